"""The boundary search's model and probe choice (stats/boundary.py): monotone evidence both
ways, the false-wedge floor, the epsilon_high cap, strata, budget, determinism."""

from __future__ import annotations

import random

import numpy as np
import pytest

from reprofleet.stats import boundary
from reprofleet.stats.search_contract import Probe, ProbeOutcome, SearchSpec

C, R, U = ProbeOutcome.CLEAN, ProbeOutcome.REPRODUCED, ProbeOutcome.UNUSABLE
SPEC = SearchSpec(levels=8)


def _runs(*blocks: tuple[int, int, ProbeOutcome], host: str = "h1") -> list[Probe]:
    out: list[Probe] = []
    for level, n, outcome in blocks:
        out += [Probe(level, host, outcome, outcome is R)] * n
    return out


def _p_bad(spec: SearchSpec, probes: list[Probe], group: str = "all") -> list[float]:
    result = next(r for r in boundary.search_results(spec, probes) if r.group == group)
    return [level.p_bad for level in result.levels]


def test_clean_runs_at_a_riskier_level_are_evidence_for_every_safer_level() -> None:
    before, after = _p_bad(SPEC, []), _p_bad(SPEC, _runs((5, 60, C)))
    assert all(after[c] < 0.05 < before[c] for c in range(6))
    assert after[6] > 0.2  # and not for the level above: nothing extrapolates upward


def test_a_wedge_at_a_safer_level_condemns_every_riskier_one() -> None:
    before, after = _p_bad(SPEC, _runs((0, 20, C))), _p_bad(SPEC, _runs((0, 20, C), (2, 3, R)))
    assert all(after[c] > 0.99 and after[c] > before[c] for c in range(2, 8))


def test_the_prior_claims_no_safety_it_never_saw() -> None:
    prior = _p_bad(SearchSpec(levels=12), [])
    assert min(prior) >= 0.40 and prior == sorted(prior)
    many = _p_bad(SPEC, _runs((3, 300, C)))  # however clean level 3 is, level 4 needs its own runs
    assert many[3] < 0.01 and many[4] > 0.2


def test_one_stray_wedge_among_clean_runs_is_absorbed_by_the_false_wedge_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    stray = _runs((3, 60, C), (3, 1, R))
    with_floor = boundary.search_results(SPEC, stray)[0]
    assert with_floor.boundary == 3
    boundary._grid.cache_clear()
    monkeypatch.setattr(boundary, "FLOOR", (0.0,))  # without the floor the same wedge costs level 3
    try:
        assert boundary.search_results(SPEC, stray)[0].boundary == 2
    finally:
        boundary._grid.cache_clear()


def test_no_level_likely_above_epsilon_high_is_ever_probed() -> None:
    rng = random.Random(4)
    grid = boundary._grid(SPEC.epsilon, SPEC.epsilon_high)
    seen = set()
    for trial in range(12):
        probes = _runs((rng.randrange(3), rng.randrange(1, 30), C), (rng.randrange(2, 8), rng.randrange(0, 3), R))
        wedges, cleans = boundary._counts(SPEC, probes, "all")
        post = boundary._posterior(grid, wedges[None], cleans[None])
        high = boundary._tail(grid, post.marginal[0], SPEC.epsilon_high)
        level = boundary.next_search_level(SPEC, probes, "h1", {})
        if level is not None:
            assert high[level] < boundary.CAP_LIKELY, (trial, level, high)
            seen.add(level)
    assert boundary.next_search_level(SPEC, _runs((2, 30, C), (4, 3, R)), "h1", {}) == 3
    assert len(seen) > 1
    assert boundary.next_search_level(SPEC, [], "h1", {}) in (0, 1, 2)  # the prior caps the risky top


def test_a_level_likely_above_epsilon_high_ends_the_search_instead_of_being_probed() -> None:
    spec = SearchSpec(levels=8, epsilon_high=0.3)
    probes = _runs((2, 60, C), (3, 1, R))
    result = boundary.search_results(spec, probes)[0]
    assert result.levels[3].p_bad < 1 - spec.delta  # not shown bad: only the cap stops it
    assert result.done and result.boundary == 2 and "too risky to probe" in result.why
    assert boundary.next_search_level(spec, probes, "h1", {}) is None


