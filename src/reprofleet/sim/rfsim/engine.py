"""The fake vLLM engine start behind ``vllm.LLM(...)`` on a simulated host.

It prints the step-by-step log of rfsim.vllm_log (time-scaled by the host's
``time_scale``), marks the GPU's load per phase, and at the decision point (entry into
CUDA-graph capture unless ``wedge_phase`` says otherwise) asks the wedge model what happens,
using the GPU policy actually applied *at that moment*:

* clean  - goes on to "init engine ... took", LLM() returns;
* error  - prints an EngineCore traceback, raises RuntimeError (the PoC exits 1);
* hang   - stops printing and sleeps forever (the host is fine); with the host's
  ``hang_ignores_sigterm`` it is stuck in the driver and only SIGKILL ends it;
* wedge  - asks the hardware to wedge the host, then sleeps forever (it will be frozen);
* reboot - asks the hardware to reset the host, then sleeps until it dies with it;
* orderly_reboot (script only) - unattended-upgrades reboots the host under the attempt: asks
  the hardware for an orderly reboot, then sleeps until systemd's SIGTERM ends it;
* forge (script only) - appends a clean ``exit`` line of its own to every events.jsonl under
  the agent's state folder and writes the attempt's exit.json (a PoC, or a package it imports,
  that writes the agent's files), then fails as ``error`` does.

Every decision is appended to ``hw/decisions.jsonl`` (the simulation's ground truth).

Host-side module: standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

from . import boots, flashinfer_store, gpu, hwio, vllm_log, wedge

HANG_FOREVER_S = 7 * 24 * 3600.0


def version() -> str:
    return os.environ.get("RFSIM_VLLM_VERSION") or str(hwio.host_config().get("vllm_version", "0.25.1"))


def _prefix(pid: int) -> str:
    return f"(EngineCore pid={pid}) "


def render(line: vllm_log.Line, args: vllm_log.EngineArgs, core_pid: int, main_pid: int) -> str:
    """One line as this vLLM version prints it. Up to 0.30 the engine-core child process
    prefixes *every* line it writes (tqdm and FlashInfer too); from 0.31 only log lines."""
    now = time.time()
    modern = args.version >= (0, 31)
    if line.kind == vllm_log.FLASHINFER:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
        body = f"{stamp} - INFO - {line.source} - flashinfer.jit: {line.text}"
        return body if modern else _prefix(core_pid) + body
    if line.kind == vllm_log.TQDM:
        return line.text if modern else _prefix(core_pid) + line.text
    body = f"{line.level} {time.strftime('%m-%d %H:%M:%S', time.localtime(now))} [{line.source}] {line.text}"
    if line.main:
        return f"(MainProcess pid={main_pid}) {body}" if modern else body
    return _prefix(core_pid) + body


def emit(text: str, stream: Any) -> None:
    stream.write(text + "\n")
    stream.flush()


def conditions(args: vllm_log.EngineArgs) -> wedge.Conditions:
    state = gpu.read_state(0)
    return wedge.Conditions(
        graphics_ceiling_mhz=gpu.graphics_ceiling(state), power_limit_w=float(state["power_limit_w"]),
        spec_tokens=None if args.spec_tokens is None else int(args.spec_tokens),
        enforce_eager=args.enforce_eager, cuda_launch_blocking=os.environ.get("CUDA_LAUNCH_BLOCKING") == "1",
        vllm_version=args.version_text,
    )


def decide(args: vllm_log.EngineArgs, attempt: int) -> wedge.Decision:
    config = hwio.host_config()
    cond = conditions(args)
    decision = wedge.decide(wedge.WedgeParams.from_config(config), cond, attempt=attempt,
                            seed=int(config.get("seed", 0)), script=list(config.get("script", [])))
    hwio.append_jsonl(hwio.hw_dir() / "decisions.jsonl", {
        "t": time.time(), "attempt": attempt, "outcome": decision.outcome, "source": decision.source,
        "lockup": decision.lockup,
        "probabilities": decision.probabilities, "conditions": cond.__dict__, "boot_id": _boot_id(),
        "pid": gpu.host_pid(),
    })
    return decision


def _boot_id() -> Optional[str]:
    """The host's boot as its hardware records it (a container's /proc is not the host's view)."""
    boot = boots.current(hwio.hw_dir() / "boots")
    if boot is not None:
        return boot.boot_id
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def note_what_it_saw(cache: Path) -> None:
    """Appends to ``hw/seen.jsonl`` the hash of the PoC script that started this engine and
    of every file in its cache, as found at start: tests check that a host received exactly
    the bytes the controller pushed (with this code, not the controller's)."""
    files = {}
    if cache.is_dir():
        for path in sorted(cache.rglob("*")):
            if path.is_file():
                files[path.relative_to(cache).as_posix()] = _sha256(path)
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    hwio.append_jsonl(hwio.hw_dir() / "seen.jsonl", {
        "t": time.time(), "poc": str(script), "poc_sha256": _sha256(script) if script and script.is_file() else None,
        "cache_dir": str(cache), "cache_files": files, "boot_id": _boot_id(),
    })


