"""Whether a cell may stop early on one host: tallies by role, and the stop decisions made.

The state is nothing but what ``attempts.jsonl`` and ``events.jsonl`` already hold: the
host's records of each cell (counted by the campaign's ``Judging``) and the cells that
already stopped there. Rebuilding it from those files on ``--resume`` makes a resumed
campaign decide exactly as an uninterrupted one, and a stop, once made, is never undone
(later reference attempts could change the numbers, but not what already happened).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from reprofleet.stats import stop_rules as stopping
from reprofleet.records.reader import attempts_of
from reprofleet.model import Cell, Playbook, Role, StopKind, frozen_mapping
from reprofleet.model.events import CampaignEvent
from reprofleet.model.shutdown import orderly_shutdown
from reprofleet.runner.host_log import HostLog


@dataclass
class Tally:
    """One cell's attempts on one host so far, by role."""

    attempts: int = 0  # every record that ran (excluded ones too; not slots that run again)
    reproductions: int = 0
    judged: int = 0  # reproductions + non-reproductions

    @property
    def counts(self) -> tuple[int, int]:
        """(reproductions, judged): what ``stopping.decide`` takes."""
        return self.reproductions, self.judged


@dataclass(frozen=True)
class Stop:
    """A cell that stopped early on a host, as the ``stopped`` event says it."""

    cell: str
    rule: str
    why: str
    verdict: str | None
    tally: Tally
    details: Mapping[str, Any] = field(default_factory=frozen_mapping)  # what a rule adds (a moved tag's digests)

    def event_fields(self) -> dict[str, Any]:
        return {"cell": self.cell, "rule": self.rule, "why": self.why, "verdict": self.verdict,
                "attempts": self.tally.attempts, "reproductions": self.tally.reproductions,
                "judged": self.tally.judged, **self.details}


def ask(playbook: Playbook, cell: Cell, counts: tuple[int, int],
        reference: tuple[int, int]) -> stopping.StopDecision | None:
    """The stop rule's answer before a slot of ``cell`` on one host, from (reproductions, judged)
    of the cell and of the reference there; None: run the slot.

    The one place the runner's arguments to ``stopping.decide`` are made (the playbook's
    ``attempts``, its ``fixed_ratio``, a Holm family of every compared cell), so that
    ``invoke plan``, which walks the same question over simulated counts
    (``campaign/stop_walk.py``), estimates the rule that will run and not a copy of it.
    """
    rule = playbook.stop_rule(cell)
    if rule.kind is StopKind.FIXED_N:
        return None  # the plan's slots are its end
    conclusion = stopping.Conclusion(playbook.judging.fixed_ratio, max(len(playbook.cells) - 1, 1))
    return stopping.decide(rule, counts, reference, playbook.attempts, conclusion)


class HostStops:
    """One host's tallies per cell and the cells that stopped there."""

    def __init__(self, playbook: Playbook, earlier: Iterable[Mapping[str, Any]] = (),
                 stopped: Iterable[str] = ()) -> None:
        self.playbook = playbook
        self.tallies: dict[str, Tally] = {}
        self.stopped: set[str] = set(stopped)
        for record in attempts_of(earlier):
            self.add(record.cell, record.outcome, record.last_phase, record.phases, record.reason,
                     orderly=orderly_shutdown(record.forensics))

    def add(self, cell: str, outcome: str, last_phase: str | None, phases: Sequence[str] | None = None,
            reason: str | None = None, *, orderly: str | None = None) -> None:
        """Count one record of ``cell`` (call it after every record the host runner writes);
        roles as the judge gives them, so a slot that runs again counts for nothing, nor does a
        reboot whose forensics show an orderly shutdown (``orderly``: model.shutdown's words)."""
        tally = self.tallies.setdefault(cell, Tally())
        role = self.playbook.judging.role(outcome, last_phase, phases, reason, orderly=orderly)
        if role is Role.NOT_RUN:
            return
        tally.attempts += 1
        if role is Role.REPRODUCTION:
            tally.reproductions += 1
        if role in (Role.REPRODUCTION, Role.NON_REPRODUCTION):
            tally.judged += 1

    def tally(self, cell: str) -> Tally:
        return self.tallies.get(cell, Tally())

    def check(self, cell: Cell) -> Stop | None:
        """A new stop of ``cell`` before its next slot, or None (run it, or it stopped before).

        A cell that stopped earlier (this run or a run this one resumes) returns None here
        and ``is_stopped`` says so: the runner skips it without a second event.
        """
        if cell.name in self.stopped:
            return None
        decision = ask(self.playbook, cell, self.tally(cell.name).counts,
                       self.tally(self.playbook.reference_cell.name).counts)
        if decision is None:
            return None
        return self.stop(cell.name, str(getattr(decision.rule, "value", decision.rule)), decision.why,
                         decision.verdict)

    def stop(self, cell: str, rule: str, why: str, verdict: str | None, **details: Any) -> Stop:
        """``cell`` stops on this host for ``rule``'s reason ``why``: its remaining slots are
        skipped from now on. The one way a cell stops (a stop rule's decision, a moved image
        tag); the returned Stop carries the ``stopped`` event's fields, tally included."""
        self.stopped.add(cell)
        tally = self.tally(cell)
        return Stop(cell, rule, why, verdict, Tally(tally.attempts, tally.reproductions, tally.judged),
                    frozen_mapping(details))

    def is_stopped(self, cell: str) -> bool:
        return cell in self.stopped

    def ended_here(self, cell: Cell, index: int, log: HostLog) -> bool:
        """Whether ``cell``'s stop rule ended it on this host: its slots are skipped, never recorded.

        The first time, one ``stopped`` event says why; a cell that stopped before (also in
        the run this one resumes) is skipped silently.
        """
        if self.is_stopped(cell.name):
            return True
        stop = self.check(cell)
        if stop is None:
            return False
        log.event(CampaignEvent.STOPPED, slot=index, **stop.event_fields())
        log.progress(cell=cell.name, phase="", status=f"stopped {cell.name}: {stop.verdict or 'no verdict'} ({stop.why})")
        return True
