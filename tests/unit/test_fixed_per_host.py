""""Fixed on A, B" only when each named host's own records support it; otherwise the sentence says
on which hosts it rests (issue 33, item 7)."""

from __future__ import annotations

from reprofleet.verdicts import VerdictKind, judge

from tests.support.verdict_records import many, pool_of, verdict


def _side(host: str, ref: int, ref_n: int, cell_n: int) -> list[dict[str, object]]:
    return (many(ref, "default", host, "wedge") + many(ref_n - ref, "default", host, "clean")
            + many(cell_n, "x", host, "clean"))


def test_fixed_pooled_over_two_hosts_says_it_rests_on_the_one_whose_reference_reproduced() -> None:
    """The issue's example at a size where the pooled claim is fixed: ws02's reference 1/30 shows nothing."""
    records = _side("ws01", 30, 30, 30) + _side("ws02", 1, 30, 30)
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.FIXED, x.text
    assert "pooled over ws01, ws02: it rests on ws01; not shown on ws02 alone (ws02: 0/30 against 1/30)" in x.text


def test_fixed_on_hosts_that_each_show_it_says_so() -> None:
    records = _side("ws01", 18, 36, 36) + _side("ws02", 20, 36, 36)
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.FIXED
    assert "each of ws01, ws02 shows it on its own records" in x.text
