"""Invoke tasks: thin wrappers that parse flags and call the modules that do the work.

The tasks live by group (``campaign_tasks``: campaign, demo, plan; ``report_tasks``: report,
compare, status, export; ``fleet_tasks``: facts, doctor, power, policy, cache.*, sim.*; ``init_task``: init); here
they are gathered into :data:`ns`, the collection the top-level ``tasks.py`` and the
``reprofleet`` console script serve. Project defaults live in ``invoke.yaml`` under
``reprofleet:`` (:mod:`reprofleet.cli.config`). Every task turns a ReprofleetError into one
line on stderr and an exit code (see :mod:`reprofleet.cli.exits`).
"""

from __future__ import annotations

from typing import cast

from invoke import Collection, Task

from reprofleet.cli.campaign_tasks import campaign, demo, plan
from reprofleet.cli.config import DEFAULTS
from reprofleet.cli.exits import document_exit_statuses
from reprofleet.cli.flags import standardise
from reprofleet.cli.fleet_tasks import (
    cache_pull,
    cache_push,
    doctor,
    facts,
    policy_task,
    power,
    sim_down,
    sim_status,
    sim_up,
)
from reprofleet.cli.init_task import init
from reprofleet.cli.report_tasks import compare, export, report, status

sim = Collection("sim")
sim.add_task(cast(Task, sim_up), "up")
sim.add_task(cast(Task, sim_status), "status")
sim.add_task(cast(Task, sim_down), "down")

cache = Collection("cache")
cache.add_task(cast(Task, cache_pull), "pull")
cache.add_task(cast(Task, cache_push), "push")

ns = Collection(campaign, facts, doctor, demo, power, policy_task, report, compare, plan, sim, cache)
ns.configure({"reprofleet": DEFAULTS})
ns.add_task(cast(Task, status))
ns.add_task(cast(Task, export))
ns.add_task(cast(Task, init))
standardise(ns)  # one flag table for every task (cli/flags.py), after the last task is added
document_exit_statuses(ns)  # each task's --help ends with its exit statuses (cli/exits.py's table)
