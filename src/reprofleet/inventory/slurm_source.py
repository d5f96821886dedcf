"""``-i slurm:PARTITION`` (or ``slurm:feature=NAME``, ``slurm:nodes=gpu[01-04]``): the hosts are the
Slurm nodes so selected, each with its GRES, features and partitions as host variables.

Slurm knows nodes, not how to log in to them or which outlet feeds them, so an Ansible inventory
given beside it (``-i slurm:gpu -i inventory/lab.yml``) supplies those: a node with a host of
the same name there takes that host's variables, groups and power; a node without one is
reached at its ``NodeAddr`` with the defaults. The Slurm selection decides which hosts run:
hosts of the Ansible inventory that Slurm did not select are left out. Partitions become
groups (``gpu``), features groups ``feature_<name>``, so host patterns (``--limit``) work as on
any inventory. Variables: ``slurm_node``, ``slurm_partitions``, ``slurm_features``,
``slurm_gres``, ``slurm_gpus``. Not the node's state: it changes as the campaign drains the
node, and a host's variables are what ``--resume`` checks for "the same inventory".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from reprofleet.errors import InventoryError, Location, SchedulerError
from reprofleet.model import Host
from reprofleet.model.values import frozen_mapping
from reprofleet.scheduler import SlurmClient, SlurmNode, select_nodes
from reprofleet.scheduler.hostlist import expand_hostlist
from reprofleet.scheduler.nodes import gres_count

from reprofleet.inventory.hosts import Inventory, host_from_vars
from reprofleet.inventory.values import Sourced

__all__ = ["SLURM_SCHEME", "SLURM_VARIABLE", "SOURCE_JOINER", "SlurmSelection", "is_slurm_source", "slurm_inventory"]

SLURM_SCHEME = "slurm:"
SOURCE_JOINER = " + "  # -i given twice: both sources, in one string (cli/flags.py joins them)
SLURM_VARIABLE = "slurm_node"  # the host variable that makes a host a Slurm node the campaign takes


def is_slurm_source(source: str) -> bool:
    return source.startswith(SLURM_SCHEME)


@dataclass(frozen=True)
class SlurmSelection:
    """Which nodes a ``slurm:`` source names: a partition, a feature, or a host list."""

    source: str
    partition: str | None = None
    feature: str | None = None
    names: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, source: str) -> SlurmSelection:
        spec = source[len(SLURM_SCHEME):].strip()
        where = Location(source, None, "slurm")
        key, sep, value = spec.partition("=")
        if not spec or (sep and not value):
            raise InventoryError(where, "name a partition (slurm:gpu), a feature (slurm:feature=NAME) or nodes "
                                        "(slurm:nodes=gpu[01-04])")
        if not sep:
            return cls(source, partition=spec)
        if key == "feature":
            return cls(source, feature=value)
        if key == "nodes":
            try:
                return cls(source, names=expand_hostlist(value))
            except SchedulerError as exc:
                raise InventoryError(where, exc.reason) from None
        raise InventoryError(where, f"unknown selector {key!r}: partition, feature=NAME or nodes=LIST")

    def words(self) -> str:
        if self.partition is not None:
            return f"partition {self.partition!r}"
        return f"feature {self.feature!r}" if self.feature is not None else f"nodes {','.join(self.names or ())}"


def slurm_inventory(selection: SlurmSelection, client: SlurmClient, details: Inventory | None = None) -> Inventory:
    """The selected nodes as an inventory, merged with ``details`` (login and power)."""
    try:
        listed = client.nodes()
    except SchedulerError as exc:
        raise InventoryError(Location(selection.source, None, "slurm"), f"cannot list Slurm's nodes: {exc}") from None
    return merged_inventory(selection, listed, details)


def merged_inventory(selection: SlurmSelection, listed: Iterable[SlurmNode], details: Inventory | None) -> Inventory:
    """Pure: Slurm's nodes and an Ansible inventory -> the hosts a campaign runs on."""
    nodes = select_nodes(listed, partition=selection.partition, feature=selection.feature, names=selection.names)
    if not nodes:
        raise InventoryError(Location(selection.source, None, "slurm"), f"Slurm has no node in {selection.words()}")
    known = {host.name: host for host in details.hosts} if details is not None else {}
    hosts = tuple(_host(node, known.get(node.name), selection.source) for node in nodes)
    groups: dict[str, list[str]] = {"all": [h.name for h in hosts]}
    for host in hosts:
        for group in host.groups:
            groups.setdefault(group, []).append(host.name)
    source = selection.source + (f"{SOURCE_JOINER}{details.source}" if details is not None else "")
    warnings = tuple(details.warnings) if details is not None else ()
    return Inventory(hosts=hosts, groups=frozen_mapping({g: tuple(m) for g, m in groups.items()}), source=source,
                     warnings=warnings, declared=tuple(h.name for h in hosts))


def slurm_vars(node: SlurmNode) -> dict[str, Any]:
    return {SLURM_VARIABLE: node.name, "slurm_partitions": list(node.partitions), "slurm_features": list(node.features),
            "slurm_gres": list(node.gres), "slurm_gpus": gres_count(node.gres)}


def _groups(node: SlurmNode) -> tuple[str, ...]:
    return (*node.partitions, *(f"feature_{feature}" for feature in node.features))


def _host(node: SlurmNode, known: Host | None, source: str) -> Host:
    if known is not None:
        return replace(known, vars=frozen_mapping({**known.vars, **slurm_vars(node)}),
                       groups=tuple(sorted({*known.groups, *_groups(node)})))
    where = Location(source, None, node.name)
    merged = {key: Sourced(value, Location(source, None, key)) for key, value in slurm_vars(node).items()}
    merged["ansible_host"] = Sourced(node.address, where)
    return host_from_vars(node.name, merged, _groups(node), where)
