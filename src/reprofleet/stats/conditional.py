"""Exact conditional distributions over a stack of 2x2 tables (one table per host).

Given every margin of every table, the count in one corner of table i follows a
hypergeometric law, and the tables are independent. Everything the stratified tests need
follows from integer weights ``comb(n1, a) * comb(n2, m - a)``, so this module computes
with Python integers: ties are exact ties, and no rounding decides a p-value. Work is
bounded: enumerations past a limit switch to a seeded Monte Carlo, and the caller says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import brentq

ENUMERATION_LIMIT = 200_000  # configurations enumerated exactly; beyond that, Monte Carlo
MONTE_CARLO_DRAWS = 20_000
MONTE_CARLO_SEED = 20_260_707  # fixed, so the same records always give the same p-value


@dataclass(frozen=True)
class Margins:
    """One 2x2 table's margins: ``n1`` cell attempts, ``n2`` reference attempts, ``m`` reproductions in all."""

    n1: int
    n2: int
    m: int

    @property
    def low(self) -> int:
        return max(0, self.m - self.n2)

    @property
    def high(self) -> int:
        return min(self.m, self.n1)

    @property
    def informative(self) -> bool:
        """A table with an empty row or column says nothing about the odds ratio."""
        return self.n1 > 0 and self.n2 > 0 and 0 < self.m < self.n1 + self.n2

    def weights(self) -> list[int]:
        """Hypergeometric weights of the corner count ``low .. high`` (proportional to its law)."""
        return [math.comb(self.n1, a) * math.comb(self.n2, self.m - a) for a in range(self.low, self.high + 1)]


@dataclass(frozen=True)
class Distribution:
    """Integer weights of a count taking the values ``low .. low + len(weights) - 1``."""

    low: int
    weights: tuple[int, ...]

    def tail(self, observed: int, alternative: str) -> float:
        """The exact p-value of ``observed``: "less" P(X <= x), "greater" P(X >= x), "two-sided"
        the probability of values no more likely than x (as Fisher's and R's exact tests)."""
        total = sum(self.weights)
        at = observed - self.low
        if alternative == "less":
            part = sum(self.weights[: at + 1])
        elif alternative == "greater":
            part = sum(self.weights[at:])
        elif alternative == "two-sided":
            part = sum(w for w in self.weights if w <= self.weights[at])
        else:
            raise ValueError(f"alternative must be two-sided, less or greater, not {alternative!r}")
        return min(1.0, part / total)

    def conditional_mle(self, observed: int) -> float | None:
        """The odds ratio psi with E_psi[X] = observed under weights w(x) psi^x; 0 at the lowest
        value, None at the highest (no finite estimate)."""
        at = observed - self.low
        if at <= 0:
            return 0.0
        if at >= len(self.weights) - 1:
            return None
        logs = np.array([math.log(w) if w > 0 else -math.inf for w in self.weights])
        values = np.arange(len(self.weights), dtype=float)

        def excess(log_psi: float) -> float:
            z = logs + values * log_psi
            p = np.exp(z - z.max())
            return float((p * values).sum() / p.sum()) - at

        bound = 1.0
        while excess(-bound) > 0 or excess(bound) < 0:
            bound *= 2.0
        return math.exp(brentq(excess, -bound, bound, xtol=1e-12))


def convolve(parts: Sequence[Distribution]) -> Distribution:
    """The law of a sum of independent counts."""
    low, weights = 0, [1]
    for part in parts:
        out = [0] * (len(weights) + len(part.weights) - 1)
        for i, w in enumerate(weights):
            if w:
                for j, v in enumerate(part.weights):
                    out[i + j] += w * v
        low, weights = low + part.low, out
    return Distribution(low, tuple(weights))


def convolution_work(parts: Sequence[Distribution]) -> int:
    """Multiplications :func:`convolve` would do (to bound the exact test's cost)."""
    work, width = 0, 1
    for part in parts:
        work += width * len(part.weights)
        width += len(part.weights) - 1
    return work


