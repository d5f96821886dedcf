"""The next cell of each host of a search or bisection, chosen at run time from the records.

A fixed campaign walks a plan made before it started (``playbook.order``); a search cannot:
which clock ceiling is worth an attempt depends on what every host has seen so far. One
:class:`LadderSchedule` is shared by the campaign's host threads. It holds this campaign's
probes (earlier runs' records first, on ``--resume``, then each record as a host runner
counts it), which level each host runs now, and asks the :class:`~reprofleet.playbook.ladder.Ladder`
for a host's next level under one lock, so two hosts never decide on the same stale view.
The model is deterministic given the probes, so a killed and resumed search continues from
its records and ends where an uninterrupted one would.

Every choice is a ``search_probe`` event (host, level, cell, attempt index, why); when the
last host leaves the ladder, one ``search_done`` event carries the result (not again on a
resume that adds no probe to the one an earlier run told). A host with
nothing to run while others still run waits for their next record (their evidence may
give it a level), and leaves once nobody runs.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

from reprofleet.records.reader import attempts_of
from reprofleet.model import Cell, Judging, Playbook, Record
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import slot_runs_again
from reprofleet.playbook.ladder import Ladder, LadderPlan, LadderResult, probe_of, probes_of, result_json
from reprofleet.stats.search_contract import Probe, ProbeOutcome

EventSink = Callable[..., None]  # (host, CampaignEvent, **fields), as CampaignContext.event


class LadderSchedule:
    """The ladder shared by every host runner of one campaign (thread-safe)."""

    def __init__(self, playbook: Playbook, plan: LadderPlan, ladder: Ladder, hosts: Iterable[str],
                 earlier: Sequence[Mapping[str, Any]] = (), event: EventSink = lambda host, what, **fields: None,
                 stop: threading.Event | None = None, told: int | None = None) -> None:
        """``earlier``: this campaign's records so far, in attempts.jsonl's order (a resume);
        ``told``: the probe count of the ``search_done`` an earlier run already wrote, if any."""
        self.plan = plan
        self.ladder = ladder
        self.judging: Judging = playbook.judging
        self.cells = {cell.name: cell for cell in playbook.cells}
        self.event = event
        self.stop = stop or threading.Event()
        self.active = set(hosts)
        self.probes: list[Probe] = probes_of(earlier, plan, self.judging)
        self.indexes: dict[tuple[str, str], int] = {}
        for record in attempts_of(earlier):
            if not record.runs_again:
                key = (record.host, record.cell)
                self.indexes[key] = self.indexes.get(key, 0) + 1
        self.running: dict[str, int] = {}
        self.spent = sum(self.indexes.values())  # slots taken: counted when chosen, given back if they run again
        self.budget = getattr(plan.spec, "budget_attempts", None)  # enforced here too: a model that never says
        # "done" must not run a fleet for ever
        self.done: LadderResult | None = None
        self.told = told
        self._changed = threading.Condition()

    def next_slot(self, host: str) -> tuple[Cell, int] | None:
        """The (cell, attempt index) ``host`` runs next, or None: it leaves the ladder."""
        with self._changed:
            self.running.pop(host, None)
            while not self.stop.is_set() and not self._spent():
                level = self.ladder.next(host, tuple(self.probes), dict(self.running))
                if level is not None:
                    return self._chosen(host, level)
                if not self.running:
                    break
                self._changed.wait(1.0)  # woken by another host's record; the timeout only re-checks stop
            self._leave(host)
            return None

    def observe(self, host: str, record: Record, refused: bool = False) -> None:
        """A record a host runner counted: its probe joins the evidence, and waiting hosts ask again.
        A slot that runs again gives its place in the budget back, except a refused start: a host
        whose old attempt never dies must not spin through a search's slots for nothing."""
        probe = probe_of(record.to_json(), self.plan, self.judging)
        with self._changed:
            if probe is not None:
                self.probes.append(probe)
            if not slot_runs_again(record.outcome.value, record.reason):
                key = (host, record.cell)
                self.indexes[key] = self.indexes.get(key, 0) + 1
            elif record.cell in self.plan.cells and not refused:
                self.spent -= 1
            self._changed.notify_all()

    def leave(self, host: str) -> None:
        """A host that stops running (quarantined, fenced, the campaign stopped) frees its place."""
        with self._changed:
            self.running.pop(host, None)
            self._leave(host)

    def results(self) -> LadderResult:
        with self._changed:
            return self.ladder.results(tuple(self.probes))

    def _spent(self) -> bool:
        return self.budget is not None and self.spent >= self.budget

    def _chosen(self, host: str, level: int) -> tuple[Cell, int]:
        if not 0 <= level < len(self.plan.cells):
            raise ValueError(f"the {self.plan.kind} model chose level {level} of {len(self.plan.cells)}")
        cell = self.cells[self.plan.cells[level]]
        index = self.indexes.get((host, cell.name), 0)  # counted up in observe: a slot that runs again keeps it
        self.running[host] = level
        self.spent += 1
        others = {h: self.plan.labels[lv] for h, lv in sorted(self.running.items()) if h != host}
        self.event(host, CampaignEvent.SEARCH_PROBE, level=level, value=self.plan.labels[level], cell=cell.name,
                   index=index, why=self._why(level), running=others, probes=len(self.probes))
        return cell, index

    def _why(self, level: int) -> str:
        counted = [p for p in self.probes if p.level == level and p.outcome is not ProbeOutcome.UNUSABLE]
        reproduced = sum(p.outcome is ProbeOutcome.REPRODUCED for p in counted)
        return (f"the {self.plan.kind} model chose {self.plan.labels[level]} "
                f"({reproduced}/{len(counted)} reproduced there so far, {len(self.probes)} probes in all)")

    def _leave(self, host: str) -> None:
        self.active.discard(host)
        if not self.active and self.done is None and not self.stop.is_set():
            if self.told == len(self.probes):  # a resume that added nothing: the result was told already
                self.done = self.ladder.results(tuple(self.probes))
                self._changed.notify_all()
                return
            try:
                self.done = self.ladder.results(tuple(self.probes))
            except Exception as exc:  # noqa: BLE001 - the records stand; the report can compute it again
                self.event("", CampaignEvent.SEARCH_DONE, kind=self.plan.kind, result=None, probes=len(self.probes),
                           error=f"{type(exc).__name__}: {exc}")
            else:
                self.event("", CampaignEvent.SEARCH_DONE, kind=self.plan.kind, result=result_json(self.done),
                           probes=len(self.probes))
        self._changed.notify_all()

