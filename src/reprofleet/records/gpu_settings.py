"""The GPU settings an attempt ran under, as read back before it, against what its cell planned.

A record's ``policy`` is what the card reported before the attempt, its ``factors`` what the
cell asked for. The runner refuses to run a cell whose asked setting does not read back,
but a cell that asks for nothing (the default cell) is run as the card is: on an
observe-only host that may be under a clock lock or a power cap its owner left. Pooling
such an attempt with true defaults credits the lock's outcome to the defaults, so each
record's departures from its plan are named here and every reader keeps them apart
(``pooling.Pool.strata``). A setting the read-back cannot tell (a card or a record that
says nothing) is never a departure: only what the card positively reports.
"""

from __future__ import annotations

from typing import Any, Mapping

CLOCK_TOLERANCE_MHZ = 15  # as the runner's verify (runner/gpu_policy.py), which records/ may not import
POWER_TOLERANCE_W = 1.0
CLOCKS = ("graphics_clocks", "memory_clocks", "application_clocks")
LOCKABLE = {"graphics_clocks": ("graphics_clocks_freqs", "graphics"), "memory_clocks": ("memory_clocks_freqs", "memory")}

__all__ = ["departures", "readback_summary"]


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return int(value[0]), int(value[1])
    return None


def _watts(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _planned_clock(name: str, planned: Any, readback: Mapping[str, Any]) -> str | None:
    wanted, got = _pair(planned), _pair(readback.get(name))
    if wanted is None or got is None:
        return None
    if any(abs(g - w) > CLOCK_TOLERANCE_MHZ for g, w in zip(got, wanted)):
        return f"{name} read back {got[0]}–{got[1]} MHz, planned {wanted[0]}–{wanted[1]}"
    return None


def _unplanned_lock(name: str, readback: Mapping[str, Any]) -> str | None:
    """A lock nobody asked for: both reads of the range (the P0 range and the driver's) agree on
    a ceiling below the card's own maximum (the runner's verify trusts a lock on the same two)."""
    second, kind = LOCKABLE[name]
    first, other = _pair(readback.get(name)), _pair(readback.get(second))
    top = (readback.get("max_clocks_mhz") or {}).get(kind) if isinstance(readback.get("max_clocks_mhz"), Mapping) else None
    if first is None or other is None or not isinstance(top, (int, float)):
        return None
    if first[1] < top - CLOCK_TOLERANCE_MHZ and other[1] < top - CLOCK_TOLERANCE_MHZ:
        return f"{name} locked at {first[0]}–{first[1]} MHz (the card's maximum {int(top)}), planned the default"
    return None


def _power(planned: Any, readback: Mapping[str, Any]) -> str | None:
    got = _watts(readback.get("power_limit_w"))
    wanted = _watts(planned)
    if got is None:
        return None
    if wanted is not None:
        return None if abs(got - wanted) <= POWER_TOLERANCE_W else f"power limit read back {got:g} W, planned {wanted:g} W"
    default = _watts(readback.get("default_power_limit_w"))
    if default is not None and abs(got - default) > POWER_TOLERANCE_W:
        return f"power limit {got:g} W (the card's default {default:g} W), planned the default"
    return None


def departures(factors: Mapping[str, Any], readback: Mapping[str, Any]) -> tuple[str, ...]:
    """How the read-back settings differ from the cell's planned ones, one phrase each; empty
    when they agree or the read-back cannot tell."""
    out: list[str] = []
    for name in CLOCKS:
        planned = factors.get(name)
        if planned is not None:
            out.append(_planned_clock(name, planned, readback) or "")
        elif name in LOCKABLE:
            out.append(_unplanned_lock(name, readback) or "")
    out.append(_power(factors.get("power_limit_w"), readback) or "")
    persistence, got = factors.get("persistence"), readback.get("persistence")
    if isinstance(persistence, bool) and isinstance(got, bool) and persistence is not got:
        out.append(f"persistence read back {got}, planned {persistence}")
    return tuple(phrase for phrase in out if phrase)


def readback_summary(readback: Mapping[str, Any]) -> str:
    """The read-back in a few words for a report's table ("—" when the record has none)."""
    parts = []
    for name, label in (("graphics_clocks", "graphics"), ("memory_clocks", "memory")):
        pair, freqs = _pair(readback.get(name)), _pair(readback.get(LOCKABLE[name][0]))
        if pair is not None:
            parts.append(f"{label} {pair[0]}–{pair[1]} MHz" + (f" (driver {freqs[0]}–{freqs[1]})" if freqs and freqs != pair else ""))
    app = _pair(readback.get("application_clocks"))
    if app is not None:
        parts.append(f"application clocks {app[0]},{app[1]} MHz")
    power, default = _watts(readback.get("power_limit_w")), _watts(readback.get("default_power_limit_w"))
    if power is not None:
        parts.append(f"power limit {power:g} W" + (f" (default {default:g})" if default is not None and default != power else ""))
    if isinstance(readback.get("persistence"), bool):
        parts.append(f"persistence {'on' if readback['persistence'] else 'off'}")
    return ", ".join(parts) or "—"
