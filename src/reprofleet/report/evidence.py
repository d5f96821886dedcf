"""Evidence from beyond a frozen host, in words: wall power at the freeze, the BMC's log. Pure.

A record's ``telemetry.wall_trace`` holds [t, w] pairs, t in seconds from the last line
heard from the host (negative before it); readings after 0 are the frozen host still
drawing power until it was declared wedged. Beside it, the GPU's own last NVML sample:
a host frozen at 450 W at the wall with the GPU last at 300 W spins; one at 120 W halted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from reprofleet.records.reader import RecordedAttempt


@dataclass(frozen=True)
class WallAtFreeze:
    """The wall trace of one record, split at the silence."""

    before: tuple[tuple[float, float], ...]
    after: tuple[tuple[float, float], ...]
    nvml_w: float | None
    note: str  # why there is no trace ('' when there is one, or when the record predates wall traces)

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        return self.before + self.after


def wall_at_freeze(record: Mapping[str, Any]) -> WallAtFreeze:
    """``record``: typed, or its JSON line."""
    telemetry = RecordedAttempt.from_json(record).telemetry
    raw = telemetry.get("wall_trace") or []
    points = [(float(p[0]), float(p[1])) for p in raw
              if isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, (int, float)) for v in p)]
    sample = telemetry.get("last_sample") or {}
    nvml = sample.get("power_w") if isinstance(sample, Mapping) else None
    return WallAtFreeze(tuple(p for p in points if p[0] <= 0), tuple(p for p in points if p[0] > 0),
                        float(nvml) if isinstance(nvml, (int, float)) else None, str(telemetry.get("wall_note") or ""))


def wall_words(wall: WallAtFreeze) -> str:
    """One line: the wall power as the host froze, over the last minute, after it; or why none."""
    nvml = f"; GPU (NVML) last {wall.nvml_w:.0f} W" if wall.nvml_w is not None else ""
    if not wall.points:
        return (wall.note or "—") + nvml
    watts = [w for _, w in wall.before]
    parts = []
    if watts:
        parts.append(f"{watts[-1]:.0f} W at the freeze (last minute {min(watts):.0f}–{max(watts):.0f} W)")
    if wall.after:
        parts.append(f"{wall.after[-1][1]:.0f} W {wall.after[-1][0]:.0f} s after it")
    return ", ".join(parts) + nvml


def bmc_words(forensics: Mapping[str, Any]) -> str:
    """The BMC's event log since the attempt started, in one line: the worst entries first."""
    events = [e for e in forensics.get("bmc_events") or [] if isinstance(e, Mapping)]
    notes = [str(n) for n in forensics.get("bmc_notes") or []]
    if "bmc_events" not in forensics:
        return "—"
    if not events:
        return "no entries" + (f" ({notes[0][:100]})" if notes else "")
    rank = {"Critical": 0, "Warning": 1}
    worst = sorted(events, key=lambda e: rank.get(str(e.get("severity")), 2))
    shown = "; ".join(f"{e.get('severity')}: {str(e.get('message'))[:90]}" for e in worst[:2])
    return f"{len(events)} entries: {shown}" + ("; …" if len(events) > 2 else "")
