"""Rates and intervals that a report can be trusted with."""

from __future__ import annotations

import math

import pytest

from reprofleet.stats.intervals import (
    Interval, boschloo, clean_attempts_to_rule_out, clopper_pearson, holm, hosts_disagree, lower_bound, rate_interval,
    stratified, upper_bound)


def test_exact_interval_matches_known_values() -> None:
    # 0 of 6: the upper bound is 1 - 0.025^(1/6) (one-sided exact at 97.5%)
    low, high = clopper_pearson(0, 6)
    assert low == 0.0
    assert high == pytest.approx(1 - 0.025 ** (1 / 6), rel=1e-9)
    low, high = clopper_pearson(6, 6)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 6), rel=1e-9)
    low, high = clopper_pearson(3, 10)
    assert low == pytest.approx(0.0667, abs=1e-4) and high == pytest.approx(0.6525, abs=1e-4)


def test_no_trials_gives_the_whole_interval() -> None:
    assert clopper_pearson(0, 0) == (0.0, 1.0)




def test_bounds_at_all_or_nothing_equal_the_power_formulas() -> None:
    for n in (1, 6, 30):
        two = rate_interval(0, n)
        assert (two.low, two.high) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12))
        two = rate_interval(n, n)
        assert (two.low, two.high) == (pytest.approx(0.025 ** (1 / n), rel=1e-12), 1.0)
        assert upper_bound(0, n).high == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12)
        assert lower_bound(n, n).low == pytest.approx(0.05 ** (1 / n), rel=1e-12)


def test_every_bound_says_which_kind_it_is() -> None:
    assert rate_interval(3, 10).label() == "95% two-sided exact"
    assert upper_bound(0, 6).label() == "95% one-sided upper bound, exact"
    assert lower_bound(6, 6, 0.9).label() == "90% one-sided lower bound, exact"
    assert (upper_bound(0, 6).low, lower_bound(6, 6).high) == (0.0, 1.0)
    assert rate_interval(1, 6) == Interval(*clopper_pearson(1, 6), 0.95, "two-sided")


def test_clean_attempts_that_rule_out_a_rate() -> None:
    assert clean_attempts_to_rule_out(0.3) == 9  # 0.7^9 = 0.040 <= 0.05 < 0.7^8 = 0.058
    assert clean_attempts_to_rule_out(0.2) == 14  # 0.8^14 = 0.044 <= 0.05 < 0.8^13 = 0.055
    assert clean_attempts_to_rule_out(0.0) is None
    assert clean_attempts_to_rule_out(1.0) == 1


def test_an_exact_power_is_not_lost_to_floating_point() -> None:
    # 0.3^2 is 0.09 = 1 - 0.91 exactly; in floating point both 0.3 ** 2 and 2 log(0.3) miss it
    assert clean_attempts_to_rule_out(0.7, 0.91) == 2
    assert clean_attempts_to_rule_out(0.6, 0.936) == 3  # 0.4^3 = 0.064
    assert clean_attempts_to_rule_out(0.3, 0.51) == 2  # 0.7^2 = 0.49
    assert clean_attempts_to_rule_out(0.9, 0.99) == 2
    assert clean_attempts_to_rule_out(0.5, 0.75) == 2
    assert clean_attempts_to_rule_out(0.5, 0.875) == 3


def test_holm_against_a_hand_worked_example() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_boschloo_is_scipys_with_the_cell_as_the_first_sample() -> None:
    from scipy.stats import boschloo_exact

    for alternative in ("two-sided", "less", "greater"):  # scipy's columns are the samples: cell 1 of 4, reference 5 of 8
        expected = boschloo_exact([[1, 5], [3, 3]], alternative=alternative).pvalue
        assert boschloo((1, 4), (5, 8), alternative) == pytest.approx(expected, rel=1e-12)
    assert boschloo((0, 6), (5, 6), "less") < 0.01 < boschloo((0, 6), (5, 6), "greater")


