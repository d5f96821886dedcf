"""bench/scale.py's bookkeeping: one run's figures, what set its pace, the table, the estimate.

Pure functions over the JSON that bench/scale.py keeps (bench/scale-results.json), so the
report can be rewritten without a fleet and tested without one.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

RESULTS_JSON = Path(__file__).resolve().parent / "scale-results.json"
NOTES_MD = Path(__file__).resolve().parent / "scale-notes.md"  # what the figures mean, written by a person
FALSE_WEDGE_OUTCOMES = ("wedge", "reboot")  # the PoC cannot wedge a host: each one is false
SATURATED = 0.85  # a share of the cores (or of the one core the GIL allows) taken as "full"
WINDOW_S = 10.0


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


def summarize_idle(run: Mapping[str, Any]) -> dict[str, Any]:
    """An idle run: what one connected host costs per second with nothing running on it."""
    idle = run["child"]["idle"]
    seconds = idle["after"]["wall"] - idle["before"]["wall"]
    cpu = _cpu(idle["after"]) - _cpu(idle["before"])
    sessions = max(1, int(idle["sessions"]))
    return {"kind": "idle", "hosts": run["hosts"], "sessions": sessions, "idle_s": round(seconds, 1),
            "cpu_ms_per_session_s": round(1000 * cpu / (sessions * seconds), 4) if seconds else None,
            "threads": idle["threads"], "threads_per_session": round(idle["threads"] / sessions, 2),
            "sys_share": round((idle["after"]["sys_s"] - idle["before"]["sys_s"]) / cpu, 2) if cpu else None}


def summarize(run: Mapping[str, Any]) -> dict[str, Any]:
    """One run's row: attempts, false wedges, CPU per attempt (controller and simulator),
    peak RSS and threads, wall time, and what set the pace."""
    if run.get("kind") == "idle":
        return summarize_idle(run)
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
    prepared = child.get("prepared")  # every host started its first attempt: start-up ends here
    start_cpu = _cpu(prepared) - _cpu(start) if prepared and start else None
    steady_wall = end["wall"] - prepared["wall"] if prepared and end else None
    steady_cpu = _cpu(end) - _cpu(prepared) if prepared and end else None
    per_host = run["attempts_per_host"]
    rss_kb = max(run.get("vmhwm_kb") or 0, run.get("controller_maxrss_kb") or 0)
    return {
        "hosts": run["hosts"], "sleep_s": run["sleep_s"], "sample_hz": run["sample_hz"],
        "attempts": attempts, "planned": child.get("planned"), "outcomes": dict(sorted(outcomes.items())),
        "false_wedges": sum(outcomes.get(o, 0) for o in FALSE_WEDGE_OUTCOMES),
        "not_clean": dict(Counter(f"{r.get('outcome')}: {str(r.get('reason') or '')[:45]}" for r in records
                                  if r.get("outcome") != "clean").most_common(5)),
        "not_clean_count": attempts - outcomes.get("clean", 0),
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
        "start_cpu_per_host_s": round(start_cpu / run["hosts"], 4) if start_cpu is not None else None,
        "steady_wall_s": _round(steady_wall, 1), "steady_cpu_s": _round(steady_cpu, 2),
        "steady_cores": round(steady_cpu / steady_wall, 3) if steady_cpu is not None and steady_wall else None,
        "steady_mcores_per_host": round(1000 * steady_cpu / steady_wall / run["hosts"], 2)
        if steady_cpu is not None and steady_wall else None,
        "controller_busiest_10s_steady_cores": _round(run.get("busiest_10s_steady_cores")),
        "rss_mb": round(rss_kb / 1024, 1), "threads_peak": run["threads_peak"],
        "sim_cpu_s": round(run["sim_cpu_s"], 1), "sim_cpu_per_attempt_s": round(run["sim_cpu_s"] / attempts, 3)
        if attempts else None, "sim_cores": round(sim_cores, 2), "other_cores": round(other / wall, 2) if wall else 0,
        "machine_busy": round(machine_busy, 2),
        "slot_s": round(campaign_wall / per_host, 2) if per_host else None,
        "attempt_median_s": round(statistics.median(durations), 2) if durations else None,
        "pace": pace(controller_cores, sim_cores, other / wall if wall else 0.0, machine_busy),
    }


def _cpu(note: Mapping[str, float]) -> float:
    return float(note["user_s"]) + float(note["sys_s"])


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def fit(points: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line (intercept, slope) through (x, y) points; two points at least."""
    xs, ys = zip(*points)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


