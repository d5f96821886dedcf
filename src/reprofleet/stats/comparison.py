"""One cell against the reference on the hosts that ran both: every number a verdict or a
stop rule decides on, fixed-n or anytime-valid.

Two one-sided questions, each a family of its own across a report's cells (Holm):

* **below**: does the cell reproduce less often than the reference? Fixed-n: Boschloo's
  exact test on one host, the exact conditional Cochran-Mantel-Haenszel test with hosts as
  strata on several (:mod:`reprofleet.stats.intervals`). Anytime-valid: the e-process of
  :mod:`reprofleet.stats.anytime` at rate ratio 1.
* **fixed**: is the rate ratio (cell / reference) below the playbook's ``fixed_ratio``?
  Fixed-n: Miettinen and Nurminen's stratified score statistic (:mod:`reprofleet.stats.ratio`)
  with its p-value made exact (:mod:`reprofleet.stats.exact_ratio`: the score's normal tail
  alone is wrong up to 6.9% of the time at 5%), where every host's two sides are within 2:1;
  otherwise, and at any look before the planned end: the e-process at that ratio.

The upper bound on the ratio printed beside them inverts the same test. The stop rules
(:mod:`reprofleet.stats.stop_rules`) and the judge (``reprofleet.verdicts``) both call
:func:`weigh`, so a cell stops as fixed only where the judge would call it so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from reprofleet.stats import anytime
from reprofleet.stats import exact_ratio
from reprofleet.stats import intervals
from reprofleet.stats import ratio as rate_ratio
from reprofleet.stats.ratio import Stratum


@dataclass(frozen=True)
class Evidence:
    """The raw (unadjusted) one-sided p-values and the ratio's bound for one comparison."""

    anytime: bool
    p_below: float
    below_method: str
    p_fixed: float
    fixed_ratio: float
    ratio_upper: float  # math.inf when the reference never reproduced on these hosts
    ratio_method: str
    confidence: float
    odds_ratio: float | None = None
    heterogeneity_p: float | None = None


def _fixed_n_below(strata: Sequence[Stratum]) -> tuple[float, str, float | None, float | None]:
    if len(strata) == 1:
        (cell, ref), = strata
        return intervals.boschloo(cell, ref, "less"), "Boschloo exact (less)", None, None
    result = intervals.stratified(strata, "less")
    return result.p_value, result.method, result.common_odds_ratio, result.heterogeneity_p


UNBALANCED_METHOD = ("the better of the score bound with a host's larger side cut to 2:1 at its worst case and the "
                     "e-process, each at half the level (a host's two sides differ more than 2:1)")


def _unbalanced(strata: Sequence[Stratum], confidence: float, fixed_ratio: float) -> tuple[float, float]:
    """(p for "ratio >= fixed_ratio", the ratio's upper bound) where a host's sides pass 2:1.

    Two valid answers, joined by Bonferroni: the score bound on the strata cut to 2:1 at the
    worst case (:func:`ratio.balanced_worst_case`: strong while the larger side is near 2:1)
    and the e-process on the whole strata (weak, but it keeps learning from every further clean
    attempt). Neither is chosen by the data, so the pair is valid; more clean attempts never
    take "fixed" away (the e-process alone made 0/61 on four hosts against 9/30 not fixed where
    0/60 was).
    """
    half = (1.0 - confidence) / 2.0
    worst = rate_ratio.balanced_worst_case(strata)
    cut = _held_to_level(rate_ratio.upper_bound(worst, 1.0 - half, fixed_ratio), worst, half)
    sequence = anytime.ratio_upper(strata, half, fixed_ratio)
    return min(1.0, 2.0 * min(cut.p_at_threshold, sequence.p_at_threshold)), min(cut.upper, sequence.upper)


EXACT_METHOD = f"Miettinen-Nurminen score bound, {exact_ratio.METHOD} at the threshold"


def _held_to_level(bound: rate_ratio.RatioBound, strata: Sequence[Stratum], alpha: float) -> rate_ratio.RatioBound:
    """The score bound with its p-value at the threshold made exact (:mod:`.exact_ratio`): the
    score test alone says "below 0.2" up to 6.9% of the time at 5% (12 against 12). Where the
    exact test does not reach the threshold the bound printed is no lower than the threshold,
    so a sentence never shows a bound below the line it did not cross."""
    p = exact_ratio.p_at_least(strata, bound.threshold)
    upper = bound.upper if p < alpha else max(bound.upper, bound.threshold)
    return rate_ratio.RatioBound(upper, bound.confidence, p, bound.threshold, bound.strata, EXACT_METHOD)