def test_boschloo_shows_nothing_where_nothing_can_be_shown() -> None:
    assert boschloo((0, 6), (0, 6)) == 1.0  # no reproduction anywhere: scipy says nan
    assert boschloo((6, 6), (6, 6), "less") == 1.0
    assert boschloo((0, 0), (5, 6)) == 1.0
    assert boschloo((3, 6), (0, 0), "greater") == 1.0


# --- stratified by host --------------------------------------------------------------------

def _brute_force_cmh(strata: list[tuple[tuple[int, int], tuple[int, int]]], alternative: str) -> float:
    """The exact conditional test by enumerating every set of tables with the same margins."""
    import itertools

    supports = []
    for (ck, cn), (rk, rn) in strata:
        m = ck + rk
        supports.append({a: math.comb(cn, a) * math.comb(rn, m - a) for a in range(max(0, m - rn), min(m, cn) + 1)})
    law: dict[int, int] = {}
    for combo in itertools.product(*(s.items() for s in supports)):
        total = sum(a for a, _ in combo)
        law[total] = law.get(total, 0) + math.prod(w for _, w in combo)
    s = sum(ck for (ck, _), _ in strata)
    norm = sum(law.values())
    if alternative == "less":
        return sum(w for t, w in law.items() if t <= s) / norm
    return sum(w for w in law.values() if w <= law[s]) / norm


def test_the_exact_stratified_test_is_the_conditional_law_of_the_summed_counts() -> None:
    strata = [((1, 6), (5, 6)), ((0, 6), (4, 6)), ((2, 6), (3, 6))]
    for alternative in ("less", "two-sided"):
        result = stratified(strata, alternative)
        assert result.exact and result.strata == 3
        assert result.p_value == pytest.approx(_brute_force_cmh(strata, alternative), rel=1e-12)
    assert "exact conditional" in stratified(strata, "less").method and "less" in stratified(strata, "less").method


def test_hosts_that_say_nothing_are_dropped() -> None:
    informative = [((1, 6), (5, 6))]
    padded = informative + [((0, 6), (0, 6)), ((3, 3), (0, 0)), ((0, 0), (2, 6)), ((4, 4), (6, 6))]
    assert stratified(padded, "less") == stratified(informative, "less")
    nothing = stratified([((0, 6), (0, 6))])
    assert (nothing.p_value, nothing.strata, nothing.common_odds_ratio, nothing.heterogeneity_p) == (1.0, 0, None, None)


def test_the_common_odds_ratio_of_one_host_is_the_conditional_mle() -> None:
    from scipy.stats.contingency import odds_ratio

    expected = odds_ratio([[2, 4], [5, 1]], kind="conditional").statistic
    assert stratified([((2, 6), (5, 6))]).common_odds_ratio == pytest.approx(expected, rel=1e-6)
    assert stratified([((0, 6), (5, 6))]).common_odds_ratio == 0.0
    assert stratified([((6, 6), (1, 6))]).common_odds_ratio is None  # no finite estimate


def test_large_counts_use_statsmodels_cmh() -> None:
    from statsmodels.stats.contingency_tables import StratifiedTable

    strata = [((100, 300), (130, 300)), ((90, 300), (120, 300))]
    result = stratified(strata)
    assert not result.exact and "statsmodels" in result.method
    tables = [[[100, 200], [130, 170]], [[90, 210], [120, 180]]]
    expected = StratifiedTable(tables).test_null_odds(correction=True).pvalue
    assert result.p_value == pytest.approx(expected, rel=1e-9)
    assert result.common_odds_ratio == pytest.approx(StratifiedTable(tables).oddsratio_pooled)
    one_sided = stratified(strata, "less")
    assert one_sided.p_value == pytest.approx(result.p_value / 2, rel=1e-9)  # the effect is in that direction
    assert result.heterogeneity_method.startswith("Breslow-Day")


