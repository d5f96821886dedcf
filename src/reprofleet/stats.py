"""Honest numbers: reproduction rates with exact intervals, and how many attempts are enough.

``infra`` attempts could not be judged, so they are neither reproductions nor clean runs:
they are excluded from the denominator and shown separately. Intervals are exact
(Clopper-Pearson), because the counts here are small (a seed-style cell has 6 attempts) and
normal approximations lie at small n.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from scipy.stats import beta, fisher_exact

from .model import Outcome

ALL_HOSTS = "(all)"


@dataclass(frozen=True)
class CellSummary:
    cell: str
    host: str
    counts: Mapping[str, int] = field(default_factory=dict)
    reproductions: int = 0
    judged: int = 0
    rate: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 1.0


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval."""
    if trials == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def attempts_to_see(rate: float, confidence: float = 0.95) -> int:
    """Attempts needed to see at least one reproduction with this confidence, at this rate."""
    if rate <= 0.0:
        return math.inf  # type: ignore[return-value]
    if rate >= 1.0:
        return 1
    return math.ceil(math.log(1 - confidence) / math.log(1 - rate))


def clean_run_bound(clean_attempts: int, confidence: float = 0.95) -> float:
    """Upper bound on the reproduction rate after this many clean attempts (rule of three, exact)."""
    if clean_attempts == 0:
        return 1.0
    return 1.0 - (1.0 - confidence) ** (1.0 / clean_attempts)


def compare(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Two-sided Fisher exact p-value for (reproductions, judged) of two cells."""
    table = [[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]]
    return float(fisher_exact(table)[1])


def _summary(cell: str, host: str, outcomes: list[str], reproductions: tuple[Outcome, ...]) -> CellSummary:
    counts: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        counts[outcome] += 1
    judged = sum(v for k, v in counts.items() if k != Outcome.INFRA.value)
    hits = sum(counts.get(o.value, 0) for o in reproductions)
    low, high = clopper_pearson(hits, judged)
    return CellSummary(cell, host, dict(counts), hits, judged, hits / judged if judged else 0.0, low, high)


def summarize(records: Iterable[Mapping[str, Any]], reproductions: tuple[Outcome, ...]) -> list[CellSummary]:
    """One row per (cell, host), and one pooled row per cell when several hosts ran it."""
    by_cell_host: dict[tuple[str, str], list[str]] = defaultdict(list)
    order: list[str] = []
    for record in records:
        cell = str(record["cell"])
        if cell not in order:
            order.append(cell)
        by_cell_host[(cell, str(record["host"]))].append(str(record["outcome"]))
    rows: list[CellSummary] = []
    for cell in order:
        hosts = sorted(h for c, h in by_cell_host if c == cell)
        for host in hosts:
            rows.append(_summary(cell, host, by_cell_host[(cell, host)], reproductions))
        if len(hosts) > 1:
            pooled = [o for h in hosts for o in by_cell_host[(cell, h)]]
            rows.append(_summary(cell, ALL_HOSTS, pooled, reproductions))
    return rows
