"""No search or bisection answer covers a host its own records contradict (issue 33, items 1 and 2).

The findings the issue built from record sets, as model inputs: a pooled clock search that
named a "highest clean level" for four hosts while one reproduced there 11 of 19 times, and
a bisection that called a version "first good" while it reproduced on the one host that
shows the bug."""

from __future__ import annotations

from reprofleet.model import Judging, Phase
from reprofleet.playbook.ladder import LadderPlan, probe_of, probes_of
from reprofleet.stats import boundary, changepoint
from reprofleet.stats.search_contract import BisectSpec, Probe, ProbeOutcome, SearchSpec

C, R = ProbeOutcome.CLEAN, ProbeOutcome.REPRODUCED
OTHERS = ("ws02", "ws03", "ws04")


def _runs(host: str, level: int, n: int, outcome: ProbeOutcome) -> list[Probe]:
    return [Probe(level, host, outcome, outcome is R)] * n


def _onset_lower_on_ws01() -> list[Probe]:
    """Three hosts clean at level 5 (120 attempts each, one stray wedge) and bad at 6; ws01 11 of 19 at 5."""
    probes: list[Probe] = []
    for host in OTHERS:
        probes += _runs(host, 5, 119, C) + _runs(host, 5, 1, R) + _runs(host, 6, 4, R) + _runs(host, 6, 4, C)
        probes += _runs(host, 3, 10, C)
    return probes + _runs("ws01", 5, 11, R) + _runs("ws01", 5, 8, C)


def test_a_host_that_reproduces_at_the_pooled_clean_level_is_left_out_of_its_answer() -> None:
    results = boundary.search_results(SearchSpec(levels=8), _onset_lower_on_ws01())
    pooled = next(r for r in results if r.group == "all")
    assert pooled.boundary == 5 and pooled.hosts == OTHERS  # the others' claim stands, for them only
    assert [(e.host, e.level, e.reproductions, e.attempts) for e in pooled.exceptions] == [("ws01", 5, 11, 19)]
    own = next(r for r in results if "ws01" in r.hosts)
    assert own.hosts == ("ws01",) and own.split_from == "all"
    assert own.boundary is None or own.boundary < 5  # its own answer, from its own records


def test_the_host_left_out_gets_its_own_next_probe_below_the_pooled_level() -> None:
    probes = _onset_lower_on_ws01()
    level = boundary.next_search_level(SearchSpec(levels=8), probes, "ws01", {})
    assert level is not None and level < 5
    assert boundary.next_search_level(SearchSpec(levels=8), probes, "ws02", {}) is None  # the others are decided


def test_hosts_that_agree_are_pooled_as_before() -> None:
    probes = [p for p in _onset_lower_on_ws01() if p.host != "ws01"] + _runs("ws01", 5, 19, C)
    (pooled,) = boundary.search_results(SearchSpec(levels=8), probes)
    assert pooled.hosts == ("ws01",) + OTHERS and pooled.exceptions == () and pooled.boundary == 5


def _bug_on_ws01_only(wedges_at_1: int) -> list[Probe]:
    """ws01 reproduced at the known bad and at version 1; the others never reproduced anywhere."""
    probes = _runs("ws01", 0, 1, R) + _runs("ws02", 5, 30, C) + _runs("ws03", 5, 29, C)
    for host in OTHERS:
        probes += _runs(host, 1, 6, C) + _runs(host, 2, 3, C) + _runs(host, 3, 3, C)
    return probes + _runs("ws01", 1, 2, C) + _runs("ws01", 1, wedges_at_1, R)


def test_a_version_that_reproduced_on_a_host_is_never_called_good_on_it() -> None:
    result = changepoint.bisect_result(BisectSpec(versions=6), _bug_on_ws01_only(1))
    assert not (result.first_good == 1 and "ws01" in result.hosts)
    assert not (result.done and result.first_good is not None and result.first_good <= 1)


def test_hosts_on_which_the_bug_never_reproduced_are_not_covered_and_are_named() -> None:
    result = changepoint.bisect_result(BisectSpec(versions=6), _bug_on_ws01_only(1))
    assert result.hosts == ("ws01",)
    assert {e.host for e in result.exceptions} == set(OTHERS)
    assert all("never reproduced" in e.why for e in result.exceptions)


def _plan() -> LadderPlan:
    cells = ("search-graphics_clocks-2600", "search-graphics_clocks-2800")
    return LadderPlan("search", "graphics_clocks", cells, ("2600 MHz", "2800 MHz"), SearchSpec(levels=2))


def _record(outcome: str, last_phase: str, reason: str = "") -> dict[str, object]:
    return {"host": "ws01", "cell": "search-graphics_clocks-2800", "outcome": outcome, "last_phase": last_phase,
            "phases": ["model_load", "torch_compile", "kv_cache", "cuda_graph_capture"][
                :["model_load", "torch_compile", "kv_cache", "cuda_graph_capture"].index(last_phase) + 1],
            "reason": reason}


JUDGING = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE)


def test_a_hang_or_error_in_the_phase_at_risk_counts_as_a_reproduction_in_the_worst_case() -> None:
    for outcome in ("hang", "error"):
        probe = probe_of(_record(outcome, "cuda_graph_capture"), _plan(), JUDGING)
        assert probe == Probe(1, "ws01", R, worst_case=True)


def test_an_attempt_lost_with_the_host_inside_the_phase_at_risk_counts_as_a_reproduction_in_the_worst_case() -> None:
    lost = probe_of(_record("infra", "cuda_graph_capture", "the controller lost the host during the attempt"),
                    _plan(), JUDGING)
    assert lost == Probe(1, "ws01", R, worst_case=True)
    before = probe_of(_record("infra", "model_load", "the controller lost the host during the attempt"),
                      _plan(), JUDGING)
    assert before == Probe(1, "ws01", ProbeOutcome.UNUSABLE)  # lost before the phase at risk: it says nothing


def test_a_level_where_most_attempts_hung_in_capture_is_never_called_clean() -> None:
    """Issue 33: 60 of 132 attempts hung in capture at the claimed level; the search called it clean."""
    plan = LadderPlan("search", "graphics_clocks", tuple(f"c{i}" for i in range(4)), ("a", "b", "c", "d"),
                      SearchSpec(levels=4))
    records = [{"host": "ws01", "cell": "c2", "outcome": "clean", "last_phase": "ready",
                "phases": ["cuda_graph_capture", "ready"]}] * 72
    records += [{"host": "ws01", "cell": "c2", "outcome": "hang", "last_phase": "cuda_graph_capture",
                 "phases": ["model_load", "cuda_graph_capture"]}] * 60
    (result,) = boundary.search_results(plan.spec, probes_of(records, plan, JUDGING))  # type: ignore[arg-type]
    assert result.boundary is None or result.boundary < 2


def test_a_first_good_that_reproduced_on_every_host_the_bug_shows_on_is_withheld() -> None:
    probes = _runs("ws01", 0, 1, R) + _runs("ws01", 3, 59, C) + _runs("ws01", 1, 14, C) + _runs("ws01", 1, 1, R)
    result = changepoint.bisect_result(BisectSpec(versions=4), probes)
    assert result.hosts == () and not result.done and "withheld" in result.why
