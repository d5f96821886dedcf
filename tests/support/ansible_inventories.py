"""Random Ansible inventories and host patterns, for the differential test against ansible-core.

An inventory is drawn as a structure (groups, a random DAG of children, hosts in several
groups, each group's hosts and children in a random order) and written out as YAML or INI
the way people write them: groups declared in different orders, a group used under one
parent before its own section, ranges such as ``ws[01:04]``, a group that appears under two
parents with its body at only one of them. Patterns mix names, globs, ``~regex``, ``:`` and
``,`` unions, ``&`` and ``!`` and subscripts (negative, slices, ansible's ``[i:0]``).
Everything comes from one ``random.Random``: a seed gives the same cases on every machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HOSTS = [f"ws{n:02d}" for n in range(1, 13)] + ["db1", "db2", "gpu-a", "gpu-b", "lone"]
GROUPS = ["lab", "office", "prod", "staging", "blackwell", "rack1", "rack2", "ws_lab"]
GLOBS = ["*", "ws0*", "ws1?", "ws[01]*", "r*", "*a*", "db?", "gpu-*", "s*", "*1", "?a*", "w*"]
REGEXES = ["~ws0[1-4]", "~(lab|db)", "~r", "~.*a$", "~gpu", "~w", "~.*[0-9]$", "~st"]
SUBSCRIPTS = ["[0]", "[1]", "[-1]", "[-2]", "[1:]", "[0:1]", "[1:2]", "[2:0]", "[0:0]", "[2:]", "[1-2]", "[4]"]


@dataclass(frozen=True)
class Drawn:
    """One inventory as a structure: each group's own hosts and children, in the order added."""

    own: dict[str, list[str]]
    children: dict[str, list[str]]
    top_hosts: list[str]  # hosts named under all: directly (YAML) or before any section (INI)
    runs: dict[str, int]  # groups whose first own hosts are an ascending run of ws names: its length

    @property
    def groups(self) -> list[str]:
        return list(self.own)


def draw_inventory(rng: random.Random) -> Drawn:
    names = rng.sample(GROUPS, rng.randint(2, 7))
    children: dict[str, list[str]] = {g: [] for g in names}
    for index, parent in enumerate(names):  # edges only forward in this order: no loops
        later = names[index + 1:]
        children[parent] = rng.sample(later, min(len(later), rng.choice([0, 1, 1, 2, 2, 3])))
    hosts = rng.sample(HOSTS, rng.randint(3, 12))
    own: dict[str, list[str]] = {g: [] for g in names}
    runs: dict[str, int] = {}
    for group in names:
        if rng.random() < 0.25:
            start = rng.randint(1, 9)
            own[group] = [f"ws{n:02d}" for n in range(start, start + rng.randint(2, 4))]
            runs[group] = len(own[group])
    for host in hosts:
        for group in rng.sample(names, min(len(names), rng.choice([0, 1, 1, 2, 3]))):
            if host not in own[group]:
                own[group].append(host)
    for group in names:
        if group not in runs:
            rng.shuffle(own[group])
    placed = {h for members in own.values() for h in members}
    top = [h for h in hosts if h not in placed or rng.random() < 0.1]
    return Drawn(own, children, top, runs)


def host_lines(drawn: Drawn, group: str) -> list[str]:
    """A group's own hosts as written: its run of ws names as one range (``ws[03:06]``), then the rest."""
    hosts = drawn.own[group]
    run = drawn.runs.get(group, 0)
    if run < 2:
        return list(hosts)
    return [f"ws[{hosts[0][2:]}:{hosts[run - 1][2:]}]", *hosts[run:]]


def to_yaml(drawn: Drawn, rng: random.Random) -> str:
    """Nested YAML: each group's body (hosts, children) at one of the places it is named."""
    parents = {g: [p for p in drawn.groups if g in drawn.children[p]] for g in drawn.groups}
    tops = [g for g in drawn.groups if not parents[g] or rng.random() < 0.15]
    rng.shuffle(tops)
    body_at = {g: rng.choice([None, *parents[g]]) if parents[g] else None for g in drawn.groups}
    written: set[str] = set()
    lines: list[str] = []
    wrap = rng.random() < 0.5 or bool(drawn.top_hosts)
    if wrap:
        lines.append("all:")
        if drawn.top_hosts:
            lines.append("  hosts:")
            lines.extend(f"    {h}:" for h in drawn.top_hosts)
        lines.append("  children:")
    for group in tops:
        _yaml_group(drawn, group, None, body_at, written, lines, 4 if wrap else 0, rng)
    return "\n".join(lines) + "\n"


def _yaml_group(drawn: Drawn, group: str, parent: str | None, body_at: dict[str, str | None], written: set[str],
                lines: list[str], indent: int, rng: random.Random) -> None:
    pad = " " * indent
    if group in written or parent not in (None, body_at[group]) and body_at[group] is not None:
        lines.append(f"{pad}{group}: {{}}")  # named here, its body elsewhere
        return
    written.add(group)
    lines.append(f"{pad}{group}:")
    sections = ["hosts", "children"]
    rng.shuffle(sections)
    for section in sections:
        if section == "hosts" and drawn.own[group]:
            lines.append(f"{pad}  hosts:")
            lines.extend(f"{pad}    {h}:" for h in host_lines(drawn, group))
        elif section == "children" and drawn.children[group]:
            lines.append(f"{pad}  children:")
            for child in drawn.children[group]:
                _yaml_group(drawn, child, group, body_at, written, lines, indent + 4, rng)


def to_ini(drawn: Drawn, rng: random.Random) -> str:
    """INI sections in a random order: a group may be used as a child before its own section."""
    lines = [*drawn.top_hosts, ""]
    sections: list[tuple[str, list[str]]] = []
    for group in drawn.groups:
        hosts = host_lines(drawn, group)
        if len(hosts) > 2 and rng.random() < 0.3:  # one group's hosts in two sections
            cut = rng.randint(1, len(hosts) - 1)
            sections.append((f"[{group}]", hosts[cut:]))
            hosts = hosts[:cut]
        sections.append((f"[{group}]", hosts))
        if drawn.children[group]:
            sections.append((f"[{group}:children]", list(drawn.children[group])))
        if rng.random() < 0.2:  # a vars section names the group too, wherever it comes
            sections.append((f"[{group}:vars]", rng.choice([[], [f"rack_role={group}"]])))
    rng.shuffle(sections)
    for header, body in sections:
        lines.extend([header, *body, ""])
    return "\n".join(lines)


def draw_pattern(drawn: Drawn, rng: random.Random) -> str:
    """One to three parts (a name, a glob, a regex; maybe a subscript, ``&`` or ``!``), joined by ``:`` or ``,``."""
    hosts = sorted({h for members in drawn.own.values() for h in members} | set(drawn.top_hosts))
    parts = []
    for index in range(rng.choice([1, 1, 2, 2, 3])):
        kind = rng.choice(["group", "group", "host", "glob", "regex", "all"])
        if kind == "group":
            part = rng.choice(drawn.groups)
        elif kind == "host":
            part = rng.choice(hosts)
        elif kind == "glob":
            part = rng.choice(GLOBS)
        elif kind == "regex":
            part = rng.choice(REGEXES)
        else:
            part = rng.choice(["all", "ungrouped"])
        if kind != "regex" and rng.random() < 0.4:
            part += rng.choice(SUBSCRIPTS)
        if index or rng.random() < 0.1:
            part = rng.choice(["", "", "&", "!"]) + part
        parts.append(part)
    return rng.choice([":", ",", ", "]).join(parts)