CONTROLLER_COLUMNS = (
    ("hosts", "hosts"), ("sleep_s", "PoC sleep s"), ("attempts", "attempts run"), ("not_clean_count", "not clean"),
    ("false_wedges", "false wedges"), ("pauses", "fleet-silence pauses"),
    ("cpu_per_attempt_s", "controller CPU-s / attempt"), ("start_cpu_per_host_s", "start-up CPU-s / host"),
    ("controller_cores", "cores (avg)"), ("controller_busiest_10s_cores", "cores (busiest 10 s)"),
    ("steady_cores", "steady cores (avg)"), ("controller_busiest_10s_steady_cores", "steady cores (busiest 10 s)"),
    ("steady_mcores_per_host", "steady 1/1000 cores per host"), ("controller_sys_share", "sys share of CPU"), ("rss_mb", "peak RSS MB (VmHWM)"), ("threads_peak", "peak threads"),
)
PACE_COLUMNS = (
    ("hosts", "hosts"), ("sleep_s", "PoC sleep s"), ("campaign_wall_s", "campaign wall s"),
    ("slot_s", "s per attempt per host"), ("attempt_median_s", "attempt median s"),
    ("sim_cpu_per_attempt_s", "simulator CPU-s / attempt"), ("sim_cores", "simulator cores"),
    ("controller_cores", "controller cores"), ("other_cores", "other load cores"),
    ("machine_busy", "machine busy (share of all cores)"), ("pace", "pace set by"),
)
TEXT_COLUMNS = ("pace",)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    lines = ["| " + " | ".join(title for _, title in columns) + " |",
             "| " + " | ".join("---" if key in TEXT_COLUMNS else "---:" for key, _ in columns) + " |"]
    for row in rows:
        lines.append("| " + " | ".join("" if row.get(key) is None else f"{row.get(key):g}"
                                       if isinstance(row.get(key), float) else str(row.get(key))
                                       for key, _ in columns) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class PerHost:
    """One run's steady-state controller cost per host, and the conditions it was measured in."""

    hosts: int
    sleep_s: float
    slot_s: float  # the campaign's seconds per attempt per host
    mcores: float  # steady-state controller cores per host, in thousandths of a core
    burst: float  # the steady state's busiest 10 s over its average

    @property
    def label(self) -> str:
        return f"{self.hosts} hosts, {self.sleep_s:g} s PoC, an attempt per host every {self.slot_s:g} s"

    def cores(self, hosts: int) -> float:
        return hosts * self.mcores / 1000

    def hosts_per_controller(self) -> int:
        """Most hosts one process can watch with its busiest 10 s under SATURATED of a core."""
        return int(SATURATED / (self.burst * self.mcores / 1000))


@dataclass(frozen=True)
class CostModel:
    """What the runs measured, per host: steady-state cores (lightest and heaviest run of at
    least MIN_HOSTS hosts), start-up CPU, RSS and threads (lines fitted over the runs)."""

    lightest: PerHost
    heaviest: PerHost
    start_per_host_s: float  # the most any run measured
    rss_base_mb: float
    rss_per_host_mb: float
    threads_base: float
    threads_per_host: float


MIN_HOSTS = 16  # smaller runs are all start-up and noise


def per_host(row: Mapping[str, Any]) -> PerHost:
    steady = row["steady_cpu_s"] / row["steady_wall_s"]
    busiest = row.get("controller_busiest_10s_steady_cores") or steady
    return PerHost(row["hosts"], row["sleep_s"], row["slot_s"], 1000 * steady / row["hosts"],
                   max(1.0, busiest / steady) if steady else 1.0)


def cost_model(rows: Sequence[Mapping[str, Any]]) -> CostModel:
    """Only runs that noted their start-up's end count (every run since the note exists)."""
    usable = [r for r in rows if r["attempts"] and r.get("steady_cores")]
    large = [per_host(r) for r in usable if r["hosts"] >= MIN_HOSTS]
    if len(usable) < 2 or not large:
        raise ValueError(f"two runs with a start-up note, one of {MIN_HOSTS} hosts or more, are needed")
    rss_base, rss_slope = fit([(r["hosts"], r["rss_mb"]) for r in usable])
    threads_base, threads_slope = fit([(r["hosts"], r["threads_peak"]) for r in usable])
    return CostModel(min(large, key=lambda p: p.mcores), max(large, key=lambda p: p.mcores),
                     max(r["start_cpu_per_host_s"] for r in usable), rss_base, rss_slope, threads_base,
                     threads_slope)


LAB_HOSTS = 2000


def estimate(model: CostModel, hosts: int = LAB_HOSTS, idle: Mapping[str, Any] | None = None) -> str:
    """What a ``hosts``-host lab needs, from the measured per-host figures (no other input)."""
    rss = model.rss_base_mb + hosts * model.rss_per_host_mb
    threads = model.threads_base + hosts * model.threads_per_host
    lines = [
        f"Per host, as measured: steady-state controller CPU between {model.lightest.mcores:.2f} and "
        f"{model.heaviest.mcores:.2f} thousandths of a core (runs of {MIN_HOSTS} hosts or more); start-up at most "
        f"{model.start_per_host_s:.3f} CPU-s (connect, lease, facts, agent and PoC pushes); peak RSS "
        f"{model.rss_base_mb:.0f} MB + {model.rss_per_host_mb:.2f} MB per host and peak threads "
        f"{model.threads_base:.0f} + {model.threads_per_host:.1f} per host (lines fitted over the runs).",
        "",
        f"| {hosts} hosts, at the per-host cost of | controller cores (avg) | busiest 10 s | "
        "hosts one process can take (busiest 10 s under 0.85 core) | controllers needed |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, measured in (("lightest", model.lightest), ("heaviest", model.heaviest)):
        cores = measured.cores(hosts)
        per = max(1, measured.hosts_per_controller())
        lines.append(f"| {name}: {measured.label} | {cores:.2f} | {cores * measured.burst:.2f} | {per} | "
                     f"{math.ceil(hosts / per)} |")
    lines += [
        "",
        f"Start-up for {hosts} hosts costs up to {hosts * model.start_per_host_s:.0f} CPU-s: on one core, that long "
        "before the last host starts its first attempt; split over the controllers of the table.",
        "",
        f"One process for all {hosts} hosts would hold about {rss:.0f} MB and {threads:.0f} threads. Memory is no "
        "limit; CPU is, because one Python process runs on one core at most (the GIL), whether its hosts are "
        "threads or asyncio tasks.",
    ]
    if idle is not None and idle.get("cpu_ms_per_session_s") is not None:
        light, heavy = (idle["cpu_ms_per_session_s"] / m.mcores if m.mcores else 0.0
                        for m in (model.lightest, model.heaviest))
        lines += [
            "",
            f"Holding a host costs CPU even when nothing runs on it: {idle['sessions']} idle SSH sessions held for "
            f"{idle['idle_s']:g} s cost {idle['cpu_ms_per_session_s']:.3f} CPU-ms per session per second "
            f"({idle['threads_per_session']:.1f} threads each, {100 * (idle['sys_share'] or 0):.0f} % of it in the "
            f"kernel): {100 * light:.0f} % of the lightest per-host figure, {100 * heavy:.0f} % of the heaviest; "
            f"for {hosts} hosts that alone is {hosts * idle['cpu_ms_per_session_s'] / 1000:.2f} cores.",
        ]
    return "\n".join(lines)


def commands(runs: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"- `flock /tmp/reprofleet-fleet.lock .venv/bin/python {run.get('command')}` "
                     f"(commit {run.get('commit')}, {run.get('date')}, {run['wall_s'] + run.get('fleet_up_s', 0):.0f} s "
                     f"with the fleet's start)" for run in runs)


METHOD = (
    "Each run: N simulated hosts (real sshd in network namespaces, 2-core VM shared with other sessions' work), "
    "one cell, a PoC (bench/scale_poc.py) that prints 3 lines over a sleep and exits 0 under the `python` "
    "runtime; it never imports the fake vLLM, so no host can truly wedge and every wedge or reboot recorded "
    "would be a false one. The controller is the real campaign path (make_plan, run_campaign with recovery; the "
    "CLI's liveness defaults, NVML sampling at 10 Hz, no live table) in a child process: CPU-seconds from its "
    "rusage, minus its own notes at campaign start (interpreter and imports: about 2 CPU-s, not charged to "
    "attempts) and when every host has started its first attempt (the start-up: connect, lease, facts, agent "
    "and PoC pushes); peak RSS from VmHWM; threads sampled every 0.2 s. The simulator's CPU is every process "
    "of the fleet (hardware daemon, sshd, sessions, agents, PoCs) through a cpuacct group; 'other load' is the "
    "machine's busy time (/proc/stat) less both. A 'fleet-silence pause' is the guard suspecting the "
    "controller's own network because every host went silent at once."
)


def markdown(runs: Sequence[Mapping[str, Any]], notes: str = "") -> str:
    """The section: commands, the controller's figures, the pace, the 2000-host estimate, and
    the notes a person wrote from them (bench/scale-notes.md)."""
    rows = [summarize(run) for run in runs if run.get("kind", "campaign") == "campaign"]
    idle = [summarize(run) for run in runs if run.get("kind") == "idle"]
    return "\n\n".join([
        METHOD,
        "Commands (one locked fleet run each, kept in bench/scale-results.json; the section written by "
        "`.venv/bin/python bench/scale.py --report --results bench/RESULTS.md`):\n\n" + commands(runs),
        "### The controller\n\n" + table(rows, CONTROLLER_COLUMNS),
        "### What set the pace\n\n" + table(rows, PACE_COLUMNS),
        f"### What a {LAB_HOSTS}-host lab needs\n\n" + estimate(cost_model(rows), idle=idle[-1] if idle else None),
        *([notes.strip()] if notes.strip() else []),
    ])
