"""One set of flags for every task: the Ansible words, the same short letters everywhere, and
``-h`` left to help.

Invoke gives each task short flags by first letter, so ``-h`` was ``--hosts`` (``invoke plan
-h`` failed with "needed value") and a letter meant one thing in one task and another in the
next. Here no letter is given automatically: :data:`SHORT` is the whole table, the same on
every task that has the flag. An inventory is ``-i/--inventory``, as in Ansible (``--hosts``
stays as a second name, the one the tasks' code uses), and ``-l/--limit`` chooses hosts.
``-i`` may be given twice (``-i slurm:gpu -i inventory/lab.yml``): Invoke keeps one value of a
text flag, so it is a list flag, and :func:`joined_inventory` hands the task body one string,
joined as the inventory package reads it (:data:`reprofleet.inventory.SOURCE_JOINER`).
:func:`standardise` applies it to a collection once, where the tasks are gathered.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from invoke import Collection, Program, Task
from invoke.parser import Parser

from reprofleet.inventory import SOURCE_JOINER

SHORT = {"inventory": "i", "limit": "l", "playbook": "p", "json": "j", "yes": "y", "attempts": "a", "dry-run": "n",
         "config": "c"}
INVENTORY_PARAM = "hosts"  # the parameter name the tasks' code reads an inventory path from


def _standard_arg_opts(task: Task, original: Any, name: str, default: Any, taken_names: set[str]) -> dict[str, Any]:
    """``task.arg_opts`` with the table's names and letters, and no automatic letter."""
    task.auto_shortflags = False
    opts: dict[str, Any] = original(name, default, taken_names)
    names = list(opts["names"])
    if name == INVENTORY_PARAM:
        names = ["inventory", INVENTORY_PARAM]
        opts["attr_name"] = INVENTORY_PARAM
        opts["kind"] = list  # -i twice: both kept (joined_inventory makes them one string again)
    letter = SHORT.get(names[0])
    if letter and letter not in taken_names:
        names.append(letter)
    opts["names"] = names
    return opts


def joined_inventory(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A task's keyword arguments with ``-i``'s list of sources as one string ("" for none)."""
    given = kwargs.get(INVENTORY_PARAM)
    if isinstance(given, list):
        kwargs = {**kwargs, INVENTORY_PARAM: SOURCE_JOINER.join(str(word) for word in given)}
    return kwargs


_ROOT: list[Collection] = []  # the collection standardise() was given (for help asked through a positional)
HELP_WORDS = ("-h", "--help")


def standardise(collection: Collection, prefix: str = "") -> Collection:
    """Every task of ``collection`` and its sub-collections takes its flags from :data:`SHORT`;
    each task's body learns its own name (for :func:`print_task_help`)."""
    if not prefix:
        _ROOT[:] = [collection]
    for name, task in collection.tasks.items():
        if isinstance(task, Task) and not getattr(task, "_standard_flags", False):
            original = task.arg_opts
            task.arg_opts = functools.partial(_standard_arg_opts, task, original)  # type: ignore[method-assign]
            task._standard_flags = True  # type: ignore[attr-defined]
            task.body._task_name = prefix + name  # type: ignore[attr-defined]
    for sub_name, sub in collection.collections.items():
        standardise(sub, f"{prefix}{sub_name}.")
    return collection


def asks_help(values: Any) -> bool:
    """Whether a task's arguments hold ``-h``/``--help`` where a positional took it (a task
    whose first argument takes any word: report, compare, export, status, power, cache)."""
    for value in values:
        if isinstance(value, str) and value in HELP_WORDS:
            return True
        if isinstance(value, (list, tuple)) and any(v in HELP_WORDS for v in value if isinstance(v, str)):
            return True
    return False


def print_task_help(name: str) -> None:
    """What ``invoke --help NAME`` prints, for a task whose positional argument ate the ``-h``."""
    collection = _ROOT[0]
    called = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "invoke"
    program = Program(namespace=collection, binary="reprofleet" if called == "__main__.py" else called)
    program.collection = collection
    program.parser = Parser(contexts=collection.to_contexts())
    program.print_task_help(name)
