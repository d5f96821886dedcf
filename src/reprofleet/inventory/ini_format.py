"""INI inventories: ``[group]``, ``[group:vars]`` and ``[group:children]`` sections.

Values are read as Ansible's INI plugin reads them (a Python literal if it is one, else
text), and every error carries the line it is on.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any, Mapping

from reprofleet.errors import InventoryError, Location

from reprofleet.inventory.graph import Graph, check_name
from reprofleet.inventory.ranges import expand_host_pattern

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def parse_ini_inventory(text: str, graph: Graph) -> None:
    """Ansible's INI rules, including groups that are used before they are declared.

    A ``[parent:children]`` line joins a child that already has a section at once, and one
    that has none yet when its ``[child]`` or ``[child:children]`` section comes: that is the
    order the parent lists its children, and so its hosts, in Ansible.
    """
    group, state = "ungrouped", "hosts"
    declared = {"all", "ungrouped"}
    wanted: dict[str, tuple[Location, str]] = {}  # group used -> where, and how it was used
    pending: dict[str, list[tuple[str, Location]]] = {}  # child with no section yet -> its parents
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        # the field of an INI line is its section: that is what a person looks for
        where = Location(graph.file, number, f"[{group}]" if state == "hosts" else f"[{group}:{state}]")
        if not line or line[0] in "#;":
            continue
        section = _SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            check_name(group, "group name", Location(graph.file, number, line))
            _ini_section(graph, group, state, Location(graph.file, number, line), declared, wanted, pending)
        elif line.startswith("["):
            raise InventoryError(Location(graph.file, number, line), f"invalid section {line!r}: no spaces, one ':type' at most")
        elif state == "hosts":
            _ini_hosts(graph, group, line, number)
        elif state == "vars":
            key, value = _ini_assignment(line, where)
            graph.set_group_var(group, key, value, Location(graph.file, number, key))
        else:
            _ini_child(graph, group, line, where, wanted, pending)
    _check_declared(wanted, declared)
    graph.reconcile()


def _ini_section(graph: Graph, group: str, state: str, where: Location, declared: set[str],
                 wanted: dict[str, tuple[Location, str]], pending: dict[str, list[tuple[str, Location]]]) -> None:
    """A ``[group]``, ``[group:vars]`` or ``[group:children]`` header: the group exists from here."""
    if state not in ("hosts", "vars", "children"):
        raise InventoryError(where, f"section [{group}:{state}] has unknown type {state!r}")
    graph.group(group)
    if state == "vars":
        wanted.setdefault(group, (Location(where.file, where.line, group), f"[{group}:vars] is for"))
        return
    declared.add(group)
    for parent, used_at in pending.pop(group, []):
        graph.add_child(parent, group, used_at)


def _ini_child(graph: Graph, group: str, line: str, where: Location, wanted: dict[str, tuple[Location, str]],
               pending: dict[str, list[tuple[str, Location]]]) -> None:
    """One line of ``[group:children]``: joined now if the child exists, else when its section comes."""
    named = _GROUP_NAME.match(line)
    if not named:
        raise InventoryError(where, f"expected a group name, got {line!r}")
    child = named.group(1)
    used_at = Location(where.file, where.line, child)
    wanted.setdefault(child, (used_at, f"[{group}:children] includes"))
    if child in graph.groups:
        graph.add_child(group, child, used_at)
    else:
        pending.setdefault(child, []).append((group, used_at))


def _check_declared(wanted: Mapping[str, tuple[Location, str]], declared: set[str]) -> None:
    for name, (where, how) in wanted.items():
        if name not in declared:
            raise InventoryError(where, f"{how} group {name!r}, which has no [{name}] section")


def _ini_hosts(graph: Graph, group: str, line: str, number: int) -> None:
    where = Location(graph.file, number, f"[{group}]")
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise InventoryError(where, f"cannot split host line: {exc}") from None
    if not tokens:
        return
    names, port = expand_host_pattern(tokens[0], Location(graph.file, number, tokens[0]))
    if tokens[0].endswith(":") and port is None:
        raise InventoryError(where, f"host {tokens[0]!r} ends in ':', which is reserved for a port")
    if "---" in names:
        raise InventoryError(where, "'---' in an INI inventory: is this a YAML file without .yml?")
    host_vars: dict[str, Any] = {}
    for token in tokens[1:]:
        if "=" not in token:
            raise InventoryError(where, f"expected key=value after the host name, got {token!r}")
        key, text = token.split("=", 1)
        host_vars[key] = ini_value(text)
    for name in names:
        graph.add_host(name, group, port, Location(graph.file, number, "ansible_port"))
        for key, value in host_vars.items():
            graph.set_host_var(name, key, value, Location(graph.file, number, key))


def _ini_assignment(line: str, where: Location) -> tuple[str, Any]:
    if "=" not in line:
        raise InventoryError(where, f"expected key=value, got {line!r}")
    key, text = (part.strip() for part in line.split("=", 1))
    if not key:
        raise InventoryError(where, f"no variable name before '=' in {line!r}")
    return key, ini_value(text)


def ini_value(text: str) -> Any:
    """A value as Ansible's INI plugin reads it: a Python literal if it is one, else text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _ini_coerce(value)


def _ini_coerce(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_ini_coerce(v) for v in value]
    if isinstance(value, dict):
        return {_ini_coerce(k): _ini_coerce(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="surrogateescape")
    if value is Ellipsis:
        return "..."
    if isinstance(value, complex):
        return str(value)
    return value
