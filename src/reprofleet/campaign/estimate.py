"""How many attempts, hours and power cycles a campaign will take, and what its verdicts can show, before it runs.

Arithmetic on a playbook and an assumed reproduction rate (the "baseline": how often the
bug shows where it is known to be). ``invoke plan`` prints it, so a user can size a
campaign, and see what a stopping rule saves, before the first host is touched.

What the report will be able to say is not arithmetic: "fixed" is the judge's decision
(the hosts that ran both, Holm across every compared cell, the rate ratio's bound below
``fixed_ratio``, fixed-n or anytime-valid looks, the cell's stop rule). So
:func:`verdict_plan` draws campaigns in the playbook's own shape from known rates
(``campaign.simulate``) and counts what the real ``judge()`` calls them: a truly fixed
cell, cells that still reproduce at a fraction of the reference's rate, and the attempts
per cell that would give a fixed cell 80% and 90% power.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, replace
from typing import Any, Sequence

from reprofleet.campaign import simulate
from reprofleet.campaign.stop_walk import Course, StopWalk, mean_course
from reprofleet.model import Cell, Playbook, StopKind, StopRule
from reprofleet.stats.sprt import Sprt
from reprofleet.stats.intervals import clean_attempts_to_rule_out
from reprofleet.stats.stop_rules import max_attempts, percent

DEFAULT_BASELINE = 0.3  # assumed when none is given: the seed wedged "in fewer than 6 tries"
DEFAULT_ALPHA = 0.05
DEFAULT_BETA = 0.2
FIXED_RATE_FACTOR = 0.1  # without --fixed-rate, "fixed" means a tenth of the baseline


@dataclass(frozen=True)
class Span:
    """An estimate that is a range (equal ends when it is one number)."""

    low: float
    high: float

    def __add__(self, other: "Span") -> "Span":
        return Span(self.low + other.low, self.high + other.high)

    def scaled(self, factor: float) -> "Span":
        return Span(self.low * factor, self.high * factor)

    def text(self, digits: int = 1) -> str:
        low, high = f"{self.low:.{digits}f}", f"{self.high:.{digits}f}"
        return low if low == high else f"{low} to {high}"

    def to_json(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class BaselinePlan:
    """What ruling out a baseline rate costs, and what an SPRT would save over fixed n."""

    baseline: float
    confidence: float
    clean_attempts: int
    sprt: Sprt
    exact_if_reproduces: float  # average attempts at p0, overshoot and cap included
    exact_if_fixed: float  # ... at p1
    wald_if_reproduces: float  # Wald's approximation, for comparison with textbooks
    wald_if_fixed: float
    fixed_n: int
    cap: int

    def to_json(self) -> dict[str, Any]:
        """``invoke plan --baseline R --json`` (docs/schema/plan.schema.json, mode "baseline")."""
        s = self.sprt
        return {"mode": "baseline", "baseline": self.baseline, "confidence": self.confidence,
                "clean_attempts": self.clean_attempts,
                "sprt": {"p0": s.p0, "p1": s.p1, "alpha": s.alpha, "beta": s.beta, "cap": self.cap,
                         "exact_if_reproduces": self.exact_if_reproduces, "exact_if_fixed": self.exact_if_fixed,
                         "wald_if_reproduces": self.wald_if_reproduces, "wald_if_fixed": self.wald_if_fixed},
                "fixed_n": self.fixed_n}


def baseline_plan(baseline: float, confidence: float = 0.95, fixed_rate: float | None = None,
                  alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> BaselinePlan:
    """The clean run that rules out ``baseline``, and the SPRT of baseline against ``fixed_rate``."""
    if not 0.0 < baseline < 1.0:
        raise ValueError(f"the baseline is a reproduction rate between 0 and 1 (exclusive), got {baseline}")
    fixed = baseline * FIXED_RATE_FACTOR if fixed_rate is None else fixed_rate
    if not 0.0 < fixed < baseline:
        raise ValueError(f"the fixed rate must be above 0 and below the baseline {baseline}, got {fixed}")
    clean = clean_attempts_to_rule_out(baseline, confidence)
    assert clean is not None  # baseline > 0
    sprt = Sprt(baseline, fixed, alpha, beta)
    return BaselinePlan(baseline, confidence, clean, sprt,
                        sprt.exact_expected_attempts(baseline), sprt.exact_expected_attempts(fixed),
                        sprt.expected_attempts(baseline), sprt.expected_attempts(fixed), sprt.fixed_n(), sprt.cap())


def describe_baseline(plan: BaselinePlan) -> str:
    s = plan.sprt
    return "\n".join([
        f"{plan.clean_attempts} clean attempts in a row rule out a reproduction rate of {percent(plan.baseline)} "
        f"at {percent(plan.confidence)} (one-sided, exact)",
        f"SPRT with p0 {percent(s.p0)} (still reproduces) against p1 {percent(s.p1)} (fixed), alpha {s.alpha:g}, "
        f"beta {s.beta:g}: {plan.exact_if_reproduces:.1f} attempts on average if the bug is still there, "
        f"{plan.exact_if_fixed:.1f} if it is fixed, at most {plan.cap} (exact, overshoot included; "
        f"Wald's approximation says {plan.wald_if_reproduces:.1f} and {plan.wald_if_fixed:.1f})",
        f"a fixed-n exact test with the same error rates runs {plan.fixed_n} attempts every time",
    ])


@dataclass(frozen=True)
class CellPlan:
    """One cell per host under the two truths a length is given for, each worked out by
    walking the runner's own stop rule (``campaign/stop_walk.py``), averaged over the hosts'
    slot orders: it reproduces like the reference (at the baseline), or it is truly fixed."""

    cell: str
    rule: StopRule
    slots: int
    if_reproduces: Course
    if_fixed: Course
    reference: bool

    @property
    def attempts(self) -> Span:
        """Expected attempts, from the kinder truth to the harsher one."""
        ends = (self.if_reproduces.attempts, self.if_fixed.attempts)
        return Span(min(ends), max(ends))

    @property
    def reproductions_at_baseline(self) -> float:
        return self.if_reproduces.reproductions

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "stop_rule": self.rule.kind.value, "slots": self.slots,
                "attempts": self.attempts.to_json(), "reproductions_at_baseline": self.reproductions_at_baseline,
                "reference": self.reference, "if_reproduces": self.if_reproduces.to_json(),
                "if_fixed": self.if_fixed.to_json()}


def cell_plan(playbook: Playbook, cell: Cell, hosts: Sequence[str], baseline: float,
              walk: StopWalk | None = None) -> CellPlan:
    """``cell``'s expected course per host if it reproduces at ``baseline`` (as the reference
    does) and if it is truly fixed: the rule that will run, comparison with the reference's
    counts on the host and Holm rank included, not a textbook average of the rule alone."""
    walk = walk or StopWalk(playbook)
    reference = cell.name == playbook.reference_cell.name

    def averaged(rate: float) -> Course:
        return mean_course([walk.course(cell, h, rate, baseline) for h in hosts])
    reproduces = averaged(baseline)
    return CellPlan(cell.name, playbook.stop_rule(cell), max_attempts(playbook.stop_rule(cell), playbook.attempts),
                    reproduces, reproduces if reference else averaged(0.0), reference)


@dataclass(frozen=True)
class Scenario:
    """One host's whole plan under one truth for every compared cell."""

    attempts: float
    power_cycles: float
    duration_s: float

    def to_json(self) -> dict[str, float]:
        return {"attempts": self.attempts, "power_cycles": self.power_cycles, "duration_s": self.duration_s}