def test_the_search_stops_at_a_boundary_whose_next_level_is_shown_bad() -> None:
    result = boundary.search_results(SPEC, _runs((3, 60, C), (4, 4, R)))[0]
    assert result.done and result.boundary == 3 and result.above == 4
    assert result.p_bad_at_boundary is not None and result.p_bad_at_boundary < SPEC.delta
    assert "level 3 meets" in result.why and result.power_cycles == 4 and result.attempts == 64
    assert boundary.next_search_level(SPEC, _runs((3, 60, C), (4, 4, R)), "h1", {}) is None
    open_ = boundary.search_results(SPEC, _runs((3, 60, C)))[0]
    assert not open_.done and open_.why.startswith("waiting")


def test_the_safest_level_failing_ends_with_no_boundary() -> None:
    result = boundary.search_results(SPEC, _runs((0, 5, R)))[0]
    assert result.done and result.boundary is None and result.above == 0 and "not even" in result.why


def test_parallel_hosts_are_sent_to_different_levels_when_one_is_taken() -> None:
    probes = _runs((3, 40, C))
    alone = boundary.next_search_level(SPEC, probes, "h1", {})
    assert alone == 4
    assert boundary.next_search_level(SPEC, probes, "h1", {"h2": 4}) != 4
    assert boundary.next_search_level(SPEC, probes, "h1", {"h1": 4}) == 4  # its own entry does not count


def test_a_host_group_is_its_own_stratum() -> None:
    spec = SearchSpec(levels=8, groups=(("bad1", "bad-card"), ("ok1", "good-card"), ("ok2", "good-card")))
    good = _runs((5, 40, C), host="ok1") + _runs((5, 30, C), host="ok2")
    bad = _runs((1, 60, C), (2, 4, R), host="bad1")
    alone = boundary.search_results(spec, good)
    both = boundary.search_results(spec, good + bad)
    assert [r.group for r in both] == ["bad-card", "good-card"]
    assert both[1] == alone[1] and both[1].boundary == 5 and both[1].hosts == ("ok1", "ok2")
    assert both[0].boundary == 1 and both[0].done
    assert boundary.next_search_level(spec, good + bad, "bad1", {}) is None
    stranger = boundary.search_results(spec, _runs((0, 3, C), host="other"))
    assert [r.group for r in stranger] == ["all", "bad-card", "good-card"]


def test_the_budget_ends_the_search_and_says_so() -> None:
    probes = _runs((0, 3, C), (1, 1, U))
    spent = boundary.search_results(SearchSpec(levels=8, budget_attempts=4), probes)[0]
    assert spent.done and "4 attempts" in spent.why
    assert boundary.next_search_level(SearchSpec(levels=8, budget_attempts=4), probes, "h1", {}) is None
    assert boundary.next_search_level(SearchSpec(levels=8, budget_attempts=5), probes, "h1", {"h2": 0}) is None
    assert boundary.next_search_level(SearchSpec(levels=8, budget_attempts=6), probes, "h1", {"h2": 0}) is not None
    cycles = SearchSpec(levels=8, budget_power_cycles=2)
    hit = [Probe(0, "h1", C), Probe(1, "h1", R), Probe(1, "h1", U, power_cycled=True)]
    assert boundary.search_results(cycles, hit)[0].done
    assert boundary.next_search_level(cycles, hit, "h1", {}) is None


def test_the_choice_is_the_same_for_the_same_records_whatever_the_global_random_state() -> None:
    probes = _runs((1, 10, C), (2, 2, C))
    random.seed(1)
    np.random.seed(1)
    first = [boundary.next_search_level(SPEC, probes, h, {}) for h in ("a", "b", "c")]
    random.seed(99)
    np.random.seed(99)
    assert [boundary.next_search_level(SPEC, probes, h, {}) for h in ("a", "b", "c")] == first
    assert boundary.search_results(SPEC, probes) == boundary.search_results(SPEC, list(probes))


def test_ties_are_broken_by_seed_host_and_probe_count_not_by_order() -> None:
    spec = SearchSpec(levels=3, seed=7)
    assert boundary._jitter(spec, "a", 3, 1) == boundary._jitter(spec, "a", 3, 1)
    assert len({boundary._jitter(spec, h, 3, 1) for h in ("a", "b", "c")}) == 3


def test_a_probe_outside_the_levels_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 0..7"):
        boundary.search_results(SPEC, [Probe(8, "h1", C)])
    with pytest.raises(ValueError, match="epsilon"):
        boundary.search_results(SearchSpec(levels=3, epsilon=0.6), [])
