"""``INVOKE_REPROFLEET_*`` environment variables read by type, and the project file found by
the ``reprofleet`` console script as by ``invoke``.

Invoke casts an environment string to the type of the value already configured: a bool is
true unless the string is ``""`` or ``"0"`` (so ``..._ACCEPT_NEW_HOST_KEYS=false`` turned
host-key acceptance *on*), and an int is ``int(text)`` (so ``..._SILENCE_S=2.5`` over
invoke.yaml's ``3`` ended in a traceback). Before Invoke loads the shell environment (its
executor does that after importing the tasks), :func:`normalise_environment` parses each of
our variables by the type of its default: booleans from true/false/yes/no/on/off/1/0, whole
numbers, finite numbers; a value that does not parse is taken out of the environment and
kept as one line that the task prints (:func:`environment_problems`), naming the variable.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, MutableMapping

PREFIX = "INVOKE_REPROFLEET_"
TRUE_WORDS = frozenset({"1", "true", "yes", "on", "y", "t"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", "n", "f", ""})
PROJECT_FILES = ("invoke.yaml", "invoke.yml", "invoke.json", "invoke.py")

_problems: list[str] = []


def parse_typed(name: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (bool, int, float; anything else as text); ValueError
    with the words a person needs otherwise."""
    word = text.strip().lower()
    if isinstance(default, bool):
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"{name}={text!r} is not a boolean (true/false, yes/no, on/off, 1/0)")
    if isinstance(default, int):
        try:
            return int(word)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not a whole number") from None
    if isinstance(default, float):
        try:
            number = float(word)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"{name}={text!r} is not a finite number")
        return number
    return text


def normalise_environment(defaults: Mapping[str, Any], environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Rewrite each ``INVOKE_REPROFLEET_<KEY>`` into the form Invoke's cast reads as we mean it
    (a bool as ``1``/``0``, a number in its canonical text); drop one that does not parse and
    return (and keep) its line. Keys Invoke would reach through nested config are left alone."""
    found: list[str] = []
    for key, default in defaults.items():
        name = PREFIX + key.upper()
        if name not in environ or default is None or isinstance(default, str):
            continue
        try:
            value = parse_typed(name, environ[name], default)
        except ValueError as exc:
            del environ[name]
            found.append(str(exc))
            continue
        environ[name] = ("1" if value else "0") if isinstance(value, bool) else repr(value)
    if environ is os.environ:  # what the tasks of this process will refuse to run with
        _problems[:] = found
    return found


def environment_problems() -> list[str]:
    """The lines :func:`normalise_environment` kept (empty when every variable parsed)."""
    return list(_problems)


def project_root(start: Path) -> Path | None:
    """The nearest folder from ``start`` upwards holding an Invoke project file (as ``invoke``
    finds tasks.py), so ``reprofleet ...`` reads the same invoke.yaml as ``invoke ...``."""
    for folder in (start, *start.parents):
        if any((folder / name).is_file() for name in PROJECT_FILES):
            return folder
    return None
