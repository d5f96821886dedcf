"""When a cell stops early on a host, and the words and claim it stops with."""

from __future__ import annotations

import pytest

from reprofleet.model import StopKind, StopRule
from reprofleet.stats.comparison import concludes_fixed, weigh
from reprofleet.stats.stop_rules import Conclusion, StopDecision, decide, max_attempts

FIXED = StopRule()
FIRST = StopRule(StopKind.FIRST_REPRODUCTION)
SPRT = StopRule(StopKind.SPRT, p0=0.3, p1=0.03)  # fixed-n design 14 attempts, cap 42
PLANNED = 6


@pytest.mark.parametrize("rule", [FIXED, FIRST, SPRT])
def test_nothing_stops_before_a_single_attempt_was_judged(rule: StopRule) -> None:
    assert decide(rule, (0, 0), (6, 6), PLANNED) is None
    assert decide(rule, (0, 0), (0, 0), PLANNED) is None
    assert decide(rule, (0, 0), (6, 6), 0) is None  # not even when nothing was planned: a cap of 0 is no claim


def test_fixed_n_never_stops_early_and_says_when_the_plan_is_done() -> None:
    for judged in range(1, PLANNED):
        assert decide(FIXED, (judged, judged), (0, judged), PLANNED) is None
    assert decide(FIXED, (6, 6), (0, 6), PLANNED) == StopDecision(StopKind.FIXED_N, "all 6 planned attempts judged",
                                                                  None)


def test_first_reproduction_stops_at_the_first_reproduction() -> None:
    assert decide(FIRST, (1, 3), (0, 3), PLANNED) == StopDecision(
        StopKind.FIRST_REPRODUCTION, "first reproduction at attempt 3", "reproduces")


def _first_fixed(rule: StopRule, reference: tuple[int, int], conclusion: Conclusion = Conclusion()) -> int:
    return next(n for n in range(1, 500) if (d := decide(rule, (0, n), reference, 1000, conclusion)) and d.verdict)


def test_clean_attempts_stop_a_cell_as_fixed_only_where_the_judges_anytime_rule_concludes() -> None:
    # reference 5 of 6: the old one-sample rule stopped at 6 clean attempts, where the judge said "clean so far"
    assert decide(FIRST, (0, 6), (5, 6), PLANNED) is None
    n = _first_fixed(FIRST, (5, 6))
    decision = decide(FIRST, (0, n), (5, 6), 1000)
    assert decision is not None and decision.verdict == "fixed" and "anytime-valid" in decision.why
    alpha = 0.05
    evidence = weigh([((0, n), (5, 6))], anytime_valid=True, fixed_ratio=Conclusion().fixed_ratio)
    before = weigh([((0, n - 1), (5, 6))], anytime_valid=True, fixed_ratio=Conclusion().fixed_ratio)
    assert concludes_fixed(evidence, alpha) and not concludes_fixed(before, alpha)


def test_a_stop_waits_for_the_strictest_holm_rank_of_the_playbooks_cells() -> None:
    assert _first_fixed(FIRST, (10, 10), Conclusion(family=4)) > _first_fixed(FIRST, (10, 10), Conclusion(family=1))
    assert _first_fixed(FIRST, (10, 10), Conclusion(fixed_ratio=0.1)) > _first_fixed(FIRST, (10, 10))


def test_a_reference_that_never_reproduced_rules_nothing_out() -> None:
    assert decide(FIRST, (0, 17), (0, 6), PLANNED) is None
    assert decide(FIRST, (0, 17), (0, 0), PLANNED) is None


def test_first_reproduction_gives_up_at_its_cap_without_a_claim() -> None:
    assert max_attempts(FIRST, PLANNED) == 18
    assert decide(FIRST, (0, 18), (0, 6), PLANNED) == StopDecision(
        StopKind.FIRST_REPRODUCTION, "first reproduction cap of 18 attempts reached", None)


def test_a_stricter_level_needs_more_clean_attempts() -> None:
    strict = StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.99)
    assert _first_fixed(strict, (10, 10)) > _first_fixed(FIRST, (10, 10))


def test_sprt_stops_as_fixed_only_when_the_reference_measured_on_the_host_agrees() -> None:
    # the LLR crosses its upper boundary at 9 clean attempts (2.94 >= 2.77), but against 3/9 nothing is shown
    assert decide(SPRT, (0, 8), (3, 8), PLANNED) is None
    assert decide(SPRT, (0, 9), (3, 9), PLANNED) is None
    n = _first_fixed(SPRT, (20, 20))
    decision = decide(SPRT, (0, n), (20, 20), PLANNED)
    assert decision is not None and decision.verdict == "fixed" and "upper SPRT boundary" in decision.why
    assert decide(SPRT, (1, 2), (1, 2), PLANNED) == StopDecision(
        StopKind.SPRT, "lower SPRT boundary (LLR -1.98 <= -1.56) after 1 reproduction", "reproduces")
    assert decide(SPRT, (1, 10), (3, 10), PLANNED) is None  # -2.30 + 9 x 0.33 = 0.63: keep going


def test_a_cell_equal_to_a_reference_that_runs_far_below_the_playbooks_p0_never_stops_as_fixed() -> None:
    # p0 = 0.3 is the playbook's guess; the reference really runs at 10% on this host
    for n in range(9, 43):
        decision = decide(SPRT, (0, n), (3, 30), PLANNED)
        assert decision is None or decision.verdict != "fixed"


def test_sprt_stops_without_a_claim_at_its_cap() -> None:
    # 5 reproductions in 42: LLR 5 x -2.30 + 37 x 0.33 = 0.56, between the boundaries
    assert decide(SPRT, (5, 41), (0, 0), PLANNED) is None
    assert decide(SPRT, (5, 42), (0, 0), PLANNED) == StopDecision(StopKind.SPRT, "SPRT cap of 42 attempts reached",
                                                                  None)


def test_without_reference_counts_an_sprt_never_claims_fixed() -> None:
    assert decide(SPRT, (0, 9), (0, 0), PLANNED) is None


def test_an_sprt_rule_without_its_rates_is_refused() -> None:
    with pytest.raises(ValueError):
        decide(StopRule(StopKind.SPRT), (0, 9), (3, 9), PLANNED)
