"""bench/scale.py keeps honest books: a wedge of a PoC that cannot wedge is counted false,
the start-up burst is told from the steady state, the pace is named after whoever used the
cores, and the 2000-host estimate follows from the fitted figures alone.

No fleet: these pin the bench's bookkeeping on runs written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.bench_modules import load_bench



_load = load_bench


report = _load("scale_report")


def _run(hosts: int = 4, attempts_per_host: int = 3, *, per_attempt: float = 0.05, per_host_s: float = 0.001,
         outcomes: tuple[str, ...] = (), steady_wall: float = 30.0, start_per_host: float = 0.2,
         sim_cpu: float = 10.0, busy: float = 50.0, cpus: int = 2) -> dict[str, Any]:
    """A run as bench/scale.py keeps it, whose controller cost follows the given model exactly."""
    attempts = hosts * attempts_per_host
    kinds = list(outcomes) + ["clean"] * (attempts - len(outcomes))
    records = [{"host": f"h{i % hosts}", "outcome": kind, "reason": "exit 0" if kind == "clean" else kind,
                "started": "2026-11-30T10:00:00+00:00", "ended": "2026-11-30T10:00:02.500000+00:00"}
               for i, kind in enumerate(kinds)]
    start_cpu = start_per_host * hosts + per_host_s * hosts * 5.0  # 5 s of start-up, every host watched
    steady_cpu = per_attempt * attempts + per_host_s * hosts * steady_wall
    start = {"user_s": 2.0, "sys_s": 0.5, "wall": 1000.0}
    prepared = {"user_s": 2.0 + start_cpu, "sys_s": 0.5, "wall": 1005.0}
    end = {"user_s": 2.0 + start_cpu + steady_cpu, "sys_s": 0.5, "wall": 1005.0 + steady_wall}
    wall = 5.0 + steady_wall + 3.0
    return {
        "hosts": hosts, "attempts_per_host": attempts_per_host, "sleep_s": 1.0, "sample_hz": 10.0,
        "child": {"planned": attempts, "start": start, "prepared": prepared, "end": end},
        "campaign": {"records": records, "power_actions": 0, "quarantined": [], "events": {}},
        "wall_s": wall, "controller_cpu_s": 2.5 + start_cpu + steady_cpu, "controller_sys_s": 0.5,
        "controller_maxrss_kb": 140_000 + hosts * 400, "vmhwm_kb": 0, "threads_peak": 3 + 7 * hosts,
        "busiest_10s_cores": 0.5, "busiest_10s_steady_cores": 2 * steady_cpu / steady_wall,
        "sim_cpu_s": sim_cpu, "machine_busy_s": busy, "cpus": cpus, "hardware_wedges": 0,
    }


def test_a_wedge_or_reboot_recorded_for_a_poc_that_cannot_wedge_counts_as_false() -> None:
    row = report.summarize(_run(outcomes=("wedge", "reboot", "infra")))
    assert row["attempts"] == 12
    assert row["false_wedges"] == 2
    assert row["outcomes"] == {"clean": 9, "infra": 1, "reboot": 1, "wedge": 1}
    assert sum(row["not_clean"].values()) == 3


def test_interpreter_start_is_not_charged_to_attempts_and_start_up_is_split_from_steady_state() -> None:
    row = report.summarize(_run(hosts=4, attempts_per_host=3, per_attempt=0.05, per_host_s=0.0,
                                start_per_host=0.25, steady_wall=30.0))
    assert row["start_cpu_per_host_s"] == pytest.approx(0.25)
    assert row["steady_cpu_s"] == pytest.approx(0.6)
    assert row["steady_cores"] == pytest.approx(0.6 / 30.0, abs=1e-3)
    # the campaign's CPU (start-up + steady), never the 2.5 s of imports before it began
    assert row["cpu_per_attempt_s"] == pytest.approx((1.0 + 0.6) / 12, abs=1e-4)


@pytest.mark.parametrize("controller, sim, other, busy, expected", [
    (0.9, 0.5, 0.1, 0.75, "controller (near one core)"),
    (0.3, 1.5, 0.1, 0.95, "simulator (cores saturated)"),
    (0.3, 0.2, 1.4, 0.95, "other load (cores saturated)"),
    (0.7, 0.6, 0.5, 0.9, "controller (cores saturated)"),
    (0.1, 0.4, 0.1, 0.3, "attempt length (cores not saturated)"),
])
def test_the_pace_is_named_after_whoever_used_the_cores(controller: float, sim: float, other: float,
                                                        busy: float, expected: str) -> None:
    assert report.pace(controller, sim, other, busy) == expected


def test_the_busiest_window_finds_a_burst_and_ignores_spans_too_short_to_judge() -> None:
    series = [(t, 0.1 * t) for t in range(0, 30)] + [(30 + t, 3.0 + 0.9 * t) for t in range(0, 12)]
    assert report.busiest_window(series, 10.0) == pytest.approx(0.9)
    assert report.busiest_window([(0.0, 0.0), (1.0, 1.0)], 10.0) is None


def test_the_estimate_takes_the_lightest_and_heaviest_per_host_cost_of_runs_big_enough_to_judge() -> None:
    runs = [_run(hosts=1, per_host_s=0.05, steady_wall=8.0),  # all start-up and noise: never the figure
            _run(hosts=16, attempts_per_host=4, per_attempt=0.04, per_host_s=0.001, steady_wall=30.0),
            _run(hosts=200, attempts_per_host=2, per_attempt=0.04, per_host_s=0.001, steady_wall=300.0)]
    model = report.cost_model([report.summarize(r) for r in runs])
    # 16 hosts: (0.04*64 + 0.001*16*30) / 30 s / 16 hosts; 200 hosts: (0.04*400 + 0.001*200*300) / 300 / 200
    assert model.heaviest.hosts == 16 and model.heaviest.mcores == pytest.approx(6.33, abs=0.01)
    assert model.lightest.hosts == 200 and model.lightest.mcores == pytest.approx(1.27, abs=0.01)
    assert model.heaviest.burst == pytest.approx(2.0, rel=0.01)
    assert model.start_per_host_s == pytest.approx(0.2 + 0.05 * 5.0)  # the 1-host run's start-up counts
    assert model.rss_per_host_mb == pytest.approx(400 / 1024, rel=0.01)
    assert model.threads_per_host == pytest.approx(7.0)


def test_the_estimate_plans_enough_controllers_for_every_host_and_keeps_each_under_a_core() -> None:
    for mcores, burst in ((1.27, 1.7), (6.33, 2.0), (0.5, 1.0)):
        measured = report.PerHost(hosts=200, sleep_s=1.0, slot_s=100.0, mcores=mcores, burst=burst)
        per = measured.hosts_per_controller()
        assert per * burst * mcores / 1000 <= report.SATURATED < (per + 1) * burst * mcores / 1000
    model = report.CostModel(
        lightest=report.PerHost(200, 1.0, 176.0, 1.2, 1.7), heaviest=report.PerHost(16, 1.0, 7.6, 5.0, 1.3),
        start_per_host_s=0.3, rss_base_mb=140, rss_per_host_mb=0.4, threads_base=3, threads_per_host=7)
    text = report.estimate(model, 2000)
    assert "| lightest: 200 hosts, 1 s PoC, an attempt per host every 176 s | 2.40 | 4.08 | 416 | 5 |" in text
    assert "| heaviest: 16 hosts, 1 s PoC, an attempt per host every 7.6 s | 10.00 | 13.00 | 130 | 16 |" in text
    assert "940 MB" in text and "14003 threads" in text and "600 CPU-s" in text


def test_a_cost_model_needs_runs_that_noted_when_start_up_ended() -> None:
    run = _run()
    del run["child"]["prepared"]
    with pytest.raises(ValueError, match="start-up note"):
        report.cost_model([report.summarize(run)] * 3)
    with pytest.raises(ValueError, match="16 hosts or more"):
        report.cost_model([report.summarize(_run(hosts=4))] * 2)


def test_keeping_a_run_replaces_the_older_run_of_the_same_size_and_sleep(tmp_path: Path) -> None:
    scale = _load("scale")
    path = tmp_path / "results.json"
    first, second, other = _run(hosts=16), _run(hosts=16, per_attempt=0.08), _run(hosts=48)
    for run in (first, other, second):
        scale.keep(run, path)
    kept = json.loads(path.read_text())
    assert [r["hosts"] for r in kept] == [16, 48]
    assert kept[0]["row"]["cpu_per_attempt_s"] == report.summarize(second)["cpu_per_attempt_s"]


def _idle_run(sessions: int = 200, seconds: float = 20.0, cpu: float = 2.0) -> dict[str, Any]:
    before = {"user_s": 5.0, "sys_s": 1.0, "wall": 100.0}
    after = {"user_s": 5.0 + cpu / 2, "sys_s": 1.0 + cpu / 2, "wall": 100.0 + seconds}
    return {"kind": "idle", "idle_s": seconds, "hosts": sessions, "sleep_s": 1.0, "wall_s": seconds + 10,
            "child": {"idle": {"sessions": sessions, "threads": 3 + 3 * sessions, "before": before, "after": after}}}


def test_an_idle_run_costs_cpu_per_held_session_per_second_and_joins_the_estimate() -> None:
    idle = report.summarize(_idle_run(sessions=200, seconds=20.0, cpu=2.0))
    assert idle["cpu_ms_per_session_s"] == pytest.approx(0.5)  # 2 CPU-s / (200 sessions * 20 s)
    assert idle["sys_share"] == pytest.approx(0.5)
    runs = [_run(hosts=h, attempts_per_host=k, per_host_s=0.001, steady_wall=w)
            for h, k, w in ((16, 3, 40.0), (48, 3, 120.0), (200, 2, 300.0))]
    text = report.markdown([*runs, _idle_run()], notes="Hand-written notes.")
    assert "0.500 CPU-ms per session per second" in text
    assert "% of the lightest per-host figure" in text and "1.00 cores" in text  # 2000 * 0.5 ms
    assert text.rstrip().endswith("Hand-written notes.")
    assert "| 16 | 1 | 48 |" in text and "| 48 | 1 | 144 |" in text and "| 200 | 1 | 400 |" in text
    assert text.count("| 200 |") == 2  # the controller and the pace table; the idle run is no row
