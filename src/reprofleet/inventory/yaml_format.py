"""YAML inventories: groups of ``vars``, ``children`` and ``hosts``, as Ansible's yaml plugin reads them.

What Ansible would only warn about (an unexpected key, a group that is not a mapping)
becomes a warning on the graph, not an error, so an inventory that works with Ansible
also works here.
"""

from __future__ import annotations

from typing import Any, Mapping

from reprofleet.errors import InventoryError, Location
from reprofleet.suggest import LineMap, did_you_mean, line_of

from reprofleet.inventory.graph import Graph, check_name
from reprofleet.inventory.ranges import expand_host_pattern

_GROUP_SECTIONS = ("vars", "children", "hosts")


def parse_yaml_inventory(data: Any, graph: Graph) -> None:
    if not data:
        raise InventoryError(Location(graph.file, 1, "(document)"), "the inventory is empty")
    if not isinstance(data, dict):
        raise InventoryError(
            Location(graph.file, line_of(data) or 1, "(document)"), "a YAML inventory is a mapping of groups (e.g. 'all:')"
        )
    for name in data:
        _yaml_group(graph, data, name)
    graph.reconcile()


def _yaml_group(graph: Graph, parent: Mapping[Any, Any], name: Any) -> str | None:
    where = Location(graph.file, line_of(parent, name), str(name))
    body = parent[name]
    if not isinstance(name, str) or not name:
        raise InventoryError(where, "a group name must be a non-empty string")
    check_name(name, "group name", where)
    if not isinstance(body, (dict, type(None))):
        graph.warnings.append(f"{where}: skipped: a group is a mapping of vars/children/hosts")
        return None
    graph.group(name)
    for key, value in (body or {}).items():
        key_where = Location(graph.file, line_of(body, key), f"{name}.{key}")
        value = _yaml_section(key, value, key_where)
        if key not in _GROUP_SECTIONS:
            graph.warnings.append(
                f"{key_where}: skipped: a group holds only vars, children and hosts"
                f"{did_you_mean(key, _GROUP_SECTIONS)}"
            )
        elif key == "vars":
            for var, var_value in (value or {}).items():
                graph.set_group_var(name, var, var_value, Location(graph.file, line_of(value, var), var))
        elif key == "children":
            for child in value or {}:
                if _yaml_group(graph, value, child) is not None:
                    graph.add_child(name, child, Location(graph.file, line_of(value, child), child))
        else:
            for pattern in value or {}:
                _yaml_hosts(graph, name, value, pattern)
    return name


def _yaml_section(key: Any, value: Any, where: Location) -> Any:
    if key in _GROUP_SECTIONS and isinstance(value, str):
        section = LineMap({value: None})  # Ansible accepts 'hosts: ws01' for one member
        section.line = where.line
        section.key_lines = {value: where.line} if where.line is not None else {}
        return section
    if key in _GROUP_SECTIONS and not isinstance(value, (dict, type(None))):
        raise InventoryError(where, f"'{key}' must be a mapping, not a {type(value).__name__}")
    return value


def _yaml_hosts(graph: Graph, group: str, hosts: Mapping[Any, Any], pattern: Any) -> None:
    line = line_of(hosts, pattern)
    if not isinstance(pattern, str):
        raise InventoryError(
            Location(graph.file, line, str(pattern)), "a host name must be a string (quote numbers)"
        )
    where = Location(graph.file, line, pattern)
    host_vars = hosts[pattern] or {}
    if not isinstance(host_vars, dict):
        raise InventoryError(where, "a host's entry must be a mapping of variables")
    names, port = expand_host_pattern(pattern, where)
    for name in names:
        graph.add_host(name, group, port, Location(graph.file, line, "ansible_port"))
        for key, value in host_vars.items():
            graph.set_host_var(name, key, value, Location(graph.file, line_of(host_vars, key), key))
