"""Checks that need no host: run before anything is contacted.

A power limit outside a card's range would fail on the host after other hosts were already
changed, so it is refused up front from what is known without asking: the inventory's
``gpu_power_limits: [min, max]``, or the facts a previous ``invoke facts`` or campaign
cached under ``reports/.facts/<host>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .errors import Location, PlaybookError
from .model import Host, Playbook
from .policy import cells_out_of_range

FACTS_CACHE = ".facts"


def cached_facts(report_root: Path, host: str) -> Mapping[str, Any] | None:
    path = report_root / FACTS_CACHE / f"{host}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cache_facts(report_root: Path, host: str, facts: Mapping[str, Any]) -> None:
    folder = report_root / FACTS_CACHE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{host}.json").write_text(json.dumps(dict(facts), sort_keys=True, default=str) + "\n")


def check_playbook_against_hosts(playbook: Playbook, hosts: tuple[Host, ...], report_root: Path) -> None:
    """Raise PlaybookError (file:cell:field) for the first cell no host's card can take."""
    for host in hosts:
        for cell, low, high in cells_out_of_range(playbook, host, cached_facts(report_root, host.name)):
            raise PlaybookError(
                Location(playbook.path, None, f"matrix[{cell.index}].power_limit"),
                f"cell {cell.name!r} asks {cell.gpu.power_limit_w:g} W, but {host.name}'s GPU takes {low:g}-{high:g} W",
            )
