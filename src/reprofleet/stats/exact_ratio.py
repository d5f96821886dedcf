"""The "fixed" test held to its level at every size: the score test's p-value made exact.

Miettinen and Nurminen's score test (:mod:`reprofleet.stats.ratio`) is asymptotic. By full
enumeration, with the cell at exactly ``rho0`` times the reference, its one-sided 5% test
says "ratio below rho0" up to 6.9% of the time (12 against 12 with the reference at 100%:
0/12 happens 0.8^12 = 6.9% of the time, and the score test calls 0/12 against 12/12
"below 0.2"; 13 against 13 at 95%: 5.6%; two hosts of 6: 6.9%). A "fixed at 95%" that is
wrong 7% of the time is not at 95%.

The exact unconditional test (Chan 1998, "Exact tests of equivalence and efficacy with a
non-zero lower bound for comparative studies", Statistics in Medicine 17:1403-1413) keeps
the score statistic as the *ordering* of tables and replaces its normal tail by the exact
one: the p-value of the observed table is the largest probability, over the nuisance rate
p_ref (with p_cell = rho0 p_ref, the null's boundary), of a table that scores as low or
lower. It holds its level at every size by construction, for any reference rate; the only
approximation is the maximum over p_ref, taken on a grid of ``GRID`` points refined around
its best point (``bench/fixed_ratio_exact.py`` enumerates the result).

Several hosts (strata) cannot be enumerated jointly (4 hosts x 9 a side is 10^8 tables),
so there the stratified score p-value, which keeps hosts apart, is joined by the exact
p-value of the hosts' pooled table, and the larger one is taken: a claim needs both. With
hosts alike the pooled exact test is exact; with hosts unlike, the stratified score guards
against a pooled table that mixes them. The enumeration of two hosts (alike and unlike)
is in the same bench.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy.stats import binom

from reprofleet.stats import ratio as score_ratio
from reprofleet.stats.ratio import Stratum

GRID = 201  # nuisance rates p_ref in [0, 1] where the tail is evaluated, then refined around the best
REFINE = 40  # points of the refinement between the best point's neighbours
TIE = 1e-9  # tables within this of the observed score count as "as low" (ties are ties)
METHOD = "exact unconditional score test"


def scores(n1: int, n2: int, rho: float) -> np.ndarray:
    """The score statistic of every table (x1 = 0..n1, x2 = 0..n2) at ratio ``rho``, as
    :func:`ratio.score` computes it for one stratum (Farrington and Manning's rates,
    Miettinen and Nurminen's N / (N - 1) correction), all at once."""
    a, b = np.meshgrid(np.arange(n1 + 1, dtype=float), np.arange(n2 + 1, dtype=float), indexing="ij")
    total = a + b
    qa = (n1 + n2) * rho
    qb = -(rho * (n1 + b) + a + n2)
    root = np.sqrt(np.maximum(qb * qb - 4.0 * qa * total, 0.0))
    p2 = np.clip((-qb - root) / (2.0 * qa), 0.0, 1.0 if rho <= 1.0 else 1.0 / rho)
    p1 = np.minimum(rho * p2, 1.0)
    weight = n1 * n2 / (n1 + n2)
    correction = (n1 + n2) / (n1 + n2 - 1) if n1 + n2 > 1 else 1.0
    numerator = weight * (a / n1 - rho * b / n2)
    variance = weight * weight * (p1 * (1 - p1) / n1 + rho * rho * p2 * (1 - p2) / n2) * correction
    safe = np.where(variance > 0, variance, 1.0)
    degenerate = np.where(numerator == 0, 0.0, np.copysign(np.inf, numerator))
    out = np.where(variance > 0, numerator / np.sqrt(safe), degenerate)
    out[(a == 0) & (b == 0)] = 0.0  # nothing reproduced on either side: the score says nothing
    return out


def tail_probabilities(n1: int, n2: int, rho: float, region: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """P(a table in ``region``) at each nuisance rate of ``grid`` (p_cell = rho p_ref)."""
    cell = binom.pmf(np.arange(n1 + 1)[None, :], n1, np.minimum(rho * grid, 1.0)[:, None])
    reference = binom.pmf(np.arange(n2 + 1)[None, :], n2, grid[:, None])
    return np.asarray(np.einsum("ga,ab,gb->g", cell, region.astype(float), reference))


def supremum(n1: int, n2: int, rho: float, region: np.ndarray) -> float:
    """The largest probability of ``region`` over the nuisance rate: a grid, then a finer grid
    between the best point's neighbours (the tail is smooth in p_ref)."""
    grid = np.linspace(0.0, 1.0, GRID)
    probs = tail_probabilities(n1, n2, rho, region, grid)
    best = int(np.argmax(probs))
    fine = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, GRID - 1)], REFINE)
    return float(min(1.0, max(probs.max(), tail_probabilities(n1, n2, rho, region, fine).max())))


@lru_cache(maxsize=65536)
def one_table(x1: int, n1: int, x2: int, n2: int, rho: float) -> float:
    """The exact p-value of "ratio >= rho" for one host's table (small: the cell is rarer)."""
    if n1 == 0 or n2 == 0 or x2 == 0:
        return 1.0
    table = scores(n1, n2, rho)
    return supremum(n1, n2, rho, table <= table[x1, x2] + TIE)


def rejections(n1: int, n2: int, rho: float, alpha: float) -> np.ndarray:
    """Which tables of this design :func:`one_table` calls "below rho" at ``alpha`` (for the
    enumeration of its error): every table's grid tail at once (tables in score order, each
    one's region the tables up to it, ties together), then :func:`one_table` itself for those
    the grid rejects (its refinement only raises a p-value, so no other table can turn)."""
    table = scores(n1, n2, rho)
    grid = np.linspace(0.0, 1.0, GRID)
    cell = binom.pmf(np.arange(n1 + 1)[None, :], n1, np.minimum(rho * grid, 1.0)[:, None])
    reference = binom.pmf(np.arange(n2 + 1)[None, :], n2, grid[:, None])
    flat = table.ravel()
    order = np.argsort(flat, kind="stable")
    joint = (cell[:, :, None] * reference[:, None, :]).reshape(GRID, -1)[:, order]
    running = np.cumsum(joint, axis=1)
    last = np.searchsorted(flat[order], flat[order] + TIE, side="right") - 1  # the end of each tie group
    tails = np.empty_like(flat)
    tails[order] = running[:, last].max(axis=0)
    out = (tails < alpha).reshape(table.shape)
    out[:, 0] = False
    for x1, x2 in zip(*np.nonzero(out)):
        out[x1, x2] = one_table(int(x1), n1, int(x2), n2, rho) < alpha
    return out


def p_at_least(strata: Sequence[Stratum], rho: float) -> float:
    """One-sided p-value of "the common ratio is at least ``rho``", valid at every size on one
    host; on several, the larger of the stratified score p-value and the pooled table's exact one."""
    informative = [s for s in strata if s[0][1] and s[1][1]]
    if not informative:
        return 1.0
    if len(informative) == 1:
        (x1, n1), (x2, n2) = informative[0]
        return one_table(x1, n1, x2, n2, float(rho))
    pooled = one_table(sum(s[0][0] for s in informative), sum(s[0][1] for s in informative),
                       sum(s[1][0] for s in informative), sum(s[1][1] for s in informative), float(rho))
    return max(score_ratio.p_at_least(informative, rho), pooled)
