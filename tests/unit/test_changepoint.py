"""The bisection's change-point posterior and version choice (stats/changepoint.py):
endpoints first, both error kinds modelled, skips, the stop at the stated posterior."""

from __future__ import annotations

import random

import numpy as np
import pytest

from reprofleet.stats import changepoint
from reprofleet.stats.search_contract import BisectSpec, Probe, ProbeOutcome

C, R, U = ProbeOutcome.CLEAN, ProbeOutcome.REPRODUCED, ProbeOutcome.UNUSABLE
SPEC = BisectSpec(versions=4)
CHECKED = [(0, 1, R), (3, 59, C)]  # both endpoints pass: the bad reproduced, the good met 5%/5%


def _runs(*blocks: tuple[int, int, ProbeOutcome], host: str = "h1") -> list[Probe]:
    out: list[Probe] = []
    for version, n, outcome in blocks:
        out += [Probe(version, host, outcome, outcome is R)] * n
    return out


def test_the_endpoints_are_rechecked_before_anything_else() -> None:
    assert changepoint.next_bisect_version(SPEC, [], "h1", {}) == 0
    assert changepoint.next_bisect_version(SPEC, [], "h2", {"h1": 0}) == 3
    assert changepoint.next_bisect_version(SPEC, [], "h3", {"h1": 0, "h2": 3}) in (1, 2)
    unchecked = changepoint.bisect_result(SPEC, _runs((1, 1, R), (2, 30, C)))
    assert unchecked.endpoints_ok is None and not unchecked.done and "re-checked" in unchecked.why
    regression = BisectSpec(versions=4, bad_first=False)  # the newest is the known bad
    assert changepoint.next_bisect_version(regression, [], "h1", {}) == 3


def test_a_known_bad_that_never_reproduces_stops_the_bisection() -> None:
    n = changepoint.bad_check_attempts(0.95, 0.2)
    assert n == 14 and 0.8 ** n <= 0.05 < 0.8 ** (n - 1)
    short = changepoint.bisect_result(SPEC, _runs((0, n - 1, C), (3, 59, C)))
    assert short.endpoints_ok is True or short.endpoints_ok is None
    failed = changepoint.bisect_result(SPEC, _runs((0, n, C), (3, 59, C)))
    assert failed.endpoints_ok is False and failed.done and "never reproduced in 14" in failed.why
    assert failed.first_good is None and failed.last_bad is None
    assert changepoint.next_bisect_version(SPEC, _runs((0, n, C)), "h1", {}) is None


def test_a_known_good_that_fails_its_target_stops_the_bisection() -> None:
    failed = changepoint.bisect_result(SPEC, _runs((0, 1, R), (3, 10, C), (3, 5, R)))
    assert failed.endpoints_ok is False and failed.done and "known good (version 3) fails the target" in failed.why
    first_run_stray = changepoint.bisect_result(SPEC, _runs((0, 1, R), (3, 1, R)))
    assert first_run_stray.endpoints_ok is None and not first_run_stray.done  # 1 of 1: a false wedge is likely
    assert changepoint.good_end_check(1, 1, 0.05, 0.05) is changepoint.EndCheck.PENDING
    assert changepoint.good_end_check(2, 3, 0.05, 0.05) is changepoint.EndCheck.FAILED
    one_stray = changepoint.bisect_result(SPEC, _runs((0, 1, R), (3, 59, C), (3, 1, R)))
    assert one_stray.endpoints_ok is None  # one wedge in 60: not yet met (needs 93), not failed
    assert changepoint.good_end_runs_left(1, 60, 0.05, 0.05) == 33
    assert changepoint.good_end_runs_left(0, 0, 0.05, 0.05) == 59 and changepoint.good_end_runs_left(0, 59, 0.05, 0.05) == 0


def test_the_stop_is_at_the_stated_posterior() -> None:
    spec = BisectSpec(versions=4, posterior=0.99, min_bad_rate=0.45)  # the first good needs 8 clean runs
    probes = _runs(*CHECKED, (1, 1, R), (2, 9, C))
    result = changepoint.bisect_result(spec, probes)
    assert 0.99 <= result.posterior < 0.992
    assert result.done and result.endpoints_ok and (result.first_good, result.last_bad) == (2, 1)
    assert result.why == f"first good: 2 (posterior {result.posterior:.3f}), last bad: 1"
    stricter = BisectSpec(versions=4, posterior=0.995, min_bad_rate=0.45)  # 9 clean runs: the floor is met
    assert changepoint.bad_check_attempts(0.995, 0.45) == 9
    assert not changepoint.bisect_result(stricter, probes).done
    assert changepoint.next_bisect_version(stricter, probes, "h1", {}) is not None
    assert changepoint.next_bisect_version(spec, probes, "h1", {}) is None


