"""Where a campaign stands, read from its folder alone: counts per host, the plan, an ETA.

``invoke status`` and the controller's metrics.prom writer both read this, on a running
campaign as on a finished one, from any machine that can read the folder: nothing here
writes, and nothing takes the folder's lock (whether the controller still runs is what its
metrics.prom last said, ``records/prometheus.py``). Verdicts are not here (they are the
verdict layer's); this is counting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from reprofleet.model import CampaignEvent, Outcome, event_of, outcome_counts
from reprofleet.records.pooling import Plan, read_manifest
from reprofleet.records.prometheus import Heartbeat, read_heartbeat
from reprofleet.records.reader import RecordedAttempt, read_attempts
from reprofleet.records.store import CampaignDir, CampaignLock, RecordError, read_log_lines

METRICS_FILE = "metrics.prom"


@dataclass(frozen=True)
class HostState:
    """One host's part of a campaign."""

    name: str
    outcomes: Mapping[str, int]  # every record by outcome (a slot that runs again included)
    done: int  # attempts that count (interrupted or never-run slots run again: not done)
    planned: int | None  # slots of its plan (a stop-rule cell at its cap); None: no plan known
    remaining: int  # slots still to run (none on a quarantined host or a stopped cell)
    power_cycles: int
    quarantined: str | None = None
    needs_person: str | None = None  # the last call for a person, when no attempt started after it
    seconds_per_slot: float | None = None  # wall time per attempt so far, recoveries included

    @property
    def wedges(self) -> int:
        return self.outcomes.get(Outcome.WEDGE.value, 0)


@dataclass(frozen=True)
class FolderState:
    """A campaign folder's counts, its plan and what its controller last said."""

    campaign: str
    folder: Path
    hosts: tuple[HostState, ...]
    cells: tuple[str, ...]
    attempts_per_cell: int | None
    heartbeat: Heartbeat | None  # metrics.prom's running flag and time; None: never written
    stopped: tuple[tuple[str, str], ...] = ()  # (host, cell) a stop rule ended
    warnings: tuple[str, ...] = field(default_factory=tuple)
    adaptive: str = ""  # "search" | "bisect": its ladder chooses each slot at run time (no plan to count down)
    budget: int | None = None  # such a campaign's attempt budget, where its playbook states one

    @property
    def done(self) -> int:
        return sum(h.done for h in self.hosts)

    @property
    def planned(self) -> int | None:
        counts = [h.planned for h in self.hosts]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)

    @property
    def running(self) -> bool:
        return bool(self.heartbeat and self.heartbeat.running)

    def eta_s(self) -> float | None:
        """Seconds until the last host is through its plan, at each host's pace so far (hosts run
        in parallel); a host with no attempt yet goes at the fleet's mean pace. None: no pace yet."""
        if self.adaptive:  # a search ends when its model decides, not at a count of slots
            return None
        paces = [h.seconds_per_slot for h in self.hosts if h.seconds_per_slot is not None]
        if not paces:
            return None if any(h.remaining for h in self.hosts) else 0.0
        mean = sum(paces) / len(paces)
        return max((h.remaining * (h.seconds_per_slot if h.seconds_per_slot is not None else mean)
                    for h in self.hosts), default=0.0)


def quarantine_reason(entry: Mapping[str, Any]) -> str | None:
    """Why an events.jsonl line quarantines its host, if it does: a ``quarantined`` event, or
    recovery's move to its ``quarantined`` state (a failed recovery says only that)."""
    event = event_of(entry)
    if event is CampaignEvent.QUARANTINED:
        return str(entry.get("reason") or "quarantined")
    if event is CampaignEvent.RECOVERY and entry.get("to") == "quarantined":
        return f"recovery failed: {entry.get('reason') or 'no reason given'}"
    return None


# The events this reading needs; a night's events.jsonl is mostly probe rounds, which are
# never parsed (the controller rewrites metrics.prom from the folder every few seconds).
WANTED = frozenset(e.value for e in (CampaignEvent.QUARANTINED, CampaignEvent.RECOVERY, CampaignEvent.NEEDS_PERSON,
                                     CampaignEvent.ATTEMPT_STARTED, CampaignEvent.PREPARED, CampaignEvent.STOPPED))
EVENT_NAME = re.compile(r'"event":\s*"([a-z_]+)"')


