"""Which hosts run: Ansible's host-pattern grammar (``--limit``, a playbook's ``hosts:``).

People who own a fleet already choose machines the Ansible way (``-l 'blackwell:!ws03'``), so
a pattern here selects exactly the hosts ``ansible-inventory --limit`` would, by the rules of
Ansible's inventory manager (ansible-core 2.19, ``ansible/inventory/manager.py``; the user
guide's "Patterns: targeting hosts and groups"):

- parts are separated by ``,`` (or, without a comma, by ``:`` outside brackets, unless the
  whole pattern is one address: an IPv6 address, ``host:port``, a ``ws[01:03]`` range);
- a part is a host or group name, a shell glob (``ws*``, ``ws0?``, ``ws[12]``), or a regular
  expression after ``~`` (matched from the name's start); a group name selects its hosts and
  its children's; a glob or regex is also matched against host names;
- ``[i]``, ``[i:j]`` (inclusive) and ``[i:]`` take a slice of what one part matched, in
  Ansible's order: each matching group's hosts as Ansible lists the group (its own hosts
  first, then its descendants', ``order.py``), then for a glob or regex the matching host
  names as declared, a host matched twice counted twice; a negative ``[-1]`` counts from the
  end, and ``[i:0]`` is ``[i]`` (ansible-core reads an end of 0 as none);
- parts without a prefix are a union (in their order), then every ``&part`` intersects, then
  every ``!part`` removes; a pattern of only ``&``/``!`` parts starts from ``all``; the hosts
  come in the parts' order (a play's ``hosts:``), and ``limited`` keeps the inventory's
  order (``--limit``, which lists hosts in the order of ``all``);
- ``@file`` reads one pattern per line from a file (a retry file).

A part that matches nothing is an error here, naming the part and the closest names, where
Ansible only warns: a typo in ``--limit`` must not start a night's campaign on other hosts.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from reprofleet.errors import InventoryError, Location
from reprofleet.model import Host
from reprofleet.suggest import did_you_mean

from reprofleet.inventory.hosts import Inventory

# a part ending in a subscript: [n], [-n], [i:j], [i:] (Ansible's PATTERN_WITH_SUBSCRIPT)
_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")
# ':'-separated parts: runs of anything but whitespace, ':' and brackets, or whole [..] groups
_COLON_PART = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
_HOST_WITH_RANGES = re.compile(r"^(?:[\w.-]|\[[0-9a-z]+:[0-9a-z]+(?::[0-9]+)?\])+$", re.I)
_HOST_PORT = re.compile(r"^(?:[\w.-]|\[[^\]]*\])+:[0-9]+$")
_GLOB_CHARS = (".", "?", "*", "[")


@dataclass(frozen=True)
class Selection:
    """The hosts a pattern chose, in the order Ansible's ``get_hosts(pattern)`` gives, and the pattern as given."""

    pattern: str
    hosts: tuple[Host, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts)


def split_pattern(pattern: str) -> list[str]:
    """``'a,b[1], c[2:3] , d'`` -> ``['a', 'b[1]', 'c[2:3]', 'd']``; ``'web:&prod:!ws3'`` by colons."""
    if "," in pattern:
        parts = pattern.split(",")
    elif _one_address(pattern.strip()):
        parts = [pattern]
    else:
        parts = _COLON_PART.findall(pattern)
    return [p.strip() for p in parts if p.strip()]


def _one_address(text: str) -> bool:
    """Ansible keeps a pattern whole when it parses as one address (colons inside are not separators)."""
    try:
        ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
        return True
    except ValueError:
        pass
    if re.match(r"^\[[0-9a-f:.]+\]:[0-9]+$", text, re.I):  # [v6]:port
        return True
    return bool(_HOST_WITH_RANGES.match(text) or _HOST_PORT.match(text))


def ordered_parts(parts: Sequence[str]) -> list[str]:
    """Unions first, then intersections (``&``), then exclusions (``!``); only modifiers: from ``all``."""
    plain = [p for p in parts if p[0] not in "&!"]
    return (plain or ["all"]) + [p for p in parts if p[0] == "&"] + [p for p in parts if p[0] == "!"]


def select(inventory: Inventory, pattern: str, *, where: Location | None = None) -> Selection:
    """The hosts ``pattern`` chooses (see the module text); InventoryError naming the part that failed.

    In the order Ansible's ``get_hosts(pattern)`` gives them (a play's ``hosts:``): the parts'
    own order, each part's hosts in the order it matched them. ``where``: the file, line and
    field the pattern came from (``--limit`` by default).
    """
    where = where or Location("--limit", None, "pattern")
    parts = _read_files(split_pattern(pattern), where)
    if not parts:
        raise InventoryError(where, f"the host pattern {pattern!r} names no host or group")
    by_name = {h.name: h for h in inventory.hosts}
    chosen: dict[str, None] = {}
    for part in ordered_parts(parts):
        matched = [part] if part in by_name else _match_part(inventory, part, where)
        if part[0] == "!":
            for name in matched:
                chosen.pop(name, None)
        elif part[0] == "&":
            keep = set(matched)
            chosen = {name: None for name in chosen if name in keep}
        else:
            chosen.update(dict.fromkeys(h for h in matched if h not in chosen))
    return Selection(pattern, tuple(by_name[name] for name in chosen))


