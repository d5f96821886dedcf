"""Wall power of a host, sampled about once a second from its PDU or BMC during attempts.

NVML cannot be asked on a frozen host, but the outlet still meters it: a host frozen at
400 W (the GPU spinning on something) and one frozen at 60 W (everything halted) are
different bugs. The sampler writes one ``{"t", "k": "wall", "w", "source"}`` line per
reading through a callback (the attempt's stream), and keeps the last readings for the
wedge record. A reading waits at most half a second for the device and is never retried:
a sample is worth less than a power cycle, and a busy or silent device just leaves a gap.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from reprofleet.clock import Clock, SystemClock
from reprofleet.power.base import PowerDriver

if TYPE_CHECKING:
    from reprofleet.model import Host

WallLine = dict[str, Any]
MAX_RUN_S = 7 * 24 * 3600.0  # a sampler never outlives a week, whatever its caller forgets
FREEZE_WINDOW_S = 60.0  # a wedge's record carries the wall power of the last minute before the freeze
WINDOW_KEEP = 600  # readings kept for that (several minutes at 1 Hz, also with a few outlets)


class WallPowerSampler:
    """Reads every metered outlet of one host every ``period_s`` in a thread of its own."""

    def __init__(self, drivers: Sequence[PowerDriver], write: Callable[[WallLine], None], *,
                 period_s: float = 1.0, keep: int = 10, clock: Clock | None = None) -> None:
        """``clock`` stamps and paces the readings: the campaign's, so that a reading and the last
        line heard from the host are on one timeline (the freeze trace subtracts them)."""
        self.clock: Clock = clock or SystemClock()
        self.drivers = [d for d in drivers if d.meters_power]
        self.unmetered = tuple(f"{d.name} {d.port.address}" for d in drivers if not d.meters_power)
        self.write = write
        self.period_s = period_s
        self._last: deque[WallLine] = deque(maxlen=keep)
        self._window: deque[WallLine] = deque(maxlen=WINDOW_KEEP)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cpu_s = 0.0  # CPU time the sampling thread used (for the bench)
        self.readings = 0
        self.gaps = 0  # ticks where a metered device gave no value

    @property
    def meters(self) -> bool:
        """Does any outlet of this host meter power? (Without one, start() does nothing.)"""
        return bool(self.drivers)

    def start(self) -> None:
        if not self.drivers or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="wall-power", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> WallPowerSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def last(self) -> list[WallLine]:
        """The latest readings, oldest first (for the wedge record: what the host drew as it froze)."""
        return list(self._last)

    def freeze_trace(self, silent_since: float) -> list[list[float]]:
        """The readings around a freeze as [t, w], t relative to the last line heard (see freeze_trace)."""
        return freeze_trace(list(self._window), silent_since)

    def summary(self) -> dict[str, Any]:
        """What goes into a wedge's record: the last readings and the last value."""
        last = self.last()
        return {"wall_w": last[-1]["w"] if last else None, "wall_last": last}

    def sample_once(self) -> list[WallLine]:
        """One reading of every metered outlet; written and kept."""
        lines = []
        for driver in self.drivers:
            watts = driver.read_power()
            if watts is None:
                self.gaps += 1
                continue
            line: WallLine = {"t": round(self.clock.wall(), 3), "k": "wall", "w": round(watts, 1), "source": driver.name}
            if len(self.drivers) > 1:
                line["outlet"] = driver.outlet_key
            self.readings += 1
            self._last.append(line)
            lines.append(line)
            self.write(line)
        if lines and len(lines) == len(self.drivers):  # a host's draw is every outlet's, read in the same tick
            self._window.append({"t": lines[0]["t"], "w": round(sum(line["w"] for line in lines), 1)})
        return lines

    def _run(self) -> None:
        started = self.clock.monotonic()
        cpu_start = time.thread_time()
        next_tick = started
        while not self._stop.is_set() and self.clock.monotonic() - started < MAX_RUN_S:
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 (a broken sample must not end the attempt's sampling)
                self.gaps += 1
            self.cpu_s = time.thread_time() - cpu_start
            next_tick += self.period_s
            self.clock.wait(self._stop, max(0.0, next_tick - self.clock.monotonic()))
        self.cpu_s = time.thread_time() - cpu_start


def freeze_trace(lines: Sequence[WallLine], silent_since: float, window_s: float = FREEZE_WINDOW_S) -> list[list[float]]:
    """[t, w] pairs from ``window_s`` before the host went silent until the sampler stopped.

    ``t`` counts seconds from the last line heard from the host (negative: before it), on
    the controller's clock like the readings themselves, so no clock agreement with the
    host is needed. With several outlets, ``w`` is their sum in one tick (a tick where
    one of them gave no reading is left out rather than drawn as a drop).
    """
    start = silent_since - window_s
    return [[round(float(line["t"]) - silent_since, 2), float(line["w"])] for line in lines
            if isinstance(line.get("t"), (int, float)) and float(line["t"]) >= start]


def freeze_telemetry(sampler: WallPowerSampler | None, silent_since: float | None) -> dict[str, Any]:
    """``wall_trace`` for a wedge's record, or a ``wall_note`` that says plainly why there is none."""
    if sampler is None:
        return {}
    if not sampler.meters:
        return {"wall_note": f"wall power not measured: {', '.join(sampler.unmetered)} does not meter power"
                if sampler.unmetered else "wall power not measured: the host has no power device in the inventory"}
    if silent_since is None:
        return {}
    points = sampler.freeze_trace(silent_since)
    if points:
        return {"wall_trace": points}
    devices = ", ".join(f"{d.name} {d.port.address}" for d in sampler.drivers)
    return {"wall_note": f"{devices} gave no wall-power reading in the last minute before the freeze "
                         "(a BMC without DCMI or a chassis Power resource meters nothing)"}


def wall_sampler(host: "Host", report_root: Path, write: Callable[[WallLine], None],
                 period_s: float = 1.0, clock: Clock | None = None) -> WallPowerSampler:
    """A 1 Hz wall-power sampler for one host's attempts (does nothing where no outlet meters power).

    ``write`` gets ``{"t", "k": "wall", "w", "source"}`` lines (the attempt's stream);
    ``summary()`` after a wedge gives the last readings for its record.
    """
    from reprofleet.power.locks import lock_folder
    from reprofleet.power.ports import build_host_power

    power = build_host_power([host], lock_dir=lock_folder(report_root), clock=clock).get(host.name)
    return WallPowerSampler(power.drivers if power else (), write, period_s=period_s, clock=clock)
