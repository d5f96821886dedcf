"""What the fake GPU reads back at one moment: clocks, power, temperature, pstate. Pure.

Idle: ~180-210 MHz, P8, ~30 W. Under load the card boosts to its ceiling (clock lock,
application clocks, ~3090 MHz) with jitter, draws ~300-590 W, and warms up. When the power
it would draw exceeds the power limit, the clock drops until it fits and the SW power cap
event reason is set: this is why ``-pl 350`` lowers clocks but, in the seed, still wedges.

Host-side module: standard library only.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Dict, Optional

from . import gpu

REASON_GPU_IDLE = 0x1
REASON_APPLICATIONS_CLOCKS = 0x2  # also "user defined clocks" (locks)
REASON_SW_POWER_CAP = 0x4
REASON_NAMES = {
    REASON_GPU_IDLE: "gpu_idle",
    REASON_APPLICATIONS_CLOCKS: "applications_clocks_setting",
    REASON_SW_POWER_CAP: "sw_power_cap",
}
FULL_LOAD_W = 560.0  # dynamic power at load 1.0 and the top clock (+ idle = ~590 W)
POWER_EXPONENT = 2.2
IDLE_TEMP_C = 32.0
TEMP_TAU_S = 8.0


@dataclass(frozen=True)
class Sample:
    graphics_mhz: int
    sm_mhz: int
    memory_mhz: int
    power_w: float
    temperature_c: int
    pstate: int
    event_reasons: int
    utilization: int
    memory_used_mib: int
    pcie_gen: int


def power_at(clock_mhz: float, level: float) -> float:
    return gpu.IDLE_POWER_W + level * FULL_LOAD_W * (clock_mhz / gpu.MAX_GRAPHICS_MHZ) ** POWER_EXPONENT


def clock_for_power(limit_w: float, level: float) -> float:
    """The highest clock whose power at ``level`` fits under ``limit_w``."""
    budget = max(limit_w - gpu.IDLE_POWER_W, 1.0) / (level * FULL_LOAD_W)
    return gpu.MAX_GRAPHICS_MHZ * budget ** (1.0 / POWER_EXPONENT)


def memory_clock(state: Dict[str, Any], busy: bool) -> int:
    target = gpu.MAX_MEMORY_MHZ if busy else gpu.MIN_MEMORY_MHZ
    if state.get("locked_memory"):
        low, high = state["locked_memory"]
        target = min(max(target, int(low)), int(high))
    return target


def sample(state: Dict[str, Any], load: Optional[Dict[str, Any]], now: float,
           rng: Optional[random.Random] = None) -> Sample:
    # One draw per 100 ms: calls made for the same sample (graphics, SM, power ...) agree.
    rng = rng or random.Random(int(now * 10))
    level = float(load.get("level", 0.0)) if load else 0.0
    used = int(load.get("memory_used_mib", 0)) if load else 0
    if level <= 0.0:
        return _idle(state, used, rng)
    ceiling = gpu.graphics_ceiling(state)
    clock = ceiling - rng.uniform(0, 35)
    reasons = REASON_APPLICATIONS_CLOCKS if ceiling < gpu.MAX_GRAPHICS_MHZ else 0
    limit = float(state.get("power_limit_w", gpu.POWER_DEFAULT_W))
    power = power_at(clock, level)
    if power > limit:
        clock = min(clock, clock_for_power(limit, level))
        power = limit - rng.uniform(0.5, 6.0)
        reasons |= REASON_SW_POWER_CAP
    elapsed = max(0.0, now - float(load.get("started", now))) if load else 0.0
    peak = 40.0 + 42.0 * level
    temperature = IDLE_TEMP_C + (peak - IDLE_TEMP_C) * (1.0 - math.exp(-elapsed / TEMP_TAU_S))
    return Sample(
        graphics_mhz=int(round(clock)), sm_mhz=int(round(clock)), memory_mhz=memory_clock(state, True),
        power_w=round(power, 2), temperature_c=int(round(temperature + rng.uniform(-0.5, 0.5))),
        pstate=0, event_reasons=reasons,
        utilization=max(1, min(100, int(level * 100 + rng.uniform(-4, 4)))),
        memory_used_mib=used, pcie_gen=gpu.PCIE_GEN_MAX,
    )


def _idle(state: Dict[str, Any], used: int, rng: random.Random) -> Sample:
    clock = rng.uniform(180, 210)
    if state.get("locked_graphics"):
        low, high = state["locked_graphics"]
        clock = min(max(clock, float(low)), float(high))
    return Sample(
        graphics_mhz=int(round(clock)), sm_mhz=int(round(clock)), memory_mhz=memory_clock(state, False),
        power_w=round(gpu.IDLE_POWER_W + rng.uniform(-2.0, 3.0), 2),
        temperature_c=int(round(IDLE_TEMP_C + rng.uniform(-1, 1))),
        pstate=8, event_reasons=REASON_GPU_IDLE, utilization=0,
        memory_used_mib=used or 2, pcie_gen=1,
    )


def reason_names(mask: int) -> list:
    return [name for bit, name in sorted(REASON_NAMES.items()) if mask & bit]
