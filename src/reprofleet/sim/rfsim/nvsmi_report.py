"""What ``nvidia-smi`` prints about the fake card: -L, --query-gpu CSV, -q, the summary table.

Host-side module: standard library only.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

from . import gpu, telemetry

Reading = Tuple[Dict[str, Any], telemetry.Sample]
Field = Tuple[str, Callable[[Reading], Any]]  # (unit, getter)


def _read(index: int, now: float) -> Reading:
    state = gpu.read_state(index)
    return state, telemetry.sample(state, gpu.read_load(index), now)


def _limit(r: Reading) -> float:
    return float(r[0]["power_limit_w"])


def _app(r: Reading, i: int) -> int:
    clocks = r[0].get("application_clocks") or [gpu.MAX_MEMORY_MHZ, gpu.MAX_GRAPHICS_MHZ]
    return int(clocks[i])


FIELDS: Dict[str, Field] = {
    "timestamp": ("", lambda r: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "driver_version": ("", lambda r: gpu.DRIVER),
    "count": ("", lambda r: gpu.gpu_count()),
    "name": ("", lambda r: gpu.NAME),
    "serial": ("", lambda r: r[0]["serial"]),
    "uuid": ("", lambda r: r[0]["uuid"]),
    "pci.bus_id": ("", lambda r: r[0]["pci_bus_id"]),
    "index": ("", lambda r: r[0]["index"]),
    "vbios_version": ("", lambda r: gpu.VBIOS),
    "persistence_mode": ("", lambda r: "Enabled" if r[0].get("persistence") else "Disabled"),
    "compute_mode": ("", lambda r: "Default"),
    "pstate": ("", lambda r: f"P{r[1].pstate}"),
    "temperature.gpu": ("", lambda r: r[1].temperature_c),
    "utilization.gpu": ("%", lambda r: r[1].utilization),
    "memory.total": ("MiB", lambda r: gpu.MEMORY_TOTAL_MIB),
    "memory.used": ("MiB", lambda r: r[1].memory_used_mib),
    "memory.free": ("MiB", lambda r: gpu.MEMORY_TOTAL_MIB - r[1].memory_used_mib),
    "power.draw": ("W", lambda r: f"{r[1].power_w:.2f}"),
    "power.limit": ("W", lambda r: f"{_limit(r):.2f}"),
    "enforced.power.limit": ("W", lambda r: f"{_limit(r):.2f}"),
    "power.default_limit": ("W", lambda r: f"{gpu.POWER_DEFAULT_W:.2f}"),
    "power.min_limit": ("W", lambda r: f"{gpu.POWER_MIN_W:.2f}"),
    "power.max_limit": ("W", lambda r: f"{gpu.POWER_MAX_W:.2f}"),
    "clocks.current.graphics": ("MHz", lambda r: r[1].graphics_mhz),
    "clocks.current.sm": ("MHz", lambda r: r[1].sm_mhz),
    "clocks.current.memory": ("MHz", lambda r: r[1].memory_mhz),
    "clocks.applications.graphics": ("MHz", lambda r: _app(r, 1)),
    "clocks.applications.memory": ("MHz", lambda r: _app(r, 0)),
    "clocks.max.graphics": ("MHz", lambda r: gpu.MAX_GRAPHICS_MHZ),
    "clocks.max.sm": ("MHz", lambda r: gpu.MAX_GRAPHICS_MHZ),
    "clocks.max.memory": ("MHz", lambda r: gpu.MAX_MEMORY_MHZ),
    "clocks_event_reasons.active": ("", lambda r: f"0x{r[1].event_reasons:016X}"),
    "clocks_event_reasons.sw_power_cap": (
        "", lambda r: "Active" if r[1].event_reasons & telemetry.REASON_SW_POWER_CAP else "Not Active"),
    "pcie.link.gen.current": ("", lambda r: r[1].pcie_gen),
    "pcie.link.gen.max": ("", lambda r: gpu.PCIE_GEN_MAX),
    "pcie.link.width.current": ("", lambda r: gpu.PCIE_WIDTH),
    "pcie.link.width.max": ("", lambda r: gpu.PCIE_WIDTH),
}
ALIASES = {
    "gpu_name": "name", "gpu_serial": "serial", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
    "clocks.gr": "clocks.current.graphics", "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory", "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory", "clocks.applications.gr": "clocks.applications.graphics",
    "clocks.applications.mem": "clocks.applications.memory", "temperature.gpu.tlimit": "temperature.gpu",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "clocks_throttle_reasons.sw_power_cap": "clocks_event_reasons.sw_power_cap",
    "power.draw.instant": "power.draw", "power.draw.average": "power.draw",
}


def list_lines(targets: List[int]) -> List[str]:
    return [f"GPU {i}: {gpu.NAME} (UUID: {gpu.read_state(i)['uuid']})" for i in targets]


def csv_lines(query: str, fmt: str, targets: List[int], now: float) -> List[str]:
    names = [ALIASES.get(n.strip(), n.strip()) for n in query.split(",") if n.strip()]
    for name in names:
        if name not in FIELDS:
            raise KeyError(name)
    options = set(fmt.split(",")[1:])
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(f"{n} [{FIELDS[n][0]}]" if FIELDS[n][0] else n for n in names))
    for index in targets:
        reading = _read(index, now)
        cells = []
        for name in names:
            unit, getter = FIELDS[name]
            value = str(getter(reading))
            cells.append(value if not unit or "nounits" in options else f"{value} {unit}")
        lines.append(", ".join(cells))
    return lines


def query_lines(targets: List[int], now: float) -> List[str]:
    lines = ["", "==============NVSMI LOG==============", "",
             f"{'Timestamp':<42}: {time.strftime('%a %b %d %H:%M:%S %Y', time.localtime(now))}",
             f"{'Driver Version':<42}: {gpu.DRIVER}", f"{'CUDA Version':<42}: {gpu.CUDA}", "",
             f"{'Attached GPUs':<42}: {gpu.gpu_count()}"]
    for index in targets:
        state, s = _read(index, now)
        rows = [
            ("Product Name", gpu.NAME), ("Product Architecture", "Blackwell"),
            ("Persistence Mode", "Enabled" if state.get("persistence") else "Disabled"),
            ("Serial Number", state["serial"]), ("GPU UUID", state["uuid"]), ("VBIOS Version", gpu.VBIOS),
            ("Performance State", f"P{s.pstate}"),
            ("Clocks Event Reasons", f"0x{s.event_reasons:016X}"),
            ("    SW Power Cap", "Active" if s.event_reasons & telemetry.REASON_SW_POWER_CAP else "Not Active"),
            ("FB Memory Usage", ""), ("    Total", f"{gpu.MEMORY_TOTAL_MIB} MiB"),
            ("    Used", f"{s.memory_used_mib} MiB"), ("Temperature", ""), ("    GPU Current Temp", f"{s.temperature_c} C"),
            ("GPU Power Readings", ""), ("    Instantaneous Power Draw", f"{s.power_w:.2f} W"),
            ("    Current Power Limit", f"{float(state['power_limit_w']):.2f} W"),
            ("    Default Power Limit", f"{gpu.POWER_DEFAULT_W:.2f} W"),
            ("    Min Power Limit", f"{gpu.POWER_MIN_W:.2f} W"), ("    Max Power Limit", f"{gpu.POWER_MAX_W:.2f} W"),
            ("Clocks", ""), ("    Graphics", f"{s.graphics_mhz} MHz"), ("    SM", f"{s.sm_mhz} MHz"),
            ("    Memory", f"{s.memory_mhz} MHz"), ("Max Clocks", ""),
            ("    Graphics", f"{gpu.MAX_GRAPHICS_MHZ} MHz"), ("    Memory", f"{gpu.MAX_MEMORY_MHZ} MHz"),
        ]
        lines += ["", f"GPU {state['pci_bus_id']}"] + [
            f"    {k:<38}: {v}" if v != "" else f"    {k}" for k, v in rows]
    return lines + [""]


def summary_lines(targets: List[int], now: float) -> List[str]:
    bar = "+-----------------------------------------+------------------------+----------------------+"
    head = f"| NVIDIA-SMI {gpu.DRIVER:<22} Driver Version: {gpu.DRIVER:<14} CUDA Version: {gpu.CUDA:<9}|"
    lines = [time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)), "+" + "-" * 89 + "+", head, bar,
             "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
             "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
             "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for index in targets:
        state, s = _read(index, now)
        persistence = "On" if state.get("persistence") else "Off"
        lines.append(f"| {index:>3}  {'NVIDIA RTX PRO 6000 Blac...':<27} {persistence:>6} | "
                     f"{state['pci_bus_id']:>18} Off | {'Off':>20} |")
        power = f"{s.power_w:.0f}W / {float(state['power_limit_w']):.0f}W"
        memory = f"{s.memory_used_mib}MiB / {gpu.MEMORY_TOTAL_MIB}MiB"
        lines.append(f"| {'30%':>3}  {s.temperature_c:>3}C    P{s.pstate:<2} {power:>22} | {memory:>22} | "
                     f"{str(s.utilization) + '%':>7}      Default |")
        lines.append(bar)
    return lines