@dataclass(frozen=True)
class CampaignEstimate:
    """Per host (hosts run in parallel, so the campaign takes as long as its slowest host)."""

    playbook: str
    hosts: tuple[str, ...]
    baseline: float
    cells: tuple[CellPlan, ...]
    attempt_s: float
    attempt_s_is_timeout: bool  # True: the playbook's attempt timeout, an upper bound
    dwell_s: float
    boot_s: float  # the playbook's boot timeout: an upper bound
    power_cycle_budget: int | None = None

    @property
    def slots(self) -> int:
        return sum(c.slots for c in self.cells)

    @property
    def cycle_s(self) -> float:
        return self.dwell_s + self.boot_s

    @property
    def if_reproduces(self) -> Scenario:
        """Every compared cell reproduces like the reference: each wedge is a power cycle."""
        return self._scenario([c.if_reproduces for c in self.cells])

    @property
    def if_fixed(self) -> Scenario:
        """Every compared cell is truly fixed: only the reference's wedges cost power cycles."""
        return self._scenario([c.if_fixed for c in self.cells])

    def _scenario(self, courses: Sequence[Course]) -> Scenario:
        attempts, cycles = sum(c.attempts for c in courses), sum(c.reproductions for c in courses)
        return Scenario(attempts, cycles, attempts * self.attempt_s + cycles * self.cycle_s)

    @property
    def attempts(self) -> Span:
        return _span(self.if_reproduces.attempts, self.if_fixed.attempts)

    @property
    def power_cycles(self) -> Span:
        """From "only the reference reproduces" to "every cell reproduces at the baseline"."""
        return Span(self.if_fixed.power_cycles, self.if_reproduces.power_cycles)

    @property
    def duration_s(self) -> Span:
        """Each end one truth's attempts and power cycles together (never one truth's attempts
        with the other's cycles)."""
        return _span(self.if_reproduces.duration_s, self.if_fixed.duration_s)

    def to_json(self) -> dict[str, Any]:
        """Per host, as :func:`describe_campaign` says it; ``over_budget``: the note that a host
        may need more power cycles than ``power_cycle_budget`` allows."""
        cycles = self.power_cycles
        return {"playbook": self.playbook, "hosts": list(self.hosts), "baseline": self.baseline,
                "cells": [c.to_json() for c in self.cells], "slots": self.slots, "attempts": self.attempts.to_json(),
                "attempt_s": self.attempt_s, "attempt_s_is_timeout": self.attempt_s_is_timeout,
                "dwell_s": self.dwell_s, "boot_s": self.boot_s, "cycle_s": self.cycle_s,
                "power_cycles": cycles.to_json(), "duration_s": self.duration_s.to_json(),
                "if_reproduces": self.if_reproduces.to_json(), "if_fixed": self.if_fixed.to_json(),
                "power_cycle_budget": self.power_cycle_budget,
                "over_budget": self.power_cycle_budget is not None and cycles.high > self.power_cycle_budget}


