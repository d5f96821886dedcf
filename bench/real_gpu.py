"""A campaign against a real NVIDIA GPU, and what the observer costs it (issue 22).

Run on a machine with a real GPU that you may not change (read-only: no clock, power-limit,
persistence or compute-mode setter ever runs; the one host is ``gpu_policy: observe``):

    python3 bench/real_gpu.py clocks   --out OUT   # what every clock-lock candidate reads at default
    python3 bench/real_gpu.py fields   --out OUT   # what each sampled NVML field costs
    python3 bench/real_gpu.py observer --out OUT --rounds 12 --cold-rounds 4
    python3 bench/real_gpu.py observer --out OUT --rounds 1000 --cold-rounds 0 --probe-loops 4000 \
        --budget-s 400 --conditions off,10hz      # the CPU's speed measured inside each capture
    python3 bench/real_gpu.py merge OUT1/observer.json OUT2/observer.json --out OUT   # runs of several calls
    python3 bench/real_gpu.py campaign --out OUT --attempts 3

``campaign``: the controller and one observe-only host on the same machine. The device has
no sshd, so the host is reached through :class:`LocalHostPort`, a host seam
(``runner.port.HostPort``) whose session runs the agent's commands in a local shell instead
of over SSH; everything else is the real code: the agent pushed and run, its supervisor,
NVML telemetry at 10 Hz, the vLLM-phase parser on the PoC's lines (bench/real_gpu_poc.py:
PyTorch modules in bf16 captured as CUDA graphs for 51 batch sizes), records, streams,
report.md and report.html with their freeze figures.

``observer``: CUDA-graph capture time with the agent's sampler off, at 10 Hz, at 50 Hz and
at 10 Hz with the PCIe replay counter read on every 10th sample only, in a paired,
interleaved design: each round runs every condition once in a fresh random order, in one
warm workload process (the graphs of all sizes captured anew each time), and the ratio to
"off" is taken within the round. The sampler runs in its own process, as the agent does,
through the agent's own classes (``nvml_sampler.NvmlSampler`` writing through
``event_log.EventLog``). Cold captures (a fresh process per capture: import, CUDA init,
build, capture) are measured the same way over fewer rounds. Each capture reports its wall
and CPU time; a capture whose CPU time falls short of its wall time by more than
``STARVED_SHARE`` (a launch-bound capture off its CPU) is a starvation episode. A first run
showed the other kind of episode (bench/RESULTS.md): CPU time equal to wall time, both up to
1.8x longer, the same work on a slower CPU (a VM's vCPU on a busy host). So each capture is
bracketed by a fixed pure-Python probe (``real_gpu_poc.cpu_probe``); a probe ``SLOW_CPU``
times the run's fastest is a slow-CPU episode, and the capture is also given in the fastest
probe's seconds (``normalized_s``). Ratios are reported raw, normalized, and normalized
without the rounds of either episode; each is said. That probe, taken around the capture,
correlates only 0.55 with it on the H200's VM; ``--probe-loops N`` runs it inside the
capture, before each size, and :func:`inline_probe_summary` gives the ratio at equal CPU
speed (r = 0.85: the interval ±0.9% in 552 rounds where ±2% had needed ~450-700).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
COLLECTORS = REPO / "collectors"
POC = REPO / "bench" / "real_gpu_poc.py"
STARVED_SHARE = 0.10  # wall - cpu above this share of wall: the capture waited for a CPU
PRE_CAPTURE_S = 0.15
SLOW_CPU = 1.15  # a CPU probe this much slower than the run's fastest: a slow-CPU episode
CONDITIONS: dict[str, tuple[float, int]] = {"off": (0.0, 1), "10hz": (10.0, 1), "50hz": (50.0, 1),
                                            "10hz-replay/10": (10.0, 10)}
BOOTSTRAP = 4000


# -- small statistics (stdlib: the device's image need not have scipy) ------------------------
def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio_summary(ratios: Sequence[float], seed: int = 22) -> dict[str, Any]:
    """Median of paired ratios with a 95% bootstrap interval (percentile), and the geometric
    mean with a t interval on log ratios."""
    if not ratios:
        return {"n": 0}
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP))
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = (2.0 * statistics.stdev(logs) / math.sqrt(len(logs))) if len(logs) > 1 else float("nan")
    return {"n": len(ratios), "median": statistics.median(ratios),
            "median_ci95": [quantile(medians, 0.025), quantile(medians, 0.975)],
            "geomean": math.exp(mean), "geomean_ci95": [math.exp(mean - half), math.exp(mean + half)]}


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values),
            "iqr": quantile(values, 0.75) - quantile(values, 0.25)}


def cpu_steal_ticks() -> int:
    """The machine's CPU steal so far (/proc/stat, all CPUs): a VM's host took the CPU."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) if len(fields) > 8 else 0
    except (OSError, ValueError):
        return 0


