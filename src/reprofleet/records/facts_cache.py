"""``reports/.facts/<host>.json``: the last facts seen of each host, for checks that may not ask it.

A power limit outside a card's range is refused before any host is contacted from what a
previous ``invoke facts`` or campaign left here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from reprofleet.records.store import write_atomic


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
    write_atomic(folder / f"{host}.json", json.dumps(dict(facts), sort_keys=True, default=str) + "\n")
