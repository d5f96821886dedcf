"""The Slurm client: the commands a campaign and ``invoke doctor`` use, their output read by
the pure parsers beside it, and Slurm's refusals as typed errors.

Golden output of every command is in ``tests/fixtures/slurm/`` (a real Slurm 22.05.8); the
words matched in :func:`_refusal` are Slurm's own there: ``Invalid user id`` is what 22.05
says to a user who is neither operator nor administrator.
"""

from __future__ import annotations

from typing import Sequence

from reprofleet.errors import SchedulerDenied, SchedulerError
from reprofleet.scheduler.batch import BatchJob, JobSpec, parse_sbatch_parsable, parse_show_job, sbatch_argv, show_job_argv
from reprofleet.scheduler.commands import CommandResult, CommandRunner, run_command
from reprofleet.scheduler.jobs import SlurmJob, parse_squeue, squeue_on
from reprofleet.scheduler.nodes import SINFO_JSON, SlurmNode, parse_sinfo_json
from reprofleet.scheduler.reboot import RebootSupport, reboot_argv, reboot_support

__all__ = ["SlurmClient", "munge_socket", "parse_config"]

COMMAND_TIMEOUT_S = 15.0  # slurmctld answers in milliseconds; a hung one must not hold a host thread long
DENIED_WORDS = ("Invalid user id", "Access/permission denied", "Permission denied")


class SlurmClient:
    """Queries and node changes through ``run`` (a subprocess by default)."""

    def __init__(self, run: CommandRunner = run_command, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self._run = run
        self.timeout_s = timeout_s

    def _call(self, argv: Sequence[str]) -> CommandResult:
        result = self._run(tuple(argv), self.timeout_s)
        if not result.ok:
            raise _refusal(result)
        return result

    def nodes(self) -> tuple[SlurmNode, ...]:
        return parse_sinfo_json(self._call(SINFO_JSON).stdout)

    def node(self, name: str) -> SlurmNode:
        for node in self.nodes():
            if node.name == name:
                return node
        raise SchedulerError(" ".join(SINFO_JSON), f"Slurm has no node {name!r}")

    def jobs_on(self, name: str) -> tuple[SlurmJob, ...]:
        argv = squeue_on(name)
        return parse_squeue(self._call(argv).stdout, " ".join(argv))

    def drain(self, name: str, reason: str) -> None:
        self._update(name, "state=drain", f"reason={reason}")

    def down(self, name: str, reason: str) -> None:
        self._update(name, "state=down", f"reason={reason}")

    def resume(self, name: str) -> None:
        self._update(name, "state=resume")

    def reboot(self, name: str, reason: str) -> None:
        """``scontrol reboot ASAP nextstate=DOWN reason=... NODE`` (scheduler/reboot.py says why those words)."""
        self._call(reboot_argv(name, reason))

    def reboot_support(self) -> RebootSupport:
        """Whether this cluster lets slurmctld itself reboot a node (``reboot_from_controller``)."""
        return reboot_support(self.config())

    def _update(self, name: str, *words: str) -> None:
        self._call(("scontrol", "update", f"nodename={name}", *words))

    def submit(self, spec: JobSpec) -> str:
        """The job id of a batch job submitted as ``spec`` says (SchedulerError: nothing was submitted)."""
        argv = sbatch_argv(spec)
        return parse_sbatch_parsable(self._call(argv).stdout, " ".join(argv))

    def job(self, job_id: str) -> BatchJob | None:
        """What Slurm says of a job now; None when it does not know it (never, or no longer: MinJobAge)."""
        argv = show_job_argv(job_id)
        result = self._run(argv, self.timeout_s)
        if not result.ok and "Invalid job id" in result.stderr:
            return None
        if not result.ok:
            raise _refusal(result)
        return parse_show_job(result.stdout, " ".join(argv))

    def cancel(self, job_id: str) -> None:
        self._call(("scancel", job_id))

    def ping(self) -> str:
        """slurmctld's own line (``Slurmctld(primary) at vm is UP``); SchedulerError when down."""
        result = self._call(("scontrol", "ping"))
        line = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
        if " is UP" not in line:
            raise SchedulerError("scontrol ping", line or "no answer")
        return line

    def munge(self, socket: str | None) -> str:
        """munged encodes a credential (``munge -n``): "munge answers", else SchedulerError."""
        self._call(("munge", "-n", *(("-S", socket) if socket else ())))
        return "munge answers" + (f" on {socket}" if socket else "")

    def config(self) -> dict[str, str]:
        return parse_config(self._call(("scontrol", "show", "config")).stdout)

    def admin_level(self, user: str) -> str | None:
        """The user's AdminLevel (None, Operator, Administrator) from slurmdbd; None when
        sacctmgr cannot tell (no slurmdbd: accounting_storage/none)."""
        try:
            result = self._call(("sacctmgr", "-n", "-P", "show", "user", user, "format=user,adminlevel"))
        except SchedulerDenied:
            raise
        except SchedulerError:
            return None
        for line in result.stdout.splitlines():
            name, _, level = line.partition("|")
            if name.strip() == user:
                return level.strip() or "None"
        return "None"


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = Value`` lines (the header and blank lines skipped)."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def _refusal(result: CommandResult) -> SchedulerError:
    said = result.first_error_line()
    munge = [line.strip() for line in result.stderr.splitlines() if "Munge encode failed" in line]
    if munge:  # scontrol then also says "slurmctld DOWN" and starts with a hint about threads
        return SchedulerError(result.words, f"munge does not answer: {munge[0][:300]}")
    if any(words in result.stderr for words in DENIED_WORDS):
        return SchedulerDenied(result.words, f"Slurm refused ({said}): this user is neither a Slurm operator nor "
                                             "an administrator (`sacctmgr modify user NAME set adminlevel=operator`)")
    return SchedulerError(result.words, said)


def munge_socket(config: dict[str, str]) -> str | None:
    """The munge socket Slurm uses (``AuthInfo=socket=PATH``), None for munge's default."""
    for part in config.get("AuthInfo", "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "socket" and value:
            return value
    return None
