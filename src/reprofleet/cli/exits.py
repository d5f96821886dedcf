"""One place turns errors into exit codes and one clear line on stderr.

Tasks are wrapped in :func:`handled`: a ReprofleetError (bad inventory, unreachable host,
PDU failure ...) becomes its message and an exit code; ``REPROFLEET_TRACEBACK=1`` shows
the traceback as well.
"""

from __future__ import annotations

import functools
import inspect
import os
import traceback
from enum import IntEnum, unique
from typing import Any, Callable, Mapping

from invoke import Collection, Exit

from reprofleet.errors import InputError, ReprofleetError, UsageError
from reprofleet.cli.env_config import environment_problems
from reprofleet.cli.flags import asks_help, joined_inventory, print_task_help
from reprofleet.cli.terminal_text import plain


class BadArgument(UsageError):
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


# What each task's exit status means, in one place: the README's table (README.md, "Exit
# status") and each task's ``--help`` are written from it, and a test holds all three
# together. Every task can also end with EVERY_TASK's statuses; a task lists only its own.
EVERY_TASK: Mapping[ExitStatus, str] = {
    ExitStatus.ERROR: "an error, in one line on stderr (a host or device that failed the one thing asked, "
                      "a record that cannot be read)",
    ExitStatus.BAD_INPUT: "bad input: an argument, inventory, playbook or INVOKE_REPROFLEET_* value is wrong, or a "
                          "confirmation had no terminal to ask on (pass --yes); nothing was done",
    ExitStatus.INTERRUPTED: "stopped by a signal (Ctrl-C, SIGTERM)",
}
_CAMPAIGN: Mapping[ExitStatus, str] = {
    ExitStatus.OK: "every host ran its plan and every cell has judged attempts",
    ExitStatus.ERROR: "the campaign stopped on its own (the controller's disk, a bug)",
    ExitStatus.SOME_HOSTS_FAILED: "a host was quarantined (one line per host on stderr)",
    ExitStatus.NOT_JUDGED: "a cell has no judged attempt on any host (every record infra): no verdict",
    ExitStatus.INTERRUPTED: "stopped by a signal; --resume goes on",
}
TASK_EXITS: Mapping[str, Mapping[ExitStatus, str]] = {
    "campaign": {**_CAMPAIGN, ExitStatus.OK: _CAMPAIGN[ExitStatus.OK] + " (--dry-run: the plan was printed; "
                                              "--check-hosts: every host can run its plan)",
                 ExitStatus.SOME_HOSTS_FAILED: _CAMPAIGN[ExitStatus.SOME_HOSTS_FAILED]
                 + "; with --dry-run --check-hosts: a host cannot run its plan"},
    "demo": {**_CAMPAIGN, ExitStatus.ERROR: _CAMPAIGN[ExitStatus.ERROR] + ", or the auditor found a claim of the "
                                                                        "demo's report that its records contradict"},
    "facts": {ExitStatus.OK: "every host answered", ExitStatus.SOME_HOSTS_FAILED: "a host could not be asked"},
    "doctor": {ExitStatus.OK: "every host is ready (--cycle: every chosen host's cycle proven)",
               ExitStatus.SOME_HOSTS_FAILED: "a host is not ready (a missing item); --cycle: a host was refused (held "
                                             "by a campaign, not seen alive) or its cycle found a problem"},
    "power": {ExitStatus.OK: "the action was done (status: the state was read)",
              ExitStatus.ERROR: "a person answered no (nothing done), the device failed, or a campaign holds the "
                                "host (--ignore-lease)",
              ExitStatus.SOME_HOSTS_FAILED: "verify: the wiring was not confirmed"},
    "policy": {ExitStatus.OK: "every host read (or restored) its policy",
               ExitStatus.SOME_HOSTS_FAILED: "a host could not, or a campaign holds it (--ignore-lease)"},
    "report": {ExitStatus.OK: "the verdicts were written (or printed with --json); with --audit, no claim is "
                              "contradicted by its records",
               ExitStatus.ERROR: "--audit: a claim its own records contradict (one line per contradiction, naming "
                                 "the claim), or an error"},
    "compare": {ExitStatus.OK: "the comparison was printed"},
    "plan": {ExitStatus.OK: "the plan was printed"},
    "status": {ExitStatus.OK: "the state was read (Ctrl-C leaving --watch is 0 too)"},
    "export": {ExitStatus.OK: "the rows were written"},
    "sim.up": {ExitStatus.OK: "the simulated fleet is up"},
    "sim.status": {ExitStatus.OK: "the simulated fleet's state was read"},
    "sim.down": {ExitStatus.OK: "the simulated fleet is down"},
    "cache.pull": {ExitStatus.OK: "the snapshot was written"},
    "init": {ExitStatus.OK: "the starter inventory, playbook and PoC were written",
             ExitStatus.BAD_INPUT: "a flag or answer is wrong, no host was named and there is no terminal to ask "
                                   "on, or a file it would write exists (nothing was written)"},
    "cache.push": {ExitStatus.OK: "every host has the snapshot",
                   ExitStatus.SOME_HOSTS_FAILED: "a host does not (its line says why)"},
}


def task_exits(task: str) -> dict[ExitStatus, str]:
    """Every status ``task`` can end with and when, its own words over EVERY_TASK's."""
    own = TASK_EXITS[task]
    return dict(sorted({**EVERY_TASK, **own}.items()))


def exit_lines(task: str) -> list[str]:
    """The lines ``invoke --help TASK`` ends with."""
    return ["Exit status:"] + [f"  {int(code):>3} {why}" for code, why in task_exits(task).items()]


def exit_table_markdown() -> str:
    """The README's table (between its exit-status markers), one row per task."""
    rows = ["| task | exit status |", "|---|---|"]
    for task in TASK_EXITS:
        own = "; ".join(f"**{int(code)}** {why}" for code, why in sorted(TASK_EXITS[task].items()))
        rows.append(f"| `{task}` | {own} |")
    every = "; ".join(f"**{int(code)}** {why}" for code, why in EVERY_TASK.items())
    return "\n".join(rows + ["", f"Every task, besides its own: {every}."])


def document_exit_statuses(collection: Collection, prefix: str = "") -> None:
    """Each task's help (its docstring) ends with its exit statuses, from :data:`TASK_EXITS`.

    A task missing from the table is a KeyError here, at import: a new task cannot ship
    without saying what its exit status means."""
    for name, task in collection.tasks.items():
        if "Exit status:" not in (task.__doc__ or ""):
            task.__doc__ = inspect.cleandoc(task.__doc__ or "") + "\n\n" + "\n".join(exit_lines(prefix + name))
    for sub_name, sub in collection.collections.items():
        document_exit_statuses(sub, f"{prefix}{sub_name}.")


def exit_status_for(error: BaseException) -> ExitStatus:
    if isinstance(error, (InputError, UsageError)):  # BadArgument is a UsageError
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
            status = body(*args, **joined_inventory(kwargs))
        except (ReprofleetError, KeyboardInterrupt) as error:
            if os.environ.get("REPROFLEET_TRACEBACK"):
                traceback.print_exc()
            # an agent's error is a host's text: each line inert, the lines our own messages break kept
            message = "\n".join(plain(line) for line in (str(error) or type(error).__name__).splitlines())
            raise Exit(f"reprofleet: error: {message}", code=int(exit_status_for(error))) from None
        if status is not None and int(status) != 0:
            raise Exit(code=int(status))

    return wrapper
