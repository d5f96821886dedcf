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
    """Ansible's INI rules, including groups that are used before they are declared."""
    group, state = "ungrouped", "hosts"
    declared = {"all", "ungrouped"}
    wanted: dict[str, tuple[Location, str]] = {}  # group used -> where, and how it was used
    edges: list[tuple[str, str, Location]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        # the field of an INI line is its section: that is what a person looks for
        where = Location(graph.file, number, f"[{group}]" if state == "hosts" else f"[{group}:{state}]")
        if not line or line[0] in "#;":
            continue
        section = _SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            where = Location(graph.file, number, line)
            check_name(group, "group name", where)
            if state not in ("hosts", "vars", "children"):
                raise InventoryError(where, f"section [{group}:{state}] has unknown type {state!r}")
            if state == "vars":
                wanted.setdefault(group, (Location(graph.file, number, group), f"[{group}:vars] is for"))
            else:
                declared.add(group)
                graph.group(group)
        elif line.startswith("["):
            raise InventoryError(Location(graph.file, number, line), f"invalid section {line!r}: no spaces, one ':type' at most")
        elif state == "hosts":
            _ini_hosts(graph, group, line, number)
        elif state == "vars":
            key, value = _ini_assignment(line, where)
            graph.set_group_var(group, key, value, Location(graph.file, number, key))
        else:
            named = _GROUP_NAME.match(line)
            if not named:
                raise InventoryError(where, f"expected a group name, got {line!r}")
            edges.append((group, named.group(1), Location(graph.file, number, named.group(1))))
            wanted.setdefault(named.group(1), (edges[-1][2], f"[{group}:children] includes"))
    _check_declared(wanted, declared)
    for parent, child, used_at in edges:
        graph.add_child(parent, child, used_at)
    graph.reconcile()


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
