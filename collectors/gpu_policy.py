"""`policy apply|read|restore`: set GPU clocks/power/persistence and read back what holds.

nvidia-smi sets (it is what administrators use and what the driver documents); NVML
reads back, because a policy is an experimental factor and the record must hold what
the card reports, not what we asked.

A locked clock range has no getter of its own in NVML (nvmlDeviceSetGpuLockedClocks and
nvmlDeviceSetMemoryLockedClocks come with a reset, no read), so two independent reads
stand for it and the controller requires them to agree: the P0 range
(nvmlDeviceGetMinMaxClockOfPState) and the current clock range the driver reports in its
clock-frequency string (nvmlDeviceGetCurrentClockFreqs: ``nvclockmin``/``nvclockmax``,
``memclockmin``/``memclockmax``). Neither is documented to reflect a lock; on an H200 at
default both read 345-1980 MHz (tests/fixtures/real_gpu/). The clock-event reasons are read
beside them: NVML documents ``nvmlClocksThrottleReasonUserDefinedClocks`` as the same bit
as ApplicationsClocksSetting (0x2), the reason a user's clocks limit the card. What the card held before our first apply (persistence,
the power limit the owner set) is kept in ``policy/gpu<N>.baseline.json`` (it survives
reboots) so restore can put it back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

import attempt_state as state
import nvml_access as nv
import policy_plan as plan

COMMAND_TIMEOUT_S = 30.0


def readback(gpu: int) -> Tuple[Dict[str, Any], List[str]]:
    """What the card reports now (PROTOCOL.md `readback`), and notes for each null."""
    notes: List[str] = []
    pynvml, reason = nv.load()
    values: Dict[str, Any] = dict.fromkeys((
        "graphics_clocks", "memory_clocks", "power_limit_w", "enforced_power_limit_w",
        "default_power_limit_w", "power_limit_range_w", "persistence", "application_clocks"))
    values["max_clocks_mhz"] = {"graphics": None, "memory": None}
    values.update(dict.fromkeys(("graphics_clocks_freqs", "memory_clocks_freqs", "clocks_event_reasons")))
    if pynvml is None:
        return values, ["NVML unavailable, nothing read back: %s" % reason]
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        _read_into(values, notes, pynvml, handle)
    except Exception as exc:
        notes.append("gpu %d: %s" % (gpu, nv.describe(exc)))
    finally:
        nv.release(pynvml)
    return values, notes


def _read_into(values: Dict[str, Any], notes: List[str], pynvml: Any, handle: Any) -> None:
    def read(name: str, call: Any, *args: Any) -> Any:
        value, why = nv.attempt(lambda: call(handle, *args))
        if why:
            notes.append("%s: %s" % (name, why))
        return value

    gfx, mem = pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_MEM
    values["graphics_clocks"] = _pair(read("graphics_clocks", pynvml.nvmlDeviceGetMinMaxClockOfPState, gfx, pynvml.NVML_PSTATE_0))
    values["memory_clocks"] = _pair(read("memory_clocks", pynvml.nvmlDeviceGetMinMaxClockOfPState, mem, pynvml.NVML_PSTATE_0))
    values["power_limit_w"] = nv.mw_to_w(read("power_limit_w", pynvml.nvmlDeviceGetPowerManagementLimit))
    values["enforced_power_limit_w"] = nv.mw_to_w(read("enforced_power_limit_w", pynvml.nvmlDeviceGetEnforcedPowerLimit))
    values["default_power_limit_w"] = nv.mw_to_w(read("default_power_limit_w", pynvml.nvmlDeviceGetPowerManagementDefaultLimit))
    limits = read("power_limit_range_w", pynvml.nvmlDeviceGetPowerManagementLimitConstraints)
    values["power_limit_range_w"] = [nv.mw_to_w(limits[0]), nv.mw_to_w(limits[1])] if limits else None
    persistence = read("persistence", pynvml.nvmlDeviceGetPersistenceMode)
    values["persistence"] = bool(persistence) if persistence is not None else None
    app_mem = read("application_clocks.memory", pynvml.nvmlDeviceGetApplicationsClock, mem)
    app_gfx = read("application_clocks.graphics", pynvml.nvmlDeviceGetApplicationsClock, gfx)
    values["application_clocks"] = [app_mem, app_gfx] if app_mem is not None and app_gfx is not None else None
    values["max_clocks_mhz"] = {
        "graphics": read("max_clocks_mhz.graphics", pynvml.nvmlDeviceGetMaxClockInfo, gfx),
        "memory": read("max_clocks_mhz.memory", pynvml.nvmlDeviceGetMaxClockInfo, mem),
    }
    freqs_call = getattr(pynvml, "nvmlDeviceGetCurrentClockFreqs", None)  # nvidia-ml-py >= 12.535
    if freqs_call is None:
        notes.append("clock_freqs: this pynvml has no nvmlDeviceGetCurrentClockFreqs")
    else:
        freqs = clock_freqs(nv.text(read("clock_freqs", freqs_call)))
        values["graphics_clocks_freqs"] = _range(freqs, "nvclock")
        values["memory_clocks_freqs"] = _range(freqs, "memclock")
    reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
               or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    if reasons is not None:
        value = read("clocks_event_reasons", reasons)
        values["clocks_event_reasons"] = int(value) if value is not None else None


def clock_freqs(text: Optional[str]) -> Dict[str, int]:
    """``"nvclock=345, nvclockmin=345, nvclockmax=1980, ..."`` -> {name: MHz} (unknown tokens kept)."""
    found: Dict[str, int] = {}
    for token in (text or "").split(","):
        name, sep, value = token.strip().partition("=")
        if sep and value.strip().lstrip("-").isdigit():
            found[name.strip()] = int(value.strip())
    return found


def _range(freqs: Dict[str, int], prefix: str) -> Optional[List[int]]:
    low, high = freqs.get(prefix + "min"), freqs.get(prefix + "max")
    return [low, high] if low is not None and high is not None else None


def _pair(value: Any) -> Optional[List[int]]:
    return [int(value[0]), int(value[1])] if value is not None else None


def _baseline_path(state_dir: str, gpu: int) -> str:
    return os.path.join(state_dir, "policy", "gpu%d.baseline.json" % gpu)


def load_or_record_baseline(state_dir: str, gpu: int, current: Dict[str, Any]) -> Dict[str, Any]:
    """The settings before our first apply: recorded once, kept until a restore."""
    path = _baseline_path(state_dir, gpu)
    baseline = state.read_json(path)
    if baseline is None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        baseline = dict(current)
        state.write_json_atomic(path, baseline)
    return baseline


def run_step(nvidia_smi: str, gpu: int, step: plan.Step) -> Dict[str, Any]:
    argv = plan.command_argv(nvidia_smi, gpu, step, os.geteuid() == 0)
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"argv": argv, "rc": 124, "output": "timed out after %gs" % COMMAND_TIMEOUT_S}
    except OSError as exc:
        return {"argv": argv, "rc": 127, "output": str(exc)}
    return {"argv": argv, "rc": result.returncode,
            "output": result.stdout.decode("utf-8", "replace").strip()}


def _run_plan(gpu: int, steps: List[plan.Step], errors: List[str], notes: List[str]) -> List[Dict[str, Any]]:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        errors.append("nvidia-smi not found on PATH")
        return []
    commands = []
    for step in steps:
        command = run_step(nvidia_smi, gpu, step)
        commands.append(command)
        if command["rc"] == 0:
            continue
        what = "%s (%s)" % (" ".join(step.args), step.key)
        if not step.requested and plan.is_unsupported(command["output"]):
            notes.append("%s: not supported on this GPU: %s" % (what, command["output"]))
        else:
            errors.append("%s failed (rc %d): %s" % (what, command["rc"], command["output"]))
    return commands


def _report(action: str, gpu: int, commands: List[Dict[str, Any]], errors: List[str],
            notes: List[str]) -> Dict[str, Any]:
    values, read_notes = readback(gpu)
    return {"k": "policy", "gpu": gpu, "action": action, "commands": commands, "readback": values,
            "ok": not errors, "errors": errors, "notes": notes + read_notes}


def apply(state_dir: str, gpu: int, policy: Dict[str, Any]) -> Dict[str, Any]:
    before, _ = readback(gpu)
    errors: List[str] = []
    notes: List[str] = []
    limit = policy.get("power_limit_w")
    if limit is not None:
        low, high = before.get("power_limit_range_w") or [None, None]
        problem = plan.power_limit_problem(limit, low, high)
        if problem:  # refuse the whole policy: half of it applied would be a wrong cell
            return _report("apply", gpu, [], [problem], notes)
    baseline = load_or_record_baseline(state_dir, gpu, before)
    steps = plan.plan_apply(policy, before.get("default_power_limit_w"), baseline.get("persistence"))
    commands = _run_plan(gpu, steps, errors, notes)
    return _report("apply", gpu, commands, errors, notes)


def read(gpu: int) -> Dict[str, Any]:
    return _report("read", gpu, [], [], [])


def restore(state_dir: str, gpu: int) -> Dict[str, Any]:
    """What the owner had before our first apply: persistence and the power limit from the
    baseline; clocks and application clocks back to the card's defaults."""
    before, _ = readback(gpu)
    notes: List[str] = []
    baseline = state.read_json(_baseline_path(state_dir, gpu))
    if baseline is None:
        notes.append("no baseline recorded (never applied here): persistence left as it is")
    errors: List[str] = []
    owner_limit = (baseline or {}).get("power_limit_w")
    if owner_limit is not None and owner_limit != before.get("default_power_limit_w"):
        notes.append("power limit back to the owner's %s W (the card's default is %s W)"
                     % (plan._watts(float(owner_limit)), before.get("default_power_limit_w")))
    steps = plan.plan_restore(before.get("default_power_limit_w"), (baseline or {}).get("persistence"),
                              float(owner_limit) if isinstance(owner_limit, (int, float)) else None)
    commands = _run_plan(gpu, steps, errors, notes)
    report = _report("restore", gpu, commands, errors, notes)
    if report["ok"] and baseline is not None:
        os.remove(_baseline_path(state_dir, gpu))  # the next campaign records its own
    return report