class Engine:
    def __init__(self, model: str, kwargs: Dict[str, Any]) -> None:
        cache = Path(os.environ.get("VLLM_CACHE_ROOT", os.path.expanduser("~/.cache/vllm")))
        note_what_it_saw(cache)
        probe = vllm_log.engine_args(model, kwargs, version(), cache_hit=False)
        self.marker = cache / "torch_compile_cache" / vllm_log.cache_key(probe) / "rank_0_0" / "backbone"
        self.args = vllm_log.engine_args(model, kwargs, version(), cache_hit=self.marker.is_dir())
        self.store: Optional[flashinfer_store.Store] = None
        if self.args.version >= (0, 33):  # FlashInfer's managed autotune store, as found now
            self.store = flashinfer_store.find(os.environ, os.path.expanduser("~"), gpu.NAME)
            self.args = dataclasses.replace(self.args, autotune_store=(
                self.store.root_words, str(self.store.env_dir), tuple(sorted(self.store.hits))))
        config = hwio.host_config()
        self.scale = float(config.get("time_scale", 0.05))
        self.steps = vllm_log.move_decision(vllm_log.timeline(self.args),
                                            str(config.get("wedge_phase", "cuda_graph_capture")))
        self.main_pid = os.getpid()  # as the engine's own log lines name it (its namespace's number)
        self.core_pid = self.main_pid + 1
        self.started = time.time()
        self.load: Dict[str, Any] = {"pid": gpu.host_pid(), "started": self.started, "level": 0.0,
                                     "memory_used_mib": 0, "phase": "engine_init"}

    def mark(self, step: vllm_log.Step) -> None:
        if step.load is None and step.memory_mib is None:
            return
        if step.load is not None:
            self.load["level"] = step.load
        if step.memory_mib is not None:
            self.load["memory_used_mib"] = step.memory_mib
        self.load["phase"] = step.phase
        gpu.write_load(0, dict(self.load))

    def start(self) -> None:
        attempt = hwio.next_counter(hwio.hw_dir() / "attempts.json")
        for step in self.steps:
            time.sleep(step.delay_s * self.scale)
            self.mark(step)  # the burst of work entering this phase is on the GPU already
            if step.decision:
                self.act(decide(self.args, attempt))
            for line in step.lines:
                stream = sys.stderr if line.kind == vllm_log.TQDM else sys.stdout
                emit(render(line, self.args, self.core_pid, self.main_pid), stream)
            if step.phase == "torch_compile" and not self.args.compile_cache_hit:
                self.marker.mkdir(parents=True, exist_ok=True)
            if self.store is not None and any("Autotuning process ends" in line.text for line in step.lines):
                flashinfer_store.publish(self.store, gpu.NAME)  # the tuned winners, once tuning is done

    def act(self, decision: wedge.Decision) -> None:
        if decision.outcome == "clean":
            return
        if decision.outcome == wedge.FORGE:
            forge_clean_exits()
            self.fail(False)
        if decision.outcome == wedge.ORDERLY_REBOOT:
            hwio.request("orderly_reboot", source="vllm", by="unattended-upgrades", attempt=decision.attempt)
            sleep_forever()
        if decision.outcome == "error":
            self.fail(random.Random(decision.attempt).random() < 0.5)
        if decision.outcome == "hang" and hwio.host_config().get("hang_ignores_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stuck in the driver: no handler of its runs
        if decision.outcome in ("wedge", "reboot"):
            hwio.request(decision.outcome, source="vllm", name="VLLM::EngineCor", attempt=decision.attempt,
                         lockup=decision.lockup, pid=gpu.host_pid())
        sleep_forever()

    def fail(self, out_of_memory: bool) -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        head = f"{_prefix(self.core_pid)}ERROR {stamp} [core.py:708] "
        if out_of_memory:
            cause = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.17 GiB. GPU 0 has a total "
                     "capacity of 95.59 GiB of which 402.00 MiB is free. Including non-PyTorch memory, this process "
                     "has 95.19 GiB memory in use. Of the allocated memory 91.86 GiB is allocated by PyTorch, and "
                     "1.62 GiB is reserved by PyTorch but unallocated.")
        else:
            cause = "RuntimeError: CUDA error: an illegal memory access was encountered"
        frames = [
            "EngineCore failed to start.", "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, **kwargs)",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 498, in __init__',
            "    super().__init__(vllm_config, executor_class, log_stats,",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4398, '
            "in capture_model", "    self._capture_cudagraphs(", cause,
        ]
        for frame in frames:
            emit(head + frame, sys.stderr)
        emit(f"{_prefix(self.core_pid)}Process EngineCore:", sys.stderr)
        gpu.write_load(0, dict(self.load, level=0.0))
        raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")


def forge_clean_exits() -> int:
    """What a PoC of the agent's own uid can do to the agent's files: a clean exit line appended
    (compact, as the agent writes its lines) to every events.jsonl under the state folder, and
    its own attempt's exit.json replaced. Returns how many files it wrote."""
    root = Path(os.environ.get("REPROFLEET_STATE_DIR") or Path.home() / ".cache" / "reprofleet")
    lie = {"t": time.time(), "k": "exit", "seq": 10_000, "rc": 0, "signal": None, "timed_out": False,
           "killed": False, "lost": False, "duration_s": 1.0, "telemetry": None, "mac": "0" * 64}
    line = json.dumps(lie, separators=(",", ":"))
    written = 0
    for events in sorted(root.glob("attempts/*/events.jsonl")):
        with open(events, "a") as out:
            out.write(line + "\n")
        written += 1
    mine = os.environ.get("REPROFLEET_ATTEMPT")
    if mine and (root / "attempts" / mine).is_dir():
        (root / "attempts" / mine / "exit.json").write_text(line)
        written += 1
    return written


def sleep_forever() -> None:
    deadline = time.monotonic() + HANG_FOREVER_S
    while time.monotonic() < deadline:
        time.sleep(60)
