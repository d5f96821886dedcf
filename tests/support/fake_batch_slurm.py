"""Slurm's batch side at the command seam, for controller shards: ``sbatch --parsable``,
``scontrol show job -o``, ``scontrol requeue`` and ``scancel`` answered with the golden output
of a real Slurm 22.05 (``tests/fixtures/slurm/capture_shards.py``), and each submitted job run
when the test says so, in-process: the job's own script is read (the line it ``exec`` s), and
its ``--run-shard`` folder is handed to the test's runner with the environment Slurm gives a
job (``SLURM_JOB_ID``; ``SLURM_RESTART_COUNT`` only on a requeued run, as 22.05 does).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from reprofleet.scheduler import CommandResult
from tests.support.fake_slurm import golden

JobRunner = Callable[[Path, Mapping[str, str]], None]  # (the shard folder, the job's environment)


@dataclass
class FakeJob:
    job_id: str
    argv: tuple[str, ...]
    state: str = "PENDING"
    restarts: int = 0
    runs: int = 0
    flags: dict[str, str] = field(default_factory=dict)

    @property
    def script(self) -> Path:
        return Path(self.argv[-1])

    def shard_folder(self) -> Path:
        """The folder the script's ``exec`` line runs (``... campaign --run-shard FOLDER``)."""
        words = shlex.split(self.script.read_text().strip().splitlines()[-1])
        return Path(words[words.index("--run-shard") + 1])


class FakeBatchSlurm:
    """Jobs by id; ``partitions``: those Slurm has (another is refused with its captured words);
    ``refuse_after``: sbatch refuses every submission after this many (a cluster that stops
    taking jobs mid-way)."""

    SHOW = golden("show_job_running")["stdout"]

    def __init__(self, partitions: Sequence[str] = ("ctl",), refuse_after: int | None = None) -> None:
        self.partitions = set(partitions)
        self.refuse_after = refuse_after
        self.jobs: dict[str, FakeJob] = {}
        self.calls: list[tuple[str, ...]] = []
        self._next = int(golden("sbatch_shard")["stdout"].strip())

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        key = tuple(argv)
        self.calls.append(key)
        if key[0] == "sbatch":
            return self._sbatch(key)
        if key[:4] == ("scontrol", "show", "job", "-o"):
            return self._show(key)
        if key[:2] == ("scontrol", "requeue"):
            self.jobs[key[2]].restarts += 1
            self.jobs[key[2]].state = "PENDING"
            return self._captured(key, "requeue_running")
        if key[0] == "scancel":
            self.jobs[key[1]].state = "CANCELLED"
            return self._captured(key, "scancel_shard")
        raise AssertionError(f"FakeBatchSlurm was not taught {key}")

    def _captured(self, key: tuple[str, ...], name: str) -> CommandResult:
        step = golden(name)
        return CommandResult(key, step["rc"], step["stdout"], step["stderr"])

    def _sbatch(self, key: tuple[str, ...]) -> CommandResult:
        flags = dict(word[2:].split("=", 1) for word in key if word.startswith("--") and "=" in word)
        if flags.get("partition") not in self.partitions:
            return self._captured(key, "sbatch_bad_partition")
        if self.refuse_after is not None and len(self.jobs) >= self.refuse_after:
            return self._captured(key, "sbatch_bad_partition")
        job = FakeJob(str(self._next), key, flags=flags)
        self._next += 1
        self.jobs[job.job_id] = job
        return CommandResult(key, 0, f"{job.job_id}\n", "")

    def _show(self, key: tuple[str, ...]) -> CommandResult:
        job = self.jobs.get(key[4])
        if job is None:
            return self._captured(key, "show_job_unknown")
        line = self.SHOW
        for name, value in (("JobId", job.job_id), ("JobName", job.flags["job-name"]), ("JobState", job.state),
                            ("Restarts", str(job.restarts))):
            line = re.sub(rf"(^| ){name}=\S*", lambda m: f"{m.group(1)}{name}={value}", line, count=1)
        return CommandResult(key, 0, line, "")

    def run(self, job_id: str, runner: JobRunner) -> None:
        """Run the job once, as a node would: its environment, its script's folder; COMPLETED
        after, unless the test requeued or cancelled it meanwhile."""
        job = self.jobs[job_id]
        job.state, job.runs = "RUNNING", job.runs + 1
        env = {"SLURM_JOB_ID": job.job_id, "SLURM_JOB_NAME": job.flags["job-name"],
               **({"SLURM_RESTART_COUNT": str(job.restarts)} if job.restarts else {})}
        runner(job.shard_folder(), env)
        if job.state == "RUNNING":
            job.state = "COMPLETED"

    def submitted(self) -> list[FakeJob]:
        return list(self.jobs.values())
