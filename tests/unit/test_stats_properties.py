"""Properties of the statistics that must hold for any counts, checked on generated ones."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, fisher_exact

from reprofleet.stats.intervals import (
    clean_attempts_to_rule_out, holm, lower_bound, rate_interval, stratified, upper_bound)
from reprofleet.stats.sprt import Sprt

LEVELS = st.sampled_from([0.8, 0.9, 0.95, 0.99])


@st.composite
def counts(draw: st.DrawFn, most: int = 60) -> tuple[int, int]:
    n = draw(st.integers(0, most))
    return draw(st.integers(0, n)), n


@st.composite
def stratum(draw: st.DrawFn) -> tuple[tuple[int, int], tuple[int, int]]:
    return draw(counts(12)), draw(counts(12))


@settings(max_examples=150, deadline=None, database=None)
@given(counts(), LEVELS)
def test_the_two_sided_interval_holds_the_observed_rate_and_is_scipys(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    interval = rate_interval(k, n, level)
    assert 0.0 <= interval.low <= interval.high <= 1.0
    if n:
        assert interval.low <= k / n <= interval.high
        expected = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
        assert (interval.low, interval.high) == (pytest.approx(expected.low, abs=1e-9),
                                                 pytest.approx(expected.high, abs=1e-9))


@settings(max_examples=100, deadline=None, database=None)
@given(counts(), LEVELS)
def test_one_more_reproduction_never_lowers_either_end(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    if k < n:
        now, more = rate_interval(k, n, level), rate_interval(k + 1, n, level)
        assert more.low >= now.low and more.high >= now.high


@settings(max_examples=100, deadline=None, database=None)
@given(counts(), LEVELS)
def test_a_one_sided_bound_is_the_two_sided_end_at_twice_the_tail(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    two_sided = rate_interval(k, n, 1 - 2 * (1 - level))
    assert upper_bound(k, n, level).high == pytest.approx(two_sided.high, abs=1e-12)
    assert lower_bound(k, n, level).low == pytest.approx(two_sided.low, abs=1e-12)


@settings(max_examples=40, deadline=None, database=None)  # statsmodels' multipletests runs gc.collect() per call
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_is_statsmodels_holm(raw: list[float]) -> None:
    from statsmodels.stats.multitest import multipletests

    assert holm(raw) == pytest.approx([float(p) for p in multipletests(raw, method="holm")[1]], abs=1e-12)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.floats(0.0, 1.0), max_size=12))
def test_holm_never_lowers_a_p_value_and_keeps_their_order(raw: list[float]) -> None:
    adjusted = holm(raw)
    assert len(adjusted) == len(raw)
    assert all(a >= r - 1e-12 and a <= 1.0 for a, r in zip(adjusted, raw))
    for (r1, a1) in zip(raw, adjusted):
        for (r2, a2) in zip(raw, adjusted):
            if r1 <= r2:
                assert a1 <= a2 + 1e-12


@settings(max_examples=150, deadline=None, database=None)
@given(counts(25), counts(25), st.sampled_from(["two-sided", "less", "greater"]))
def test_the_exact_stratified_test_on_one_host_is_fishers(cell: tuple[int, int], reference: tuple[int, int],
                                                          alternative: str) -> None:
    (ck, cn), (rk, rn) = cell, reference
    expected = fisher_exact([[ck, cn - ck], [rk, rn - rk]], alternative=alternative).pvalue
    assert stratified([(cell, reference)], alternative).p_value == pytest.approx(expected, rel=1e-9, abs=1e-15)


@settings(max_examples=80, deadline=None, database=None)
@given(st.lists(stratum(), max_size=6), st.sampled_from(["two-sided", "less", "greater"]))
def test_the_stratified_test_never_says_nan(strata: list[tuple[tuple[int, int], tuple[int, int]]],
                                            alternative: str) -> None:
    result = stratified(strata, alternative)
    assert 0.0 <= result.p_value <= 1.0
    assert result.heterogeneity_p is None or 0.0 <= result.heterogeneity_p <= 1.0
    assert result.common_odds_ratio is None or (result.common_odds_ratio >= 0 and math.isfinite(result.common_odds_ratio))
    assert result.strata <= len(strata)


@settings(max_examples=200, deadline=None, database=None)
@given(st.floats(1e-4, 1.0), LEVELS)
def test_clean_attempts_are_the_fewest_that_rule_the_rate_out(rate: float, level: float) -> None:
    n = clean_attempts_to_rule_out(rate, level)
    assert n is not None and n >= 1
    clean, tail = 1 - Fraction(str(rate)), 1 - Fraction(str(level))  # the decimals as given, exactly
    assert clean ** n <= tail
    assert n == 1 or clean ** (n - 1) > tail


@settings(max_examples=150, deadline=None, database=None)
@given(st.floats(0.05, 0.9), st.floats(0.05, 0.9), st.sampled_from([0.01, 0.05, 0.1]),
       st.sampled_from([0.1, 0.2]), counts(80))
def test_sprt_decides_exactly_where_the_llr_crosses_a_boundary(p0: float, ratio: float, alpha: float, beta: float,
                                                               kn: tuple[int, int]) -> None:
    test = Sprt(p0, p0 * ratio, alpha, beta)
    llr, decision = test.llr(*kn), test.decide(*kn)
    if llr >= math.log((1 - beta) / alpha):
        assert decision == "fixed"
    elif llr <= math.log(beta / (1 - alpha)):
        assert decision == "reproduces"
    else:
        assert decision is None
