"""Ansible inventories as users already have them -> the hosts a campaign runs on.

A fleet owner already describes their machines in an Ansible inventory, so we read that
format as Ansible does instead of inventing one: YAML and INI files are parsed here (with
real line numbers for every error), ``group_vars/`` and ``host_vars/`` beside the file are
merged in Ansible's precedence order, and any other source (a directory, a dynamic
inventory script, a plugin config) is handed to ``ansible-inventory --list`` when it is
installed. Ansible itself is never imported: it is an optional tool, not a library we
depend on. ``tests/test_inventory.py`` checks our reading against ``ansible-inventory``.

Sections below: the graph of groups and hosts, host patterns and ranges, the YAML and INI
parsers, vars files, precedence, Host construction, and the ``ansible-inventory`` path.
"""

from __future__ import annotations

import ast
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from reprofleet.errors import InventoryError, Location
from reprofleet.model import CredentialRef, Host, PowerPort, frozen_mapping
from reprofleet.suggest import LineMap, LocatedLoader, did_you_mean, line_of, load_located_yaml, plain

ANSIBLE_INVENTORY_TIMEOUT_S = 60.0
YAML_SUFFIXES = (".yml", ".yaml", ".json")
# Later names win, as in Ansible's ssh connection plugin option definitions.
ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")
PORT_VARS = ("ansible_port", "ansible_ssh_port")
USER_VARS = ("ansible_user", "ansible_ssh_user")
KEY_FILE_VARS = ("ansible_private_key_file", "ansible_ssh_private_key_file")
PDU_SECRET_KEYS = frozenset(
    {"password", "passwd", "pass", "secret", "token", "api_key", "apikey", "community",
     "auth_key", "priv_key", "auth_password", "priv_password"}
)


