"""bench/scale.py keeps honest books: a wedge of a PoC that cannot wedge is counted false,
the start-up burst is told from the steady state, the pace is named after whoever used the
cores, and the 2000-host estimate follows from the fitted figures alone.

No fleet: these pin the bench's bookkeeping on runs written by hand.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


def test_the_cost_model_recovers_the_per_attempt_and_per_host_second_costs_it_was_built_from() -> None:
    runs = [_run(hosts=h, attempts_per_host=k, per_attempt=0.04, per_host_s=0.0008, steady_wall=w)
            for h, k, w in ((1, 3, 8.0), (16, 4, 35.0), (48, 6, 120.0), (200, 2, 300.0))]
    model = report.cost_model([report.summarize(r) for r in runs])
    assert model.per_attempt_s == pytest.approx(0.04, rel=0.02)
    assert model.per_host_s == pytest.approx(0.0008, rel=0.02)
    assert model.start_per_host_s == pytest.approx(0.2, rel=0.01)
    assert model.rss_per_host_mb == pytest.approx(400 / 1024, rel=0.01)
    assert model.threads_per_host == pytest.approx(7.0)
    assert model.largest == 200 and model.burst == pytest.approx(2.0, rel=0.05)


def test_a_campaign_on_a_slower_fleet_costs_more_per_attempt_but_the_same_per_host_second() -> None:
    """Watching a host costs CPU whether or not its attempt makes progress: a fleet whose hosts
    are starved stretches each attempt and so its CPU per attempt, never the fitted costs."""
    fast = _run(hosts=48, attempts_per_host=6, per_attempt=0.03, per_host_s=0.001, steady_wall=100.0)
    slow = _run(hosts=200, attempts_per_host=2, per_attempt=0.03, per_host_s=0.001, steady_wall=350.0)
    rows = [report.summarize(r) for r in (_run(hosts=1, steady_wall=8.0, per_attempt=0.03, per_host_s=0.001),
                                          _run(hosts=16, steady_wall=30.0, per_attempt=0.03, per_host_s=0.001),
                                          fast, slow)]
    assert rows[3]["cpu_per_attempt_s"] > 3 * rows[2]["cpu_per_attempt_s"]
    model = report.cost_model(rows)
    assert model.per_attempt_s == pytest.approx(0.03, rel=0.05)
    assert model.per_host_s == pytest.approx(0.001, rel=0.02)


def test_the_estimate_plans_enough_controllers_for_every_host_and_keeps_each_under_a_core() -> None:
    model = report.CostModel(start_per_host_s=0.1, per_attempt_s=0.05, per_host_s=0.001, rss_base_mb=140,
                             rss_per_host_mb=0.4, threads_base=3, threads_per_host=7, burst=2.0, largest=200)
    for slot in report.SLOTS_S:
        per = model.hosts_per_controller(slot)
        assert per * model.burst * (model.per_attempt_s / slot + model.per_host_s) <= report.SATURATED
        assert (per + 1) * model.burst * (model.per_attempt_s / slot + model.per_host_s) > report.SATURATED
    text = report.estimate(model, 2000)
    assert "| 60 s | 3.67 | 7.33 | 231 | 9 |" in text  # 2000*(0.05/60+0.001); 0.85/(2*0.001833) = 231.8
    assert "940 MB" in text and "14003 threads" in text


def test_a_cost_model_needs_runs_that_noted_when_start_up_ended() -> None:
    run = _run()
    del run["child"]["prepared"]
    with pytest.raises(ValueError, match="start-up note"):
        report.cost_model([report.summarize(run)] * 3)


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
    assert "50 % of the fitted per-host-second cost" in text  # 0.5 of the 1.0 ms the runs were built with
    assert text.rstrip().endswith("Hand-written notes.")
    assert "| 16 | 1 | 48 |" in text and "| 48 | 1 | 144 |" in text and "| 200 | 1 | 400 |" in text
    assert text.count("| 200 |") == 2  # the controller and the pace table; the idle run is no row