def test_hosts_that_disagree_about_the_effect_show_in_the_heterogeneity_test() -> None:
    opposite = stratified([((0, 10), (10, 10)), ((10, 10), (0, 10))])
    assert opposite.heterogeneity_p is not None and opposite.heterogeneity_p < 0.001
    assert opposite.heterogeneity_method == "Zelen's exact test"
    alike = stratified([((1, 6), (5, 6)), ((1, 6), (5, 6))])
    assert alike.heterogeneity_p == pytest.approx(1.0)
    assert stratified([((1, 6), (5, 6))]).heterogeneity_p is None


def test_with_small_counts_heterogeneity_is_zelens_exact_test() -> None:
    strata = [((1, 6), (5, 6)), ((4, 6), (3, 6))]
    # Zelen by hand: tables with every margin and the total a1 + a2 = 5 fixed, weight w1(a1) w2(a2)
    def weight(a: int, n1: int, n2: int, m: int) -> int:
        return math.comb(n1, a) * math.comb(n2, m - a)

    law = {a1: weight(a1, 6, 6, 6) * weight(5 - a1, 6, 6, 7) for a1 in range(0, 6)}
    expected = sum(w for w in law.values() if w <= law[1]) / sum(law.values())
    result = stratified(strata)
    assert result.heterogeneity_method == "Zelen's exact test"
    assert result.heterogeneity_p == pytest.approx(expected, rel=1e-12)


def test_a_pooled_odds_ratio_of_one_does_not_turn_breslow_day_into_nan() -> None:
    result = stratified([((30, 300), (30, 300)), ((40, 300), (40, 300))])
    assert result.heterogeneity_p == pytest.approx(1.0) and result.heterogeneity_method == "Zelen's exact test"


def test_hosts_disagree_about_a_cells_rate() -> None:
    assert hosts_disagree([(6, 6), (0, 6)]) == boschloo((6, 6), (0, 6))
    assert hosts_disagree([(3, 6)]) == 1.0 and hosts_disagree([(3, 6), (0, 0)]) == 1.0
    # three hosts: Freeman-Halton, by hand: every (k1, k2, k3) summing to 6, weight C(6,k1)C(6,k2)C(6,k3)
    import itertools

    weights = {ks: math.prod(math.comb(6, k) for k in ks)
               for ks in itertools.product(range(7), repeat=3) if sum(ks) == 6}
    expected = sum(w for w in weights.values() if w <= weights[(5, 0, 1)]) / sum(weights.values())
    assert hosts_disagree([(5, 6), (0, 6), (1, 6)]) == pytest.approx(expected, rel=1e-12)
    assert hosts_disagree([(2, 6), (2, 6), (2, 6)]) == pytest.approx(1.0)
    assert hosts_disagree([(0, 6), (0, 6), (0, 6)]) == 1.0
    with pytest.raises(ValueError):
        hosts_disagree([(3, 6), (2, 0)])


def test_past_the_enumeration_limit_a_seeded_monte_carlo_agrees_with_the_exact_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.stats import conditional

    rows = [(5, 6), (0, 6), (1, 6), (2, 6)]
    exact = hosts_disagree(rows)
    monkeypatch.setattr(conditional, "ENUMERATION_LIMIT", 0)
    sampled = hosts_disagree(rows)
    assert sampled == hosts_disagree(rows)  # a fixed seed: the same records give the same p
    assert sampled == pytest.approx(exact, abs=0.01) and sampled != exact


# --- SPRT, worked by hand for p0 = 30% (still reproduces), p1 = 3% (fixed), alpha 5%, beta 20% --

from reprofleet.stats.sprt import Sprt  # noqa: E402
from reprofleet.stats.sprt import fixed_n  # noqa: E402

DESIGN = Sprt(0.3, 0.03, 0.05, 0.2)
STEP_REPRODUCTION = math.log(0.03 / 0.3)  # -2.3026
STEP_CLEAN = math.log(0.97 / 0.7)  # +0.3262
LOG_A, LOG_B = math.log(0.8 / 0.05), math.log(0.2 / 0.95)  # 2.7726, -1.5581