def test_the_first_good_needs_the_clean_runs_that_a_version_at_the_rate_floor_rarely_passes() -> None:
    # one reproduction at version 1 and 5 clean runs at 2: the posterior says 0.956, but a bad
    # version at 20% passes 5 clean runs a third of the time; 14 (0.8^14 < 5%) are needed
    five = _runs(*CHECKED, (1, 1, R), (2, 5, C))
    result = changepoint.bisect_result(SPEC, five)
    assert result.posterior >= 0.95 and (result.first_good, result.last_bad) == (2, 1)
    assert not result.done and "the first good needs 9 more clean runs" in result.why
    spent = changepoint.bisect_result(BisectSpec(versions=4, budget_attempts=len(five)), five)
    assert spent.done and "budget of 66 attempts" in spent.why and "the first good needs 9 more clean runs" in spent.why
    assert changepoint.next_bisect_version(SPEC, five, "h1", {}) == 2
    assert changepoint.next_bisect_version(SPEC, five, "h2", {f"r{i}": 2 for i in range(8)}) == 2
    assert changepoint.next_bisect_version(SPEC, five, "h2", {f"r{i}": 2 for i in range(9)}) is None
    fourteen = changepoint.bisect_result(SPEC, _runs(*CHECKED, (1, 1, R), (2, 14, C)))
    assert fourteen.done and fourteen.first_good == 2
    with pytest.raises(ValueError, match="min_bad_rate"):
        changepoint.bisect_result(BisectSpec(versions=3, min_bad_rate=0.0), [])


def test_a_bad_versions_rate_is_a_beta_cut_at_the_rate_floor() -> None:
    from scipy.integrate import quad
    from scipy.stats import beta

    wedges, cleans = np.array([[0, 1, 2]]), np.array([[5, 0, 7]])
    terms = changepoint._bad_terms(0.2, wedges, cleans)[0]
    for h, (a, b) in enumerate(changepoint._HYPER):
        for v in range(3):
            w, c = int(wedges[0, v]), int(cleans[0, v])
            cut, _ = quad(lambda p: p ** w * (1 - p) ** c * beta.pdf(p, a, b), 0.2, 1.0, epsabs=0, epsrel=1e-10)
            assert terms[v, h] == pytest.approx(np.log(cut / beta.sf(0.2, a, b)), rel=1e-6)
    # the cut is why 14 clean runs suffice: an uncut Beta keeps "a bad version at 3%" in play
    fourteen = _runs(*CHECKED, (1, 1, R), (2, 14, C))
    uncut = BisectSpec(versions=4, min_bad_rate=1e-9)
    assert changepoint.bisect_result(SPEC, fourteen).posterior > changepoint.bisect_result(uncut, fourteen).posterior


def test_a_miss_is_expected_of_a_bad_version_and_a_false_wedge_of_a_good_one() -> None:
    # version 1 reproduced once; clean runs there are misses, not proof of a fix
    missed = changepoint.bisect_result(SPEC, _runs(*CHECKED, (1, 1, R), (1, 4, C), (2, 8, C)))
    assert (missed.first_good, missed.last_bad) == (2, 1) and missed.versions[1].p_good < 0.5
    # one wedge at version 2 among 40 clean runs: a false wedge, the answer stays
    stray = changepoint.bisect_result(SPEC, _runs(*CHECKED, (1, 2, R), (2, 40, C), (2, 1, R)))
    assert (stray.first_good, stray.last_bad) == (2, 1) and stray.posterior > 0.95
    assert stray.versions[2].p_good > 0.95 and stray.versions[1].p_good < 0.05


def test_a_version_that_never_starts_is_skipped_and_the_answer_spans_it() -> None:
    spec = BisectSpec(versions=5)
    probes = _runs((0, 1, R), (4, 59, C), (1, 2, R), (2, 3, U), (3, 14, C))
    result = changepoint.bisect_result(spec, probes)
    assert result.versions[2].skipped and result.versions[2].attempts == 0 and result.versions[2].unusable == 3
    assert (result.first_good, result.last_bad) == (3, 1) and result.done
    assert all(changepoint.next_bisect_version(spec, probes[:-14], f"h{i}", {}) != 2 for i in range(4))
    two = changepoint.bisect_result(spec, _runs((2, 2, U)))
    assert not two.versions[2].skipped  # two unusable are not yet a skip
    mixed = changepoint.bisect_result(spec, _runs((2, 5, U), (2, 1, C)))
    assert not mixed.versions[2].skipped and mixed.versions[2].attempts == 1


def test_while_the_known_good_is_owed_its_runs_one_host_bisects_and_the_rest_run_the_known_good() -> None:
    spec = BisectSpec(versions=16)
    probes = _runs((0, 2, R), (15, 20, C))
    first = changepoint.next_bisect_version(spec, probes, "h1", {"h0": 15})
    assert first is not None and 0 < first < 15
    assert changepoint.next_bisect_version(spec, probes, "h2", {"h0": 15, "h1": first}) == 15


