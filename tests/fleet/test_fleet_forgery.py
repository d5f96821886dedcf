"""Outcomes the PoC cannot write (issue 32, item 3), on the simulated fleet.

The simulated PoC (a process of the host, as the agent's user) appends a clean ``exit`` line of
its own to every events.jsonl under the agent's state folder and replaces its exit.json, then
fails with exit 1. The record is the real outcome, ``error``, and counts the forged line; the
stream file says so once and holds no forged line.

The attempt runner gives each attempt a key (``AttemptKeys(...).new(attempt_id)``, on the
agent's stdin), and the controller takes only lines signed with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

BARE = "  - name: bare\n    runtime: {kind: python, image: null, docker_args: null}\n"  # the PoC as a process of the host


def test_a_poc_that_forges_a_clean_exit_is_recorded_as_what_really_happened(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("fg", script=("forge", "clean"))])
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=BARE)
    plan = make_plan(load_playbook(book), load_inventory(sim_inventory(fleet)).hosts)
    result = run_campaign(plan, settings_for(fleet), tmp_path / "reports")
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [(r["outcome"], r["reason"]) for r in records] == [("error", "exit 1"), ("clean", "exit 0")], records
    forged, clean = records
    assert forged["exit_code"] == 1 and forged["forged_lines"] >= 1 and clean["forged_lines"] == 0
    stream = [json.loads(line) for line in (result.directory.root / forged["stream"]).read_text().splitlines()]
    notices = [line for line in stream if line.get("what") == "forged_lines"]
    assert len(notices) == 1 and notices[0]["by"] == "controller"
    assert [line["rc"] for line in stream if line.get("k") == "exit"] == [1]  # the lie never reached the stream file
    assert (result.directory.root / ".attempt-keys").stat().st_mode & 0o077 == 0
