"""The per-attempt telemetry summary (pure: a function of the samples and nothing else).

It answers the seed's questions for each attempt without reading the stream: how high
did the graphics clock go, for how long above the clock ceiling that kept the seed clean
(2800 MHz), how much power, how hot, which clock-event reasons, which Xids.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

# nvmlClocksEventReason* bits (stable across NVML releases; pynvml's names, snake_cased).
EVENT_REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def reason_names(mask: int) -> List[str]:
    """Names of the set bits; an unknown bit is named by its value."""
    names = [name for bit, name in EVENT_REASON_BITS if mask & bit]
    known = 0
    for bit, _ in EVENT_REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest and bit <= rest:
        if rest & bit:
            names.append("0x%x" % bit)
        bit <<= 1
    return names


def _numbers(samples: Sequence[Dict[str, Any]], key: str) -> List[float]:
    return [float(s[key]) for s in samples if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]


def seconds_above(samples: Sequence[Dict[str, Any]], threshold_mhz: float, interval_s: float) -> float:
    """Time the graphics clock spent above `threshold_mhz`.

    Each sample stands for the time until the next one, but never more than two
    nominal intervals (a gap in sampling must not count as time at a high clock).
    """
    timed = [s for s in samples if isinstance(s.get("gfx_mhz"), (int, float)) and isinstance(s.get("t"), (int, float))]
    total = 0.0
    for index, sample in enumerate(timed):
        if sample["gfx_mhz"] <= threshold_mhz:
            continue
        following = timed[index + 1]["t"] - sample["t"] if index + 1 < len(timed) else interval_s
        total += max(0.0, min(following, 2.0 * interval_s))
    return round(total, 3)


def summarize(samples: Sequence[Dict[str, Any]], xids: Iterable[int], threshold_mhz: float,
              interval_s: float) -> Dict[str, Any]:
    """The `telemetry` object of the exit line and exit.json."""
    gfx = _numbers(samples, "gfx_mhz")
    power = _numbers(samples, "power_w")
    temp = _numbers(samples, "temp_c")
    reasons: Set[str] = set()
    for sample in samples:
        reasons.update(sample.get("event_reason_names") or [])
    return {
        "samples": len(samples),
        "gfx_mhz_peak": _peak(gfx),
        "gfx_mhz_mean": round(sum(gfx) / len(gfx), 1) if gfx else None,
        "power_w_peak": _peak(power),
        "temp_c_peak": _peak(temp),
        "clock_threshold_mhz": threshold_mhz,
        "seconds_above_threshold": seconds_above(samples, threshold_mhz, interval_s) if gfx else None,
        "event_reasons_seen": sorted(reasons),
        "xids": sorted(set(xids)),
    }


def _peak(values: List[float]) -> Optional[float]:
    return max(values) if values else None
