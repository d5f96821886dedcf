"""What every part of inventory reading shares: a variable's value with where it was written.

Every error about an inventory names file:line:field, so values travel with their
location (``Sourced``) from the parsers through precedence to the Host built from them,
and are checked (``as_text``, ``as_int``) only where they become a setting. The inventory
file and the vars files beside it are read alike: the same suffixes, the same reading
errors, and Ansible's YAML tags (``!unsafe`` is a plain string, ``!vault`` stays
encrypted and is refused only where it would become a setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprofleet.errors import InventoryError, Location
from reprofleet.suggest import LocatedLoader

YAML_SUFFIXES = (".yml", ".yaml", ".json")
MAX_INT = 2**31 - 1  # a GPU index, a group priority: far below it


class VaultEncrypted(str):
    """An inline ``!vault`` value: kept (as its ciphertext), never usable as a setting."""


class InventoryLoader(LocatedLoader):
    """Ansible's YAML tags: ``!unsafe`` is a plain string, ``!vault`` stays encrypted."""


InventoryLoader.add_constructor(
    "!unsafe", lambda loader, node: loader.construct_scalar(node)  # type: ignore[arg-type]
)
InventoryLoader.add_constructor(
    "!vault", lambda loader, node: VaultEncrypted(loader.construct_scalar(node))  # type: ignore[arg-type]
)


def read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(Location(shown), f"cannot read: {exc}") from None


@dataclass(frozen=True)
class Sourced:
    """One variable's value and where it was written (field = the variable's name)."""

    value: Any
    where: Location


def as_text(item: Sourced) -> str:
    value = item.value
    if isinstance(value, VaultEncrypted):
        raise InventoryError(item.where, "is vault-encrypted; reprofleet cannot decrypt it")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise InventoryError(item.where, f"must be a non-empty string, got {value!r}")
    if "{{" in value or "{%" in value:
        raise InventoryError(item.where, "is a Jinja template; reprofleet does not render templates")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def as_int(value: Any, where: Location, what: str, low: int | None = None, high: int | None = None) -> int:
    """A whole number in [low, high]; with no ``high``, at most MAX_INT (10**100 is a typo)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 19:
        number = int(value)
    ceiling = MAX_INT if high is None else high
    if number is None or (low is not None and number < low) or number > ceiling or number < -MAX_INT:
        raise InventoryError(where, f"must be {what}, got {_shown(value)}")
    return number
