"""CPU cost of the host agent's NVML sampler, at several rates.

Starts ``agent.py run`` with a PoC that only sleeps, once per rate (0 Hz = sampler off, the
baseline), reads the supervisor's CPU time (utime + stime from /proc) just before it exits,
and reports CPU seconds per wall second above the baseline. Runs wherever the agent runs:
on a real GPU host (the device machine) or a simulated one.

    python3 bench/sampler_cost.py --seconds 20 --rates 0,10,50 > sampler-cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENT = Path(__file__).resolve().parents[1] / "collectors" / "agent.py"


def supervisor_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(rate: float, seconds: float, state_dir: str) -> dict[str, float]:
    attempt = f"cost-{rate:g}-{time.time_ns()}"
    argv = [sys.executable, str(AGENT), "--state-dir", state_dir, "run", "--id", attempt,
            "--timeout", str(seconds + 30), "--sample-hz", f"{rate:g}", "--", "sleep", str(seconds)]
    reader = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = Path(state_dir) / "attempts" / attempt / "supervisor.pid"
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pid_file.read_text().split()[0])
    last = 0.0
    while True:
        value = supervisor_cpu_s(pid)
        if value is None:
            break
        last = value
        time.sleep(0.2)
    reader.wait(timeout=30)
    return {"rate_hz": rate, "wall_s": seconds, "supervisor_cpu_s": round(last, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rates", default="0,10,50")
    parser.add_argument("--results", help="rewrite this RESULTS.md's sampler section")
    parser.add_argument("--where", default="this host", help="words for RESULTS.md: where it ran")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory() as state_dir:
        runs = [measure(rate, args.seconds, state_dir) for rate in rates]
    baseline = next((r["supervisor_cpu_s"] for r in runs if r["rate_hz"] == 0), 0.0)
    for run in runs:
        run["cpu_percent_of_one_core"] = round(100 * run["supervisor_cpu_s"] / run["wall_s"], 2)
        run["sampler_cpu_percent_above_baseline"] = round(100 * (run["supervisor_cpu_s"] - baseline) / run["wall_s"], 2)
    report = {"host": os.uname().nodename, "runs": runs}
    print(json.dumps(report, indent=2))
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import rewrite_section

        rows = ["| rate | supervisor CPU (% of one core) | sampler cost above the 0 Hz baseline |", "| --- | --- | --- |"]
        rows += [f"| {r['rate_hz']:g} Hz | {r['cpu_percent_of_one_core']:.2f} % | "
                 f"{r['sampler_cpu_percent_above_baseline']:.2f} % |" for r in runs]
        body = (f"Command: `python3 bench/sampler_cost.py --seconds {args.seconds:g} --rates {args.rates} --results "
                f"bench/RESULTS.md` on {args.where}; {args.seconds:g} s per rate.\n\n" + "\n".join(rows))
        rewrite_section(Path(args.results), "sampler", "NVML sampler CPU cost on the host (bench/sampler_cost.py)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