def _span(a: float, b: float) -> Span:
    return Span(min(a, b), max(a, b))


def campaign_estimate(playbook: Playbook, hosts: Sequence[str], baseline: float, dwell_s: float,
                      attempt_s: float | None = None, power_cycle_budget: int | None = None) -> CampaignEstimate:
    if not 0.0 < baseline < 1.0:
        raise ValueError(f"the baseline is a reproduction rate between 0 and 1 (exclusive), got {baseline}")
    if attempt_s is not None and attempt_s <= 0:
        raise ValueError(f"an attempt takes a positive number of seconds, got {attempt_s}")
    if not hosts:
        raise ValueError("a campaign's length needs at least one host")
    walk = StopWalk(playbook)
    cells = tuple(cell_plan(playbook, c, hosts, baseline, walk) for c in playbook.cells)
    return CampaignEstimate(playbook.name, tuple(hosts), baseline, cells,
                            playbook.timeouts.attempt if attempt_s is None else attempt_s, attempt_s is None,
                            dwell_s, playbook.timeouts.boot, power_cycle_budget)


def describe_campaign(plan: CampaignEstimate) -> str:
    rate = percent(plan.baseline)
    width = max(len(c.cell) for c in plan.cells) + len(" (reference)")
    lines = [f"{plan.playbook} on {len(plan.hosts)} hosts ({', '.join(plan.hosts)}); they run in parallel, "
             "so the campaign takes as long as one host's plan (each stop rule walked exactly as the runner asks "
             "it, against the reference's counts on the host):",
             f"  {'cell':<{width}}  {'stop rule':<18}  {'slots':>5}  expected attempts if it reproduces at {rate}; "
             "if truly fixed (how the rule ends it)"]
    for c in plan.cells:
        name = c.cell + (" (reference)" if c.reference else "")
        fixed = "" if c.reference else f"; {c.if_fixed.attempts:.1f} ({_ending(c)})"
        lines.append(f"  {name:<{width}}  {c.rule.kind.value:<18}  {c.slots:>5}  {c.if_reproduces.attempts:.1f}{fixed}")
    cycles = plan.power_cycles
    duration = plan.duration_s.scaled(1 / 3600)
    source = "the playbook's attempt timeout: an upper bound; --attempt-s for a typical one" \
        if plan.attempt_s_is_timeout else "as given"
    lines += [
        f"per host: {plan.slots} slots, {plan.attempts.text()} attempts expected",
        f"attempt duration: {plan.attempt_s:g} s ({source})",
        f"power cycles per host: {cycles.low:.1f} (only the reference reproduces, at {rate}) to {cycles.high:.1f} "
        f"(every cell reproduces at {rate}); each up to {plan.cycle_s:g} s (dwell {plan.dwell_s:g} s "
        f"+ boot timeout {plan.boot_s:g} s, an upper bound)",
        f"expected length: {duration.text()} h per host",
        f"  if every compared cell reproduces at {rate}: {_scenario_text(plan.if_reproduces)}",
        f"  if every compared cell is truly fixed: {_scenario_text(plan.if_fixed)}",
    ]
    lines += _uncalled(plan)
    if plan.power_cycle_budget is not None and cycles.high > plan.power_cycle_budget:
        lines.append(f"note: more power cycles than the budget of {plan.power_cycle_budget} per host may be needed; "
                     "a host past it is quarantined (power_cycle_budget in invoke.yaml)")
    return "\n".join(lines)


