"""``invoke status``: where a running or finished campaign stands, from its folder alone.

Whoever can read ``reports/<id>/`` (another terminal, another machine over NFS or a copy)
sees hosts, cells, attempts done of planned, wedges, power cycles, quarantines, who needs
a person, an ETA at each host's pace so far, and the verdicts so far, judged exactly as
``invoke report`` judges them: before the planned end they are anytime-valid and say so.
Nothing is written and the campaign's lock is never taken: whether a controller still
runs it is what the controller last wrote in metrics.prom, with its age.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reprofleet.records.folder_state import FolderState, read_state, state_json
from reprofleet.records.pooling import load_pool
from reprofleet.verdicts import Verdict, judge


@dataclass(frozen=True)
class CampaignStatus:
    """A campaign's state and its verdicts so far, read at ``now`` (unix time)."""

    state: FolderState
    verdicts: tuple[Verdict, ...]
    now: float

    @property
    def anytime(self) -> bool:
        return any(v.anytime for v in self.verdicts)

    def controller(self) -> str:
        """Running, finished or unknown, in words, with how old the controller's last word is."""
        beat = self.state.heartbeat
        if beat is None:
            return "no metrics.prom: a controller older than this one, or one that never started"
        age = f"{self.now - beat.updated:.0f} s ago" if beat.updated is not None else "at an unknown time"
        return f"running (its controller last wrote {age})" if beat.running else f"finished ({age})"

    def to_json(self) -> dict[str, Any]:
        return {**state_json(self.state), "read_at": self.now, "controller": self.controller(),
                "anytime": self.anytime, "verdicts": [v.to_json() for v in self.verdicts]}


def read_status(folder: Path, now: float | None = None) -> CampaignStatus:
    """The status of the campaign in ``folder``; reads only."""
    state = read_state(folder)
    verdicts: tuple[Verdict, ...] = ()
    if (Path(folder) / "attempts.jsonl").exists():
        verdicts = judge(load_pool([Path(folder)], running=lambda _folder: state.running)).verdicts
    return CampaignStatus(state, verdicts, time.time() if now is None else now)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _eta(status: CampaignStatus) -> str:
    state = status.state
    if not state.running:
        return "no ETA: no controller runs it"
    eta = state.eta_s()
    if state.adaptive:
        return f"no ETA: a {state.adaptive} ends when its model decides" + (
            f" or its budget of {state.budget} attempts is spent" if state.budget is not None else "")
    if eta is None:
        return "ETA unknown until a first attempt ends"
    at = datetime.fromtimestamp(status.now + eta, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"ETA {_duration(eta)} (about {at}; at most, where a stop rule may end a cell early)"


def _host_line(host: Any, adaptive: str = "") -> str:
    planned = f"{host.done}/{host.planned}" if host.planned is not None else f"{host.done}/?"
    outcomes = ", ".join(f"{n} {o}" for o, n in sorted(host.outcomes.items())) or "no attempt yet"
    state = f"quarantined: {host.quarantined}" if host.quarantined else (
        f"NEEDS A PERSON: {host.needs_person}" if host.needs_person else
        "its next level chosen at run time" if adaptive else f"{host.remaining} to run")
    if adaptive:
        planned = str(host.done)
    return f"  {host.name}: {planned} done ({outcomes}); {host.power_cycles} power cycles; {state}"


def status_lines(status: CampaignStatus) -> list[str]:
    """The status as plain lines (the terminal, a log, a watch refresh)."""
    state = status.state
    planned = state.planned
    of = (f" of a budget of {state.budget}" if state.budget is not None else " (a search: no fixed plan)") \
        if state.adaptive else f"/{planned if planned is not None else '?'}"
    lines = [f"campaign {state.campaign} ({state.folder}): {status.controller()}",
             f"hosts {len(state.hosts)}, cells {len(state.cells)}, attempts {state.done}{of} done, "
             f"{sum(h.wedges for h in state.hosts)} wedges, {sum(1 for h in state.hosts if h.quarantined)} quarantined; "
             f"{_eta(status)}"]
    lines += [_host_line(host, state.adaptive) for host in state.hosts]
    lines += [f"  stopped by its rule: {cell} on {host}" for host, cell in state.stopped]
    if status.verdicts:
        lines.append("verdicts so far (anytime-valid: this look is not the planned end, and each says why):"
                     if status.anytime else "verdicts:")
        lines += [f"  {v.cell}: {v.text}" for v in status.verdicts]
    else:
        lines.append("verdicts: none yet (no attempt recorded)")
    lines += [f"note: {w}" for w in state.warnings]
    return lines
