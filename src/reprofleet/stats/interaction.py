"""Does a cell's effect differ between the sides of a comparison? The interaction test.

A side (one host, or a group of hosts) compares a cell with the reference in one 2x2 table
per host. The question is whether the effect, the odds ratio of the cell against the
reference, is the same on every side. Given every table's margins, each table's corner
count (the cell's reproductions) is hypergeometric with the odds ratio as its only
parameter, and under one common odds ratio their sum is sufficient for it: given that sum
too, the law of the side totals is free of it. The exact test ranks every possible vector of
side totals by that conditional probability and sums those no more likely than the one
observed (Zelen 1971, "The analysis of several 2x2 contingency tables", Biometrika 58:129-137;
with one table per side this is Zelen's exact test of equal odds ratios). It is valid at any
count, where Breslow-Day is not.

Where every side is one table and every expected count is at least 5, the judge's own
heterogeneity test is used instead (:func:`reprofleet.stats.intervals.stratified`:
Breslow-Day with Tarone's correction, statsmodels' ``StratifiedTable.test_equal_odds``),
which is Zelen's exact test at smaller counts, so ``--by host`` and the pooled report ask
the same question the same way. Past the enumeration limit the exact test is a seeded Monte
Carlo (:mod:`reprofleet.stats.conditional`), and the method says so.

It tests odds ratios, not rate ratios: a cell that halves a rate of 0.8 on one host and of
0.2 on another has one rate ratio but two odds ratios. At the ends, a fix (ratio 0) or no
effect (ratio 1), the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from reprofleet.stats import intervals
from reprofleet.stats.conditional import Distribution, Margins, convolve, same_sum_test
from reprofleet.stats.ratio import Stratum

METHOD_EXACT = "exact test of equal odds ratios, hosts as strata within sides (Zelen)"


@dataclass(frozen=True)
class Interaction:
    """``p_value`` None: fewer than two sides say anything about the effect."""

    p_value: float | None
    method: str
    tested: tuple[str, ...]  # the sides in the test
    left_out: tuple[tuple[str, str], ...]  # (side, why) for the sides that say nothing about the effect


def _law(stratum: Stratum) -> Distribution:
    (ck, cn), (rk, rn) = stratum
    margins = Margins(cn, rn, ck + rk)
    return Distribution(margins.low, tuple(margins.weights()))


def _informative(stratum: Stratum) -> bool:
    (ck, cn), (rk, rn) = stratum
    return Margins(cn, rn, ck + rk).informative


def _why_not(strata: Sequence[Stratum]) -> str:
    """Why a side's tables say nothing about the odds ratio."""
    if not strata or all(cn == 0 or rn == 0 for (_, cn), (_, rn) in strata):
        return "no judged attempts of both cells"
    if all(ck + rk == 0 for (ck, _), (rk, _) in strata):
        return "neither cell reproduced"
    if all(ck + rk == cn + rn for (ck, cn), (rk, rn) in strata):
        return "every attempt of both reproduced"
    return "no host with both outcomes and both cells"


def interaction(sides: Mapping[str, Sequence[Stratum]]) -> Interaction:
    """The test of "the odds ratio is the same on every side"; ``sides`` maps a side to its
    tables, ((cell reproductions, judged), (reference reproductions, judged)) per host."""
    kept: dict[str, list[Stratum]] = {}
    left_out: list[tuple[str, str]] = []
    for side, strata in sides.items():
        tables = [s for s in strata if _informative(s)]
        if tables:
            kept[side] = tables
        else:
            left_out.append((side, _why_not(strata)))
    if len(kept) < 2:
        return Interaction(None, "fewer than 2 sides with a table that says anything about the effect",
                           tuple(kept), tuple(left_out))
    if all(len(tables) == 1 for tables in kept.values()):
        result = intervals.stratified([tables[0] for tables in kept.values()])
        assert result.heterogeneity_p is not None  # two informative tables or more
        return Interaction(result.heterogeneity_p, result.heterogeneity_method, tuple(kept), tuple(left_out))
    parts = [convolve([_law(s) for s in tables]) for tables in kept.values()]
    observed = [sum(ck for (ck, _), _ in tables) for tables in kept.values()]
    p, exact = same_sum_test(parts, observed)
    method = METHOD_EXACT if exact else METHOD_EXACT + ", seeded Monte Carlo"
    return Interaction(p, method, tuple(kept), tuple(left_out))