def _ending(cell: CellPlan) -> str:
    """How a truly fixed cell's rule ends it: stopped with a claim, or its slots run out without one."""
    if cell.rule.kind is StopKind.FIXED_N:
        return "every slot; the judge decides"
    course = cell.if_fixed
    parts = [(course.fixed, "stops fixed"), (course.reproduces, "stops reproduces"),
             (course.no_claim, "runs to its cap with no claim")]
    return ", ".join(f"{p:.0%} {words}" for p, words in parts if p >= 0.005)


def _scenario_text(scenario: Scenario) -> str:
    return (f"{scenario.attempts:.1f} attempts, {scenario.power_cycles:.1f} power cycles, "
            f"{scenario.duration_s / 3600:.1f} h per host")


def _uncalled(plan: CampaignEstimate) -> list[str]:
    """The finding the textbook averages hid: a stop rule that cannot call a truly fixed cell
    fixed against this reference runs it to its cap, and the hours say so."""
    stuck = [c for c in plan.cells if not c.reference and c.rule.kind is not StopKind.FIXED_N
             and c.if_fixed.no_claim >= 0.5]
    if not stuck:
        return []
    reference = next(c for c in plan.cells if c.reference)
    names = ", ".join(c.cell for c in stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
    worst = max(stuck, key=lambda c: c.if_fixed.no_claim)
    return [f"note: a truly fixed cell under its stop rule ({names}) stops as fixed only once the anytime-valid "
            f"comparison with the reference's counts on its host concludes; against the reference's "
            f"{reference.slots} attempts it runs to its cap of {worst.slots} with no claim "
            f"{worst.if_fixed.no_claim:.0%} of the time (more reference attempts, or a larger fixed_ratio, let "
            "it stop)"]


DEFAULT_CAMPAIGNS = 60  # per number: about +-5 points near 0 or 1, +-13 at 50% (the power search: half as many per size)
DEFAULT_RATIOS = (0.1, 1 / 3)  # rate ratios (cell / reference) whose false "fixed" plan prints
POWER_GOALS = (0.8, 0.9)
MAX_PLANNED = 400  # attempts per cell and host the power search goes up to


@dataclass(frozen=True)
class Chance:
    """A probability counted over simulated campaigns, with its 95% half-width: normal, from
    the spread of the per-campaign shares (cells of one campaign share its reference); where
    every campaign gave the same share, the rule of three (3 / campaigns)."""

    p: float
    half_width: float
    campaigns: int

    @classmethod
    def of(cls, shares: Sequence[float]) -> "Chance":
        spread = statistics.stdev(shares)
        half = 1.96 * spread / math.sqrt(len(shares)) if spread > 0 else 3.0 / len(shares)
        return cls(statistics.fmean(shares), half, len(shares))

    def text(self) -> str:
        digits = 0 if self.half_width >= 0.01 else 1
        return f"{self.p:.{digits}%} ± {self.half_width:.{digits}%}"

    def to_json(self) -> dict[str, Any]:
        return {"p": self.p, "half_width": self.half_width, "campaigns": self.campaigns}


@dataclass(frozen=True)
class PowerAnswer:
    """The fewest attempts per cell and host at which a truly fixed cell is called fixed at least ``goal``."""

    goal: float
    attempts: int | None  # None: not reached by MAX_PLANNED
    chance: Chance | None  # the simulated power there

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "attempts": self.attempts, "chance": self.chance.to_json() if self.chance else None}


