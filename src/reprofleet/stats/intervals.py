"""Honest numbers: reproduction rates with exact intervals, tests between cells, and when to stop.

``infra`` attempts could not be judged, so they are neither reproductions nor clean runs:
they are excluded from the denominator and shown separately. Intervals and tests are exact
(Clopper-Pearson, Boschloo, exact conditional), because the counts here are small (a
seed-style cell has 6 attempts) and normal approximations lie at small n. Every bound
says what it is: two- or one-sided, and at which level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy.stats import beta, boschloo_exact, norm
from scipy.stats import chi2 as chi2_dist

from reprofleet.stats.conditional import Distribution, Margins, convolution_work, convolve, same_sum_test

ALTERNATIVES = ("two-sided", "less", "greater")
EXACT_UP_TO_N = 200  # the stratified test is exact up to this many attempts, or with any expected count < 5
EXACT_WORK_LIMIT = 5_000_000  # ... unless the convolution would cost more than this


@dataclass(frozen=True)
class Interval:
    """A bound on a rate, with what kind of bound it is."""

    low: float
    high: float
    confidence: float
    sided: str  # "two-sided" | "upper" (high is the bound, low = 0) | "lower" (low is the bound, high = 1)
    method: str = "exact (Clopper-Pearson)"

    def label(self) -> str:
        """E.g. "95% two-sided exact" or "95% one-sided upper bound, exact"."""
        level = f"{self.confidence * 100:g}%"
        short = "exact" if self.method.startswith("exact") else self.method
        if self.sided == "two-sided":
            return f"{level} two-sided {short}"
        return f"{level} one-sided {self.sided} bound, {short}"


def _check_counts(successes: int, trials: int) -> None:
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval (the pair; :func:`rate_interval` says what it is)."""
    interval = rate_interval(successes, trials, confidence)
    return interval.low, interval.high


def rate_interval(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """Two-sided exact (Clopper-Pearson) interval: each tail holds at most (1 - confidence) / 2."""
    _check_counts(successes, trials)
    _check_confidence(confidence)
    tail = (1.0 - confidence) / 2
    return Interval(_lower(successes, trials, tail), _upper(successes, trials, tail), confidence, "two-sided")


def upper_bound(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """One-sided exact upper bound: "the rate is at most ``high``" (what clean runs can claim)."""
    _check_counts(successes, trials)
    _check_confidence(confidence)
    return Interval(0.0, _upper(successes, trials, 1.0 - confidence), confidence, "upper")


def lower_bound(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """One-sided exact lower bound: "the rate is at least ``low``" (what reproductions can claim)."""
    _check_counts(successes, trials)
    _check_confidence(confidence)
    return Interval(_lower(successes, trials, 1.0 - confidence), 1.0, confidence, "lower")


def _upper(successes: int, trials: int, tail: float) -> float:
    if successes == trials:
        return 1.0
    return float(beta.ppf(1.0 - tail, successes + 1, trials - successes))


def _lower(successes: int, trials: int, tail: float) -> float:
    if successes == 0:
        return 0.0
    return float(beta.ppf(tail, successes, trials - successes + 1))


def clean_attempts_to_rule_out(p0: float, confidence: float = 0.95) -> int | None:
    """Clean attempts in a row that rule out rate ``p0`` at ``confidence`` (one-sided, exact):
    the smallest N with (1 - p0)^N <= 1 - confidence. None when p0 <= 0 (nothing to rule out)."""
    _check_confidence(confidence)
    if p0 <= 0.0:
        return None
    if p0 >= 1.0:
        return 1
    guess = math.log1p(-confidence) / math.log1p(-p0)
    if not math.isfinite(guess):
        raise ValueError(f"a rate of {p0} is too small to rule out")
    n = max(1, math.ceil(guess))
    while n > 1 and _rules_out(p0, n - 1, confidence):
        n -= 1
    while not _rules_out(p0, n, confidence):
        n += 1
    return n


def _rules_out(p0: float, n: int, confidence: float) -> bool:
    """(1 - p0)^n <= 1 - confidence; near equality, decided exactly on the decimals given
    (0.9 clean-rate squared is 0.01 exactly, though not in floating point)."""
    lhs, rhs = n * math.log1p(-p0), math.log1p(-confidence)
    if abs(lhs - rhs) > 1e-9 * max(1.0, abs(rhs)) or n > 10_000:
        return lhs <= rhs
    return (1 - Fraction(str(float(p0)))) ** n <= 1 - Fraction(str(float(confidence)))


def boschloo(cell: tuple[int, int], reference: tuple[int, int], alternative: str = "two-sided") -> float:
    """Boschloo's exact test on (reproductions, judged) of a cell and the reference.

    "less": the cell's rate is below the reference's. 1.0 where nothing can be shown (a
    side with no judged attempts, or no reproduction anywhere, or nothing but).
    """
    _check_alternative(alternative)
    (ck, cn), (rk, rn) = cell, reference
    _check_counts(ck, cn)
    _check_counts(rk, rn)
    if cn == 0 or rn == 0 or ck + rk in (0, cn + rn):
        return 1.0
    return _boschloo_p(ck, cn, rk, rn, alternative)


@lru_cache(maxsize=65536)
def _boschloo_p(ck: int, cn: int, rk: int, rn: int, alternative: str) -> float:
    """scipy's Boschloo maximises over a nuisance grid (tens of ms); a report asks the same tables often."""
    # scipy's columns are the two samples; row 0 holds the successes
    p = float(boschloo_exact([[ck, rk], [cn - ck, rn - rk]], alternative=alternative).pvalue)
    return 1.0 if math.isnan(p) else min(1.0, p)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: family-wise error controlled over all the comparisons.

    Written out (six lines) because statsmodels' ``multipletests(method="holm")``, which the
    tests check it against, forces a full garbage collection on every call: 60-90 ms, most
    of the time of a report or of the verdict bench.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * float(p_values[i])))
        adjusted[i] = running
    return adjusted


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}, not {alternative!r}")


