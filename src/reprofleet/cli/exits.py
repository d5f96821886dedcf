"""One place turns errors into exit codes and one clear line on stderr.

Tasks are wrapped in :func:`handled`: a ReprofleetError (bad inventory, unreachable host,
PDU failure ...) becomes its message and an exit code; ``REPROFLEET_TRACEBACK=1`` shows
the traceback as well.
"""

from __future__ import annotations

import functools
import os
import traceback
from enum import IntEnum, unique
from typing import Any, Callable

from invoke import Exit

from reprofleet.errors import InputError, ReprofleetError
from reprofleet.cli.env_config import environment_problems
from reprofleet.cli.flags import asks_help, print_task_help


class BadArgument(ReprofleetError):
    """A command-line argument is wrong (exit status 2, like bad input files)."""


@unique
class ExitStatus(IntEnum):
    """What a task's exit status means (README, "Exit status")."""

    OK = 0  # every host ran its plan and every cell has judged attempts
    ERROR = 1  # the campaign stopped on its own (the controller's disk, a bug), or an error with one line
    BAD_INPUT = 2  # an inventory, playbook or argument is wrong: nothing ran
    SOME_HOSTS_FAILED = 3  # a host was quarantined (could not run, broke, could not be recovered)
    NOT_JUDGED = 4  # every host ran, but a cell has no judged attempt (all infra): no verdict
    INTERRUPTED = 130  # stopped by a signal; --resume goes on


def exit_status_for(error: BaseException) -> ExitStatus:
    if isinstance(error, (InputError, BadArgument)):
        return ExitStatus.BAD_INPUT
    if isinstance(error, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED
    return ExitStatus.ERROR


def handled(body: Callable[..., Any]) -> Callable[..., Any]:
    """Run a task body; map its result or error to an exit status and one line."""

    @functools.wraps(body)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        if asks_help([*args[1:], *kwargs.values()]) and getattr(wrapper, "_task_name", None):
            print_task_help(wrapper._task_name)  # type: ignore[attr-defined]  # a positional took the -h
            return
        try:
            problems = environment_problems()
            if problems:  # an INVOKE_REPROFLEET_* value that did not parse: nothing runs
                raise BadArgument("; ".join(problems))
            status = body(*args, **kwargs)
        except (ReprofleetError, KeyboardInterrupt) as error:
            if os.environ.get("REPROFLEET_TRACEBACK"):
                traceback.print_exc()
            message = str(error) or type(error).__name__
            raise Exit(f"reprofleet: error: {message}", code=int(exit_status_for(error))) from None
        if status is not None and int(status) != 0:
            raise Exit(code=int(status))

    return wrapper