@dataclass(frozen=True)
class VerdictPlan:
    playbook: str
    hosts: tuple[str, ...]
    baseline: float
    attempts: int
    compared: int  # cells compared with the reference: one Holm family
    fixed_ratio: float
    rules: tuple[str, ...]  # the stop rules the compared cells run under
    seed: int
    fixed: Chance  # P(called fixed | the cell's rate is 0)
    false_fixed: tuple[tuple[float, Chance], ...]  # (rate ratio, P(called fixed | the cell reproduces at it))
    power: tuple[PowerAnswer, ...]

    def to_json(self) -> dict[str, Any]:
        return {"playbook": self.playbook, "hosts": list(self.hosts), "baseline": self.baseline,
                "attempts": self.attempts, "compared": self.compared, "fixed_ratio": self.fixed_ratio,
                "rules": list(self.rules), "seed": self.seed, "fixed": self.fixed.to_json(),
                "false_fixed": [{"ratio": r, **c.to_json()} for r, c in self.false_fixed],
                "power": [a.to_json() for a in self.power], "max_planned": MAX_PLANNED}


def campaign_plan_json(estimate: CampaignEstimate, verdicts: VerdictPlan) -> dict[str, Any]:
    """``invoke plan -i INV -p BOOK --json``: the length estimate and what the verdicts can show
    (docs/schema/plan.schema.json, mode "campaign")."""
    return {"mode": "campaign", "estimate": estimate.to_json(), "verdicts": verdicts.to_json()}


def called_fixed(playbook: Playbook, hosts: Sequence[str], baseline: float, ratio: float, campaigns: int,
                 seed: int = 1) -> Chance:
    """P(the judge calls a compared cell fixed) when the reference reproduces at ``baseline`` on
    every host and every compared cell at ``ratio`` x ``baseline`` (0: truly fixed). Every
    compared cell has the same truth, so each is judged at the strictest Holm ranks, as a
    single fix among cells that still reproduce would be."""
    if campaigns < 2:
        raise ValueError(f"--campaigns needs at least 2 campaigns, got {campaigns}")
    design = simulate.Design(playbook, tuple(hosts))
    reference = playbook.reference_cell.name
    truth = {(c.name, h): simulate.Behaviour(baseline if c.name == reference else ratio * baseline)
             for c in playbook.cells for h in hosts}
    compared = [c.name for c in playbook.cells if c.name != reference]
    if not compared:
        raise ValueError(f"{playbook.path}: the playbook has no cell besides its reference {reference}")
    shares = []
    with simulate.remembered_statistics():
        for index in range(campaigns):
            campaign = simulate.draw(design, truth, random.Random(f"plan/{seed}/{index}"))
            verdicts = simulate.judge_campaign(design, campaign).verdicts
            shares.append(sum(v.kind.value == "fixed" for v in verdicts if v.cell in compared) / len(compared))
    return Chance.of(shares)


