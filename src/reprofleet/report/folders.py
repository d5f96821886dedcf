"""The files beside a pool's attempt records: streams, power log, events, host facts.

A pooled report may read two controllers' copies of one campaign, or a merged folder; both
must give the same report, so every side file is read from every folder and de-duplicated
by content, and a host's facts are the snapshot its latest record names (by hash), never
"whichever folder came first".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from reprofleet.records.pooling import Pool
from reprofleet.records.reader import RecordedAttempt, attempts_of
from reprofleet.verdicts import natural_key


@dataclass(frozen=True)
class Folders:
    """The campaign folders a pool's attempts files live in, in the order they were given."""

    roots: tuple[Path, ...]

    @classmethod
    def of(cls, pool: Pool) -> "Folders":
        return cls(tuple(dict.fromkeys(Path(source).parent for source in pool.sources)))

    def stream(self, record: RecordedAttempt) -> Path | None:
        """The record's stream file in the first folder that has it (copies are identical)."""
        if not record.stream:
            return None
        for root in self.roots:
            path = root / record.stream
            if path.is_file():
                return path
        return None

    def lines(self, name: str) -> list[dict[str, Any]]:
        """Every JSON line of ``name`` (power.jsonl, events.jsonl) in any folder, each once."""
        seen: dict[str, dict[str, Any]] = {}
        for root in self.roots:
            path = root / name
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the torn last line of a killed controller
                if isinstance(entry, dict):
                    seen.setdefault(json.dumps(entry, sort_keys=True, default=str), entry)
        return [seen[k] for k in sorted(seen, key=lambda k: (str(seen[k].get("time") or seen[k].get("t") or ""), k))]

    def facts(self, records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each host's facts snapshot: the one its latest record was run with (``records``:
        typed, or their JSON lines)."""
        by_hash: dict[str, dict[str, Any]] = {}
        by_host: dict[str, list[dict[str, Any]]] = {}
        for root in self.roots:
            kept = sorted((root / "facts").glob("*.json")) + sorted((root / "facts" / "by-hash").glob("*.json"))
            for path in kept if (root / "facts").is_dir() else []:  # by-hash: every snapshot a record names
                try:
                    snapshot = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError):
                    continue
                if not isinstance(snapshot, dict):
                    continue
                body = json.dumps(snapshot, sort_keys=True, default=str)
                by_hash[hashlib.sha256(body.encode()).hexdigest()] = snapshot
                if path.parent.name != "by-hash":
                    by_host.setdefault(path.stem, []).append(snapshot)
        chosen: dict[str, dict[str, Any]] = {}
        for record in sorted(attempts_of(records), key=lambda r: str(r.started)):
            snapshot = by_hash.get(str(record.facts))
            if snapshot is not None:
                chosen[record.host] = snapshot
        for host, snapshots in by_host.items():
            if host not in chosen:
                chosen[host] = min(snapshots, key=lambda s: json.dumps(s, sort_keys=True, default=str))
        return {h: chosen[h] for h in sorted(chosen, key=natural_key)}
