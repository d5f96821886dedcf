"""``invoke report PATH [PATH ...]``: a task that takes any number of positional words.

Invoke 2 has no variadic positional arguments: a second word after a task is read as the
next task's name ("No idea what 'b' is!"). A task made with ``@task(klass=RestTask,
iterable=["paths"])`` takes every word that is not one of its flags into its first
iterable option (which also still works as a repeatable ``--paths``). The words after such
a task are all its own: it must be the last task on a command line.

How: Invoke's parser gives a word to a context's first positional argument whose value is
None, and also checks, when the task ends, that no positional argument is None. The list
argument here reads as None only while the parser is placing a word, so it takes every
word and is never reported missing. Invoke's parser is pinned by ``invoke>=2.2`` and the
CLI tests pin this behaviour.

Also here: the checks every task makes of a value typed on the command line before anything
is read (:func:`whole_number`, :func:`need_inventory`, :func:`path_words`), and a person's yes
(:func:`confirm`), each failing in one line (exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

from invoke import Task
from invoke.parser import Argument

from reprofleet.cli.exits import BadArgument

_PLACING = ("handle", "see_positional_arg")  # the parser's methods that place a positional word


class _RestArgument(Argument):
    """A list-valued argument that is also an ever-open positional slot."""

    @property
    def value(self) -> Any:
        frame: FrameType | None = sys._getframe(1)
        for _ in range(5):  # the property's callers: a comprehension, missing_positional_args, handle
            if frame is None:
                break
            if frame.f_code.co_name in _PLACING:
                return None
            frame = frame.f_back
        return self._value if self._value is not None else self.default

    @value.setter
    def value(self, word: Any) -> None:
        self.set_value(word)

    def set_value(self, value: Any, cast: bool = True) -> None:
        self.raw_value = value
        self._value = [*(self._value or []), value]


class RestTask(Task):
    """A task whose first ``iterable`` option also takes every free word on the command line."""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        arguments = super().get_arguments(ignore_unknown_help=ignore_unknown_help)
        rest = next(iter(self.iterable), None)
        out = []
        for argument in arguments:
            if rest is not None and argument.name == rest:
                argument = _RestArgument(names=argument.names, kind=list, default=[], help=argument.help,
                                         positional=True, attr_name=argument.attr_name)
            out.append(argument)
        return out


def path_words(paths: list[str] | None) -> list[Path]:
    """A task's PATH words and ``--paths`` (repeatable, or comma-separated as before)."""
    return [Path(p) for entry in paths or [] for p in str(entry).split(",") if p]


def need_inventory(hosts: str) -> str:
    """The inventory a task needs, or one line saying how to give it."""
    if not hosts:
        raise BadArgument("which inventory? -i/--inventory INVENTORY (an Ansible inventory file or source)")
    return hosts


def whole_number(flag: str, value: str | None, low: int = 1) -> int | None:
    """A whole-number flag (``--attempts``): one line, not a traceback, for ``x`` or ``0``."""
    if value is None or value == "":
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadArgument(f"--{flag} takes a whole number, not {value!r}") from None
    if number < low:
        raise BadArgument(f"--{flag} takes a number >= {low}, not {number}")
    return number


def confirm(question: str) -> bool:
    """A person's yes at a terminal. Without one, nothing is done and the task fails (exit 2):
    a script that forgot --yes must not read "nothing done" as success."""
    if not sys.stdin.isatty():
        raise BadArgument(f"{question.split('?')[0].strip()}? there is no terminal to ask on: pass --yes to do it")
    return input(question).strip().lower() in ("y", "yes")