@dataclass(frozen=True)
class StratifiedResult:
    """A cell against the reference, host by host (each host one stratum)."""

    p_value: float
    common_odds_ratio: float | None  # cell vs reference; None when undefined or infinite
    exact: bool
    method: str
    heterogeneity_p: float | None  # do the hosts disagree about the effect? None below 2 informative hosts
    heterogeneity_method: str
    strata: int  # informative hosts only


@dataclass(frozen=True)
class _Stratum:
    cell_k: int
    cell_n: int
    ref_k: int
    ref_n: int

    @property
    def margins(self) -> Margins:
        return Margins(self.cell_n, self.ref_n, self.cell_k + self.ref_k)

    @property
    def law(self) -> Distribution:
        return Distribution(self.margins.low, tuple(self.margins.weights()))

    @property
    def table(self) -> np.ndarray:
        return np.array([[self.cell_k, self.cell_n - self.cell_k], [self.ref_k, self.ref_n - self.ref_k]], float)

    def smallest_expected(self) -> float:
        n, m = self.cell_n + self.ref_n, self.cell_k + self.ref_k
        return min(r * c / n for r in (self.cell_n, self.ref_n) for c in (m, n - m))


def stratified(strata: Sequence[tuple[tuple[int, int], tuple[int, int]]],
               alternative: str = "two-sided") -> StratifiedResult:
    """Cochran-Mantel-Haenszel: is the cell's odds of reproducing different from the
    reference's, host by host? Exact (conditional on every host's margins, as R's
    ``mantelhaen.test(exact=TRUE)``) when counts are small, statsmodels' asymptotic test otherwise."""
    _check_alternative(alternative)
    kept = []
    for (ck, cn), (rk, rn) in strata:
        _check_counts(ck, cn)
        _check_counts(rk, rn)
        stratum = _Stratum(ck, cn, rk, rn)
        if stratum.margins.informative:
            kept.append(stratum)
    if not kept:
        return StratifiedResult(1.0, None, True, "no host with both outcomes and both cells: nothing to test",
                                None, "fewer than 2 informative hosts", 0)
    heterogeneity_p, heterogeneity_method = _heterogeneity(kept)
    laws = [s.law for s in kept]
    small = sum(s.cell_n + s.ref_n for s in kept) <= EXACT_UP_TO_N or min(s.smallest_expected() for s in kept) < 5
    if small and convolution_work(laws) <= EXACT_WORK_LIMIT:
        total, observed = convolve(laws), sum(s.cell_k for s in kept)
        sided = "two-sided" if alternative == "two-sided" else f"one-sided, {alternative}"
        return StratifiedResult(total.tail(observed, alternative), total.conditional_mle(observed), True,
                                f"exact conditional CMH ({sided})", heterogeneity_p, heterogeneity_method, len(kept))
    p, odds_ratio = _asymptotic_cmh(kept, alternative)
    return StratifiedResult(p, odds_ratio, False, "Cochran-Mantel-Haenszel (statsmodels, continuity-corrected"
                            + ("" if alternative == "two-sided" else f", one-sided {alternative}") + ")",
                            heterogeneity_p, heterogeneity_method, len(kept))


