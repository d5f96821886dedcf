"""Scale: what the controller costs per attempt as the fleet grows (1, 16, 48, 200 hosts).

    flock /tmp/reprofleet-fleet.lock .venv/bin/python bench/scale.py --hosts 16 --attempts 4
    .venv/bin/python bench/scale.py --report --results bench/RESULTS.md

One run brings up ``--hosts`` simulated hosts, runs a campaign of short attempts on them
(bench/scale_poc.py: a few log lines, a sleep, exit 0; it never imports the fake vLLM, so
no host can truly wedge and every wedge recorded is a false one), tears the fleet down in
``finally`` and appends its figures to bench/scale-results.json; ``--report`` writes the
table and the 2000-host estimate from every run kept there.

The controller runs in a child process (bench/scale_controller.py). Its CPU-seconds come
from the child's rusage (``os.wait4``), peak RSS from VmHWM and the thread count from
/proc/<pid>/status sampled every 0.2 s. The simulator's CPU is every process of the fleet
(the hardware daemon, each host's sshd and everything they start: sessions, agents, PoCs)
counted by a cpuacct cgroup the bench puts them in after the fleet is up; the machine's
total busy time (/proc/stat) says how much else ran beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(BENCH))

from scale_report import NOTES_MD, RESULTS_JSON, busiest_window, markdown, summarize  # noqa: E402

CPUACCT_ROOT = Path("/sys/fs/cgroup/cpuacct")
# What the liveness layer did: a pause is every host silent at once (our network suspected).
WATCHED_EVENTS = ("controller_network_suspect", "controller_network_back", "wedge", "reboot", "unreachable",
                  "quarantined", "orphan_killed")
SAMPLE_S = 0.2
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class CpuAcct:
    """A cpuacct group holding the whole simulated fleet: the simulator's CPU, in one number."""

    name: str
    adopted: int = 0

    @property
    def path(self) -> Path:
        return CPUACCT_ROOT / self.name

    def create(self) -> "CpuAcct":
        self.path.mkdir(exist_ok=True)
        return self

    def adopt(self, pids: list[int]) -> None:
        """Move running processes in; everything they start later is born inside."""
        for pid in pids:
            try:
                (self.path / "cgroup.procs").write_text(f"{pid}\n")
                self.adopted += 1
            except OSError:  # exited meanwhile
                continue

    def usage_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """After the fleet is down; leftovers (none expected) go back to the root group."""
        if not self.path.exists():
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                (CPUACCT_ROOT / "cgroup.procs").write_text(f"{pid}\n")
            except OSError:
                continue
        try:
            self.path.rmdir()
        except OSError:
            pass


