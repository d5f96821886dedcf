"""Watchdogs driven by hand: a fake clock moved in quarter seconds, the follower's calls, and
the events a watchdog reports (tests/unit/test_watchdog.py, tests/unit/test_peer_evidence.py)."""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.watchdog import FleetLiveness, Verdict, Watchdog, WatchdogSettings

SETTINGS = WatchdogSettings(silence_s=3.0, probe_after_s=1.0, probe_interval_s=0.5, probe_timeout_s=1.0,
                            dead_rounds=3, userspace_s=60.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, host: str, what: str, **fields: Any) -> None:
        self.seen.append((host, what, fields))

    def names(self) -> list[str]:
        return [what for _, what, _ in self.seen]


def settle(dog: Watchdog) -> None:
    """Let every launched round answer (the fake probes answer at once)."""
    deadline = time.monotonic() + 2
    while dog._rounds is not None and dog.rounds_completed < dog._rounds.launched and time.monotonic() < deadline:
        time.sleep(0.002)


def advance(dog: Watchdog, clock: FakeClock, seconds: float, step: float = 0.25) -> Verdict:
    """Move time on as the follower does (a check every quarter second); the last verdict."""
    verdict = dog.check()
    for _ in range(int(round(seconds / step))):
        clock.now += step
        verdict = dog.check()
        settle(dog)
    return dog.check()


def make(answer: Callable[[], Any], fleet: FleetLiveness | None = None, settings: WatchdogSettings = SETTINGS,
         name: str = "ws01") -> tuple[Watchdog, FakeClock, Events]:
    clock, events = FakeClock(), Events()
    return Watchdog(name, answer, settings, fleet=fleet, clock=clock, report=events), clock, events


def together(fleet: FleetLiveness, clock: FakeClock, names: list[str],
             answer: Callable[[], Any] = lambda: ProbeAnswer.DEAD, events: Events | None = None) -> list[Watchdog]:
    """Watchdogs of one fleet, all heard last now (their silences begin together)."""
    return [Watchdog(n, answer, SETTINGS, fleet=fleet, clock=clock, report=events) for n in names]


def tick(dogs: list[Watchdog], clock: FakeClock, seconds: float, live: Sequence[Watchdog] = ()) -> list[Verdict]:
    """Quarter seconds of the follower's loop for ``dogs``; ``live`` stream a line each; the last verdicts."""
    for _ in range(int(round(seconds / 0.25))):
        clock.now += 0.25
        for dog in live:
            dog.heard()
        for dog in dogs:
            dog.check()
            settle(dog)
    return [d.check() for d in dogs]