def same_sum_test(parts: Sequence[Distribution], observed: Sequence[int]) -> tuple[float, bool]:
    """P(a configuration with the observed sum is no more likely than the observed one).

    The configurations are the vectors (x_1 .. x_k) with x_i in part i's range and the
    observed total; each has weight prod w_i(x_i). This is Zelen's exact test of equal odds
    ratios (parts = hypergeometric tables) and the Freeman-Halton test of a k x 2 table
    (parts = binomial rows). Returns (p-value, exact); not exact means seeded Monte Carlo.
    """
    total = sum(observed)
    suffix = _suffix_laws(parts)
    count = _configurations(parts, total)
    threshold = math.prod(p.weights[x - p.low] for p, x in zip(parts, observed))
    if count <= ENUMERATION_LIMIT:
        hits = _enumerate_at_most(parts, suffix, total, threshold)
        return min(1.0, hits / _weight_at(suffix[0], total)), True
    return _monte_carlo(parts, suffix, total, threshold), False


def _suffix_laws(parts: Sequence[Distribution]) -> list[Distribution]:
    """suffix[i] = the law of x_i + ... + x_k (suffix[k] = the law of an empty sum)."""
    laws = [Distribution(0, (1,))]
    for part in reversed(parts):
        laws.append(convolve([part, laws[-1]]))
    return laws[::-1]


def _weight_at(law: Distribution, value: int) -> int:
    at = value - law.low
    return law.weights[at] if 0 <= at < len(law.weights) else 0


def _configurations(parts: Sequence[Distribution], total: int) -> int:
    ones = [Distribution(p.low, tuple(1 for _ in p.weights)) for p in parts]
    return _weight_at(convolve(ones), total)


def _enumerate_at_most(parts: Sequence[Distribution], suffix: Sequence[Distribution], total: int,
                       threshold: int) -> int:
    """Sum of the weights of configurations summing to ``total`` whose weight is <= threshold."""
    found = 0
    stack: list[tuple[int, int, int]] = [(0, total, 1)]  # (part index, remaining sum, weight so far)
    while stack:
        index, remaining, weight = stack.pop()
        if index == len(parts):
            if remaining == 0 and weight <= threshold:
                found += weight
            continue
        part = parts[index]
        for at, w in enumerate(part.weights):
            rest = remaining - (part.low + at)
            if w and _weight_at(suffix[index + 1], rest):
                stack.append((index + 1, rest, weight * w))
    return found


def _monte_carlo(parts: Sequence[Distribution], suffix: Sequence[Distribution], total: int,
                 threshold: int) -> float:
    """Draw configurations from their conditional law, part by part, all draws at once, with a
    fixed seed. Weights are compared in logs, with R's relative tolerance of 1e-7 for ties."""
    rng = np.random.default_rng(MONTE_CARLO_SEED)
    remaining = np.full(MONTE_CARLO_DRAWS, total, dtype=np.int64)
    log_weight = np.zeros(MONTE_CARLO_DRAWS)
    for index, part in enumerate(parts):
        logs = np.array([math.log(w) if w else -math.inf for w in part.weights])
        for value in np.unique(remaining):
            rows = np.flatnonzero(remaining == value)
            joint = [w * _weight_at(suffix[index + 1], int(value) - part.low - at) for at, w in enumerate(part.weights)]
            norm = sum(joint)
            cdf = np.cumsum([j / norm for j in joint])
            cdf /= cdf[-1]  # values of weight 0 are never drawn: u < 1 = their cdf
            at = np.searchsorted(cdf, rng.random(len(rows)), side="right")
            remaining[rows] -= part.low + at
            log_weight[rows] += logs[at]
    hits = int(np.count_nonzero(log_weight <= math.log(threshold) + 1e-7))
    return (1 + hits) / (1 + MONTE_CARLO_DRAWS)