@dataclass(frozen=True)
class Inventory:
    """Hosts to run on, group membership (transitive, including ``all``), and where from.

    ``warnings`` carries what Ansible would only warn about (an unexpected key in a YAML
    group, a vault-encrypted vars file we cannot read), for the command line to print.
    """

    hosts: tuple[Host, ...]
    groups: Mapping[str, tuple[str, ...]]
    source: str
    warnings: tuple[str, ...] = ()

    def host(self, name: str) -> Host:
        """The host called ``name``; KeyError naming the known ones otherwise."""
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name!r} in {self.source}{did_you_mean(name, self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(host.name for host in self.hosts)


class VaultEncrypted(str):
    """An inline ``!vault`` value: kept (as its ciphertext), never usable as a setting."""


class _InventoryLoader(LocatedLoader):
    """Ansible's YAML tags: ``!unsafe`` is a plain string, ``!vault`` stays encrypted."""


_InventoryLoader.add_constructor(
    "!unsafe", lambda loader, node: loader.construct_scalar(node)  # type: ignore[arg-type]
)
_InventoryLoader.add_constructor(
    "!vault", lambda loader, node: VaultEncrypted(loader.construct_scalar(node))  # type: ignore[arg-type]
)


def load_inventory(path: str | Path, *, timeout_s: float = ANSIBLE_INVENTORY_TIMEOUT_S) -> Inventory:
    """Read an inventory the way ``ansible-inventory -i PATH --list`` would.

    YAML/INI files are parsed here; anything else goes through ``ansible-inventory``
    (bounded by ``timeout_s``). Every problem is an InventoryError at file:line:field.
    """
    source = str(path)
    where = Path(path)
    if where.is_file() and not _is_script(where):
        graph = _Graph(source)
        if _parse_file(_read_text(where, source), where, graph):
            return _inventory_from_graph(graph, _VarsFiles(where), source)
    if where.exists() or "," in source:  # a plugin config, script, folder or 'a,b,' list
        return _inventory_from_listing(_ansible_list(source, timeout_s), source)
    raise InventoryError(Location(source), "no such inventory file or directory")


def _is_script(path: Path) -> bool:
    """An executable file that can run (shebang or ELF), as Ansible's script plugin tries first.

    An inventory that is merely executable (a chmod -R, a FAT/NTFS mount) stays data.
    """
    if not os.access(path, os.X_OK) or path.suffix.lower() in (*YAML_SUFFIXES, ".ini"):
        return False
    try:
        with path.open("rb") as head:
            magic = head.read(4)
    except OSError:
        return False
    return magic.startswith(b"#!") or magic == b"\x7fELF"


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(Location(shown), f"cannot read: {exc}") from None


def _parse_file(text: str, path: Path, graph: _Graph) -> bool:
    """Pick the format as Ansible's auto-detection does for files: YAML first, then INI.

    False for an inventory plugin config (``plugin:``), which only Ansible can run.
    """
    is_yaml = path.suffix.lower() in YAML_SUFFIXES
    data: Any = None
    if is_yaml:
        data = load_located_yaml(text, graph.file, InventoryError, loader=_InventoryLoader)
    elif not path.suffix and not _looks_like_ini(text):
        data = _yaml_mapping_or_none(text, graph.file)
    if data is None and not is_yaml:
        _parse_ini_inventory(text, graph)
        return True
    if isinstance(data, dict) and data.get("plugin"):
        return False
    _parse_yaml_inventory(data, graph)
    return True


def _yaml_mapping_or_none(text: str, file: str) -> Any:
    try:
        data = load_located_yaml(text, file, InventoryError, loader=_InventoryLoader)
    except InventoryError:
        return None
    return data if isinstance(data, dict) and data else None


def _looks_like_ini(text: str) -> bool:
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#;":
            return line.startswith("[")
    return False


# --- the graph of groups and hosts ---------------------------------------------------


@dataclass(frozen=True)
class _Sourced:
    """One variable's value and where it was written (field = the variable's name)."""

    value: Any
    where: Location


@dataclass
class _Group:
    name: str
    vars: dict[str, _Sourced] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    priority: int = 1


@dataclass
class _HostEntry:
    vars: dict[str, _Sourced] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)


class _Graph:
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
        if name not in self.hosts:
            self.hosts[name] = _HostEntry()
            if port is not None:  # a pattern's :port counts only where the host is first seen
                self.set_host_var(name, "ansible_port", port, where)
        entry = self.hosts[name]
        if group not in entry.groups:
            entry.groups.append(group)
            self.group(group).hosts.append(name)

    def add_child(self, parent: str, child: str, where: Location) -> None:
        if child == parent or parent in self._descendants(child):
            raise InventoryError(where, f"group {child!r} under {parent!r} makes a loop of groups")
        if child not in self.group(parent).children:
            self.groups[parent].children.append(child)
            self.group(child).parents.append(parent)

    def set_group_var(self, group: str, key: str, value: Any, where: Location) -> None:
        if key == "ansible_group_priority":  # Ansible keeps this out of the group's vars
            self.group(group).priority = _as_int(value, where, "an integer")
            return
        self.group(group).vars[str(key)] = _Sourced(value, where)

    def set_host_var(self, host: str, key: str, value: Any, where: Location) -> None:
        self.hosts[host].vars[str(key)] = _Sourced(value, where)

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
        member_sets = {name: set(self.groups[name].hosts) for name in self.groups}
        for host in self.hosts:
            for name in self.ancestors(host):
                member_sets[name].add(host)
        return {name: tuple(h for h in self.hosts if h in hosts) for name, hosts in member_sets.items()}


# --- host patterns: name[:port] and [a:b(:step)] ranges ------------------------------

_RANGE = r"\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]"
_LABEL = rf"(?:[\w]|{_RANGE})(?:[\w_-]|{_RANGE})*(?<![_-])"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$", re.I)
_BRACKETED_PORT = re.compile(r"^\[(.+)\]:([0-9]+)$")
_HOST_PORT = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$")


def expand_host_pattern(pattern: str, where: Location) -> tuple[list[str], int | None]:
    """``ws[01:03]:2222`` -> (["ws01", "ws02", "ws03"], 2222), as Ansible expands host keys."""
    address, port = pattern, None
    for regex in (_BRACKETED_PORT, _HOST_PORT):
        match = regex.match(address)
        if match:
            address, port = match.group(1), int(match.group(2))
    if not (_HOSTNAME.match(address) or _is_ipv6(address)):
        address, port = pattern, None  # Ansible keeps an unrecognised pattern whole
    names = expand_host_ranges(address, where) if "[" in address else [address]
    return names, port


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_host_ranges(pattern: str, where: Location) -> list[str]:
    """Expand the first ``[begin:end(:step)]`` (numeric, zero-padded, or letters), recursively."""
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    bounds = body.split(":")
    if not closed or len(bounds) not in (2, 3):
        raise InventoryError(where, f"host range in {pattern!r} must be [begin:end] or [begin:end:step]")
    begin, end = bounds[0] or "0", bounds[1]
    step = bounds[2] if len(bounds) == 3 else "1"
    if not end or not step.isdigit() or int(step) < 1:
        raise InventoryError(where, f"host range in {pattern!r} needs an end and a step of at least 1")
    values = _range_values(begin, end, int(step), pattern, where)
    names: list[str] = []
    for value in values:
        name = f"{head}{value}{tail}"
        names.extend(expand_host_ranges(name, where) if "[" in name else [name])
    return names


def _range_values(begin: str, end: str, step: int, pattern: str, where: Location) -> list[str]:
    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        if letters.index(begin) > letters.index(end):
            raise InventoryError(where, f"host range in {pattern!r} must have begin <= end")
        return list(letters[letters.index(begin) : letters.index(end) + 1 : step])
    if not (begin.isdigit() and end.isdigit()):
        raise InventoryError(where, f"host range in {pattern!r} must be numbers or single letters")
    width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
    if width and len(end) != width:
        raise InventoryError(where, f"host range in {pattern!r} must pad begin and end to one width")
    if int(begin) > int(end):
        raise InventoryError(where, f"host range in {pattern!r} must have begin <= end")
    return [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]


# --- YAML inventories ----------------------------------------------------------------

_GROUP_SECTIONS = ("vars", "children", "hosts")


def _parse_yaml_inventory(data: Any, graph: _Graph) -> None:
    if not data:
        raise InventoryError(Location(graph.file), "the inventory is empty")
    if not isinstance(data, dict):
        raise InventoryError(
            Location(graph.file, line_of(data)), "a YAML inventory is a mapping of groups (e.g. 'all:')"
        )
    for name in data:
        _yaml_group(graph, data, name)
    graph.reconcile()


def _yaml_group(graph: _Graph, parent: Mapping[Any, Any], name: Any) -> str | None:
    where = Location(graph.file, line_of(parent, name), str(name))
    body = parent[name]
    if not isinstance(name, str) or not name:
        raise InventoryError(where, "a group name must be a non-empty string")
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


def _yaml_hosts(graph: _Graph, group: str, hosts: Mapping[Any, Any], pattern: Any) -> None:
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


# --- INI inventories -----------------------------------------------------------------

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def _parse_ini_inventory(text: str, graph: _Graph) -> None:
    """Ansible's INI rules, including groups that are used before they are declared."""
    group, state = "ungrouped", "hosts"
    declared = {"all", "ungrouped"}
    wanted: dict[str, tuple[Location, str]] = {}  # group used -> where, and how it was used
    edges: list[tuple[str, str, Location]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = Location(graph.file, number)
        if not line or line[0] in "#;":
            continue
        section = _SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            if state not in ("hosts", "vars", "children"):
                raise InventoryError(where, f"section [{group}:{state}] has unknown type {state!r}")
            if state == "vars":
                wanted.setdefault(group, (Location(graph.file, number, group), f"[{group}:vars] is for"))
            else:
                declared.add(group)
                graph.group(group)
        elif line.startswith("[") and line.endswith("]"):
            raise InventoryError(where, f"invalid section {line!r}: no spaces, one ':type' at most")
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


def _ini_hosts(graph: _Graph, group: str, line: str, number: int) -> None:
    where = Location(graph.file, number)
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


# --- group_vars/ and host_vars/ ------------------------------------------------------


class _VarsFiles:
    """``group_vars/<name>`` and ``host_vars/<name>`` beside the inventory, read once each."""

    def __init__(self, inventory_file: Path) -> None:
        self.shown = inventory_file.parent
        self.base = Path(os.path.realpath(inventory_file.parent))
        self.cache: dict[tuple[str, str], dict[str, _Sourced]] = {}
        self.warnings: list[str] = []

    def vars(self, kind: str, name: str) -> dict[str, _Sourced]:
        if (kind, name) not in self.cache:
            merged: dict[str, _Sourced] = {}
            for path in self._files(kind, name):
                merged.update(self._read(path))
            self.cache[(kind, name)] = merged
        return self.cache[(kind, name)]

    def _files(self, kind: str, name: str) -> list[Path]:
        folder = self.base / kind
        if not folder.is_dir() or name.startswith("/"):
            return []
        for suffix in ("", *YAML_SUFFIXES):  # the first that exists wins, as in Ansible
            candidate = folder / f"{name}{suffix}"
            if candidate.is_dir():
                return _dir_vars_files(candidate)
            if candidate.exists():
                return [candidate]
        return []

    def _read(self, path: Path) -> dict[str, _Sourced]:
        shown = str(self.shown / path.relative_to(self.base))
        text = _read_text(path, shown)
        if text.startswith("$ANSIBLE_VAULT;"):
            self.warnings.append(f"{shown}: skipped: vault-encrypted vars file")
            return {}
        data = load_located_yaml(text, shown, InventoryError, loader=_InventoryLoader)
        if data is None or data == {}:
            return {}
        if not isinstance(data, dict):
            raise InventoryError(Location(shown, line_of(data)), "a vars file must be a mapping")
        return {str(k): _Sourced(v, Location(shown, line_of(data, k), str(k))) for k, v in data.items()}


def _dir_vars_files(folder: Path) -> list[Path]:
    """Files of a ``group_vars/<name>/`` folder: sorted, recursive, no hidden or backups."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_dir() and not entry.suffix:
            found.extend(_dir_vars_files(entry))
        elif entry.is_file() and entry.suffix in ("", *YAML_SUFFIXES):
            found.append(entry)
    return found


# --- precedence and Host construction ------------------------------------------------


def _inventory_from_graph(graph: _Graph, files: _VarsFiles, source: str) -> Inventory:
    if not graph.hosts:
        raise InventoryError(Location(source), "the inventory has no hosts")
    depth = graph.depths()
    hosts = []
    for name in graph.hosts:
        groups = graph.ancestors(name)
        hosts.append(host_from_vars(name, _host_layers(graph, files, name, groups, depth), groups))
    return Inventory(
        hosts=tuple(hosts),
        groups=frozen_mapping(graph.members()),
        source=source,
        warnings=tuple(graph.warnings + files.warnings),
    )


def _host_layers(
    graph: _Graph, files: _VarsFiles, host: str, groups: set[str], depth: Mapping[str, int]
) -> dict[str, _Sourced]:
    """Ansible's default order: all < groups (shallow first) < group_vars files alike < host < host_vars."""
    ordered = sorted(
        (graph.groups[g] for g in groups if g != "all"), key=lambda g: (depth[g.name], g.priority, g.name)
    )
    merged: dict[str, _Sourced] = dict(graph.groups["all"].vars)
    for group in ordered:
        merged.update(group.vars)
    for name in ["all", *(g.name for g in ordered)]:
        merged.update(files.vars("group_vars", name))
    merged.update(graph.hosts[host].vars)
    merged.update(files.vars("host_vars", host))
    return merged


def host_from_vars(name: str, merged: Mapping[str, _Sourced], groups: Iterable[str]) -> Host:
    """Connection settings, GPU and PDU of one host from its merged variables."""
    address = _last(merged, ADDRESS_VARS)
    port = _last(merged, PORT_VARS)
    user = _last(merged, USER_VARS)
    key_file = _last(merged, KEY_FILE_VARS)
    python = _last(merged, ("ansible_python_interpreter",))
    gpu = _last(merged, ("gpu_index",))
    pdu = _last(merged, ("pdu",))
    return Host(
        name=name,
        address=_text(address) if address else name,
        port=_port(port) if port else 22,
        user=_text(user) if user else None,
        key_file=_text(key_file) if key_file else None,
        python=_interpreter(python) if python else "python3",
        gpu_index=_as_int(gpu.value, gpu.where, "a GPU index (0, 1, ...)", low=0) if gpu else 0,
        pdu=power_port(pdu.value, pdu.where) if pdu else None,
        groups=tuple(sorted(g for g in groups if g != "all")),
        vars=frozen_mapping({key: plain(item.value) for key, item in merged.items()}),
    )


def _last(merged: Mapping[str, _Sourced], names: tuple[str, ...]) -> _Sourced | None:
    present = [merged[n] for n in names if n in merged and merged[n].value is not None]
    return present[-1] if present else None


def _text(item: _Sourced) -> str:
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


def _port(item: _Sourced) -> int:
    return _as_int(item.value, item.where, "a port number (1-65535)", low=1, high=65535)


def _interpreter(item: _Sourced) -> str:
    value = _text(item)
    return "python3" if value.startswith("auto") else value  # Ansible's discovery modes


def _as_int(value: Any, where: Location, what: str, low: int | None = None, high: int | None = None) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or (low is not None and number < low) or (high is not None and number > high):
        raise InventoryError(where, f"must be {what}, got {value!r}")
    return number


def power_port(pdu: Any, where: Location) -> PowerPort:
    """The ``pdu:`` block of a host: driver and address required, secrets only by reference."""
    if not isinstance(pdu, dict):
        raise InventoryError(where, "must be a mapping with driver, address, outlet, credentials")

    def at(key: str) -> Location:
        return Location(where.file, line_of(pdu, key) or where.line, f"pdu.{key}")

    for key in pdu:
        if str(key).lower() in PDU_SECRET_KEYS:  # never echo the value: it is a secret
            raise InventoryError(
                at(key), "secrets never go into the inventory: use 'credentials: env:VAR' or 'file:/path'"
            )
    for key in ("driver", "address"):
        if key not in pdu:
            raise InventoryError(where, f"pdu needs '{key}'")
    outlet = pdu.get("outlet")
    if isinstance(outlet, bool) or not isinstance(outlet, (str, int, type(None))):
        raise InventoryError(at("outlet"), f"must be an outlet name or number, got {outlet!r}")
    credentials = pdu.get("credentials")
    return PowerPort(
        driver=_text(_Sourced(pdu["driver"], at("driver"))),
        address=_text(_Sourced(pdu["address"], at("address"))),
        outlet=None if outlet is None else str(outlet),
        credentials=None if credentials is None else credential_ref(credentials, at("credentials")),
        options=frozen_mapping(
            {k: plain(v) for k, v in pdu.items() if k not in ("driver", "address", "outlet", "credentials")}
        ),
    )


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def credential_ref(value: Any, where: Location) -> CredentialRef:
    """``env:VAR`` or ``file:/path``; the message never repeats the value (it may be a secret)."""
    scheme, _, name = value.partition(":") if isinstance(value, str) else ("", "", "")
    if scheme == "env" and _ENV_NAME.match(name):
        return CredentialRef("env", name)
    if scheme == "file" and name:
        return CredentialRef("file", name)
    if scheme in ("env", "file"):
        raise InventoryError(where, f"'{scheme}:' needs a {'variable name' if scheme == 'env' else 'path'}")
    known = f"unknown scheme {scheme!r}" if name and scheme.isalpha() and len(scheme) < 12 else "not a reference"
    raise InventoryError(where, f"{known}: credentials are 'env:VAR' or 'file:/path'")


# --- other sources through ansible-inventory -----------------------------------------


def ansible_inventory_command() -> str | None:
    """``ansible-inventory`` on PATH, or beside this interpreter (an unactivated venv)."""
    found = shutil.which("ansible-inventory")
    if found:
        return found
    beside = Path(sys.executable).parent / "ansible-inventory"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _ansible_list(source: str, timeout_s: float) -> Any:
    command = ansible_inventory_command()
    if command is None:
        raise InventoryError(
            Location(source),
            "a plugin config, script or folder needs ansible-inventory (pip install ansible-core)",
        )
    env = dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="1", ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="1",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    process = subprocess.Popen(
        [command, "-i", source, "--list"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: takes the script along
        process.communicate()
        raise InventoryError(Location(source), f"ansible-inventory gave no answer within {timeout_s:g}s") from None
    if process.returncode != 0:
        tail = " ".join(stderr.strip().splitlines()[-3:])
        raise InventoryError(Location(source), f"ansible-inventory failed ({process.returncode}): {tail}")
    try:
        return json.loads(stdout)
    except ValueError as exc:
        raise InventoryError(Location(source), f"ansible-inventory printed no JSON: {exc}") from None


def _inventory_from_listing(listing: Any, source: str) -> Inventory:
    """``ansible-inventory --list`` JSON: hostvars are already merged; membership is not."""
    if not isinstance(listing, dict):
        raise InventoryError(Location(source), "ansible-inventory printed something other than a mapping")
    hostvars = (listing.get("_meta") or {}).get("hostvars") or {}
    groups = {name: body for name, body in listing.items() if name != "_meta" and isinstance(body, dict)}
    direct = {name: list(body.get("hosts") or []) for name, body in groups.items()}
    children = {name: list(body.get("children") or []) for name, body in groups.items()}
    order = list(dict.fromkeys([h for hosts in direct.values() for h in hosts] + list(hostvars)))
    if not order:
        raise InventoryError(Location(source), "the inventory has no hosts")
    members = {name: _closure(name, direct, children) for name in set(groups) | {"all"}}
    members["all"] = set(order)
    hosts = []
    for name in order:
        merged = {k: _Sourced(_unwrap(v), Location(source, None, k)) for k, v in (hostvars.get(name) or {}).items()}
        hosts.append(host_from_vars(name, merged, [g for g, m in members.items() if name in m]))
    return Inventory(
        hosts=tuple(hosts),
        groups=frozen_mapping({g: tuple(h for h in order if h in m) for g, m in members.items()}),
        source=source,
    )


def _unwrap(value: Any) -> Any:
    """ansible-inventory's JSON marks ``!unsafe`` and ``!vault`` values as one-key objects."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return _unwrap(value["__ansible_unsafe"])
        if set(value) == {"__ansible_vault"}:
            return VaultEncrypted(value["__ansible_vault"])
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _closure(group: str, direct: Mapping[str, list[str]], children: Mapping[str, list[str]]) -> set[str]:
    found: set[str] = set()
    seen: set[str] = set()
    stack = [group]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            found.update(direct.get(name, []))
            stack.extend(children.get(name, []))
    return found
