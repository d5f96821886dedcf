"""The graph of groups and hosts a file declares, with Ansible's implicit rules applied.

Both parsers (YAML and INI) fill one ``Graph``; its closing rules (every group under
``all``, lone hosts in ``ungrouped``), depths and ancestors are what precedence needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reprofleet.errors import InventoryError, Location
from reprofleet.model import unsafe_name_reason

from reprofleet.inventory.order import group_hosts
from reprofleet.inventory.values import Sourced, as_int


@dataclass
class _Group:
    name: str
    vars: dict[str, Sourced] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    priority: int = 1


@dataclass
class _HostEntry:
    vars: dict[str, Sourced] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    where: Location | None = None  # where the host was first named (its name's errors point there)


class Graph:
    """Groups and hosts as a file declares them, with Ansible's implicit rules applied."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.groups: dict[str, _Group] = {"all": _Group("all"), "ungrouped": _Group("ungrouped")}
        self.add_child("all", "ungrouped", Location(file))
        self.hosts: dict[str, _HostEntry] = {}
        self.warnings: list[str] = []

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def add_host(self, name: str, group: str, port: int | None, where: Location) -> None:
        check_name(name, "host name", where)
        check_name(group, "group name", where)
        if name not in self.hosts:
            self.hosts[name] = _HostEntry(where=Location(where.file, where.line, "host name"))
            if port is not None:  # a pattern's :port counts only where the host is first seen
                self.set_host_var(name, "ansible_port", port, where)
        entry = self.hosts[name]
        if group not in entry.groups:
            entry.groups.append(group)
            self.group(group).hosts.append(name)

    def add_child(self, parent: str, child: str, where: Location) -> None:
        check_name(child, "group name", where)
        if child == parent or parent in self._descendants(child):
            raise InventoryError(where, f"group {child!r} under {parent!r} makes a loop of groups")
        if child not in self.group(parent).children:
            self.groups[parent].children.append(child)
            self.group(child).parents.append(parent)

    def set_group_var(self, group: str, key: str, value: Any, where: Location) -> None:
        check_name(group, "group name", where)
        if key == "ansible_group_priority":  # Ansible keeps this out of the group's vars
            self.group(group).priority = as_int(value, where, "an integer")
            return
        self.group(group).vars[str(key)] = Sourced(value, where)

    def set_host_var(self, host: str, key: str, value: Any, where: Location) -> None:
        self.hosts[host].vars[str(key)] = Sourced(value, where)

    def _descendants(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.groups[name].children) if name in self.groups else []
        while stack:
            child = stack.pop()
            if child not in seen:
                seen.add(child)
                stack.extend(self.groups[child].children)
        return seen

    def reconcile(self) -> None:
        """Ansible's closing rules: every group hangs under ``all``; lone hosts are ``ungrouped``."""
        for group in list(self.groups.values()):
            if group.name != "all" and not group.parents:
                self.add_child("all", group.name, Location(self.file))
        ungrouped = self.groups["ungrouped"]
        for name, entry in self.hosts.items():
            others = [g for g in entry.groups if g not in ("all", "ungrouped")]
            if others and "ungrouped" in entry.groups:
                entry.groups.remove("ungrouped")
                ungrouped.hosts.remove(name)
            elif not others and "ungrouped" not in entry.groups:
                self.add_host(name, "ungrouped", None, Location(self.file))

    def depths(self) -> dict[str, int]:
        """Longest path from ``all``: Ansible merges shallow groups first."""
        depth = {"all": 0}
        order = ["all"]
        for name in order:  # bounded: each group re-enters only when its depth grows
            for child in self.groups[name].children:
                if depth.get(child, -1) < depth[name] + 1:
                    depth[child] = depth[name] + 1
                    order.append(child)
        return depth

    def ancestors(self, host: str) -> set[str]:
        found: set[str] = set()
        stack = list(self.hosts[host].groups)
        while stack:
            name = stack.pop()
            if name not in found:
                found.add(name)
                stack.extend(self.groups[name].parents)
        return found

    def members(self) -> dict[str, tuple[str, ...]]:
        """Every group's hosts, its descendants' included, in Ansible's order (``order.group_hosts``);
        groups in the order they were first named, as Ansible matches patterns against them."""
        own = {name: group.hosts for name, group in self.groups.items()}
        children = {name: group.children for name, group in self.groups.items()}
        return {name: group_hosts(name, own, children) for name in self.groups}


def check_name(name: str, what: str, where: Location) -> None:
    """Host and group names become file names (facts, netconsole, bug reports): one that could
    leave its folder is refused at the line that wrote it (``model.names``)."""
    reason = unsafe_name_reason(name, what)
    if reason is not None:
        raise InventoryError(Location(where.file, where.line, what), reason)
