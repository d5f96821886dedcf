"""The jobs on one node, as ``squeue --noheader -w NODE -o '%i|%u|%T|%j'`` prints them.

``squeue --json`` in 22.05 ignores ``-w`` and lists every job of the cluster (with a compressed
node list to expand), so the per-node text form is read instead. The job's name comes last
and is split off with a bounded split: a user's name may hold the separator
(``tests/fixtures/slurm/squeue_one_running.json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reprofleet.errors import SchedulerError

__all__ = ["SQUEUE_FORMAT", "SlurmJob", "parse_squeue", "squeue_on"]

SQUEUE_FORMAT = "%i|%u|%T|%j"


@dataclass(frozen=True)
class SlurmJob:
    """One job Slurm has on a node."""

    job_id: str
    user: str
    state: str  # RUNNING, COMPLETING, ...
    name: str

    def words(self) -> str:
        return f"job {self.job_id} of {self.user} ({self.state.lower()})"


def squeue_on(node: str) -> tuple[str, ...]:
    return ("squeue", "--noheader", "-w", node, "-o", SQUEUE_FORMAT)


def parse_squeue(text: str, command: str = "squeue") -> tuple[SlurmJob, ...]:
    """Each line one job; SchedulerError naming the line for one with fewer than four fields."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", 3)
        if len(fields) != 4 or not fields[0].strip():
            raise SchedulerError(command, f"line {number}: expected 'id|user|state|name', got {line[:120]!r}")
        job_id, user, state, name = fields
        jobs.append(SlurmJob(job_id.strip(), user.strip(), state.strip().upper(), name))
    return tuple(jobs)
