"""The example playbooks, their PoC and the example inventory that ship with reprofleet.

Installed from its wheel, reprofleet has no ``playbooks/`` folder beside the user: the seed's
experiment (``playbooks/sm120-hostwedge.yml`` and ``poc/sm120_hostwedge.py``) travels as
package data under ``reprofleet/_examples/`` (pyproject's ``force-include``), the same files as
the repository's ``playbooks/`` and ``inventory/``. A playbook is then named by its built-in
name (``--playbook sm120-hostwedge``); a file of that name in the current folder always wins,
so a user's own copy is never shadowed. The default ``playbooks/sm120-hostwedge.yml`` of the
tasks is found the same way when the current folder has no such file.

In a checkout (``pip install -e .`` or ``PYTHONPATH=src``) the examples are the repository's
own folders, found from this file.
"""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "_examples"  # reprofleet/_examples in a wheel
CHECKOUT = Path(__file__).resolve().parents[3]  # src/reprofleet/playbook/builtin.py -> the repository
SEED = "sm120-hostwedge"  # the seed's experiment: the default playbook
EXAMPLE_INVENTORY = "blackwell.yml"
_SUFFIXES = (".yml", ".yaml")


def examples_root() -> Path | None:
    """The folder holding ``playbooks/`` and ``inventory/`` (None: neither a wheel's nor a checkout's)."""
    for root in (PACKAGED, CHECKOUT):
        if (root / "playbooks" / f"{SEED}.yml").is_file() and (root / "inventory" / EXAMPLE_INVENTORY).is_file():
            return root
    return None


def builtin_names() -> tuple[str, ...]:
    """Every built-in playbook's name (its file name without ``.yml``), sorted."""
    root = examples_root()
    if root is None:
        return ()
    return tuple(sorted(p.stem for p in (root / "playbooks").iterdir() if p.suffix in _SUFFIXES and p.is_file()))


def builtin_playbook(name: str) -> Path | None:
    """The built-in playbook called ``name`` (with or without ``.yml``), or None."""
    stem = playbook_stem(name)
    root = examples_root()
    if root is None or stem not in builtin_names():
        return None
    return next(root / "playbooks" / f"{stem}{suffix}" for suffix in _SUFFIXES
                if (root / "playbooks" / f"{stem}{suffix}").is_file())


def example_inventory() -> Path | None:
    """The annotated example inventory (every pdu: driver, groups, ranges)."""
    root = examples_root()
    return None if root is None else root / "inventory" / EXAMPLE_INVENTORY


def locate(path: str | Path) -> Path:
    """``path`` when it names a file; else, for a bare name or ``playbooks/NAME.yml``, the
    built-in playbook of that name; else ``path`` unchanged (its reader says it is missing)."""
    given = Path(path)
    if given.exists() or given.parent not in (Path("."), Path("playbooks")):
        return given
    return builtin_playbook(given.name) or given


def playbook_stem(name: str) -> str:
    """A playbook's name without its ``.yml``/``.yaml``."""
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
