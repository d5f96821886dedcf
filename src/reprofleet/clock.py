"""The one clock the controller's decisions read: injectable, so tests play them in virtual time.

The runner, the attempt follower, recovery and the power drivers wait a lot (a 30 s grace
past an attempt's timeout, an 11 s dwell, a boot polled with backoff). Read from the wall
clock, every test of those decisions takes as long as the waits it plays. Given a
:class:`VirtualClock`, the same code runs unchanged and a wait costs nothing: time moves
only when someone sleeps or waits, by exactly what they asked for.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "VirtualClock"]


@runtime_checkable
class Clock(Protocol):
    """What the controller's timing code asks of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for deadlines."""
        ...

    def wall(self) -> float:
        """Unix time: for what records and streams say about when."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, whatever happens meanwhile."""
        ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait until ``event`` is set or ``timeout`` passes; True when it was set."""
        ...


class SystemClock:
    """The real clock: what production runs on."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


class VirtualClock:
    """A clock that moves only when asked to wait: a 24 h wait for a person takes no time.

    ``sleep(s)`` advances now by ``s`` at once; ``wait(event, t)`` returns at once when the
    event is set, else advances ``t``. Threads share one now under a lock, so a probe
    thread and the follower see the same time; no one ever blocks for real, which is what
    makes a scenario deterministic (nothing races a real timer).
    """

    def __init__(self, start: float = 1000.0, wall_start: float = 1_780_000_000.0) -> None:
        self._lock = threading.Lock()
        self._now = start
        self._wall_offset = wall_start - start

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def wall(self) -> float:
        with self._lock:
            return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds`` (never back)."""
        with self._lock:
            self._now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        self.advance(timeout)
        return event.is_set()
