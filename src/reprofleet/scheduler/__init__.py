"""The lab's scheduler (Slurm) as a client: which nodes there are, which jobs run on them, and
the node changes a campaign makes (drain, down, resume).

Each query is a command plus a pure parser (pyinfra's fact shape): ``commands`` runs an argv
through an injected runner (a real subprocess in production, golden output of a real Slurm
22.05 in tests, ``tests/fixtures/slurm/``), ``nodes`` and ``jobs`` read what Slurm printed,
``batch`` submits and reads the batch jobs controller shards run as, ``hostlist`` expands Slurm's
host lists (``gpu[01-04]``), ``reasons`` builds and recognises the campaign's drain reasons,
``reboot`` says whether ``scontrol reboot`` may cycle a node (``reboot_from_controller``) and
builds its command, and ``client`` puts them
together and turns Slurm's refusals into :class:`~reprofleet.errors.SchedulerError`. No
decision lives here: when to take or give back a node is the runner's
(``runner/slurm_node.py``).

    from reprofleet.scheduler import SlurmClient
    client = SlurmClient()
    nodes = client.nodes()
"""

from __future__ import annotations

from reprofleet.scheduler.batch import BatchJob, JobSpec
from reprofleet.scheduler.client import SlurmClient
from reprofleet.scheduler.commands import CommandResult, CommandRunner, run_command
from reprofleet.scheduler.jobs import SlurmJob, parse_squeue
from reprofleet.scheduler.nodes import SlurmNode, parse_sinfo_json, select_nodes
from reprofleet.scheduler.reboot import RebootSupport, reboot_argv, reboot_support
from reprofleet.scheduler.reasons import REASON_PREFIX, NodeReasons, clean_text

__all__ = ["REASON_PREFIX", "BatchJob", "JobSpec", "CommandResult", "CommandRunner", "NodeReasons", "RebootSupport",
           "SlurmClient", "SlurmJob", "SlurmNode", "clean_text", "parse_sinfo_json", "parse_squeue", "reboot_argv",
           "reboot_support", "run_command", "select_nodes"]
