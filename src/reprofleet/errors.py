"""One exception root for everything reprofleet raises on purpose.

Errors about user input carry where the input was (file, line, field) so that the
command line can print one line a user can act on, and nothing runs before it.
"""

from __future__ import annotations

from dataclasses import dataclass


class ReprofleetError(Exception):
    """Root of every error reprofleet raises deliberately."""


@dataclass(frozen=True)
class Location:
    """Where in a user's file a problem is: ``file:line:field``."""

    file: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
        if self.field:
            parts.append(self.field)
        return ":".join(parts)


class InputError(ReprofleetError):
    """A user-supplied file is wrong; the message starts with file:line:field."""

    def __init__(self, location: Location, message: str) -> None:
        self.location = location
        self.reason = message
        super().__init__(f"{location}: {message}")


class UsageError(ReprofleetError):
    """A value a person typed for a command is wrong (a flag's, not a file's: that is
    InputError); the command line exits 2. Raised where the value is first used, which may be
    after a file was read: a command with two mistakes still reports the one it always did."""


class InventoryError(InputError):
    """An inventory (YAML, INI, group_vars/host_vars, dynamic source) is invalid."""


class PlaybookError(InputError):
    """A campaign playbook is invalid."""

    top: object = None  # the parsed document, while the loader still holds it


class ConnectError(ReprofleetError):
    """A host could not be reached or the SSH session broke; names the host."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        self.reason = message
        super().__init__(f"{host}: {message}")


class SchedulerError(ReprofleetError):
    """A Slurm command failed or answered what we cannot read; names the command and says
    Slurm's own words (its first stderr line), never a traceback."""

    def __init__(self, command: str, message: str) -> None:
        self.command = command
        self.reason = message
        super().__init__(f"{command}: {message}")


class SchedulerDenied(SchedulerError):
    """Slurm refused a node change to this user (not an operator or administrator)."""


class HostKeyError(ConnectError):
    """The host's SSH key is unknown or differs from the one on record."""


class CommandTimedOut(ReprofleetError):
    """A remote command did not finish within its timeout."""

    def __init__(self, host: str, command: str, timeout: float) -> None:
        self.host = host
        self.command = command
        self.timeout = timeout
        super().__init__(f"{host}: command timed out after {timeout:g}s: {command}")


class AgentError(ReprofleetError):
    """The host agent broke its protocol or reported a failure of its own."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        self.reason = message
        super().__init__(f"{host}: agent: {message}")


class AgentRefused(AgentError):
    """The agent refused to start an attempt because another one is alive on the host.

    Nothing ran: the slot is ``infra: not run`` (it runs again), never a broken stream to
    re-attach to, and never a ``hang`` that consumes the slot.
    """


class AgentFenced(AgentError):
    """Another controller took this host's lease: this one must not touch the host again
    (its next ``run``, ``kill`` or policy change is refused by the agent)."""


class HostLeased(AgentError):
    """A by-hand action on a host a campaign holds: refused unless told to ignore the lease."""


class HostNotReady(ReprofleetError):
    """A host lacks what its plan needs (nvidia-smi, NVML, docker ...): one line per problem."""

    def __init__(self, host: str, problems: list[str]) -> None:
        self.host = host
        self.problems = tuple(problems)
        super().__init__("; ".join(problems))


class PolicyError(ReprofleetError):
    """A GPU policy could not be applied, read back or verified."""


class PowerError(ReprofleetError):
    """A PDU/BMC did not do what it was asked, in time."""


class CredentialError(ReprofleetError):
    """A credential reference (env var or file) could not be resolved."""


class LeaseError(ConnectError):
    """Another campaign holds the host's lease; only an explicit --break-lease takes it."""


class ControllerDiskError(ReprofleetError):
    """The controller cannot write its records (disk full, read-only): the campaign stops cleanly."""
