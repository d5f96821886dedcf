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
from typing import Any, Callable, Sequence

from .base import PowerDriver

WallLine = dict[str, Any]
MAX_RUN_S = 7 * 24 * 3600.0  # a sampler never outlives a week, whatever its caller forgets


class WallPowerSampler:
    """Reads every metered outlet of one host every ``period_s`` in a thread of its own."""

    def __init__(self, drivers: Sequence[PowerDriver], write: Callable[[WallLine], None], *,
                 period_s: float = 1.0, keep: int = 10) -> None:
        self.drivers = [d for d in drivers if d.meters_power]
        self.write = write
        self.period_s = period_s
        self._last: deque[WallLine] = deque(maxlen=keep)
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
            line: WallLine = {"t": round(time.time(), 3), "k": "wall", "w": round(watts, 1), "source": driver.name}
            if len(self.drivers) > 1:
                line["outlet"] = driver.outlet_key
            self.readings += 1
            self._last.append(line)
            lines.append(line)
            self.write(line)
        return lines

    def _run(self) -> None:
        started = time.monotonic()
        cpu_start = time.thread_time()
        next_tick = started
        while not self._stop.is_set() and time.monotonic() - started < MAX_RUN_S:
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 (a broken sample must not end the attempt's sampling)
                self.gaps += 1
            self.cpu_s = time.thread_time() - cpu_start
            next_tick += self.period_s
            self._stop.wait(max(0.0, next_tick - time.monotonic()))
        self.cpu_s = time.thread_time() - cpu_start