def _asymptotic_cmh(kept: Sequence[_Stratum], alternative: str) -> tuple[float, float | None]:
    from statsmodels.stats.contingency_tables import StratifiedTable

    table = StratifiedTable([s.table for s in kept])
    delta = sum(s.cell_k - s.cell_n * (s.cell_k + s.ref_k) / (s.cell_n + s.ref_n) for s in kept)
    # statsmodels subtracts 0.5 even from |delta| < 0.5; R's min(0.5, |delta|) makes that 0
    chi2 = 0.0 if abs(delta) <= 0.5 else float(table.test_null_odds(correction=True).statistic)
    if alternative == "two-sided":
        p = float(chi2_dist.sf(chi2, 1))  # statsmodels' 1 - cdf underflows to 0 for strong effects
    else:
        z = math.copysign(math.sqrt(chi2), delta)
        p = float(norm.cdf(z) if alternative == "less" else norm.sf(z))
    odds_ratio = float(table.oddsratio_pooled)
    return min(1.0, p), odds_ratio if math.isfinite(odds_ratio) else None


def _heterogeneity(kept: Sequence[_Stratum]) -> tuple[float | None, str]:
    """Breslow-Day (Tarone) when every expected count is at least 5; Zelen's exact test otherwise."""
    if len(kept) < 2:
        return None, "fewer than 2 informative hosts"
    if min(s.smallest_expected() for s in kept) >= 5:
        from statsmodels.stats.contingency_tables import StratifiedTable

        with np.errstate(divide="ignore", invalid="ignore"):  # a pooled odds ratio of exactly 1 divides by 0
            p = float(StratifiedTable([s.table for s in kept]).test_equal_odds(adjust=True).pvalue)
        if math.isfinite(p):
            return min(1.0, max(0.0, p)), "Breslow-Day, Tarone-adjusted (statsmodels)"
    p, exact = same_sum_test([s.law for s in kept], [s.cell_k for s in kept])
    return p, "Zelen's exact test" if exact else "Zelen's test (seeded Monte Carlo)"


def hosts_disagree(per_host: Sequence[tuple[int, int]]) -> float:
    """p-value that one cell's rate differs between hosts (exact test of homogeneity).

    Two hosts: Boschloo. More: Freeman-Halton's exact test on the hosts x outcome table
    (a seeded Monte Carlo past the enumeration limit). 1.0 when fewer than 2 hosts have data.
    """
    for k, n in per_host:
        _check_counts(k, n)
    rows = [(k, n) for k, n in per_host if n > 0]
    if len(rows) < 2:
        return 1.0
    if len(rows) == 2:
        return boschloo(rows[0], rows[1])
    parts = [Distribution(0, tuple(math.comb(n, x) for x in range(n + 1))) for _, n in rows]
    return same_sum_test(parts, [k for k, _ in rows])[0]