def attempts_for_power(playbook: Playbook, hosts: Sequence[str], baseline: float, goals: Sequence[float],
                       campaigns: int, seed: int = 1) -> tuple[PowerAnswer, ...]:
    """About the fewest attempts per cell and host (the playbook's ``attempts``) at which a
    truly fixed cell is called fixed at least each goal of the time: doubling, then
    bisection to within an eighth, on the same simulated campaigns at every size (each size
    judged once for all goals)."""
    tried: dict[int, Chance] = {}

    def power(n: int) -> Chance:
        if n not in tried:
            tried[n] = called_fixed(replace(playbook, attempts=n), hosts, baseline, 0.0, campaigns, seed)
        return tried[n]
    answers = []
    for goal in goals:
        low = max([n for n, c in tried.items() if c.p < goal], default=0)
        high = min([n for n, c in tried.items() if c.p >= goal], default=max(2 * low, playbook.attempts, 1))
        while power(high).p < goal and high < MAX_PLANNED:
            low, high = high, min(2 * high, MAX_PLANNED)
        if power(high).p < goal:
            answers.append(PowerAnswer(goal, None, None))
            continue
        while high - low > max(1, high // 8):
            middle = (low + high) // 2
            low, high = (middle, high) if power(middle).p < goal else (low, middle)
        answers.append(PowerAnswer(goal, high, power(high)))
    return tuple(answers)


def verdict_plan(playbook: Playbook, hosts: Sequence[str], baseline: float, campaigns: int = DEFAULT_CAMPAIGNS,
                 ratios: Sequence[float] = DEFAULT_RATIOS, seed: int = 1) -> VerdictPlan:
    if not 0.0 < baseline < 1.0:
        raise ValueError(f"the baseline is a reproduction rate between 0 and 1 (exclusive), got {baseline}")
    for ratio in ratios:
        if not 0.0 < ratio < 1.0:
            raise ValueError(f"a rate ratio (cell / reference) is between 0 and 1 (exclusive), got {ratio}")
    reference = playbook.reference_cell.name
    cells = [c for c in playbook.cells if c.name != reference]
    rules = tuple(dict.fromkeys(playbook.stop_rule(c).kind.value for c in cells))
    fixed = called_fixed(playbook, hosts, baseline, 0.0, campaigns, seed)
    false_fixed = tuple((r, called_fixed(playbook, hosts, baseline, r, campaigns, seed)) for r in ratios)
    reached = tuple(PowerAnswer(g, playbook.attempts, fixed) for g in POWER_GOALS if fixed.p >= g)
    missing = [g for g in POWER_GOALS if fixed.p < g]
    power = reached + (attempts_for_power(playbook, hosts, baseline, missing, max(campaigns // 2, 2), seed)
                       if missing else ())
    return VerdictPlan(playbook.name, tuple(hosts), baseline, playbook.attempts, len(cells), playbook.fixed_ratio,
                       rules, seed, fixed, false_fixed, tuple(power))


def describe_verdicts(plan: VerdictPlan) -> str:
    rate = percent(plan.baseline)
    where = (f"{plan.attempts} attempts per cell on each of {len(plan.hosts)} hosts, the reference at {rate}, "
             f"{plan.compared} cells compared with it (one Holm family), fixed_ratio {plan.fixed_ratio:g}, stop rule "
             f"{', '.join(plan.rules)}")
    lines = [f"what the verdicts can show ({plan.fixed.campaigns} simulated campaigns per number, seed {plan.seed}, "
             f"judged by the real judge; {where}):",
             "  (every attempt judged and every host alike: a fleet with errors, infra and hosts that differ gets "
             "less; bench/verdicts.py measures how much)",
             f"  a truly fixed cell (rate 0) is called fixed {plan.fixed.text()} of the time"]
    for ratio, chance in plan.false_fixed:
        lines.append(f"  a cell that still reproduces at {ratio:.2g} of the reference's rate ({percent(ratio * plan.baseline)})"
                     f" is called fixed {chance.text()} of the time")
    for answer in plan.power:
        if answer.attempts is None:
            lines.append(f"  {answer.goal:.0%} power for a fixed cell: not reached by {MAX_PLANNED} attempts per cell "
                         "and host")
        elif answer.attempts == plan.attempts:
            lines.append(f"  {answer.goal:.0%} power for a fixed cell: reached at the playbook's {plan.attempts} attempts")
        else:
            assert answer.chance is not None
            lines.append(f"  {answer.goal:.0%} power for a fixed cell needs about {answer.attempts} attempts per cell and "
                         f"host, not {plan.attempts} (called fixed {answer.chance.text()} there, "
                         f"{answer.chance.campaigns} campaigns; playbook key attempts)")
    return "\n".join(lines)
