"""bench/scale.py's bookkeeping: one run's figures, what set its pace, the table, the estimate.

Pure functions over the JSON that bench/scale.py keeps (bench/scale-results.json), so the
report can be rewritten without a fleet and tested without one.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

RESULTS_JSON = Path(__file__).resolve().parent / "scale-results.json"
FALSE_WEDGE_OUTCOMES = ("wedge", "reboot")  # the PoC cannot wedge a host: each one is false
SATURATED = 0.85  # a share of the cores (or of the one core the GIL allows) taken as "full"
WINDOW_S = 10.0
TARGET_CONTROLLER_CORES = 0.5  # what a 2000-host plan gives each controller (headroom for bursts)


def busiest_window(series: Sequence[Sequence[float]], window_s: float = WINDOW_S) -> float | None:
    """The most cores the process used over any ``window_s`` of its (time, cpu-s) samples."""
    best = None
    start = 0
    for end in range(len(series)):
        while series[end][0] - series[start][0] > window_s:
            start += 1
        span = series[end][0] - series[start][0]
        if span >= window_s * 0.8:
            rate = (series[end][1] - series[start][1]) / span
            best = rate if best is None else max(best, rate)
    return best


def pace(controller_cores: float, sim_cores: float, other_cores: float, machine_busy: float) -> str:
    """Who set the pace: a controller near one core is GIL-bound; a saturated machine is
    paced by its biggest consumer (the simulator, the controller, or other work on the
    machine); otherwise the attempts' own length did."""
    if controller_cores >= SATURATED:
        return "controller (near one core)"
    if machine_busy >= SATURATED:
        users = {"simulator": sim_cores, "controller": controller_cores, "other load": other_cores}
        return f"{max(users, key=lambda k: users[k])} (cores saturated)"
    return "attempt length (cores not saturated)"


def _duration_s(record: Mapping[str, Any]) -> float | None:
    try:
        return (datetime.fromisoformat(str(record["ended"])) - datetime.fromisoformat(str(record["started"]))
                ).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def summarize(run: Mapping[str, Any]) -> dict[str, Any]:
    """One run's row: attempts, false wedges, CPU per attempt (controller and simulator),
    peak RSS and threads, wall time, and what set the pace."""
    records = run.get("campaign", {}).get("records", [])
    child = run.get("child", {})
    attempts = len(records)
    outcomes = Counter(str(r.get("outcome")) for r in records)
    start, end = child.get("start", {}), child.get("end", {})
    campaign_wall = end["wall"] - start["wall"] if start and end else run["wall_s"]
    campaign_cpu = (end["user_s"] + end["sys_s"] - start["user_s"] - start["sys_s"]) if start and end \
        else run["controller_cpu_s"]
    wall = run["wall_s"]
    controller_cores = campaign_cpu / campaign_wall if campaign_wall > 0 else 0.0
    sim_cores = run["sim_cpu_s"] / wall if wall > 0 else 0.0
    machine_busy = run["machine_busy_s"] / (run["cpus"] * wall) if wall > 0 else 0.0
    other = max(0.0, run["machine_busy_s"] - run["controller_cpu_s"] - run["sim_cpu_s"])
    durations = [d for d in map(_duration_s, records) if d is not None]
    per_host = run["attempts_per_host"]
    rss_kb = max(run.get("vmhwm_kb") or 0, run.get("controller_maxrss_kb") or 0)
    return {
        "hosts": run["hosts"], "sleep_s": run["sleep_s"], "sample_hz": run["sample_hz"],
        "attempts": attempts, "planned": child.get("planned"), "outcomes": dict(sorted(outcomes.items())),
        "false_wedges": sum(outcomes.get(o, 0) for o in FALSE_WEDGE_OUTCOMES),
        "not_clean": dict(Counter(f"{r.get('outcome')}: {str(r.get('reason') or '')[:45]}" for r in records
                                  if r.get("outcome") != "clean").most_common(5)),
        "pauses": run.get("campaign", {}).get("events", {}).get("controller_network_suspect", 0),
        "hardware_wedges": run.get("hardware_wedges", 0), "power_actions": run.get("campaign", {}).get(
            "power_actions", 0), "quarantined": len(run.get("campaign", {}).get("quarantined", [])),
        "wall_s": round(wall, 1), "campaign_wall_s": round(campaign_wall, 1),
        "controller_cpu_s": round(run["controller_cpu_s"], 2),
        "controller_sys_share": round(run["controller_sys_s"] / run["controller_cpu_s"], 2)
        if run.get("controller_sys_s") is not None and run["controller_cpu_s"] else None, "campaign_cpu_s": round(campaign_cpu, 2),
        "cpu_per_attempt_s": round(campaign_cpu / attempts, 4) if attempts else None,
        "controller_cores": round(controller_cores, 3),
        "controller_busiest_10s_cores": _round(run.get("busiest_10s_cores")),
        "rss_mb": round(rss_kb / 1024, 1), "threads_peak": run["threads_peak"],
        "sim_cpu_s": round(run["sim_cpu_s"], 1), "sim_cpu_per_attempt_s": round(run["sim_cpu_s"] / attempts, 3)
        if attempts else None, "sim_cores": round(sim_cores, 2), "other_cores": round(other / wall, 2) if wall else 0,
        "machine_busy": round(machine_busy, 2),
        "slot_s": round(campaign_wall / per_host, 2) if per_host else None,
        "attempt_median_s": round(statistics.median(durations), 2) if durations else None,
        "pace": pace(controller_cores, sim_cores, other / wall if wall else 0.0, machine_busy),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def fit(points: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line (intercept, slope) through (x, y) points; two points at least."""
    xs, ys = zip(*points)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


COLUMNS = (
    ("hosts", "hosts"), ("attempts", "attempts run"), ("false_wedges", "false wedges"),
    ("cpu_per_attempt_s", "controller CPU-s / attempt"), ("controller_cores", "controller cores (avg)"),
    ("controller_busiest_10s_cores", "controller cores (busiest 10 s)"), ("rss_mb", "peak RSS MB (VmHWM)"),
    ("threads_peak", "peak threads"), ("campaign_wall_s", "campaign wall s"), ("slot_s", "s per attempt per host"),
    ("sim_cpu_per_attempt_s", "simulator CPU-s / attempt"), ("sim_cores", "simulator cores"),
    ("other_cores", "other load cores"), ("pace", "pace set by"),
)


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "| " + " | ".join("---:" if key != "pace" else "---" for key, _ in COLUMNS) + " |"]
    for row in rows:
        lines.append("| " + " | ".join("" if row.get(key) is None else str(row.get(key)) for key, _ in COLUMNS) + " |")
    return "\n".join(lines)


def markdown(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [summarize(run) for run in runs]
    return table(rows)