def _events(path: Path) -> list[dict[str, Any]]:
    """The lines of events.jsonl whose event is one of WANTED (a torn or foreign line skipped)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        name = EVENT_NAME.search(line)
        if name is None or name.group(1) not in WANTED:
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("event") in WANTED:
            out.append(entry)
    return out


def _unix(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _pace(records: Sequence[RecordedAttempt]) -> float | None:
    """Wall seconds per recorded slot, first start to last end (recoveries and boots included)."""
    starts = [t for t in (_unix(r.started) for r in records) if t is not None]
    ends = [t for t in (_unix(r.ended) for r in records) if t is not None]
    ran = [r for r in records if r.started and r.ended]
    if not ran or not starts or not ends or max(ends) <= min(starts):
        return None
    return (max(ends) - min(starts)) / len(ran)


def _planned(plan: Plan | None, host: str, cells: Sequence[str]) -> dict[str, int] | None:
    if plan is None or host not in plan.hosts:
        return None
    return {cell: plan.of(cell) for cell in cells}


def read_state(folder: Path) -> FolderState:
    """The state of the campaign in ``folder``; a folder that is not a campaign is a RecordError."""
    directory = CampaignDir(Path(folder))
    if not any(p.exists() for p in (directory.manifest, directory.attempts, directory.root / CampaignLock.NAME)):
        raise RecordError(f"{folder}: not a campaign folder (no campaign.json, no attempts.jsonl)")
    info = read_manifest(directory.manifest, running=lambda _folder: False)  # never the lock
    records = read_attempts(directory.attempts)
    events = _events(directory.events)
    cells = info.cells if info and info.cells else tuple(dict.fromkeys(r.cell for r in records))
    plan = info.plan if info else None
    names = list(plan.hosts if plan else ())
    names += sorted({r.host for r in records} - set(names))
    stopped = tuple(sorted({(str(e.get("host")), str(e.get("cell"))) for e in events
                            if event_of(e) is CampaignEvent.STOPPED}))
    cycles: dict[str, int] = {}
    for entry in read_log_lines(directory.power):
        if entry.get("action") == "off" and entry.get("result") == "ok":
            cycles[str(entry.get("host"))] = cycles.get(str(entry.get("host")), 0) + 1
    adaptive = info.adaptive if info else ""
    hosts = tuple(_host(name, [r for r in records if r.host == name], events,
                        None if adaptive else _planned(plan, name, cells), {c for h, c in stopped if h == name},
                        cycles.get(name, 0))
                  for name in names)
    return FolderState(info.campaign if info else Path(folder).name, Path(folder), hosts, tuple(cells),
                       plan.attempts_per_cell if plan else None, read_heartbeat(directory.root / METRICS_FILE),
                       stopped, (info.caveat,) if info and info.caveat else (), adaptive,
                       info.budget if info else None)


def _host(name: str, records: list[RecordedAttempt], events: list[dict[str, Any]], planned: dict[str, int] | None,
          stopped: set[str], power_cycles: int) -> HostState:
    outcomes: dict[str, int] = {}
    done: dict[str, int] = {}
    for record in records:
        outcomes[record.outcome] = outcomes.get(record.outcome, 0) + 1
        if not record.runs_again:
            done[record.cell] = done.get(record.cell, 0) + 1
    own = [e for e in events if str(e.get("host")) == name]
    quarantined = person = None
    for entry in own:  # a resume prepares a quarantined host again; an attempt started: nobody is needed
        why = quarantine_reason(entry)
        if why is not None:
            quarantined = why
        elif event_of(entry) is CampaignEvent.NEEDS_PERSON:
            person = str(entry.get("message") or "needs a person")
        elif event_of(entry) in (CampaignEvent.ATTEMPT_STARTED, CampaignEvent.PREPARED):
            person = None
            quarantined = quarantined if event_of(entry) is CampaignEvent.ATTEMPT_STARTED else None
    remaining = 0 if quarantined or planned is None else sum(
        max(0, slots - done.get(cell, 0)) for cell, slots in planned.items() if cell not in stopped)
    return HostState(name, outcomes, sum(done.values()), sum(planned.values()) if planned is not None else None,
                     remaining, power_cycles, quarantined, person, _pace(records))


def state_json(state: FolderState) -> dict[str, Any]:
    """The state as plain JSON (``invoke status --json`` adds the verdicts)."""
    return {
        "campaign": state.campaign, "folder": str(state.folder), "running": state.running,
        "updated": state.heartbeat.updated if state.heartbeat else None,
        "cells": list(state.cells), "attempts_per_cell": state.attempts_per_cell,
        "done": state.done, "planned": state.planned, "eta_s": state.eta_s(),
        "hosts": [{"name": h.name, "done": h.done, "planned": h.planned, "remaining": h.remaining,
                   "outcomes": outcome_counts(h.outcomes), "wedges": h.wedges, "power_cycles": h.power_cycles,
                   "quarantined": h.quarantined, "needs_person": h.needs_person,
                   "seconds_per_slot": h.seconds_per_slot} for h in state.hosts],
        "stopped": [{"host": h, "cell": c} for h, c in state.stopped], "warnings": list(state.warnings),
        "adaptive": state.adaptive or None, "budget": state.budget,
    }
