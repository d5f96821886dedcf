"""``reports/.facts/<host>.json``: the last facts seen of each host, for checks that may not ask it.

A power limit outside a card's range is refused before any host is contacted from what a
previous ``invoke facts`` or campaign left here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from reprofleet.model import file_name
from reprofleet.records.private_files import make_folder
from reprofleet.records.store import write_atomic


FACTS_CACHE = ".facts"


def cached_facts(report_root: Path, host: str) -> Mapping[str, Any] | None:
    path = report_root / FACTS_CACHE / file_name(host, ".json", what="host name")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cache_facts(report_root: Path, host: str, facts: Mapping[str, Any]) -> None:
    name = file_name(host, ".json", what="host name")  # before anything is made
    write_atomic(make_folder(report_root / FACTS_CACHE) / name, json.dumps(dict(facts), sort_keys=True, default=str) + "\n")
