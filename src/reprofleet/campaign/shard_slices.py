"""Which hosts each controller shard runs: disjoint, balanced slices, chosen once.

The rule (``invoke campaign --shards N``): hosts that share a power outlet (a cycle of one
cuts the other) form one unit, since only one controller may know that a cut it made was its
own; units go, largest first and then in inventory order, each to the shard with the fewest
hosts so far (the lowest shard number on a tie), so shard sizes differ by at most the largest
unit (by one host when no outlet is shared). The slices are computed once, at submission,
and written into the campaign folder (``shards.json``): a shard requeued by Slurm reads its
slice back and never recomputes it, so a changed inventory cannot move a host between shards
mid-campaign. Pure: nothing here contacts a host or Slurm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from reprofleet.errors import UsageError

__all__ = ["ShardOf", "slice_hosts"]


@dataclass(frozen=True)
class ShardOf:
    """One shard of a campaign: its number (1..count) of count, its slice, and the Slurm job
    that runs it."""

    campaign: str
    index: int
    count: int
    hosts: tuple[str, ...]
    job: str = ""  # SLURM_JOB_ID ("" outside Slurm)
    requeued: bool = False  # SLURM_RESTART_COUNT > 0: Slurm ended an earlier run of this job

    @property
    def folder_name(self) -> str:
        return f"shard-{self.index}"

    @property
    def controller(self) -> str:
        """The controller's name in records and leases: the same over every run of one job, so a
        requeued run knows the leases its earlier run left (runner/link.py)."""
        job = f", slurm job {self.job}" if self.job else ""
        return f"shard {self.index} of {self.count}{job}"


def slice_hosts(names: Sequence[str], count: int, outlets: Mapping[str, frozenset[str]] | None = None
                ) -> tuple[tuple[str, ...], ...]:
    """``count`` disjoint slices of ``names`` (inventory order kept within each); ``outlets``:
    each host's outlet keys (power/ports.py ``outlet_keys``). UsageError (one line) when it
    cannot be done: fewer than one shard, or more shards than hosts or outlet groups."""
    if count < 1:
        raise UsageError(f"--shards takes a number >= 1, not {count}")
    if count > len(names):
        raise UsageError(f"--shards {count} is more than the {len(names)} hosts chosen: each shard needs a host")
    units = _units(names, outlets or {})
    if count > len(units):
        raise UsageError(f"--shards {count} is more than the {len(units)} groups of hosts that share no outlet "
                         "(hosts on one outlet stay in one shard)")
    order = {name: position for position, name in enumerate(names)}
    loads = [0] * count
    slices: list[list[str]] = [[] for _ in range(count)]
    for unit in sorted(units, key=lambda u: (-len(u), order[u[0]])):
        target = min(range(count), key=lambda i: (loads[i], i))
        slices[target].extend(unit)
        loads[target] += len(unit)
    return tuple(tuple(sorted(s, key=order.__getitem__)) for s in slices)


def _units(names: Sequence[str], outlets: Mapping[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """Hosts joined when they share an outlet key, transitively (a union of groups), each unit in
    inventory order, units in the order of their first host."""
    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    first_with: dict[str, str] = {}
    for name in names:
        for key in sorted(outlets.get(name, frozenset())):
            if key in first_with:
                parent[root(name)] = root(first_with[key])
            else:
                first_with[key] = name
    units: dict[str, list[str]] = {}
    for name in names:
        units.setdefault(root(name), []).append(name)
    return [tuple(unit) for unit in units.values()]