def test_sprt_boundaries_are_walds() -> None:
    assert (DESIGN.upper, DESIGN.lower) == (pytest.approx(LOG_A), pytest.approx(LOG_B))
    assert DESIGN.llr(2, 10) == pytest.approx(2 * STEP_REPRODUCTION + 8 * STEP_CLEAN)
    assert DESIGN.decide(0, 8) is None  # 8 x 0.326 = 2.61 < 2.77
    assert DESIGN.decide(0, 9) == "fixed"  # 9 x 0.326 = 2.94
    assert DESIGN.decide(1, 1) == "reproduces"  # -2.30 <= -1.56
    assert DESIGN.decide(1, 10) is None  # -2.30 + 9 x 0.326 = 0.63


def test_sprt_average_sample_number_is_walds_formula() -> None:
    at_p0 = ((1 - 0.05) * LOG_B + 0.05 * LOG_A) / (0.3 * STEP_REPRODUCTION + 0.7 * STEP_CLEAN)
    at_p1 = (0.2 * LOG_B + 0.8 * LOG_A) / (0.03 * STEP_REPRODUCTION + 0.97 * STEP_CLEAN)
    assert (at_p0, at_p1) == (pytest.approx(2.9012, abs=1e-4), pytest.approx(7.7074, abs=1e-4))
    assert DESIGN.expected_attempts(0.3) == pytest.approx(at_p0, rel=1e-9)
    assert DESIGN.expected_attempts(0.03) == pytest.approx(at_p1, rel=1e-9)
    assert DESIGN.accepts_reproduces(0.3) == pytest.approx(0.95) and DESIGN.accepts_reproduces(0.03) == pytest.approx(0.2)


def test_sprt_average_sample_number_is_continuous_where_the_drift_is_zero() -> None:
    flat = STEP_CLEAN / (STEP_CLEAN - STEP_REPRODUCTION)  # p with p * down + (1 - p) * up = 0
    at_flat = -LOG_A * LOG_B / (flat * STEP_REPRODUCTION ** 2 + (1 - flat) * STEP_CLEAN ** 2)
    assert DESIGN.expected_attempts(flat) == pytest.approx(at_flat, rel=1e-9)
    for offset in (1e-6, -1e-6, 1e-3, -1e-3):
        assert DESIGN.expected_attempts(flat + offset) == pytest.approx(at_flat, rel=1e-2)


def test_sprt_exact_expected_attempts_walks_the_counts() -> None:
    # capped at 2: a reproduction at attempt 1 ends it ("reproduces"), a clean one goes on to the cap
    assert DESIGN.exact_expected_attempts(0.3, cap=2) == pytest.approx(0.3 * 1 + 0.7 * 2)
    # at least Wald's figure, which ignores the overshoot past the boundary
    assert DESIGN.exact_expected_attempts(0.3) > DESIGN.expected_attempts(0.3)


def test_fixed_n_against_a_hand_check() -> None:
    def cdf(c: int, n: int, p: float) -> float:
        return sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(c + 1))

    # n = 14: cut-off 1 (P(X <= 1 | 30%) = 0.047 <= 5%), power P(X <= 1 | 3%) = 0.936 >= 80%
    assert cdf(1, 14, 0.3) <= 0.05 < cdf(2, 14, 0.3) and cdf(1, 14, 0.03) >= 0.8
    # n = 13: cut-off 0 (P(X <= 1 | 30%) = 0.064), power 0.97^13 = 0.673 < 80%
    assert cdf(0, 13, 0.3) <= 0.05 < cdf(1, 13, 0.3) and cdf(0, 13, 0.03) < 0.8
    assert fixed_n(0.3, 0.03, 0.05, 0.2) == DESIGN.fixed_n() == 14 and DESIGN.cap() == 42


def test_an_sprt_needs_a_fixed_rate_below_the_reproducing_one() -> None:
    for bad in ((0.03, 0.3, 0.05, 0.2), (0.3, 0.0, 0.05, 0.2), (0.3, 0.03, 0.6, 0.5)):
        with pytest.raises(ValueError):
            Sprt(*bad)