def _read_files(parts: list[str], where: Location) -> list[str]:
    out: list[str] = []
    for part in parts:
        if not part.startswith("@"):
            out.append(part)
            continue
        path = Path(part[1:])
        if not path.is_file():
            raise InventoryError(where, f"{part}: no such limit file (a retry file names one host per line)")
        out.extend(line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip())
    return out


def _match_part(inventory: Inventory, part: str, where: Location) -> list[str]:
    """One part (its ``&``/``!`` aside): the groups and hosts it matches, then its subscript.

    As Ansible: every matching group's hosts (groups in the order they were first named), then,
    for a glob, a regex or a name no group has, the matching host names in the order they were
    declared; a host two of them match is listed twice, and the subscript counts it twice.
    """
    expr, subscript = _split_subscript(part[1:] if part[0] in "&!" else part)
    matcher = _matcher(expr, where)
    groups = [g for g in inventory.groups if matcher(g)]
    found = [h for group in groups for h in inventory.groups[group]]
    if not groups or expr[0] == "~" or any(c in expr for c in _GLOB_CHARS):
        found.extend(h for h in inventory.declared_names if matcher(h))
    if not found:
        known = [*inventory.groups, *inventory.declared_names]
        raise InventoryError(where, f"the host pattern part {part!r} matches no host or group"
                                    f"{did_you_mean(expr.lstrip('~'), known)}")
    return _apply_subscript(found, subscript, part, where)


def _split_subscript(part: str) -> tuple[str, tuple[int, int | None] | None]:
    if part[0] == "~":  # a regex keeps its brackets
        return part, None
    match = _SUBSCRIPT.match(part)
    if not match:
        return part, None
    expr, index, start, _sep, end = match.groups()
    if index is not None:
        return expr, (int(index), None)
    return expr, (int(start), int(end) if end else -1)


def _apply_subscript(hosts: list[str], subscript: tuple[int, int | None] | None, part: str,
                     where: Location) -> list[str]:
    """``[i]`` one host (from the end when negative); ``[i:j]`` i to j inclusive, ``[i:]`` to the end.

    As ansible-core, ``[i:0]`` is read as ``[i]``: it tests the end for truth, and 0 is false.
    """
    if subscript is None:
        return hosts
    start, end = subscript
    if not end:
        if -len(hosts) <= start < len(hosts):
            return [hosts[start]]
        raise InventoryError(where, f"{part!r}: the pattern matched {len(hosts)} hosts, so [{start}] is out of "
                                    "range")
    chosen = hosts[start:] if end == -1 else hosts[start:end + 1]
    if not chosen:
        raise InventoryError(where, f"{part!r}: the pattern matched {len(hosts)} hosts, so [{start}:"
                                    f"{'' if end == -1 else end}] selects none")
    return chosen


def _matcher(expr: str, where: Location):  # type: ignore[no-untyped-def]
    try:
        regex = re.compile(expr[1:] if expr[0] == "~" else fnmatch.translate(expr))
    except re.error as exc:
        raise InventoryError(where, f"invalid host pattern {expr!r}: {exc}") from None
    return lambda name: regex.match(name) is not None


def limited(inventory: Inventory, pattern: str | None, *, where: Location | None = None) -> Inventory:
    """The inventory with only the hosts ``pattern`` chooses (all of it for None or an empty
    pattern), in the inventory's order as ``--limit`` keeps it (that of ``all``, whatever the
    pattern's order); groups keep only chosen hosts, so ``--by group`` and ``segment`` see the same."""
    if pattern is None or not pattern.strip():
        return inventory
    chosen = set(select(inventory, pattern, where=where).names)
    return _restricted(inventory, [name for name in inventory.names if name in chosen])


def play_hosts(inventory: Inventory, hosts_pattern: str | None, limit: str | None, *,
               where: Location | None = None) -> Inventory:
    """The hosts a play runs on, as ansible-playbook picks them: its ``hosts:`` pattern (the whole
    inventory when None), in that pattern's order, then ``--limit`` evaluated on the whole inventory,
    as Ansible's subset is, not on what ``hosts:`` kept: ``--limit lab[0]`` is lab's first host or
    nobody. ``where``: the file and line of ``hosts:``. Keeping nobody is an error naming both."""
    if hosts_pattern is None or not hosts_pattern.strip():
        play = inventory.names
    else:
        play = select(inventory, hosts_pattern, where=where).names
    if limit is not None and limit.strip():
        kept = set(select(inventory, limit).names)
        play = tuple(name for name in play if name in kept)
        if not play:
            chose = f"the playbook's hosts: {hosts_pattern!r}" if hosts_pattern else "the inventory"
            raise InventoryError(Location("--limit", None, "pattern"),
                                 f"{limit!r} keeps none of the hosts {chose} chose")
    return _restricted(inventory, play)


def _restricted(inventory: Inventory, names: Sequence[str]) -> Inventory:
    """Only the hosts ``names``, in that order; groups and the declared order keep only them."""
    chosen = set(names)
    by_name = {h.name: h for h in inventory.hosts}
    return Inventory(hosts=tuple(by_name[name] for name in names),
                     groups={g: tuple(h for h in members if h in chosen) for g, members in inventory.groups.items()},
                     source=inventory.source, warnings=inventory.warnings,
                     declared=tuple(h for h in inventory.declared_names if h in chosen))
