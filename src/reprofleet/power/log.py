"""The power log: one JSON line per power action, in ``reports/<campaign>/power.jsonl``.

Why a separate file from the attempt records: a wedge rate is only as good as the
recovery behind it, and when a host stays down someone needs to see which outlet was
switched, what the PDU answered and what state was read back, in order, with times.
Lines never carry a secret: drivers scrub their error texts before they get here.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reprofleet.records.private_files import make_folder
from reprofleet.records.store import append_line, cut_torn_tail


@dataclass(frozen=True)
class PowerEvent:
    """One power action as it was logged."""

    time: str  # ISO 8601 UTC, when the action started
    host: str
    driver: str
    address: str
    outlet: str | None
    action: str  # on | off | status | cycle
    result: str  # ok | failed | unverified (the device cannot report state)
    state: str | None  # the state read back at the end, if any
    duration_s: float
    error: str | None = None
    tries: int = 1
    note: str | None = None  # e.g. "this driver cannot read the outlet state"
    pdu: str | None = None  # a daisy-chained PDU's id, when the outlet is not on the first PDU
    fallback: int | None = None  # which ``fallback:`` device switched (1: the first); None: the host's own pdu block

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class PowerLog:
    """Appends PowerEvents to a JSONL file; one instance may be shared by many threads.

    ``path=None`` keeps events in memory only (for callers that have no campaign).
    Every line is flushed and fsync'd: after a power cut of the controller itself, the
    log must still say what was switched last.
    """

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._memory: list[PowerEvent] = []
        self.torn = cut_torn_tail(self.path) if self.path is not None else ""

    @classmethod
    def for_campaign(cls, reports_dir: Path | str, campaign: str) -> PowerLog:
        return cls(Path(reports_dir) / campaign / "power.jsonl")

    def append(self, event: PowerEvent) -> None:
        line = json.dumps(event.to_json(), sort_keys=True)
        with self._lock:
            self._memory.append(event)
            if self.path is None:
                return
            make_folder(self.path.parent)
            append_line(self.path, line)

    @property
    def events(self) -> tuple[PowerEvent, ...]:
        """The events this instance appended (not those of other processes)."""
        with self._lock:
            return tuple(self._memory)

    def read(self) -> list[dict[str, Any]]:
        """Every line of the file, parsed (for reports and tests)."""
        if self.path is None or not self.path.exists():
            return []
        with open(self.path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
