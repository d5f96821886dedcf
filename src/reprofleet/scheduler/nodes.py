"""Slurm's nodes as ``sinfo --json`` prints them (Slurm 22.05, OpenAPI v0.0.38), read into
:class:`SlurmNode`.

Facts about 22.05 the parser relies on (``tests/fixtures/slurm/``): ``sinfo --json`` lists
every node and ignores ``--partition``/``--nodes`` filters, so selection happens here
(:func:`select_nodes`); ``state`` is the base state in lower case (``idle``, ``mixed``,
``allocated``, ``down``, ...), ``state_flags`` the rest in upper case (``DRAIN``,
``NOT_RESPONDING``, ...); a drained node that still runs a job is ``mixed`` or ``allocated``
with ``DRAIN`` (Slurm's "draining"); a node set down keeps an earlier ``DRAIN`` flag.
``scontrol show node -o`` was not used: its values hold unquoted spaces (``OS=Linux 6.1 #1
SMP``, the reason), so it cannot be split reliably.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from reprofleet.errors import SchedulerError

__all__ = ["SINFO_JSON", "SlurmNode", "gres_count", "parse_sinfo_json", "select_nodes"]

SINFO_JSON = ("sinfo", "--json")
BUSY_STATES = frozenset({"mixed", "allocated", "completing"})


@dataclass(frozen=True)
class SlurmNode:
    """One node as Slurm sees it."""

    name: str
    address: str  # NodeAddr: where its slurmd is reached (a login address when no inventory gives one)
    state: str  # the base state, lower case
    flags: frozenset[str]  # DRAIN, NOT_RESPONDING, MAINTENANCE, ... upper case
    reason: str  # empty when none
    reason_by: str | None  # the user who set the reason
    gres: tuple[str, ...]  # "gpu:rtxpro6000:2", one per resource
    features: tuple[str, ...]  # the active features
    partitions: tuple[str, ...]

    @property
    def drain_flag(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def down(self) -> bool:
        return self.state == "down"

    @property
    def held_by_someone(self) -> bool:
        """Taken out of service (drained, draining, down, failing, in maintenance) by anyone."""
        return self.drain_flag or self.down or bool(self.flags & {"FAIL", "MAINTENANCE", "RESERVED"})

    @property
    def runs_jobs(self) -> bool:
        """Slurm counts CPUs of a job on it (``squeue -w`` says which jobs)."""
        return self.state in BUSY_STATES

    @property
    def state_words(self) -> str:
        """As ``scontrol show node`` writes it: ``MIXED+DRAIN``."""
        return "+".join([self.state.upper(), *sorted(self.flags)])


def parse_sinfo_json(text: str, command: str = " ".join(SINFO_JSON)) -> tuple[SlurmNode, ...]:
    """Every node of ``sinfo --json``; SchedulerError naming the node and field for what is not
    the shape 22.05 prints."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SchedulerError(command, f"not JSON ({exc}); is this Slurm 21.08 or later?") from None
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise SchedulerError(command, "no 'nodes' list in its JSON")
    errors = document.get("errors") or []
    if errors:
        raise SchedulerError(command, f"Slurm reported: {_first_error(errors)}")
    return tuple(_node(entry, index, command) for index, entry in enumerate(document["nodes"]))


def _first_error(errors: Any) -> str:
    first = errors[0] if isinstance(errors, list) and errors else errors
    if isinstance(first, dict):
        return str(first.get("description") or first.get("error") or first)[:300]
    return str(first)[:300]


def _node(entry: Any, index: int, command: str) -> SlurmNode:
    where = f"nodes[{index}]"
    if not isinstance(entry, dict):
        raise SchedulerError(command, f"{where}: not an object")
    name = _text(entry, "name", where, command)
    where = f"nodes[{index}] ({name})" if name else where
    if not name:
        raise SchedulerError(command, f"{where}.name: empty")
    reason_by = entry.get("reason_set_by_user")
    return SlurmNode(
        name=name, address=_text(entry, "address", where, command) or name,
        state=_text(entry, "state", where, command).lower(),
        flags=frozenset(flag.upper() for flag in _texts(entry, "state_flags", where, command)),
        reason=_text(entry, "reason", where, command),
        reason_by=reason_by if isinstance(reason_by, str) and reason_by else None,
        gres=_split(_text(entry, "gres", where, command)),
        features=_split(_text(entry, "active_features", where, command)),
        partitions=tuple(_texts(entry, "partitions", where, command)),
    )


def _text(entry: Mapping[str, Any], key: str, where: str, command: str) -> str:
    value = entry.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SchedulerError(command, f"{where}.{key}: expected text, got {type(value).__name__}")
    return value


def _texts(entry: Mapping[str, Any], key: str, where: str, command: str) -> list[str]:
    value = entry.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SchedulerError(command, f"{where}.{key}: expected a list of text")
    return value


def _split(value: str) -> tuple[str, ...]:
    """A comma list as Slurm prints it; "(null)"/"N/A" are none. A GRES' socket note
    (``gpu:a100:4(S:0-1)``) is cut: it is placement, not what the node has."""
    if value in ("", "(null)", "N/A"):
        return ()
    parts, depth, current = [], 0, ""
    for char in value:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return tuple(part.split("(", 1)[0].strip() for part in parts if part.strip())


def gres_count(gres: Iterable[str], name: str = "gpu") -> int:
    """How many of one resource the node has (``gpu:rtxpro6000:2`` -> 2; ``gpu`` alone -> 1)."""
    total = 0
    for item in gres:
        fields = item.split(":")
        if fields[0] != name:
            continue
        total += int(fields[-1]) if len(fields) > 1 and fields[-1].isdigit() else 1
    return total


def select_nodes(nodes: Iterable[SlurmNode], *, partition: str | None = None, feature: str | None = None,
                 names: Iterable[str] | None = None) -> tuple[SlurmNode, ...]:
    """The nodes of a partition, with a feature, or named (each filter optional), in Slurm's order."""
    wanted = set(names) if names is not None else None
    return tuple(node for node in nodes
                 if (partition is None or partition in node.partitions)
                 and (feature is None or feature in node.features)
                 and (wanted is None or node.name in wanted))
