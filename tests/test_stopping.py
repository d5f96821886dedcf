"""When a cell stops early on a host, and the words and claim it stops with."""

from __future__ import annotations

import pytest

from reprofleet.model import StopKind, StopRule
from reprofleet.stats.stop_rules import StopDecision, decide, max_attempts

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


def test_clean_attempts_that_rule_out_the_references_lower_bound_stop_a_cell_as_fixed() -> None:
    # reference 5 of 6: one-sided 95% lower bound 41.8%; 0.582^5 = 0.067, 0.582^6 = 0.039 -> 6 clean attempts
    assert decide(FIRST, (0, 5), (5, 6), PLANNED) is None
    assert decide(FIRST, (0, 6), (5, 6), PLANNED) == StopDecision(
        StopKind.FIRST_REPRODUCTION, "6 clean attempts rule out the reference's lower bound 42% at 95%", "fixed")


def test_a_reference_that_never_reproduced_rules_nothing_out() -> None:
    assert decide(FIRST, (0, 17), (0, 6), PLANNED) is None
    assert decide(FIRST, (0, 17), (0, 0), PLANNED) is None


def test_first_reproduction_gives_up_at_its_cap_without_a_claim() -> None:
    assert max_attempts(FIRST, PLANNED) == 18
    assert decide(FIRST, (0, 18), (0, 6), PLANNED) == StopDecision(
        StopKind.FIRST_REPRODUCTION, "first reproduction cap of 18 attempts reached", None)


def test_a_stricter_level_needs_more_clean_attempts() -> None:
    strict = StopRule(StopKind.FIRST_REPRODUCTION, confidence=0.99)
    # reference 5 of 6 at 99%: lower bound 29.4%; 0.706^13 = 0.0108, 0.706^14 = 0.0076 -> 14 (6 at 95%)
    assert decide(strict, (0, 13), (5, 6), PLANNED) is None
    decision = decide(strict, (0, 14), (5, 6), PLANNED)
    assert decision is not None and decision.verdict == "fixed" and "at 99%" in decision.why


def test_sprt_stops_when_the_llr_crosses_a_boundary() -> None:
    assert decide(SPRT, (0, 8), (3, 8), PLANNED) is None
    assert decide(SPRT, (0, 9), (3, 9), PLANNED) == StopDecision(StopKind.SPRT, "SPRT: fixed (LLR 2.94 >= 2.77)",
                                                                 "fixed")
    assert decide(SPRT, (1, 2), (1, 2), PLANNED) == StopDecision(
        StopKind.SPRT, "SPRT: reproduces (LLR -1.98 <= -1.56)", "reproduces")
    assert decide(SPRT, (1, 10), (3, 10), PLANNED) is None  # -2.30 + 9 x 0.33 = 0.63: keep going


def test_sprt_stops_without_a_claim_at_its_cap() -> None:
    # 5 reproductions in 42: LLR 5 x -2.30 + 37 x 0.33 = 0.56, between the boundaries
    assert decide(SPRT, (5, 41), (0, 0), PLANNED) is None
    assert decide(SPRT, (5, 42), (0, 0), PLANNED) == StopDecision(StopKind.SPRT, "SPRT cap of 42 attempts reached",
                                                                  None)


def test_the_reference_never_matters_to_an_sprt() -> None:
    assert decide(SPRT, (0, 9), (0, 0), PLANNED) == decide(SPRT, (0, 9), (9, 9), PLANNED)


def test_an_sprt_rule_without_its_rates_is_refused() -> None:
    with pytest.raises(ValueError):
        decide(StopRule(StopKind.SPRT), (0, 9), (3, 9), PLANNED)
