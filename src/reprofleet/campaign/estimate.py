"""How many attempts, hours and power cycles a campaign will take, before it runs.

Pure arithmetic on a playbook and an assumed reproduction rate (the "baseline": how
often the bug shows where it is known to be). ``invoke plan`` prints it, so a user can
size a campaign, and see what a stopping rule saves, before the first host is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from reprofleet.model import Playbook, StopKind, StopRule
from reprofleet.stats.sprt import Sprt
from reprofleet.stats.intervals import clean_attempts_to_rule_out
from reprofleet.stats.stop_rules import max_attempts, percent, sprt_of

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
    """One cell on one host: its slots and the attempts it is expected to use."""

    cell: str
    rule: StopRule
    slots: int
    attempts: Span  # expected attempts, from the kindest to the harshest case the rule allows
    reproductions_at_baseline: float  # expected reproductions if the cell reproduces at the baseline
    reference: bool


def cell_plan(name: str, rule: StopRule, planned: int, baseline: float, reference: bool) -> CellPlan:
    """Expected attempts under the cell's stop rule (fixed n: the plan; SPRT: at p1 and p0;
    first reproduction: from the expected wait for a reproduction at the baseline to the cap)."""
    slots = max_attempts(rule, planned)
    if rule.kind is StopKind.SPRT:
        sprt = sprt_of(rule)
        ends = (sprt.exact_expected_attempts(sprt.p0, slots), sprt.exact_expected_attempts(sprt.p1, slots))
        attempts, at_baseline = Span(min(ends), max(ends)), sprt.exact_expected_attempts(baseline, slots)
    elif rule.kind is StopKind.FIRST_REPRODUCTION:
        at_baseline = (1.0 - (1.0 - baseline) ** slots) / baseline  # E[min(wait for a reproduction, cap)]
        attempts = Span(at_baseline, slots)
    else:
        attempts, at_baseline = Span(slots, slots), float(slots)
    # Wald's identity: expected reproductions = rate x expected attempts, for any stopping rule
    return CellPlan(name, rule, slots, attempts, baseline * at_baseline, reference)


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
    def attempts(self) -> Span:
        return sum((c.attempts for c in self.cells), Span(0.0, 0.0))

    @property
    def power_cycles(self) -> Span:
        """From "only the reference reproduces" to "every cell reproduces at the baseline"."""
        only_reference = sum(c.reproductions_at_baseline for c in self.cells if c.reference)
        return Span(only_reference, sum(c.reproductions_at_baseline for c in self.cells))

    @property
    def cycle_s(self) -> float:
        return self.dwell_s + self.boot_s

    @property
    def duration_s(self) -> Span:
        return self.attempts.scaled(self.attempt_s) + self.power_cycles.scaled(self.cycle_s)


def campaign_estimate(playbook: Playbook, hosts: Sequence[str], baseline: float, dwell_s: float,
                      attempt_s: float | None = None, power_cycle_budget: int | None = None) -> CampaignEstimate:
    if not 0.0 < baseline < 1.0:
        raise ValueError(f"the baseline is a reproduction rate between 0 and 1 (exclusive), got {baseline}")
    if attempt_s is not None and attempt_s <= 0:
        raise ValueError(f"an attempt takes a positive number of seconds, got {attempt_s}")
    reference = playbook.reference_cell.name
    cells = tuple(cell_plan(c.name, playbook.stop_rule(c), playbook.attempts, baseline, c.name == reference)
                  for c in playbook.cells)
    return CampaignEstimate(playbook.name, tuple(hosts), baseline, cells,
                            playbook.timeouts.attempt if attempt_s is None else attempt_s, attempt_s is None,
                            dwell_s, playbook.timeouts.boot, power_cycle_budget)


def describe_campaign(plan: CampaignEstimate) -> str:
    rate = percent(plan.baseline)
    width = max(len(c.cell) for c in plan.cells) + len(" (reference)")
    lines = [f"{plan.playbook} on {len(plan.hosts)} hosts ({', '.join(plan.hosts)}); they run in parallel, "
             "so the campaign takes as long as one host's plan:",
             f"  {'cell':<{width}}  {'stop rule':<18}  {'slots':>5}  expected attempts"]
    for c in plan.cells:
        name = c.cell + (" (reference)" if c.reference else "")
        lines.append(f"  {name:<{width}}  {c.rule.kind.value:<18}  {c.slots:>5}  {c.attempts.text()}")
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
    ]
    if plan.power_cycle_budget is not None and cycles.high > plan.power_cycle_budget:
        lines.append(f"note: more power cycles than the budget of {plan.power_cycle_budget} per host may be needed; "
                     "a host past it is quarantined (power_cycle_budget in invoke.yaml)")
    return "\n".join(lines)
