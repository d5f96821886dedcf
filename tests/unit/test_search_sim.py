"""campaign/search_sim.py: the simulated search and bisection drive the real models, judge
answers against the truth they were given, and run the naive rules beside them."""

from __future__ import annotations

import math
import random

import pytest

from reprofleet.campaign import search_sim
from reprofleet.stats.search_contract import BisectSpec, SearchSpec


def _curve(onset: int, levels: int = 6, slope: float = 0.5, floor: float = 0.0) -> tuple[float, ...]:
    return tuple(floor + (1 - floor) * (0.0 if c <= onset else 1 - math.exp(-slope * (c - onset)))
                 for c in range(levels))


def test_a_search_finds_the_true_onset_for_a_fraction_of_the_full_grid() -> None:
    spec = SearchSpec(levels=6)
    plan = search_sim.plan_search(spec, {"a": _curve(2), "b": _curve(2)}, runs=2, seed=1)
    assert plan.ours.share_meets == 1.0 and plan.ours.share_within_one == 1.0
    assert all(reported == best == 2 for run in plan.runs for _, reported, best in run.boundaries)
    assert plan.ours.mean_attempts < 0.5 * plan.grid.mean_attempts
    assert plan.fixed_n == 59 and plan.grid.share_meets == 1.0
    assert plan.ours.attempts == tuple(run.attempts for run in plan.runs)
    again = search_sim.plan_search(spec, {"a": _curve(2), "b": _curve(2)}, runs=2, seed=1)
    assert again == plan  # seeded: the same plan twice


def test_an_answer_above_the_truth_is_scored_as_missing_the_target() -> None:
    a = search_sim.figures("x", [10, 20], [1, 2], [True, False], [True, False])
    assert a.share_meets == 0.5 and a.p90_attempts == pytest.approx(19.0)
    both = search_sim.pooled([a, search_sim.figures("x", [30], [3], [True], [True])])
    assert both.mean_attempts == 20.0 and both.share_meets == pytest.approx(2 / 3)
    assert search_sim._true_best(SearchSpec(levels=4), [(0, 0, 0.2, 0.4), (0, 0.1, 0.2, 0.4)]) == 0
    assert search_sim._true_best(SearchSpec(levels=2), [(0.3, 0.4)]) == -1


def test_a_budget_less_search_in_the_indifference_zone_still_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_sim, "PLAN_CAP", 40)
    plan = search_sim.plan_search(SearchSpec(levels=3), {"a": (0.0, 0.06, 0.9)}, runs=1, seed=2)
    assert plan.runs[0].attempts == 40 and plan.runs[0].budget_spent and plan.runs[0].done


def test_the_full_grid_decides_each_level_by_its_exact_bound() -> None:
    met, n, wedges = search_sim._target_check(0.05, 0.05, lambda _: 0.0, random.Random(1))
    assert (met, n, wedges) == (True, 59, 0)  # (1 - 0.05)^59 <= 0.05 < 0.95^58
    bad, n_bad, w_bad = search_sim._target_check(0.05, 0.05, lambda _: 1.0, random.Random(1))
    assert not bad and w_bad == n_bad and n_bad <= 3


def test_a_bisection_plan_finds_the_change_and_matches_the_fixed_rule_to_our_share() -> None:
    truth = (0.5, 0.5, 0.0, 0.0)  # the acceptance: four versions, the change between the 2nd and 3rd
    plan = search_sim.plan_bisect(BisectSpec(versions=4), truth, hosts=2, runs=3, seed=1)
    assert plan.true_first_good == 2 and plan.ours.share_meets == 1.0
    assert plan.fixed_reaches and plan.fixed.share_meets >= plan.ours.share_meets
    assert plan.mean_good_end_attempts >= 59  # the known good's target check is counted
    assert plan.fixed.mean_attempts >= 59  # and the fixed rule's known good gets the same check


def test_the_fixed_run_rule_calls_a_point_bad_at_any_reproduction() -> None:
    spec = BisectSpec(versions=5)
    found, _, wedges, _ = search_sim._fixed_bisect(spec, (1.0, 1.0, 0.0, 0.0, 0.0), 3, random.Random(1))
    assert found == 2 and wedges == 2
    lost, _, _, _ = search_sim._fixed_bisect(spec, (1.0, 0.0, 0.0, 0.0, 0.0), 3, random.Random(1))
    assert lost == 1
    failed_good, spent, _, _ = search_sim._fixed_bisect(spec, (1.0, 1.0, 0.0, 0.0, 0.5), 3, random.Random(1))
    assert failed_good is None and spent >= 2  # its known good fails the same target check as ours
    regression = BisectSpec(versions=3, bad_first=False)
    assert search_sim._true_first_good(regression, (0.0, 0.0, 0.5)) == 1


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError):
        search_sim.plan_search(SearchSpec(levels=3), {"a": (0.0, 0.1)}, runs=1, seed=1)
    with pytest.raises(ValueError):
        search_sim.plan_bisect(BisectSpec(versions=3), (0.5, 0.0), hosts=1, runs=1, seed=1)


def test_a_host_answered_none_while_others_run_waits_and_is_asked_again() -> None:
    asked: list[tuple[str, int]] = []

    def choose(probes, host, running):  # type: ignore[no-untyped-def]
        asked.append((host, len(probes)))
        if len(probes) >= 3:
            return None
        if host == "b" and not probes:
            return None  # nothing worth an attempt until a's first outcome: b waits, as the runner's ladder does
        return 0

    probes, _ = search_sim._drive(["a", "b"], 2, choose, lambda h, lvl: 0.0, lambda wedge: 1.0, random.Random(1))
    assert ("b", 0) in asked and any(p.host == "b" for p in probes)  # before: b retired at its first None


def test_on_several_hosts_the_fixed_rule_pays_for_the_whole_round_of_its_first_reproduction() -> None:
    spec = BisectSpec(versions=3)
    truth = (1.0, 1.0, 0.0)  # the middle version reproduces on its first run
    _, one, _, rounds_one = search_sim._fixed_bisect(spec, truth, 10, random.Random(1), hosts=1)
    _, four, _, rounds_four = search_sim._fixed_bisect(spec, truth, 10, random.Random(1), hosts=4)
    # known good: 59 clean runs (60 in 15 rounds of 4); known bad and middle: 1 run alone, a round of 4 on 4 hosts
    assert (one, rounds_one) == (59 + 1 + 1, 61)
    assert (four, rounds_four) == (60 + 4 + 4, 15 + 1 + 1)
