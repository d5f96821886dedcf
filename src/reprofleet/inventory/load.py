"""Which reader an inventory path needs: our YAML/INI parsers, or ``ansible-inventory``.

Files are parsed here so every error has a real line number; a script, a folder, a
plugin config or an ``a,b,`` host list goes to Ansible, which alone can run them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reprofleet.errors import InventoryError, Location
from reprofleet.scheduler import SlurmClient
from reprofleet.suggest import load_located_yaml

from reprofleet.inventory.graph import Graph
from reprofleet.inventory.hosts import Inventory, inventory_from_graph
from reprofleet.inventory.ini_format import parse_ini_inventory
from reprofleet.inventory.listing import ANSIBLE_INVENTORY_TIMEOUT_S, ansible_list, inventory_from_listing
from reprofleet.inventory.slurm_source import SOURCE_JOINER, SlurmSelection, is_slurm_source, slurm_inventory
from reprofleet.inventory.values import YAML_SUFFIXES, InventoryLoader, read_text
from reprofleet.inventory.vars_files import VarsFiles
from reprofleet.inventory.yaml_format import parse_yaml_inventory


def load_inventory(path: str | Path, *, timeout_s: float = ANSIBLE_INVENTORY_TIMEOUT_S,
                   slurm: SlurmClient | None = None) -> Inventory:
    """Read an inventory the way ``ansible-inventory -i PATH --list`` would.

    YAML/INI files are parsed here; anything else goes through ``ansible-inventory``
    (bounded by ``timeout_s``). Every problem is an InventoryError at file:line:field.
    A ``slurm:`` source (alone, or joined with one Ansible inventory by ``-i`` given twice)
    reads Slurm's nodes through ``slurm`` (the real commands by default): slurm_source.py.
    """
    source = str(path)
    if is_slurm_source(source) or SOURCE_JOINER in source:
        return _with_slurm(source.split(SOURCE_JOINER), timeout_s, slurm or SlurmClient())
    where = Path(path)
    if where.is_file() and not _is_script(where):
        graph = Graph(source)
        if _parse_file(read_text(where, source), where, graph):
            return inventory_from_graph(graph, VarsFiles(where), source)
    if where.exists() or "," in source:  # a plugin config, script, folder or 'a,b,' list
        return inventory_from_listing(ansible_list(source, timeout_s), source)
    raise InventoryError(Location(source), "no such inventory file or directory")


def _with_slurm(parts: list[str], timeout_s: float, slurm: SlurmClient) -> Inventory:
    """One ``slurm:`` source choosing the hosts, and at most one Ansible inventory for their
    login and power details."""
    chosen = [p for p in parts if is_slurm_source(p)]
    details = [p for p in parts if not is_slurm_source(p)]
    if len(chosen) != 1 or len(details) > 1:
        raise InventoryError(Location(SOURCE_JOINER.join(parts)), "give one slurm: source (which nodes) and at most "
                             "one Ansible inventory (their login and power): -i slurm:gpu -i inventory/lab.yml")
    known = load_inventory(details[0], timeout_s=timeout_s) if details else None
    return slurm_inventory(SlurmSelection.parse(chosen[0]), slurm, known)


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


def _parse_file(text: str, path: Path, graph: Graph) -> bool:
    """Pick the format as Ansible's auto-detection does for files: YAML first, then INI.

    False for an inventory plugin config (``plugin:``), which only Ansible can run.
    """
    is_yaml = path.suffix.lower() in YAML_SUFFIXES
    data: Any = None
    if is_yaml:
        data = load_located_yaml(text, graph.file, InventoryError, loader=InventoryLoader)
    elif not path.suffix and not _looks_like_ini(text):
        data = _yaml_mapping_or_none(text, graph.file)
    if data is None and not is_yaml:
        parse_ini_inventory(text, graph)
        return True
    if isinstance(data, dict) and data.get("plugin"):
        return False
    parse_yaml_inventory(data, graph)
    return True


def _yaml_mapping_or_none(text: str, file: str) -> Any:
    try:
        data = load_located_yaml(text, file, InventoryError, loader=InventoryLoader)
    except InventoryError:
        return None
    return data if isinstance(data, dict) and data else None


def _looks_like_ini(text: str) -> bool:
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#;":
            return line.startswith("[")
    return False