def test_parallel_hosts_get_different_versions() -> None:
    spec = BisectSpec(versions=16, speculate=0.0)  # every host runs: speculative midpoints
    probes = _runs((0, 2, R), (15, 59, C))
    chosen: dict[str, int] = {}
    for host in ("h1", "h2", "h3"):
        version = changepoint.next_bisect_version(spec, probes, host, chosen)
        assert version is not None
        chosen[host] = version
    assert len(set(chosen.values())) == 3 and all(0 < v < 15 for v in chosen.values())


def test_the_choice_is_the_same_for_the_same_records_whatever_the_global_random_state() -> None:
    spec = BisectSpec(versions=9, seed=3)
    probes = _runs((0, 1, R), (8, 59, C), (4, 2, C))
    random.seed(1)
    np.random.seed(1)
    first = [changepoint.next_bisect_version(spec, probes, h, {}) for h in ("a", "b")]
    random.seed(2)
    np.random.seed(2)
    assert [changepoint.next_bisect_version(spec, probes, h, {}) for h in ("a", "b")] == first


def test_the_budget_ends_the_bisection() -> None:
    spec = BisectSpec(versions=4, budget_attempts=3)
    probes = _runs((0, 1, R), (3, 2, C))
    result = changepoint.bisect_result(spec, probes)
    assert result.done and "budget of 3 attempts" in result.why and result.attempts == 3
    assert changepoint.next_bisect_version(spec, probes, "h1", {}) is None
    cycles = BisectSpec(versions=4, budget_power_cycles=1)
    assert changepoint.next_bisect_version(cycles, _runs((0, 1, R)), "h1", {}) is None


def test_a_probe_outside_the_versions_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 0..3"):
        changepoint.bisect_result(SPEC, [Probe(4, "h1", C)])
    with pytest.raises(ValueError, match="two versions"):
        changepoint.bisect_result(BisectSpec(versions=1), [])


def test_a_speculative_probe_is_weighed_against_the_attempts_already_running() -> None:
    spec = BisectSpec(versions=16)
    tally = changepoint._tally(spec, _runs((0, 2, R), (15, 59, C)))
    candidates = list(range(1, 15))
    fresh, chance = changepoint._gains(tally, np.zeros(16, dtype=int), candidates, 0.2)
    running = np.zeros(16, dtype=int)
    running[7] = 1
    after, chance_after = changepoint._gains(tally, running, candidates, 0.2)
    assert after[7] < fresh[7]  # a second attempt at the same midpoint tells less than the first
    assert after[8] < fresh[8] and after[6] < fresh[6]  # and so does one at its neighbour
    assert sum(after.values()) < sum(fresh.values())
    assert chance[1] > chance[14] and chance_after == pytest.approx(chance)  # running outcomes, averaged out


def test_a_host_waits_rather_than_spend_an_attempt_worth_less_than_its_share() -> None:
    probes = _runs((0, 2, R), (15, 59, C))  # both endpoints passed: only the interior is left
    never = BisectSpec(versions=16, speculate=1.0)  # no speculative probe is worth a whole fresh attempt
    assert changepoint.next_bisect_version(never, probes, "h2", {"h1": 7}) is None
    assert changepoint.next_bisect_version(never, probes, "h1", {}) is not None  # nobody running: never waits
    always = BisectSpec(versions=16, speculate=0.0)
    assert changepoint.next_bisect_version(always, probes, "h2", {"h1": 7}) not in (None, 7)


def test_a_likely_reproduction_costs_a_power_cycle_so_the_likelier_clean_version_goes_first() -> None:
    probes = _runs((0, 2, R), (15, 59, C))
    flat = BisectSpec(versions=16, clean_cost_s=1.0, wedge_cost_s=1.0)
    costly = BisectSpec(versions=16)  # 900 s a wedge, 120 s a clean run
    assert changepoint.next_bisect_version(costly, probes, "h1", {}) > changepoint.next_bisect_version(flat, probes, "h1", {})
    worth = changepoint._worth(costly, {3: 1.0, 12: 1.0}, {3: 0.4, 12: 0.1})
    assert worth[12] > worth[3]
    with pytest.raises(ValueError, match="speculate"):
        changepoint.bisect_result(BisectSpec(versions=3, speculate=1.5), [])


def test_the_known_good_gets_no_more_hosts_than_the_clean_runs_it_still_needs() -> None:
    spec = BisectSpec(versions=4)
    probes = _runs((0, 1, R), (1, 3, R), (2, 20, C), (3, 57, C))  # the change point is sure; 2 runs owed
    running = {"h1": 3, "h2": 3}
    assert changepoint.good_end_runs_left(0, 57, 0.05, 0.05) == 2
    assert changepoint.next_bisect_version(spec, probes, "h3", running) is None
    assert changepoint.next_bisect_version(spec, probes, "h3", {"h1": 3}) == 3
