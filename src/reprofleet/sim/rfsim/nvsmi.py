"""``nvidia-smi`` on a simulated host: the options a GPU policy needs, with the real tool's
messages and exit codes (0 ok, 2 invalid argument, 4 no permission, 6 not found, 15 the GPU
fell off the bus).

A card off the bus makes every command that names it print what users of real cards
report, "Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost.  Reboot
the system to recover this GPU" (AlexeyAB/darknet#86, marian-nmt/marian#251, with its two
spaces), and exit 15: nvidia-smi(1) RETURN VALUE, "The GPU has fallen off the bus or has
otherwise become inaccessible".

Settings are written to the card's state file, where the fake NVML, the wedge model and
the hardware daemon (which resets them on power off) see them. Every setter call (``-lgc``,
``-rgc``, ``-pl``, ``-pm`` ...) is also appended to ``nvidia-smi-setters.jsonl`` beside it,
whatever its outcome, so a test can count what a host was asked to change: an observe-only
host must see none.

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from . import gpu, hwio, nvsmi_report

RC_OK, RC_INVALID, RC_NO_PERMISSION, RC_NOT_FOUND, RC_NO_DRIVER, RC_GPU_LOST = 0, 2, 4, 6, 9, 15
GPU_LOST = "Unable to determine the device handle for GPU {bus}: GPU is lost.  Reboot the system to recover this GPU"
INVALID_COMBINATION = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
TERMINATING = "Terminating early due to previous errors."

# option -> (canonical name, takes a value)
OPTIONS: Dict[str, Tuple[str, bool]] = {
    "-h": ("help", False), "--help": ("help", False), "--version": ("version", False),
    "-L": ("list", False), "--list-gpus": ("list", False),
    "-q": ("query", False), "--query": ("query", False), "-d": ("display", True),
    "--display": ("display", True), "-i": ("id", True), "--id": ("id", True),
    "--query-gpu": ("query-gpu", True), "--format": ("format", True),
    "-lgc": ("lgc", True), "--lock-gpu-clocks": ("lgc", True),
    "-rgc": ("rgc", False), "--reset-gpu-clocks": ("rgc", False),
    "-lmc": ("lmc", True), "--lock-memory-clocks": ("lmc", True),
    "-rmc": ("rmc", False), "--reset-memory-clocks": ("rmc", False),
    "-pl": ("pl", True), "--power-limit": ("pl", True),
    "-pm": ("pm", True), "--persistence-mode": ("pm", True),
    "-ac": ("ac", True), "--applications-clocks": ("ac", True),
    "-rac": ("rac", False), "--reset-applications-clocks": ("rac", False),
}
MODIFIERS = ("lgc", "rgc", "lmc", "rmc", "pl", "pm", "ac", "rac")


class UsageError(Exception):
    pass


def parse(argv: List[str]) -> Dict[str, str]:
    """nvidia-smi's argument forms: ``-pl 350``, ``--power-limit=350``, ``-i0`` is not one."""
    parsed: Dict[str, str] = {}
    args = list(argv)
    while args:
        token = args.pop(0)
        flag, sep, inline = token.partition("=")
        if flag not in OPTIONS:
            raise UsageError(token)
        name, takes_value = OPTIONS[flag]
        if takes_value:
            if not sep:
                if not args:
                    raise UsageError(token)
                inline = args.pop(0)
            parsed[name] = inline
        elif sep:
            raise UsageError(token)
        else:
            parsed[name] = ""
    if len([m for m in MODIFIERS if m in parsed]) > 1:
        raise UsageError("more than one setting")
    return parsed


def _pair(text: str, single_ok: bool) -> Tuple[int, int]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 1 and single_ok:
        parts = parts * 2
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(text)
    low, high = int(parts[0]), int(parts[1])
    return low, high


def _targets(parsed: Dict[str, str]) -> List[int]:
    count = gpu.gpu_count()
    if "id" not in parsed:
        return list(range(count))
    chosen = []
    for part in parsed["id"].split(","):
        part = part.strip()
        index = _index_of(part, count)
        if index is None:
            raise LookupError(part)
        chosen.append(index)
    return chosen


