"""Running one Slurm command: an argv (never a shell line) with a timeout, its result as data.

The runner is injected so that tests replay the golden output of a real Slurm
(``tests/fixtures/slurm/``) and production runs the real binaries; nothing above this module
sees a ``subprocess`` exception.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol, Sequence

from reprofleet.errors import SchedulerError

__all__ = ["CommandResult", "CommandRunner", "run_command"]


@dataclass(frozen=True)
class CommandResult:
    """What one command printed and how it ended."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def words(self) -> str:
        """The command as a person would type it, for messages."""
        return " ".join(self.argv)

    def first_error_line(self) -> str:
        """Slurm's own words for a failure: its first non-empty stderr line, else stdout's
        (``scontrol ping`` says DOWN on stdout), bounded."""
        for line in [*self.stderr.splitlines(), *self.stdout.splitlines()]:
            if line.strip():
                return line.strip()[:300]
        return f"exit status {self.rc}, nothing printed"


class CommandRunner(Protocol):
    """Runs ``argv`` within ``timeout_s``; SchedulerError when it cannot run at all."""

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult: ...


def run_command(argv: Sequence[str], timeout_s: float) -> CommandResult:
    """The production runner: the binary on PATH, no shell, stdin closed, bounded."""
    words = " ".join(argv)
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise SchedulerError(words, f"{argv[0]} is not installed on this controller (Debian: slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(words, f"no answer within {timeout_s:g} s (is slurmctld up? `scontrol ping`)") from None
    except OSError as exc:
        raise SchedulerError(words, f"cannot run: {exc.strerror or exc}") from None
    return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)