def machine_busy_s() -> float:
    """CPU-seconds every core spent not idle since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(v) for v in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK  # minus idle and iowait


def proc_status(pid: int) -> dict[str, int]:
    """Threads, VmRSS and VmHWM (kB) of a live process; empty once it is gone."""
    wanted = {"Threads", "VmRSS", "VmHWM"}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in wanted:
            values[key] = int(rest.split()[0])
    return values


def proc_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


@dataclass
class Watch:
    """What sampling the controller process saw while it ran."""

    threads_peak: int = 0
    hwm_kb: int = 0
    cpu_series: list[tuple[float, float]] = field(default_factory=list)  # (time.time(), cpu-s)

    def sample(self, pid: int) -> None:
        status = proc_status(pid)
        self.threads_peak = max(self.threads_peak, status.get("Threads", 0))
        self.hwm_kb = max(self.hwm_kb, status.get("VmHWM", 0))
        cpu = proc_cpu_s(pid)
        if cpu is not None:
            self.cpu_series.append((time.time(), cpu))  # wall clock: the child's own notes use it


def write_playbook(folder: Path, attempts: int, sleep_s: float, attempt_timeout_s: float) -> Path:
    (folder / "poc").mkdir(parents=True, exist_ok=True)
    shutil.copy(BENCH / "scale_poc.py", folder / "poc" / "scale_poc.py")
    path = folder / "scale.yml"
    path.write_text(
        "name: scale-bench\n"
        "poc: {script: poc/scale_poc.py, cache: persistent}\n"
        "runtime: {kind: python, python: python3}\n"
        f"attempts: {attempts}\n"
        f"timeouts: {{attempt: {attempt_timeout_s:g}, boot: 60, connect: 30}}\n"
        f"defaults:\n  args: {{sleep_s: {sleep_s:g}, lines: 3}}\n"
        "matrix:\n  - name: default\n"
    )
    return path


def run_controller(argv: list[str], acct: CpuAcct, max_wall_s: float) -> dict[str, Any]:
    """Start the controller, sample it until it exits (bounded), return what was measured."""
    busy0, sim0, wall0 = machine_busy_s(), acct.usage_s(), time.monotonic()
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    watch = Watch()
    status, usage, killed = None, None, False
    try:
        while status is None:
            watch.sample(child.pid)
            pid, code, rusage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                status, usage = code, rusage
                break
            if time.monotonic() - wall0 > max_wall_s and not killed:
                child.send_signal(signal.SIGTERM)  # the campaign stops, records what it has
                killed = True
                max_wall_s += 60
            elif killed and time.monotonic() - wall0 > max_wall_s:
                child.kill()
            time.sleep(SAMPLE_S)
    finally:
        if status is None:
            child.kill()
            _pid, status, usage = os.wait4(child.pid, 0)
        child.returncode = 0  # reaped by wait4: keep Popen from waiting again
    wall = time.monotonic() - wall0
    return {
        "rc": os.waitstatus_to_exitcode(status) if status is not None else None, "killed": killed,
        "wall_s": wall, "controller_cpu_s": usage.ru_utime + usage.ru_stime if usage else None,
        "controller_sys_s": usage.ru_stime if usage else None,
        "controller_maxrss_kb": usage.ru_maxrss if usage else None, "vmhwm_kb": watch.hwm_kb,
        "threads_peak": watch.threads_peak, "busiest_10s_cores": busiest_window(watch.cpu_series),
        "cpu_series": watch.cpu_series,
        "sim_cpu_s": acct.usage_s() - sim0, "machine_busy_s": machine_busy_s() - busy0,
        "cpus": os.cpu_count() or 1,
    }


def fleet_pids(fleet: Any) -> list[int]:
    pids = [fleet.manifest.hardware.pid] if fleet.manifest.hardware else []
    for host in fleet.hosts:
        pids += host.cgroup.pids()
    return pids


def read_campaign(folder: Path) -> dict[str, Any]:
    from reprofleet.records.store import read_log_lines, read_records

    records = list(read_records(folder / "attempts.jsonl")) if (folder / "attempts.jsonl").exists() else []
    power = list(read_log_lines(folder / "power.jsonl")) if (folder / "power.jsonl").exists() else []
    events = list(read_log_lines(folder / "events.jsonl")) if (folder / "events.jsonl").exists() else []
    return {
        "records": [{k: r.get(k) for k in ("host", "outcome", "reason", "started", "ended")} for r in records],
        "power_actions": len(power),
        "quarantined": sorted({str(e.get("host")) for e in events if e.get("event") == "quarantined"}),
        "events": dict(Counter(str(e.get("event")) for e in events if e.get("event") in WATCHED_EVENTS)),
    }


def run_size(args: argparse.Namespace) -> dict[str, Any]:
    from reprofleet.sim import Fleet, SimHostSpec

    specs = tuple(SimHostSpec(f"sc{i}", p_wedge=0.0, p_error=0.0, p_hang=0.0) for i in range(args.hosts))
    work = Path(tempfile.mkdtemp(prefix="rf-scale-"))
    started = time.monotonic()
    fleet = Fleet.up(specs, ready_timeout_s=max(60.0, args.hosts * 1.0))
    up_s = time.monotonic() - started
    acct = CpuAcct(f"rfs-scale-{fleet.run_id}").create()
    try:
        acct.adopt(fleet_pids(fleet))
        book = write_playbook(work, args.attempts, args.sleep_s, args.attempt_timeout_s)
        argv = [sys.executable, str(BENCH / "scale_controller.py"), "--inventory", str(fleet.inventory_path),
                "--playbook", str(book), "--reports", str(work / "reports"),
                "--known-hosts", str(fleet.known_hosts_path), "--out", str(work / "controller.json"),
                "--sample-hz", str(args.sample_hz)]
        if args.profile:
            argv += ["--profile", str(Path(args.profile).resolve())]
        if args.idle_s:
            argv += ["--idle-s", str(args.idle_s)]
        measured = run_controller(argv, acct, args.max_wall_s)
        child = json.loads((work / "controller.json").read_text()) if (work / "controller.json").exists() else {}
        campaign = read_campaign(Path(child["campaign_dir"])) if child.get("campaign_dir") else {}
        series = measured.pop("cpu_series")
        if child.get("prepared"):  # the steady state: after every host started its first attempt
            measured["busiest_10s_steady_cores"] = busiest_window([p for p in series
                                                                   if p[0] >= child["prepared"]["wall"]])
        hardware_wedges = sum(1 for e in fleet.events() if e.get("event") in ("wedge", "reset"))
    finally:
        fleet.down()
        acct.remove()
    shutil.rmtree(work, ignore_errors=True)
    return {"kind": "idle" if args.idle_s else "campaign", "idle_s": args.idle_s,
            "hosts": args.hosts, "attempts_per_host": args.attempts, "sleep_s": args.sleep_s,
            "sample_hz": args.sample_hz, "fleet_up_s": up_s, "teardown_s": time.monotonic() - started - up_s
            - measured["wall_s"], "adopted_pids": acct.adopted, "child": child, "campaign": campaign,
            "hardware_wedges": hardware_wedges, "commit": git_head(), "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["bench/scale.py", *sys.argv[1:]]), **measured}


def git_head() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or "unknown"


def keep(result: dict[str, Any], path: Path) -> None:
    """Add one run to the results file; a run of the same kind, size and sleep replaces the older one."""
    runs = json.loads(path.read_text()) if path.exists() else []
    runs = [r for r in runs if run_key(r) != run_key(result)]
    runs.append({**result, "row": summarize(result)})
    runs.sort(key=run_key)
    path.write_text(json.dumps(runs, indent=1) + "\n")


def run_key(run: dict[str, Any]) -> tuple[str, float, int]:
    return str(run.get("kind", "campaign")), float(run["sleep_s"]), int(run["hosts"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, help="simulated hosts for this run")
    parser.add_argument("--attempts", type=int, default=6, help="attempts per host")
    parser.add_argument("--sleep-s", type=float, default=1.0, help="how long each attempt's PoC sleeps")
    parser.add_argument("--sample-hz", type=float, default=10.0, help="NVML samples per second on each host")
    parser.add_argument("--attempt-timeout-s", type=float, default=120.0)
    parser.add_argument("--max-wall-s", type=float, default=540.0, help="stop the campaign after this long")
    parser.add_argument("--profile", help="cProfile the controller's threads into this file")
    parser.add_argument("--idle-s", type=float, help="no campaign: hold one idle SSH session per host this long")
    parser.add_argument("--json", default=str(RESULTS_JSON), help="results file (one entry per size and sleep)")
    parser.add_argument("--report", action="store_true", help="write the table from the results file")
    parser.add_argument("--results", help="with --report: rewrite this RESULTS.md's scale section")
    args = parser.parse_args()
    if args.report:
        runs = json.loads(Path(args.json).read_text())
        text = markdown(runs, NOTES_MD.read_text() if NOTES_MD.exists() else "")
        print(text)
        if args.results:
            from results import rewrite_section

            rewrite_section(Path(args.results), "scale", "Scale: controller cost from 1 to 200 hosts "
                            "(bench/scale.py)", text)
        return 0
    if not args.hosts:
        parser.error("--hosts N (or --report)")
    result = run_size(args)
    keep(result, Path(args.json))
    row = summarize(result)
    print(json.dumps(row, indent=1))
    return 0 if result["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