def _index_of(ident: str, count: int) -> Optional[int]:
    if ident.isdigit():
        return int(ident) if int(ident) < count else None
    for index in range(count):
        state = gpu.read_state(index)
        if ident in (state["uuid"], state["pci_bus_id"], state["serial"]):
            return index
    return None


Setter = Callable[[int, Dict[str, object], str], Tuple[int, List[str]]]


def set_locked_graphics(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
    low, high = _pair(value, single_ok=True)
    if low > high:
        raise UsageError(value)
    gpu.update_settings(index, {"locked_graphics": [low, high]})
    bus = state["pci_bus_id"]
    return RC_OK, [f'GPU clocks set to "(gpuClkMin {low}, gpuClkMax {high})" for GPU {bus}']


def set_locked_memory(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
    low, high = _pair(value, single_ok=True)
    if low > high:
        raise UsageError(value)
    gpu.update_settings(index, {"locked_memory": [low, high]})
    bus = state["pci_bus_id"]
    return RC_OK, [f'Memory clocks set to "(memClkMin {low}, memClkMax {high})" for GPU {bus}']


def set_power_limit(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
    try:
        watts = float(value)
    except ValueError:
        raise UsageError(value) from None
    bus, previous = state["pci_bus_id"], float(state["power_limit_w"])  # type: ignore[arg-type]
    if not gpu.POWER_MIN_W <= watts <= gpu.POWER_MAX_W:
        return RC_INVALID, [
            f"Provided power limit {watts:.2f} W is not a valid power limit which should be between "
            f"{gpu.POWER_MIN_W:.2f} W and {gpu.POWER_MAX_W:.2f} W for GPU {bus}", TERMINATING]
    gpu.update_settings(index, {"power_limit_w": watts})
    return RC_OK, [f"Power limit for GPU {bus} was set to {watts:.2f} W from {previous:.2f} W."]


def set_persistence(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
    wanted = {"0": False, "DISABLED": False, "1": True, "ENABLED": True}.get(value.strip().upper())
    if wanted is None:
        raise UsageError(value)
    bus, word = state["pci_bus_id"], "Enabled" if wanted else "Disabled"
    if bool(state.get("persistence")) == wanted:
        return RC_OK, [f"Persistence mode is already {word} for GPU {bus}."]
    gpu.update_settings(index, {"persistence": wanted})
    return RC_OK, [f"{word} persistence mode for GPU {bus}."]


def set_application_clocks(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
    memory, graphics = _pair(value, single_ok=False)
    bus = state["pci_bus_id"]
    if memory not in gpu.SUPPORTED_MEMORY_MHZ or not gpu.MIN_GRAPHICS_MHZ <= graphics <= gpu.MAX_GRAPHICS_MHZ:
        return RC_INVALID, [
            f'Specified clock combination "(MEM {memory}, SM {graphics})" is not supported for GPU {bus}. '
            "Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations",
            TERMINATING]
    gpu.update_settings(index, {"application_clocks": [memory, graphics]})
    return RC_OK, [f'Applications clocks set to "(MEM {memory}, SM {graphics})" for GPU {bus}']


def _reset(key: str, message: str) -> Setter:
    def reset(index: int, state: Dict[str, object], value: str) -> Tuple[int, List[str]]:
        gpu.update_settings(index, {key: None})
        return RC_OK, [message.format(bus=state["pci_bus_id"])] if message else []
    return reset


SETTERS: Dict[str, Tuple[Setter, str]] = {
    "lgc": (set_locked_graphics, "Failed to set locked GPU clocks for GPU {bus}: Insufficient Permissions"),
    "rgc": (_reset("locked_graphics", ""), "Failed to reset locked GPU clocks for GPU {bus}: Insufficient Permissions"),
    "lmc": (set_locked_memory, "Failed to set memory locked clocks for GPU {bus}: Insufficient Permissions"),
    "rmc": (_reset("locked_memory", ""), "Failed to reset memory locked clocks for GPU {bus}: Insufficient Permissions"),
    "pl": (set_power_limit, "Failed to set power management limit for GPU {bus}: Insufficient Permissions"),
    "pm": (set_persistence, "Unable to set persistence mode for GPU {bus}: Insufficient Permissions"),
    "ac": (set_application_clocks, "Failed to set applications clocks for GPU {bus}: Insufficient Permissions"),
    "rac": (_reset("application_clocks", ""), "Failed to reset applications clocks for GPU {bus}: Insufficient Permissions"),
}


SETTER_LOG = "nvidia-smi-setters.jsonl"


def setter_log_path(hw: Optional[Path] = None) -> Path:
    return (hw or hwio.hw_dir()) / SETTER_LOG


def record_setter_call(name: str, value: str, targets: List[int]) -> None:
    """One line per setter invocation, before it is tried (a refused one was still asked)."""
    line = json.dumps({"t": time.time(), "setter": name, "value": value, "gpus": targets, "euid": os.geteuid()})
    try:
        with open(setter_log_path(), "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError as exc:  # an unprivileged caller cannot write the hardware folder; it is refused below anyway
        sys.stderr.write("rfsim: setter call not logged: %s\n" % exc)


def setter_calls(hw: Optional[Path] = None) -> List[Dict[str, object]]:
    """Every setter call recorded on this host so far (oldest first)."""
    try:
        text = setter_log_path(hw).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def modify(name: str, value: str, targets: List[int]) -> int:
    setter, denied = SETTERS[name]
    record_setter_call(name, value, targets)
    for index in targets:
        state = gpu.read_state(index)
        if os.geteuid() != 0:
            _out(denied.format(bus=state["pci_bus_id"]), TERMINATING)
            return RC_NO_PERMISSION
        rc, lines = setter(index, state, value)
        lines = [line for line in lines if line != "All done."]
        _out(*lines)
        if rc != RC_OK:
            return rc
    _out("All done.")
    return RC_OK


def _out(*lines: str) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: List[str]) -> int:
    try:
        parsed = parse(argv)
    except UsageError:
        _out(INVALID_COMBINATION)
        return RC_INVALID
    if "help" in parsed:
        _out("NVIDIA System Management Interface -- v" + gpu.DRIVER, "", "(simulated: reprofleet.sim)")
        return RC_OK
    if "version" in parsed:
        _out(f"NVIDIA-SMI version  : {gpu.DRIVER}", f"NVML version        : {gpu.DRIVER.split('.')[0]}.43",
             f"DRIVER version      : {gpu.DRIVER}", f"CUDA Version        : {gpu.CUDA}")
        return RC_OK
    if gpu.gpu_count() == 0:
        _out("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")
        return RC_NO_DRIVER
    try:
        targets = _targets(parsed)
    except LookupError:
        _out("No devices were found")
        return RC_NOT_FOUND
    lost = [index for index in targets if gpu.is_lost(index)]
    if lost:
        _out(GPU_LOST.format(bus=str(gpu.read_state(lost[0])["pci_bus_id"])[4:]))  # a 4-digit domain, as reported
        return RC_GPU_LOST
    try:
        for name in MODIFIERS:
            if name in parsed:
                return modify(name, parsed[name], targets)
        return report(parsed, targets)
    except UsageError:
        _out(INVALID_COMBINATION)
        return RC_INVALID


def report(parsed: Dict[str, str], targets: List[int]) -> int:
    now = time.time()
    if "list" in parsed:
        _out(*nvsmi_report.list_lines(targets))
    elif "query-gpu" in parsed:
        if "format" not in parsed or not parsed["format"].startswith("csv"):
            _out("No format was specified. Please use --format=csv.") if "format" not in parsed else _out(INVALID_COMBINATION)
            return RC_INVALID
        try:
            _out(*nvsmi_report.csv_lines(parsed["query-gpu"], parsed["format"], targets, now))
        except KeyError as exc:
            _out(f'Field "{exc.args[0]}" is not a valid field to query.', "")
            return RC_INVALID
    elif "query" in parsed:
        _out(*nvsmi_report.query_lines(targets, now))
    else:
        _out(*nvsmi_report.summary_lines(targets, now))
    return RC_OK
