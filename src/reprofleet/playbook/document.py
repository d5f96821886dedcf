"""The playbook file as errors see it: every message at ``file:line:field.path``.

A typo found after the first power cycle costs an evening, so every check names the
line and the dotted field it is about, and an unknown key comes with the closest valid
one. The checks shared by top-level settings and cells live here too.
"""

from __future__ import annotations

import math
import re
from typing import Any

from reprofleet.errors import Location, PlaybookError
from reprofleet.model import NAME_RULE, SAFE_NAME, is_safe_name
from reprofleet.suggest import did_you_mean, line_of

NAME = SAFE_NAME  # a campaign's and a cell's name become file and folder names (model.names)
MAX_SECONDS = 7 * 86400  # a timeout past a week is a typo (or .inf), never a plan
MAX_COUNT = 1_000_000  # attempts of one cell
MAX_WATTS = 10_000  # a GPU's power limit
MAX_MHZ = 100_000  # a GPU clock


class Doc:
    """The playbook file: builds locations from containers and dotted field paths."""

    def __init__(self, file: str) -> None:
        self.file = file

    def at(self, container: Any, key: Any, path: str) -> Location:
        return Location(self.file, line_of(container, key), path)

    def fail(self, container: Any, key: Any, path: str, message: str) -> PlaybookError:
        return PlaybookError(self.at(container, key, path), message)

    def check_keys(self, mapping: Any, allowed: tuple[str, ...], path: str) -> None:
        if not isinstance(mapping, dict):
            raise PlaybookError(Location(self.file, line_of(mapping), path or None), "must be a mapping")
        for key in mapping:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(mapping, key, where, f"unknown key {key!r}{did_you_mean(key, allowed)}")


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def line_of_path(top: Any, path: str | None) -> int | None:
    """The line of the deepest part of a dotted field path (``matrix[7].env``) that the file has.

    A wrong *value* (a scalar where a mapping belongs) carries no line of its own; the key
    that holds it does, and that is the line a person needs.
    """
    line, node = line_of(top), top
    for name, index in _STEP.findall(path or ""):
        key: Any = int(index) if index else name
        found = line_of(node, key)
        if found is None:
            break
        line = found
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    return line


def valid_name(doc: Doc, mapping: Any, key: str, path: str) -> str:
    value = mapping.get(key)
    if not is_safe_name(value):
        raise doc.fail(mapping, key, path, f"must be {NAME_RULE}, got {value!r}")
    return value


def finite(value: Any, low: float, high: float) -> bool:
    """A real number (not a bool) in [low, high]: NaN, infinities and 10**100 are not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return low <= value <= high  # an int is compared exactly: no float() of 10**400


def shown(value: Any) -> str:
    """``repr`` of a value in an error, cut short (10**100 is 101 digits of nothing)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def positive(doc: Doc, mapping: Any, key: Any, path: str, high: float = MAX_SECONDS, unit: str = "s") -> float:
    """A number > 0 and at most ``high`` (a timeout's default ceiling: a week), finite."""
    value = mapping[key]
    if not finite(value, 0, high) or value <= 0:
        raise doc.fail(mapping, key, path, f"must be a number > 0 and <= {high:g} {unit}, got {shown(value)}")
    return float(value)
