"""Per host, the campaign over time: each attempt, power cycles, quarantines and pauses.

A freeze that follows a power cycle, a host that was quarantined half-way, or a pause when
every host went silent at once (the controller's own network) all change how far a rate
can be trusted, and they are easiest to see on one time axis per host.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

from matplotlib.lines import Line2D

from reprofleet.records.reader import attempts_of
from reprofleet.verdicts import natural_key
from reprofleet.report import plots
from reprofleet.model.events import CampaignEvent, event_of

PAUSE_START, PAUSE_END = CampaignEvent.CONTROLLER_NETWORK_SUSPECT, CampaignEvent.CONTROLLER_NETWORK_BACK


@dataclass(frozen=True)
class Mark:
    host: str
    when: datetime
    what: str  # an outcome, "power cycle" or "quarantined"


@dataclass(frozen=True)
class Pause:
    host: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Timeline:
    hosts: tuple[str, ...]
    attempts: tuple[Mark, ...]
    power_cycles: tuple[Mark, ...]
    quarantines: tuple[Mark, ...]
    pauses: tuple[Pause, ...]


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 record or event time (``Z`` or an offset), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _marks(entries: Sequence[Mapping[str, Any]], key: str, what: str) -> list[Mark]:
    marks = []
    for entry in entries:
        when = parse_time(entry.get(key))
        if when is not None and entry.get("host"):
            marks.append(Mark(str(entry["host"]), when, what))
    return marks


def _pauses(events: Sequence[Mapping[str, Any]]) -> list[Pause]:
    open_since: dict[str, datetime] = {}
    pauses = []
    for event in events:
        when, host = parse_time(event.get("t")), str(event.get("host"))
        if when is None:
            continue
        if event_of(event) is PAUSE_START:
            open_since.setdefault(host, when)
        elif event_of(event) is PAUSE_END and host in open_since:
            pauses.append(Pause(host, open_since.pop(host), when))
    last = max((parse_time(e.get("t")) for e in events), default=None, key=lambda t: t.timestamp() if t else 0.0)
    pauses += [Pause(h, start, last or start) for h, start in open_since.items()]
    return pauses


def _attempt_marks(records: Sequence[Mapping[str, Any]]) -> list[Mark]:
    """Each attempt with a start time and a host, at its start, as its outcome."""
    marks = []
    for record in attempts_of(records):
        when = parse_time(record.started)
        if when is not None and record.host:
            marks.append(Mark(record.host, when, record.outcome))
    return marks


def build_timeline(records: Sequence[Mapping[str, Any]], power: Sequence[Mapping[str, Any]],
                   events: Sequence[Mapping[str, Any]]) -> Timeline:
    """``records``: typed, or their JSON lines. Power cycles are the ``off`` and ``cycle``
    actions that succeeded (a ``status`` is no cycle)."""
    attempts = _attempt_marks(records)
    cycles = _marks([p for p in power if p.get("action") in ("off", "cycle") and p.get("result") == "ok"],
                    "time", "power cycle")
    quarantines = _marks([e for e in events if event_of(e) is CampaignEvent.QUARANTINED], "t", "quarantined")
    hosts = sorted({m.host for m in attempts + cycles + quarantines}, key=natural_key)
    return Timeline(tuple(hosts), tuple(attempts), tuple(cycles), tuple(quarantines), tuple(_pauses(events)))


def timeline_svg(timeline: Timeline) -> str:
    """One row per host (``ws2`` above ``ws10``), time along the bottom."""
    rows = {host: index for index, host in enumerate(reversed(timeline.hosts))}
    with plots.style():
        fig, ax = plots.figure(7.5, 0.9 + 0.32 * max(1, len(rows)))
        if not timeline.attempts:
            plots.no_data(fig, ax, "no attempts with a start time")
            return plots.svg_of(fig, "timeline of attempts per host")
        for pause in timeline.pauses:
            if pause.host in rows:
                y = rows[pause.host]
                ax.fill_betweenx([y - 0.4, y + 0.4], pause.start, pause.end, color="#ffe082", linewidth=0)
        for outcome in plots.OUTCOME_ORDER:
            marks = [m for m in timeline.attempts if m.what == outcome and m.host in rows]
            if marks:
                ax.scatter([m.when for m in marks], [rows[m.host] for m in marks], s=14 if outcome == "clean" else 26,
                           color=plots.OUTCOME_COLOURS[outcome], marker="o" if outcome == "clean" else "D", zorder=3,
                           linewidths=0)
        for extra, symbol, colour in ((timeline.power_cycles, "|", "#000000"), (timeline.quarantines, "X", "#000000")):
            shown = [m for m in extra if m.host in rows]
            if shown:
                ax.scatter([m.when for m in shown], [rows[m.host] + 0.3 for m in shown], marker=symbol, s=40,
                           color=colour, zorder=4, linewidths=1.2)
        ax.set_yticks(list(rows.values()), list(rows.keys()))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlabel("time (UTC)")
        present = {m.what for m in timeline.attempts}
        handles = [Line2D([], [], color=plots.OUTCOME_COLOURS[o], marker="o" if o == "clean" else "D", linestyle="",
                          label=o) for o in plots.OUTCOME_ORDER if o in present]
        handles += [Line2D([], [], color="#000000", marker="|", linestyle="", label="power cycle"),
                    Line2D([], [], color="#000000", marker="X", linestyle="", label="quarantined"),
                    Line2D([], [], color="#ffe082", linewidth=6, label="paused (controller network?)")]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=6, frameon=False)
        fig.autofmt_xdate(rotation=0, ha="center")
        return plots.svg_of(fig, "timeline of attempts per host")