# -- the agent's sampler in its own process -------------------------------------------------
def sampler_server() -> int:
    """Reads ``start HZ SLOW_EVERY`` / ``stop`` lines; runs the agent's NvmlSampler through its
    EventLog between them and answers each ``stop`` with this process's CPU time and what
    the samples saw (graphics clock, power). ``off`` reads one sample at start and stop."""
    sys.path.insert(0, str(COLLECTORS))
    import event_log  # noqa: E402  (the agent's own modules, stdlib only)
    import nvml_access as nv  # noqa: E402
    from nvml_sampler import Notices, NvmlSampler  # noqa: E402

    folder = tempfile.mkdtemp(prefix="rf-observer-")
    log = event_log.EventLog(os.path.join(folder, "events.jsonl"))
    notices = Notices(log.append)
    pynvml, _ = nv.load()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def spot() -> dict[str, float]:
        return {"gfx_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_GRAPHICS),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0}

    sampler: NvmlSampler | None = None
    cpu0, spots = 0.0, []
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "start":
            hz, slow_every = float(words[1]), int(words[2])
            spots = [spot()]
            cpu0 = time.process_time()
            sampler = NvmlSampler(0, hz, log.append, notices, slow_every=slow_every)
            sampler.start()
            print(json.dumps({"started": True}), flush=True)
        elif words and words[0] == "stop" and sampler is not None:
            sampler.stop()
            cpu = time.process_time() - cpu0
            spots.append(spot())
            seen = [s for s in sampler.samples if "gfx_mhz" in s]
            print(json.dumps({"sampler_cpu_s": cpu, "samples": len(seen), "replay_reads":
                              sum(1 for s in seen if "pcie_replay" in s),
                              "seen": [[s["t"], s["gfx_mhz"], s.get("power_w")] for s in seen], "spots": spots}),
                  flush=True)
            sampler = None
        else:
            break
    nv.release(pynvml)
    return 0


class Pipe:
    """A child that answers one JSON line per line it is sent."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ask(None)  # its ready line

    def ask(self, line: str | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"{self.proc.args[1:3]} ended (rc {self.proc.wait()})")
        return json.loads(answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def one_capture(condition: str, sampler: Pipe, capture: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    hz, slow_every = CONDITIONS[condition]
    sampler.ask(f"start {hz:g} {slow_every}")
    time.sleep(PRE_CAPTURE_S)  # the sampler's first samples are in before the capture starts
    steal0 = cpu_steal_ticks()
    result = capture()
    steal = cpu_steal_ticks() - steal0
    seen = sampler.ask("stop")
    wall, cpu = float(result["capture_s"]), float(result["capture_cpu_s"])
    during = [s for s in seen.pop("seen") if result["t0"] <= s[0] <= result["t1"]]  # samples inside the capture
    spots = seen.pop("spots")
    inline = {k: result[k] for k in ("inline_probe_s", "work_s") if k in result}
    return {"condition": condition, "capture_s": wall, "capture_cpu_s": cpu, "steal_ticks": steal, **inline,
            "cpu_probe_s": result["cpu_probe_s"], "starved": (wall - cpu) / wall > STARVED_SHARE,
            "gfx_mhz": [s[1] for s in during] or [p["gfx_mhz"] for p in spots],
            "power_w": [s[2] for s in during if s[2] is not None] or [p["power_w"] for p in spots],
            "clocks_from": "samples during the capture" if during else "one read before and after", **seen}


def cold_capture(args: argparse.Namespace) -> dict[str, Any]:
    """A fresh process: import torch, CUDA init, build, capture once (what an attempt pays)."""
    out = subprocess.run([sys.executable, str(POC), "--sizes", str(args.sizes), "--serve-s", "0"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("REPROFLEET_BENCH "))
    return json.loads(line.split(" ", 1)[1])


def observer(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    sampler = Pipe([sys.executable, __file__, "sampler-server"])
    workload = Pipe([sys.executable, str(POC), "--serve-commands", "--sizes", str(args.sizes)]
                    + (["--cpu", str(args.pin_workload)] if args.pin_workload is not None else [])
                    + ["--probe-loops", str(args.probe_loops)])
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        for _ in range(2):  # warm-up captures, not counted (allocator and cuBLAS settle)
            workload.ask("capture")
        for round_no in range(args.rounds):
            order = list(args.conditions.split(","))
            rng.shuffle(order)
            for condition in order:
                rows.append({"kind": "warm", "round": round_no,
                             **one_capture(condition, sampler, lambda: workload.ask("capture"))})
            if time.monotonic() - started > args.budget_s:
                break
        workload.close()
        for round_no in range(args.cold_rounds):
            order = ["off", "10hz", "50hz"]
            rng.shuffle(order)
            for condition in order:
                rows.append({"kind": "cold", "round": round_no,
                             **one_capture(condition, sampler, lambda: cold_capture(args))})
            if time.monotonic() - started > args.budget_s + args.cold_budget_s:
                break
    finally:
        sampler.close()
    return {"rows": rows, "summary": summarize(rows), "sizes": args.sizes, "seconds": time.monotonic() - started}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("warm", "cold"):
        mine = [r for r in rows if r["kind"] == kind]
        rounds = sorted({r["round"] for r in mine})
        by = {(r["round"], r["condition"]): r for r in mine}
        fastest = min((r["cpu_probe_s"] for r in mine), default=1.0)
        for r in mine:
            r["slow_cpu"] = r["cpu_probe_s"] > SLOW_CPU * fastest
            r["normalized_s"] = r["capture_s"] * fastest / r["cpu_probe_s"]  # in the fastest CPU's seconds
        starved_rounds = {r["round"] for r in mine if r["starved"]}
        slow_rounds = {r["round"] for r in mine if r["slow_cpu"]}
        part: dict[str, Any] = {"rounds": len(rounds), "starved_rounds": sorted(starved_rounds),
                                "slow_cpu_rounds": sorted(slow_rounds), "conditions": {}}
        for condition in CONDITIONS:
            cells = [by[(k, condition)] for k in rounds if (k, condition) in by]
            if not cells:
                continue
            ratios = [by[(k, condition)]["capture_s"] / by[(k, "off")]["capture_s"]
                      for k in rounds if (k, condition) in by and (k, "off") in by]
            paired = [k for k in rounds if (k, condition) in by and (k, "off") in by]
            clean = [by[(k, condition)]["capture_s"] / by[(k, "off")]["capture_s"]
                     for k in paired if k not in starved_rounds]
            normalized = [by[(k, condition)]["normalized_s"] / by[(k, "off")]["normalized_s"] for k in paired]
            steady = [by[(k, condition)]["normalized_s"] / by[(k, "off")]["normalized_s"] for k in paired
                      if k not in starved_rounds | slow_rounds]
            gfx = [g for c in cells for g in c["gfx_mhz"]]
            power = [p for c in cells for p in c["power_w"]]
            part["conditions"][condition] = {
                "capture_s": spread([c["capture_s"] for c in cells]),
                "capture_cpu_s": spread([c["capture_cpu_s"] for c in cells]),
                "cpu_over_wall": statistics.median(c["capture_cpu_s"] / c["capture_s"] for c in cells),
                "sampler_cpu_s_per_capture": statistics.median(c["sampler_cpu_s"] for c in cells),
                "sampler_cpu_share": statistics.median(c["sampler_cpu_s"] / (c["capture_s"] + PRE_CAPTURE_S) for c in cells),
                "samples_per_capture": statistics.median(c["samples"] for c in cells),
                "gfx_mhz": {"median": statistics.median(gfx), "min": min(gfx), "max": max(gfx)},
                "power_w": {"median": statistics.median(power), "max": max(power)},
                "normalized_s": spread([c["normalized_s"] for c in cells]),
                "cpu_probe_s": spread([c["cpu_probe_s"] for c in cells]),
                "ratio_to_off": ratio_summary(ratios), "ratio_to_off_without_starved": ratio_summary(clean),
                "ratio_to_off_normalized": ratio_summary(normalized),
                "ratio_to_off_normalized_steady_cpu": ratio_summary(steady),
            }
        if any("inline_probe_s" in r and r["inline_probe_s"] > 0 for r in mine):
            part["inline_probe"] = {c: inline_probe_summary(by, rounds, c) for c in CONDITIONS
                                    if c != "off" and any((k, c) in by for k in rounds)}
        out[kind] = part
    return out


def inline_probe_summary(by: Mapping[tuple[Any, str], Mapping[str, Any]], rounds: Sequence[Any],
                         condition: str) -> dict[str, Any]:
    """The capture's own seconds (``work_s``, the in-capture probes left out) against "off",
    raw and at equal CPU speed.

    Per round, d_w = log(work / work_off) and d_p = log(probe / probe_off), the probes summed
    over the sizes of each capture. Least squares d_w = a + b d_p: exp(a) is the ratio of two
    captures whose CPU ran at the same speed (the VM's vCPU speed, which changes within a
    second, is the noise; the in-capture probe sees it where the probes around the capture do
    not). If the sampler itself slowed the workload's CPU, exp(a) would not show that part:
    the probe's own ratio to "off" (``probe_ratio``) says whether it did, and the raw ratio
    is exp(a) times that share."""
    pairs = [(math.log(by[(k, condition)]["work_s"] / by[(k, "off")]["work_s"]),
              math.log(by[(k, condition)]["inline_probe_s"] / by[(k, "off")]["inline_probe_s"]))
             for k in rounds if (k, condition) in by and (k, "off") in by
             and by[(k, condition)].get("inline_probe_s") and by[(k, "off")].get("inline_probe_s")]
    n = len(pairs)
    if n < 4:
        return {"n": n}
    dw, dp = [w for w, _ in pairs], [p for _, p in pairs]
    mw, mp = statistics.fmean(dw), statistics.fmean(dp)
    sxx = sum((p - mp) ** 2 for p in dp)
    b = sum((p - mp) * (w - mw) for w, p in pairs) / sxx if sxx > 0 else 0.0
    a = mw - b * mp
    residuals = [w - a - b * p for w, p in pairs]
    s2 = sum(e * e for e in residuals) / (n - 2)
    se_a = math.sqrt(s2 * (1.0 / n + mp * mp / sxx)) if sxx > 0 else float("nan")
    r = (sum((p - mp) * (w - mw) for w, p in pairs)
         / math.sqrt(sxx * sum((w - mw) ** 2 for w in dw))) if sxx > 0 else float("nan")
    return {"n": n, "work_ratio": ratio_summary([math.exp(w) for w in dw]),
            "probe_ratio": ratio_summary([math.exp(p) for p in dp]),
            "at_equal_cpu": math.exp(a), "at_equal_cpu_ci95": [math.exp(a - 2.0 * se_a), math.exp(a + 2.0 * se_a)],
            "slope_on_probe": b, "r_work_probe": r, "sd_log_work_ratio": statistics.stdev(dw),
            "sd_log_residual": math.sqrt(s2)}


def merged_summary(paths: Sequence[str]) -> dict[str, Any]:
    """Rows of several observer runs (several calls on the device) summarized as one: the
    rounds of run i are renamed (i, round), so pairs never cross runs."""
    rows: list[dict[str, Any]] = []
    for i, path in enumerate(paths):
        for row in json.loads(Path(path).read_text())["rows"]:
            rows.append({**row, "round": f"{i}:{row['round']}"})
    return {"rows": rows, "summary": summarize(rows), "inputs": list(paths)}


# -- what each sampled field costs, and the clock-lock candidates ---------------------------
def field_costs(samples: int = 300) -> dict[str, Any]:
    sys.path.insert(0, str(COLLECTORS))
    import nvml_access as nv  # noqa: E402
    from nvml_sampler import _fields  # noqa: E402

    pynvml, _ = nv.load()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    costs: dict[str, float] = {}
    for name, read in _fields(pynvml):
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            read(handle)
            times.append(time.perf_counter() - t0)
        costs[name] = statistics.median(times) * 1e6
    nv.release(pynvml)
    return {"median_us": costs, "sample_us": sum(costs.values()), "samples": samples}


def clock_candidates() -> dict[str, Any]:
    """Every candidate for a locked graphics-clock range, read (never set) at this moment."""
    sys.path.insert(0, str(COLLECTORS))
    import gpu_policy  # noqa: E402  (the agent's read-back: what a record holds)

    values, notes = gpu_policy.readback(0)
    smi = subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE"], capture_output=True, text=True,
                         timeout=60).stdout
    return {"agent_readback": values, "notes": notes, "nvidia_smi_q_clock_performance": smi}


# -- a campaign through a local host seam ---------------------------------------------------
def local_session(host: Any) -> Any:
    """A Session-shaped object (``remote.transport.Session``'s methods) over a local shell."""
    from reprofleet.errors import CommandTimedOut
    from reprofleet.remote.transport import CommandResult

    home = Path.home()

    class LocalStream:
        def __init__(self, command: str) -> None:
            self._proc = subprocess.Popen(["bash", "-c", command], cwd=home, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            self._lines: list[bytes] = []
            self._cond = threading.Condition()
            self._eof = False
            self.stderr_tail = b""
            self.exit_code: int | None = None
            threading.Thread(target=self._pump, daemon=True).start()

        def _pump(self) -> None:
            assert self._proc.stdout is not None
            for raw in self._proc.stdout:
                with self._cond:
                    self._lines.append(raw.rstrip(b"\n"))
                    self._cond.notify_all()
            with self._cond:
                self._eof = True
                self._cond.notify_all()

        @property
        def finished(self) -> bool:
            with self._cond:
                return self._eof and not self._lines and self._proc.poll() is not None

        def next_line(self, timeout: float) -> str | None:
            with self._cond:
                self._cond.wait_for(lambda: self._lines or self._eof, timeout)
                if self._lines:
                    return self._lines.pop(0).decode("utf-8", "replace")
            if self._eof:
                self.exit_code = self._proc.wait()
            return None

        def close(self) -> None:
            if self._proc.poll() is None:
                self._proc.kill()

    class LocalExec:
        def __init__(self, command: str) -> None:
            self._proc = subprocess.Popen(["bash", "-c", command], cwd=home, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.stdout = self._proc.stdout

        def write(self, data: bytes) -> None:
            assert self._proc.stdin is not None
            self._proc.stdin.write(data)

        def finish(self, timeout: float) -> tuple[int, bytes, bytes]:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            out, err = self._proc.communicate(timeout=timeout)
            return self._proc.returncode, out, err

        def close(self) -> None:
            if self._proc.poll() is None:
                self._proc.kill()

    class LocalSession:
        def __init__(self) -> None:
            self.host = host
            self.alive = True

        def silent_for(self) -> float:
            return 0.0

        def run(self, command: str, timeout: float | None = None, stdin: str | None = None) -> Any:
            try:
                done = subprocess.run(["bash", "-c", command], cwd=home, input=stdin or "", capture_output=True,
                                      text=True, timeout=timeout or 120)
            except subprocess.TimeoutExpired as exc:
                raise CommandTimedOut(host.name, command, timeout or 120) from exc
            return CommandResult(command, done.returncode, done.stdout, done.stderr)

        def stream(self, command: str) -> Any:
            return LocalStream(command)

        def exec_channel(self, command: str) -> Any:
            return LocalExec(command)

        def put_bytes(self, content: bytes, remote_path: str, mode: int = 0o644) -> None:
            path = Path(remote_path) if remote_path.startswith("/") else home / remote_path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(mode)

        def close(self) -> None:
            self.alive = False

    return LocalSession()


class LocalHostPort:
    """``runner.port.HostPort`` for a host that is the controller's own machine (no sshd)."""

    def __init__(self, ctx: Any, host: Any) -> None:
        self._ctx, self._host = ctx, host

    def connect(self) -> Any:
        from reprofleet.remote.agent import AgentClient

        agent = AgentClient(local_session(self._host), self._ctx.bundle, self._host.python)
        agent.push()
        return agent

    def probe(self, timeout_s: float) -> Any:
        from reprofleet.liveness.probes import ProbeAnswer

        return ProbeAnswer.SSHD  # the controller runs on it: it is up whenever we ask

    def banner(self, timeout_s: float) -> bool:
        return True

    def power(self, log: Any) -> Any:
        from reprofleet.power.ports import HostPower

        return HostPower(self._host.name, ())  # no outlet: a wedge here would be a person's to cycle

    def wall_sampler(self, write: Callable[[Any], None]) -> Any:
        from reprofleet.power.wall import WallPowerSampler

        return WallPowerSampler((), write)


PLAYBOOK = """name: real-gpu-h200
description: bench/real_gpu.py on a real GPU, read-only (the host is gpu_policy observe)
poc:
  script: {poc}
runtime:
  kind: python
  python: {python}
attempts: {attempts}
timeouts: {{attempt: 300, boot: 120}}
reference: default
at_risk_phase: cuda_graph_capture
defaults:
  args: {{sizes: 51, serve_s: 5}}
matrix:
  - name: default
  - name: lgc-1500
    graphics_clocks: [180, 1500]
"""


def campaign(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "src"))
    from reprofleet.campaign.preflight import observe_only_refusals
    from reprofleet.campaign.run import describe_plan, make_plan, run_campaign
    from reprofleet.inventory import load_inventory
    from reprofleet.playbook import load_playbook
    from reprofleet.remote.transport import TransportSettings
    from reprofleet.runner.context import RunSettings

    work = Path(args.out) / "campaign"
    work.mkdir(parents=True, exist_ok=True)
    inventory = work / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    h200:\n      ansible_host: 127.0.0.1\n      gpu_index: 0\n"
                         f"      ansible_python_interpreter: {sys.executable}\n      gpu_policy: observe\n")
    book_path = work / "book.yml"
    book_path.write_text(PLAYBOOK.format(poc=POC, python=sys.executable, attempts=args.attempts))
    book, hosts = load_playbook(book_path), load_inventory(str(inventory)).hosts
    plan = make_plan(book, hosts)
    refusals = observe_only_refusals(book, hosts)
    settings = RunSettings(transport=TransportSettings(known_hosts=work / "known_hosts"), controller="real-gpu",
                           sample_hz=10.0)
    started = time.monotonic()
    result = run_campaign(plan, settings, work / "reports", port_for=LocalHostPort)
    from reprofleet.cli.campaign_tasks import write_campaign_report
    from rich.console import Console

    report = write_campaign_report(result.directory.root, Console(width=160), f"campaign {result.campaign_id}")
    return {"plan": describe_plan(plan), "refusals": refusals, "folder": str(result.directory.root),
            "report": str(report), "seconds": time.monotonic() - started, "records": len(result.records),
            "quarantined": dict(result.quarantined), "failure": result.failure}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["clocks", "fields", "observer", "campaign", "sampler-server", "merge"])
    parser.add_argument("inputs", nargs="*", help="merge: observer.json files of several runs")
    parser.add_argument("--probe-loops", type=int, default=0,
                        help="observer: a CPU probe of this many loops before each size of every capture")
    parser.add_argument("--out", default=".")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--cold-rounds", type=int, default=4)
    parser.add_argument("--sizes", type=int, default=51)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=160.0, help="stop adding warm rounds after this long")
    parser.add_argument("--cold-budget-s", type=float, default=170.0, help="and cold rounds this much later")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="warm rounds: which conditions")
    parser.add_argument("--pin-workload", type=int, help="run the warm workload on this CPU only (the sampler is not pinned)")
    args = parser.parse_args(argv)
    if args.what == "sampler-server":
        return sampler_server()
    result = {"clocks": lambda: clock_candidates(), "fields": lambda: field_costs(),
              "observer": lambda: observer(args), "campaign": lambda: campaign(args),
              "merge": lambda: merged_summary(args.inputs)}[args.what]()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"{args.what}.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result.get("summary", {k: v for k, v in result.items() if k != "rows"}), indent=1,
                     default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
