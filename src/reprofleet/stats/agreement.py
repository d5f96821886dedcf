"""Do one host's own records contradict what its group's pooled answer says about it?

A pooled answer ("level 5 is clean for ws01-ws04") is a claim about every host it names,
but pooled counts are dominated by the hosts that ran most: in issue 33 one host's 11 of 19
reproductions at 2800 MHz sat beside three hosts' ~120 clean runs each, the pooled rate read
3%, and the search called 2800 clean for all four. So before a group's answer names a host,
that host's own counts are tested against the answer. Under "P(level) <= epsilon" (the
claim) and a monotone curve, every attempt of the host at ``level`` or a safer level
reproduces with probability at most ``worst_rate`` (epsilon, plus the largest false-wedge
floor the model allows). The test is exact binomial on each run of levels c..level (a host
whose onset sits just below the claimed level shows it at that level alone; one whose onset
is far below shows it over several), Bonferroni-corrected over the runs with data. It is a
test of agreement, not a claim: a host it flags is answered from its own records, and a
host it misses is still bounded by the pooled model's guarantee on the pool's average, so
``AGREE_ALPHA`` trades attempts (a false split costs the host its own answer) against
power, never the stated delta of a claim the host's own records support.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from scipy.stats import binom

AGREE_ALPHA = 0.05  # a host's corrected p-value below this: its records contradict its group's clean level


@dataclass(frozen=True)
class Contradiction:
    """The run of levels ``lowest``..level whose counts most contradict the claim, and its corrected p-value."""

    lowest: int
    reproductions: int
    attempts: int
    p_value: float


def worst_rate(epsilon: float, floor: float) -> float:
    """The highest chance an attempt reproduces at a level where the claim P <= epsilon holds."""
    return floor + (1.0 - floor) * epsilon


def contradicts_clean(reproductions: Sequence[int], attempts: Sequence[int], level: int,
                      rate: float) -> Contradiction | None:
    """The most contradicting run of levels c..``level`` of one host's counts (per level, 0 the
    safest) against every attempt there reproducing at most at ``rate``; None: no attempt there."""
    best: tuple[float, int, int, int] | None = None
    runs = 0
    wedges = total = 0
    for lowest in range(level, -1, -1):
        wedges += int(reproductions[lowest])
        total += int(attempts[lowest])
        if not attempts[lowest] or not total:
            continue
        runs += 1
        p = float(binom.sf(wedges - 1, total, rate)) if wedges else 1.0
        if best is None or p < best[0]:
            best = (p, lowest, wedges, total)
    if best is None:
        return None
    return Contradiction(best[1], best[2], best[3], min(1.0, best[0] * runs))
