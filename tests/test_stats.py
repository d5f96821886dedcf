"""Rates and intervals that a report can be trusted with."""

from __future__ import annotations

import math

import pytest

from reprofleet.model import Outcome
from reprofleet.stats import ALL_HOSTS, attempts_to_see, clean_run_bound, clopper_pearson, compare, summarize


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


def test_attempts_needed_to_see_a_reproduction() -> None:
    assert attempts_to_see(0.5) == 5  # 1 - 0.5^5 = 0.969 >= 0.95, 0.5^4 leaves 0.0625
    assert attempts_to_see(1.0) == 1
    assert math.isinf(attempts_to_see(0.0))


def test_six_clean_runs_bound_the_rate_below_40_percent() -> None:
    assert clean_run_bound(6) == pytest.approx(0.393, abs=1e-3)


def test_fisher_separates_a_wedging_cell_from_a_clean_one() -> None:
    assert compare((6, 6), (0, 6)) < 0.01
    assert compare((1, 6), (0, 6)) == pytest.approx(1.0)


def test_infra_attempts_are_not_judged_and_not_clean() -> None:
    records = [
        {"cell": "default", "host": "ws01", "outcome": "wedge"},
        {"cell": "default", "host": "ws01", "outcome": "clean"},
        {"cell": "default", "host": "ws01", "outcome": "infra"},
        {"cell": "default", "host": "ws02", "outcome": "hang"},
    ]
    rows = summarize(records, (Outcome.WEDGE,))
    ws01 = next(r for r in rows if r.host == "ws01")
    assert (ws01.judged, ws01.reproductions, ws01.counts["infra"]) == (2, 1, 1)
    pooled = next(r for r in rows if r.host == ALL_HOSTS)
    assert (pooled.judged, pooled.reproductions) == (3, 1)


def test_hangs_count_when_the_playbook_says_so() -> None:
    records = [{"cell": "c", "host": "h", "outcome": "hang"}, {"cell": "c", "host": "h", "outcome": "clean"}]
    assert summarize(records, (Outcome.WEDGE, Outcome.HANG))[0].reproductions == 1
    assert summarize(records, (Outcome.WEDGE,))[0].reproductions == 0