def weigh(strata: Sequence[Stratum], *, anytime_valid: bool, fixed_ratio: float,
          confidence: float = 0.95) -> Evidence:
    """The comparison of a cell with the reference on these strata (one per host that ran both)."""
    if not strata:
        raise ValueError("a comparison needs at least one host that ran both cells")
    if not 0.0 < fixed_ratio < 1.0:
        raise ValueError(f"fixed_ratio must be in (0, 1), got {fixed_ratio}")
    if anytime_valid:
        sequence = anytime.ratio_upper(strata, 1.0 - confidence, fixed_ratio)
        return Evidence(True, anytime.p_value(strata, 1.0), anytime.METHOD_RATIO, sequence.p_at_threshold,
                        fixed_ratio, sequence.upper, anytime.METHOD_RATIO, confidence)
    p_below, method, odds_ratio, heterogeneity = _fixed_n_below(strata)
    if not rate_ratio.balanced(strata):
        p_fixed_, upper_ = _unbalanced(strata, confidence, fixed_ratio)
        return Evidence(False, p_below, method, p_fixed_, fixed_ratio, upper_, UNBALANCED_METHOD, confidence,
                        odds_ratio, heterogeneity)
    bound = _held_to_level(rate_ratio.upper_bound(strata, confidence, fixed_ratio), strata, 1.0 - confidence)
    return Evidence(False, p_below, method, bound.p_at_threshold, fixed_ratio, bound.upper,
                    bound.method, confidence, odds_ratio, heterogeneity)


def p_below(strata: Sequence[Stratum], *, anytime_valid: bool) -> float:
    """:func:`weigh`'s ``p_below`` alone (what the advice searches over)."""
    return anytime.p_value(strata, 1.0) if anytime_valid else _fixed_n_below(strata)[0]


def p_fixed(strata: Sequence[Stratum], *, anytime_valid: bool, fixed_ratio: float) -> float:
    """:func:`weigh`'s ``p_fixed`` alone, without the bound (cheap: no exact test)."""
    if anytime_valid:
        return anytime.p_value(strata, fixed_ratio)
    if not rate_ratio.balanced(strata):  # as _unbalanced: the pair, joined by Bonferroni
        cut = exact_ratio.p_at_least(rate_ratio.balanced_worst_case(strata), fixed_ratio)
        return min(1.0, 2.0 * min(cut, anytime.p_value(strata, fixed_ratio)))
    return exact_ratio.p_at_least(strata, fixed_ratio)


def rarer(cell: tuple[int, int], other: tuple[int, int], *, anytime_valid: bool) -> float:
    """One-sided p-value that ``cell`` (reproductions, judged) has a lower rate than ``other``
    (one host against another: Boschloo, or the e-process at ratio 1)."""
    if anytime_valid:
        return anytime.p_value([(cell, other)], 1.0)
    return intervals.boschloo(cell, other, "less")


def upper(successes: int, trials: int, confidence: float, *, anytime_valid: bool) -> intervals.Interval:
    """A one-sided upper bound on one rate: exact (Clopper-Pearson) or the confidence sequence."""
    if anytime_valid:
        return intervals.Interval(0.0, anytime.rate_upper(successes, trials, 1.0 - confidence), confidence, "upper",
                                  anytime.METHOD_RATE)
    return intervals.upper_bound(successes, trials, confidence)


def lower(successes: int, trials: int, confidence: float, *, anytime_valid: bool) -> intervals.Interval:
    """A one-sided lower bound on one rate: exact (Clopper-Pearson) or the confidence sequence."""
    if anytime_valid:
        return intervals.Interval(anytime.rate_lower(successes, trials, 1.0 - confidence), 1.0, confidence, "lower",
                                  anytime.METHOD_RATE)
    return intervals.lower_bound(successes, trials, confidence)


def concludes_fixed(evidence: Evidence, alpha: float) -> bool:
    """Both questions answered at ``alpha`` (what a stop rule asks at the strictest Holm rank)."""
    return evidence.p_below < alpha and evidence.p_fixed < alpha
