"""How much rarer: the common rate ratio of a cell to the reference, host by host.

"Fixed" has to mean more than "reproduces less often than the reference": 0/3 against
10/10 is less often, and says nothing about whether the bug is gone. The effect size a
verdict prints is an upper bound on the rate ratio rho = p_cell / p_reference, assumed
common to every host (stratum), as the Cochran-Mantel-Haenszel test assumes a common odds
ratio.

The method is the stratified score statistic of Miettinen and Nurminen (1985, "Comparative
analysis of two rates", Statistics in Medicine 4:213-226): in each stratum the difference
p1 - rho p2 is scored against its variance at the maximum-likelihood rates constrained to
p1 = rho p2 (Farrington and Manning 1990, Statistics in Medicine 9:1447-1454, give the
closed form), with Miettinen and Nurminen's N / (N - 1) variance correction, and the
strata are combined with the weights n1 n2 / (n1 + n2). One stratum is Koopman's (1984)
score interval, and equals statsmodels' ``confint_proportions_2indep(method="score",
compare="ratio")`` (pinned by a test). The one-sided bound inverts the test of
"rho >= rho0". It is a score method, not an exact one: by full enumeration its one-sided
95% bound misses the true ratio at most 5.6% of the time at 24 to 36 attempts a side, 6.5%
at 12 and 7.5% at 6 (tests/unit/test_stats_ratio.py pins the enumeration), which is why a
verdict asks for it *and* the exact test that the cell is rarer at all, and why the
threshold it is held to was chosen by simulation through the whole judge. (statsmodels
returns a complex number where the reference reproduced every time; this does not.)

The score bound is used only where that enumeration vouches for it: every stratum within
2:1 between the cell's and the reference's attempts (:func:`balanced`). Outside it, with
sparse reference counts (0/136 against 1/10), the score bound misses up to 12% of the time
at a true ratio of 0.2, so the comparison takes the anytime-valid e-process there instead
(:mod:`reprofleet.stats.comparison`), which is valid for any design.

Strata are ((cell reproductions, cell judged), (reference reproductions, reference judged)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy.stats import norm

Stratum = tuple[tuple[int, int], tuple[int, int]]
LOG_RANGE = (math.log(1e-9), math.log(1e9))  # rate ratios searched; beyond either end is "unbounded"
BISECTIONS = 80
BALANCE = 2.0  # the score bound's enumeration covers strata within 2:1 (cell : reference attempts)


@dataclass(frozen=True)
class RatioBound:
    """A one-sided upper bound on the common rate ratio, and the p-value of "rho >= threshold"."""

    upper: float  # math.inf: no bound (the reference never reproduced on these hosts)
    confidence: float
    p_at_threshold: float  # one-sided p-value of H0: rho >= threshold
    threshold: float
    strata: int  # informative strata
    method: str = "Miettinen-Nurminen score"


def constrained_rates(x1: int, n1: int, x2: int, n2: int, rho: float) -> tuple[float, float]:
    """The maximum-likelihood (p1, p2) under p1 = rho p2 (Farrington and Manning's closed form)."""
    total = x1 + x2
    if total == 0:
        return 0.0, 0.0
    a = (n1 + n2) * rho
    b = -(rho * (n1 + x2) + x1 + n2)
    root = math.sqrt(max(b * b - 4.0 * a * total, 0.0))
    p2 = (-b - root) / (2.0 * a)
    p2 = min(max(p2, 0.0), 1.0 if rho <= 1.0 else 1.0 / rho)
    return min(rho * p2, 1.0), p2


def balanced(strata: Sequence[Stratum]) -> bool:
    """Every stratum with attempts on both sides within ``BALANCE``:1 either way."""
    return all(n2 / BALANCE <= n1 <= n2 * BALANCE for (_, n1), (_, n2) in strata if n1 and n2)


def balanced_worst_case(strata: Sequence[Stratum]) -> list[Stratum]:
    """Each stratum beyond ``BALANCE``:1 cut to it, the larger side keeping its worst case.

    A host's larger side is taken as ``BALANCE`` times the smaller side's attempts, with the
    count that speaks least for "the cell is rarer": on the cell's side as many reproductions
    as the cut can keep, on the reference's as few. Any sub-sample of that size is a balanced
    design the score bound holds for, and the bound only grows with the cell's count and falls
    with the reference's, so the worst case is valid for all of them. More clean attempts on a
    host past 2:1 then weigh the same as 2:1 of them, never less (the e-process, the other
    valid choice, made one more clean attempt turn "fixed" into not fixed: 0/60 against 9/30
    on four hosts was fixed, 0/61 was not).
    """
    out: list[Stratum] = []
    for (x1, n1), (x2, n2) in strata:
        if n1 and n2 and n1 > n2 * BALANCE:
            keep = int(n2 * BALANCE)
            out.append(((min(x1, keep), keep), (x2, n2)))
        elif n1 and n2 and n2 > n1 * BALANCE:
            keep = int(n1 * BALANCE)
            out.append(((x1, n1), (max(0, x2 - (n2 - keep)), keep)))
        else:
            out.append(((x1, n1), (x2, n2)))
    return out


def _informative(stratum: Stratum) -> bool:
    (x1, n1), (x2, n2) = stratum
    return n1 > 0 and n2 > 0 and x1 + x2 > 0


def score(strata: Sequence[Stratum], rho: float) -> float:
    """Miettinen-Nurminen's stratified score at ratio ``rho``: negative when the cell's rate is
    below rho times the reference's; falls as rho grows."""
    numerator, variance = 0.0, 0.0
    for stratum in strata:
        if not _informative(stratum):
            continue
        (x1, n1), (x2, n2) = stratum
        weight = n1 * n2 / (n1 + n2)
        p1, p2 = constrained_rates(x1, n1, x2, n2, rho)
        correction = (n1 + n2) / (n1 + n2 - 1) if n1 + n2 > 1 else 1.0
        numerator += weight * (x1 / n1 - rho * x2 / n2)
        variance += weight * weight * (p1 * (1 - p1) / n1 + rho * rho * p2 * (1 - p2) / n2) * correction
    if variance <= 0.0:
        return 0.0 if numerator == 0.0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def p_at_least(strata: Sequence[Stratum], rho: float) -> float:
    """One-sided p-value of "the common ratio is at least ``rho``" (small: the cell is rarer)."""
    _check(strata)
    if not any(_informative(s) for s in strata) or all(s[1][0] == 0 for s in strata):
        return 1.0
    return float(norm.cdf(score(strata, rho)))


def upper_bound(strata: Sequence[Stratum], confidence: float = 0.95, threshold: float = 1.0) -> RatioBound:
    """The largest ratio the score test does not reject at ``confidence`` (one-sided), and the
    p-value of "rho >= threshold". Unbounded when the reference never reproduced in an
    informative stratum: then no count of the cell's can show it rarer."""
    _check(strata)
    informative = sum(_informative(s) for s in strata)
    p = p_at_least(strata, threshold)
    if all(s[1][0] == 0 for s in strata if _informative(s)) or informative == 0:
        return RatioBound(math.inf, confidence, p, threshold, informative)
    z = float(norm.ppf(confidence))
    low, high = LOG_RANGE
    if score(strata, math.exp(high)) > -z:
        return RatioBound(math.inf, confidence, p, threshold, informative)
    if score(strata, math.exp(low)) < -z:
        return RatioBound(0.0, confidence, p, threshold, informative)
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if score(strata, math.exp(middle)) >= -z:
            low = middle
        else:
            high = middle
    return RatioBound(math.exp(high), confidence, p, threshold, informative)


def _check(strata: Sequence[Stratum]) -> None:
    for (x1, n1), (x2, n2) in strata:
        if not (0 <= x1 <= n1 and 0 <= x2 <= n2):
            raise ValueError(f"need 0 <= reproductions <= judged, got {x1}/{n1} and {x2}/{n2}")
