"""Batch jobs: the controller shards ``invoke campaign --shards`` submits, as ``sbatch`` takes
them and as ``scontrol show job -o`` reports them.

Facts of Slurm 22.05 relied on (``tests/fixtures/slurm/``, ``capture_shards.py``): ``sbatch
--parsable`` prints the job id alone (``id;cluster`` on a multi-cluster setup); ``scontrol
show job -o ID`` prints one line of ``Key=Value`` words, of which only single-word values are
read here (``Command=`` and ``WorkDir=`` may hold spaces); a job Slurm does not know (or forgot
after ``MinJobAge``) is rc 1 with ``Invalid job id specified``; a requeued job keeps its id and
counts ``Restarts=``; its next run sees ``SLURM_RESTART_COUNT`` (the first run has none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reprofleet.errors import SchedulerError

__all__ = ["ENDED_STATES", "BatchJob", "JobSpec", "parse_sbatch_parsable", "parse_show_job", "sbatch_argv",
           "show_job_argv"]

# states in which a job will not run again by itself (a requeued job goes back to PENDING instead)
ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                          "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT"})
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


@dataclass(frozen=True)
class JobSpec:
    """One batch job as ``sbatch`` is asked for it: no GPU, one task, requeued by Slurm when
    its node fails or it is preempted, its output appended over every run."""

    name: str
    partition: str
    script: Path
    output: Path  # may hold %j
    chdir: Path
    account: str | None = None
    time: str | None = None  # Slurm's time syntax (``2-00:00:00``), checked by sbatch itself


def sbatch_argv(spec: JobSpec) -> tuple[str, ...]:
    return ("sbatch", "--parsable", f"--job-name={spec.name}", f"--partition={spec.partition}",
            *((f"--account={spec.account}",) if spec.account else ()), *((f"--time={spec.time}",) if spec.time else ()),
            "--requeue", "--nodes=1", "--ntasks=1", "--open-mode=append", f"--output={spec.output}",
            f"--chdir={spec.chdir}", str(spec.script))


def parse_sbatch_parsable(text: str, command: str = "sbatch") -> str:
    """The job id ``sbatch --parsable`` printed (its cluster, after ``;``, dropped)."""
    line = text.strip().splitlines()[-1].strip() if text.strip() else ""
    job = line.split(";", 1)[0].strip()
    if not _JOB_ID.match(job):
        raise SchedulerError(command, f"expected a job id, got {line[:120]!r}")
    return job


def show_job_argv(job_id: str) -> tuple[str, ...]:
    return ("scontrol", "show", "job", "-o", job_id)


@dataclass(frozen=True)
class BatchJob:
    """What Slurm says of one job now."""

    job_id: str
    name: str
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, NODE_FAIL ...
    restarts: int
    nodes: str  # the node list it runs on ("(null)" while pending)
    exit_code: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    def words(self) -> str:
        runs = f", requeued {self.restarts}x" if self.restarts else ""
        where = f" on {self.nodes}" if self.nodes and self.nodes != "(null)" else ""
        return f"job {self.job_id} {self.state.lower()}{where}{runs}"


def parse_show_job(text: str, command: str = "scontrol show job") -> BatchJob:
    """The first line of ``scontrol show job -o``; SchedulerError naming the missing field."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    fields = {}
    for word in line.split(" "):
        key, sep, value = word.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    missing = [k for k in ("JobId", "JobName", "JobState", "Restarts") if k not in fields]
    if missing:
        raise SchedulerError(command, f"no {', '.join(missing)} in {line[:120]!r}")
    if not fields["Restarts"].isdigit():
        raise SchedulerError(command, f"Restarts={fields['Restarts'][:20]!r} is not a count")
    return BatchJob(fields["JobId"], fields["JobName"], fields["JobState"].upper(), int(fields["Restarts"]),
                    fields.get("NodeList", ""), fields.get("ExitCode", ""))
