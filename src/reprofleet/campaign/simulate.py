"""Campaigns drawn from a known truth and judged by the real ``judge()``: what a design can show.

``invoke plan`` asks, before anything runs, how often a campaign's report would call a truly
fixed cell fixed, and how often a cell that still reproduces at a fraction of the
reference's rate; ``bench/verdicts.py`` and ``bench/fixed_ratio.py`` ask the same of designs
that go wrong. All of them need the records a campaign really writes: the playbook's cells
and hosts in its own slot order (``playbook.order.plan_order``), each cell's stop rule
decided before every slot by the host runner's own ``runner.stops.HostStops`` (a stop is a
``stopped`` event), every attempt's outcome and phases, and the manifest a report reads
(``CampaignInfo`` with its ``Plan``). This module draws those from a truth it is given (a
:class:`Behaviour` per cell and host) with a seeded RNG, and judges them with
``reprofleet.verdicts.judge``; nothing of the judge is re-implemented here.

It lives in ``campaign/`` because it runs the runner's stop decisions and the playbook's
order, which ``verdicts/`` may not import.

    design = Design(load_playbook("playbooks/sm120-hostwedge.yml"), ("ws01", "ws02"))
    campaign = draw(design, {("default", h): Behaviour(0.3) for h in design.hosts}, random.Random(1))
    by_cell = {v.cell: v for v in judge_campaign(design, campaign).verdicts}
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from reprofleet.model import PHASE_ORDER, Cell, Phase, Playbook
from reprofleet.model.reasons import ReasonCode
from reprofleet.playbook.order import cell_slots, plan_order
from reprofleet.records import identity
from reprofleet.records.pooling import CampaignInfo, Plan, Pool, missing_manifest
from reprofleet.records.reader import RecordedAttempt, attempts_of
from reprofleet.runner.context import record_runtime
from reprofleet.runner.stops import HostStops
from reprofleet.stats import intervals
from reprofleet.verdicts import Judgement, judge

CAMPAIGN = "sim"
OTHER_INFRA = "the agent could not start the attempt"  # ReasonCode.OTHER: excluded, never run again
LOST = "the controller lost the host during the attempt"  # a strike recorded as infra: an informative exclusion


@dataclass(frozen=True)
class Behaviour:
    """How one cell's attempts end on one host: the truth an attempt is drawn from.

    ``rate`` is the chance that the bug strikes a start that reaches the phase at risk; a
    strike usually freezes the host (a ``wedge``, or a watchdog ``reboot``), but may end as an
    error or hang *in* that phase (the bug caught short), come before it, or leave a record
    the controller could only call ``infra`` (the host was lost). The rest are the noise of
    any real fleet, the same whatever the bug does.
    """

    rate: float = 0.0
    reboot: float = 0.0  # share of strikes that are a watchdog reboot, not a wedge
    caught_short: float = 0.0  # share of strikes that end as an error or hang in the phase at risk
    lost: float = 0.0  # share of strikes recorded as infra
    early: float = 0.0  # share of strikes that freeze the host before the phase at risk
    infra: float = 0.0  # P(infra that has nothing to do with the bug)
    before: float = 0.0  # P(an error or hang before the phase at risk)
    in_risk: float = 0.0  # P(an unrelated error or hang inside it)
    after: float = 0.0  # P(an error or hang after it, among starts that got through)


CLEAN = Behaviour()


@dataclass(frozen=True)
class Design:
    """What a campaign runs and what happens to it besides the bug.

    ``runs``: (cell, host) -> attempts it ran there, where fewer than planned (0: never);
    ``runtimes``: (cell, host) -> the runtime recorded there, where not the cell's own (a tag
    that resolved to another image: a second identity); ``quarantined``: host -> slots it
    ran before it was quarantined (the rest are recorded ``not run``); ``interrupted``: the
    share of slots interrupted and run again on resume; ``manifest``: False judges the
    records as a folder without ``campaign.json``."""

    playbook: Playbook
    hosts: tuple[str, ...]
    runs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    runtimes: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    quarantined: Mapping[str, int] = field(default_factory=dict)
    interrupted: float = 0.0
    manifest: bool = True

    def plan(self) -> Plan:
        slots = cell_slots(self.playbook)
        return Plan(self.playbook.attempts, self.hosts,
                    {c.name: s for c, s in zip(self.playbook.cells, slots) if s != self.playbook.attempts})


@dataclass(frozen=True)
class Campaign:
    """The records and ``stopped`` events one simulated campaign wrote."""

    records: tuple[RecordedAttempt, ...]
    stops: tuple[Mapping[str, Any], ...]
    rounds: int  # the most attempt indexes any cell used (looks after every round: 0 .. rounds - 1)


def _outcome(b: Behaviour, risk: Phase, rng: random.Random) -> tuple[str, str | None, str | None]:
    """(outcome, last phase, infra reason) of one attempt (records keep the last phase only,
    as older controllers wrote them: where the phase at risk is, that decides every role)."""
    before = PHASE_ORDER[rng.randrange(PHASE_ORDER.index(risk.value))] if risk.value != PHASE_ORDER[0] else None
    failure = "error" if rng.random() < 0.5 else "hang"
    if rng.random() < b.infra:
        return "infra", before, OTHER_INFRA
    if rng.random() < b.before:
        return failure, before, None
    if rng.random() < b.rate:
        if rng.random() < b.lost:
            return "infra", risk.value, LOST
        if rng.random() < b.caught_short:
            return failure, risk.value, None
        phase = before if before and rng.random() < b.early else risk.value
        return ("reboot" if rng.random() < b.reboot else "wedge"), phase, None
    if rng.random() < b.in_risk:
        return failure, risk.value, None
    if rng.random() < b.after:
        return failure, Phase.READY.value, None
    return "clean", Phase.READY.value, None


def _record(design: Design, cell: Cell, host: str, index: int, serial: int, in_boot: int, outcome: str,
            phase: str | None, reason: str | None) -> dict[str, Any]:
    runtime = dict(design.runtimes.get((cell.name, host)) or record_runtime(cell))
    factors = dict(cell.factors)
    record = {"schema": 1, "campaign": CAMPAIGN, "attempt": f"{host}-{cell.name}-{index}-{serial}", "host": host,
              "cell": cell.name, "cell_id": identity.cell_id(cell.name, factors, runtime, None), "factors": factors,
              "runtime": runtime, "outcome": outcome, "last_phase": phase, "attempt_index": index,
              "attempt_in_boot": in_boot, "cold_boot": in_boot == 1, "started": f"2026-12-01T00:00:{serial:06d}Z"}
    if reason is not None:
        record["reason"] = reason
    return record


def _host(design: Design, host: str, truth: Mapping[tuple[str, str], Behaviour], rng: random.Random,
          records: list[dict[str, Any]], stops: list[dict[str, Any]]) -> None:
    """One host through its plan as ``runner.host`` runs it: a stop check before every slot."""
    book = design.playbook
    risk = book.at_risk_phase or Phase.CUDA_GRAPH_CAPTURE
    runner = HostStops(book)
    quarantine_at = design.quarantined.get(host)
    ran, in_boot = 0, 0
    for c, index in plan_order(book, host):
        cell = book.cells[c]
        if index >= design.runs.get((cell.name, host), index + 1) or runner.is_stopped(cell.name):
            continue
        if quarantine_at is not None and ran >= quarantine_at:
            records.append(_record(design, cell, host, index, len(records), 0, "infra", None,
                                   ReasonCode.NOT_RUN.words("the host was quarantined")))
            continue
        stop = runner.check(cell)
        if stop is not None:
            stops.append({"event": "stopped", "host": host, "slot": index, **stop.event_fields()})
            continue
        if rng.random() < design.interrupted:  # interrupted under the attempt; the resume runs the slot again
            records.append(_record(design, cell, host, index, len(records), in_boot + 1, "infra", None,
                                   ReasonCode.INTERRUPTED.words("the campaign was stopped")))
        outcome, phase, reason = _outcome(truth.get((cell.name, host), CLEAN), risk, rng)
        in_boot += 1
        records.append(_record(design, cell, host, index, len(records), in_boot, outcome, phase, reason))
        runner.add(cell.name, outcome, phase, None, reason)
        ran += 1
        if outcome in ("wedge", "reboot") or reason == LOST:
            in_boot = 0


def draw(design: Design, truth: Mapping[tuple[str, str], Behaviour], rng: random.Random) -> Campaign:
    """One campaign of ``design`` whose attempts follow ``truth`` ((cell, host) -> behaviour; clean where absent)."""
    records: list[dict[str, Any]] = []
    stops: list[dict[str, Any]] = []
    for host in design.hosts:
        _host(design, host, truth, rng, records, stops)
    attempts = attempts_of(records)
    rounds = 1 + max((r.attempt_index or 0 for r in attempts), default=0)
    return Campaign(attempts, tuple(stops), rounds)


def pool_of(design: Design, campaign: Campaign, after_round: int | None = None) -> Pool:
    """The records as a report reads them: whole (the planned end, or wherever the design left
    it), or as they stood after round ``after_round`` while the campaign was still running."""
    records, stops = campaign.records, campaign.stops
    running = after_round is not None and after_round < campaign.rounds - 1
    if after_round is not None:
        records = tuple(r for r in records if (r.attempt_index or 0) <= after_round)
        stops = tuple(s for s in stops if int(s["slot"]) <= after_round)
    if not design.manifest:  # as load_pool reads a folder without campaign.json
        return Pool(records, {CAMPAIGN: missing_manifest(CAMPAIGN)}, stops)
    book = design.playbook
    info = CampaignInfo(CAMPAIGN, book.judging, book.reference_cell.name, tuple(c.name for c in book.cells),
                        plan=design.plan(), running=running)
    return Pool(records, {CAMPAIGN: info}, stops)


def judge_campaign(design: Design, campaign: Campaign, after_round: int | None = None) -> Judgement:
    """The real judge's verdicts on the campaign (see :func:`pool_of` for ``after_round``)."""
    return judge(pool_of(design, campaign, after_round))


@contextmanager
def remembered_statistics() -> Iterator[None]:
    """Remember two exact enumerations while simulating: ``intervals.hosts_disagree`` and
    ``intervals.stratified`` (nine tenths of a judge at 24 attempts a cell) are pure
    functions of counts, and every cell of a report asks them of the same reference counts.
    Results are unchanged; the originals are back on exit."""
    originals = (intervals.hosts_disagree, intervals.stratified)
    disagree: dict[Any, float] = {}
    strata: dict[Any, Any] = {}

    def hosts_disagree(per_host: Sequence[tuple[int, int]]) -> float:
        key = tuple((int(k), int(n)) for k, n in per_host)
        if key not in disagree:
            disagree[key] = originals[0](per_host)
        return disagree[key]

    def stratified(rows: Sequence[Any], alternative: str = "two-sided") -> Any:
        key = (tuple((tuple(a), tuple(b)) for a, b in rows), alternative)
        if key not in strata:
            strata[key] = originals[1](rows, alternative)
        return strata[key]

    intervals.hosts_disagree, intervals.stratified = hosts_disagree, stratified  # type: ignore[assignment]
    try:
        yield
    finally:
        intervals.hosts_disagree, intervals.stratified = originals
