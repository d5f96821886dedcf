"""What might be a reproduction is counted as one wherever "fixed" is claimed (issue 33, item 2):
errors and hangs in the phase at risk, and attempts lost with the host inside it."""

from __future__ import annotations

from reprofleet.model import Role
from reprofleet.verdicts import VerdictKind, judge

from tests.support.verdict_records import SEED, many, pool_of, verdict

LOST = "the controller lost the host during the attempt"


def test_an_attempt_lost_with_the_host_in_capture_is_at_risk_and_one_lost_before_it_is_excluded() -> None:
    assert SEED.role("infra", "cuda_graph_capture", infra_reason=LOST) is Role.FAILED_AT_RISK
    assert SEED.role("infra", "model_load", infra_reason=LOST) is Role.EXCLUDED
    assert SEED.role("infra", "cuda_graph_capture", infra_reason="interrupted: the campaign was stopped") is Role.NOT_RUN


def test_thirty_clean_and_seven_lost_in_capture_against_18_of_37_is_not_fixed() -> None:
    """The issue's example: best case 0/30 against 18/37 is fixed; 7/37 is not."""
    records = many(18, "default", "ws01", "wedge") + many(19, "default", "ws01", "clean")
    records += many(30, "x", "ws01", "clean")
    records += many(7, "x", "ws01", "infra", phase="cuda_graph_capture", reason=LOST)
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is not VerdictKind.FIXED
    assert x.at_risk == 7
    assert "7 attempts lost with the host in capture" in x.text
    assert x.worst_case is not None and x.worst_case.startswith(
        "worst case, had the 7 attempts lost with the host in capture been reproductions")
    assert "so not fixed" in x.worst_case


def test_a_clean_cell_with_no_attempt_at_risk_is_still_fixed() -> None:
    records = many(18, "default", "ws01", "wedge") + many(19, "default", "ws01", "clean") + many(37, "x", "ws01", "clean")
    assert verdict(judge(pool_of(records)), "x").kind is VerdictKind.FIXED
