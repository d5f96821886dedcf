"""At most N outlets of one power device switched on within M seconds: the inrush gate.

A correlated wedge (every host of a rack frozen by the same driver bug) makes recovery
switch many outlets of one PDU on within a second. Every supply that starts draws an
inrush current at once, and together they can trip the PDU's breaker, taking down the
hosts that were fine. PDU vendors sequence outlets for this reason: Raritan's
``inrushGuardDelay`` ("the time interval between switching on two outlets", 100-10000 ms,
PDU2-MIB) and its user guide ("inrush current typically lasts for 20-40 milliseconds ... the
PDU will sequentially turn the outlets on"), APC's per-outlet ``rPDUOutletConfigPowerOnTime``
/ ``rPDU2OutletSwitchedConfigPowerOnTime`` power-on delays (PowerNet-MIB). Those delays act
only on the PDU's own "all on" and cold start, not on single commands from us, so the
controller gates its own.

The default is one "on" per 2 s per device: ten times Raritan's longest default-range
guard, because a GPU server's supplies charge their bulk capacitors and then spin fans to
full speed at POST, which lasts seconds, not milliseconds. Sixteen wedged hosts on one PDU
come back within 30 s of each other, a small price against a boot of minutes.

The gate is keyed by the driver's ``device_key`` (what the device serialises) and waits on
the driver's clock, so a test's virtual clock plays it in no time. Within one process it
is a list of recent "on" times per device; with a lock folder and the system clock it is
a small JSON file under an flock, so a by-hand ``invoke power`` and a campaign share it.
A device-side cycle's return to on is the device's own: the gate reserves that moment
when the cycle starts (``lead_s``), so the device's "on" is counted where it will happen.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from reprofleet.clock import Clock, SystemClock
from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.errors import PowerError
from reprofleet.power.locks import file_lock
from reprofleet.records.store import write_atomic

__all__ = ["InrushGate", "Stagger", "admissible", "earliest_slot", "gate_for"]

MAX_TURNS = 10_000  # a bound on the loop, far past any real queue
HORIZON_S = 3600.0 + 60.0  # reservations further ahead than the longest device cycle are a clock gone wrong


@dataclass(frozen=True)
class Stagger:
    """At most ``outlets`` switched on within any ``window_s`` (0: no limit)."""

    outlets: int = DEFAULT_TIMINGS.power_stagger_on
    window_s: float = DEFAULT_TIMINGS.power_stagger_window_s
    wait_cap_s: float = DEFAULT_TIMINGS.power_stagger_wait_cap_s


def admissible(times: Sequence[float], at: float, outlets: int, window_s: float) -> bool:
    """Would one more "on" at ``at`` keep every ``window_s`` long window to at most ``outlets`` ons?"""
    near = sorted([t for t in times if abs(t - at) < window_s] + [at])
    return all(near[i + outlets] - near[i] >= window_s for i in range(len(near) - outlets))


def earliest_slot(times: Sequence[float], at: float, outlets: int, window_s: float) -> float:
    """The first moment not before ``at`` at which an "on" is admissible.

    Admissibility only improves where some earlier "on" leaves the window, so the answer is
    ``at`` or one of ``t + window_s``.
    """
    candidates = sorted({at, *(t + window_s for t in times if t + window_s > at)})
    for candidate in candidates:
        if admissible(times, candidate, outlets, window_s):
            return candidate
    return max(times) + window_s  # unreachable: past every "on" the window is empty


class InrushGate:
    """The "on"s of one power device, recent and reserved, shared by every driver of it."""

    def __init__(self, key: str, clock: Clock, folder: Path | None) -> None:
        self.key = key
        self.clock = clock
        self.folder = folder
        self._times: list[float] = []
        self._lock = threading.Lock()

    @contextmanager
    def _held(self, window_s: float) -> Iterator[list[float]]:
        """The recorded times (pruned), under the thread lock and, with a folder, the file's flock."""
        with self._lock:
            if self.folder is None:
                self._times[:] = self._pruned(self._times, window_s)
                yield self._times
                return
            with file_lock(self.folder, f"stagger-{self.key}", 30.0, f"inrush gate of {self.key}"):
                path = self.folder / f"stagger-{_safe(self.key)}.json"
                times = self._pruned(_load(path), window_s)
                yield times
                _save(path, times)

    def _pruned(self, times: Sequence[float], window_s: float) -> list[float]:
        now = self.clock.wall()
        return [t for t in times if now - window_s <= t <= now + HORIZON_S]

    def wait_turn(self, stagger: Stagger, lead_s: float = 0.0) -> float:
        """Wait until an "on" ``lead_s`` from now is admissible, record it, and return the seconds waited."""
        if stagger.window_s <= 0:
            return 0.0
        waited = 0.0
        for _ in range(MAX_TURNS):
            with self._held(stagger.window_s) as times:
                at = self.clock.wall() + lead_s
                slot = earliest_slot(times, at, stagger.outlets, stagger.window_s)
                if slot <= at:
                    times.append(at)
                    return waited
            pause = slot - at
            if waited + pause > stagger.wait_cap_s:
                break
            self.clock.sleep(pause)
            waited += pause
        raise PowerError(f"no inrush slot on {self.key} within {stagger.wait_cap_s:g} s "
                         f"({stagger.outlets} on per {stagger.window_s:g} s)")


_GATES: dict[tuple[str, int, str], InrushGate] = {}
_GATES_GUARD = threading.Lock()


def gate_for(key: str, clock: Clock, folder: Path | None) -> InrushGate:
    """The process-wide gate of device ``key``.

    Every driver of one device on the system clock shares one gate (and the folder's file);
    a test's virtual clock is a world of its own, so gates are kept per virtual clock and
    never written to a folder, whose times are wall-clock seconds.
    """
    system = type(clock) is SystemClock
    scope = 0 if system else id(clock)
    shared_folder = folder if system else None
    with _GATES_GUARD:
        index = (key, scope, str(shared_folder))
        gate = _GATES.get(index)
        if gate is None:
            gate = _GATES[index] = InrushGate(key, SystemClock() if system else clock, shared_folder)
        return gate


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in key)[:120]


def _load(path: Path) -> list[float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [float(t) for t in data if isinstance(t, (int, float))] if isinstance(data, list) else []


def _save(path: Path, times: Sequence[float]) -> None:
    write_atomic(path, json.dumps(sorted(times)))  # its temporary file is made new, never a planted link
