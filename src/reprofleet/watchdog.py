"""Liveness of a host during an attempt: silence, then independent probes, then a verdict.

Fast like OpenSSH's ServerAlive, but sure: silence on the attempt stream (which carries a
heartbeat at least every half second) only makes a host a *suspect*. A suspect is then
probed independently of the stalled connection (a fresh TCP connect that must yield an SSH
banner) for a confirm window; only if every probe failed throughout is it a wedge. A suspect
that answers a probe is alive (its session broke, or it stalled): re-attach, never cycle.

If every watched host goes silent within one window, the controller's own network is the
likely culprit: :class:`FleetLiveness` then holds every verdict back (cycle nothing) until
some host answers again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import Enum, unique
from typing import Callable


@dataclass(frozen=True)
class WatchdogSettings:
    silence_s: float = 3.0  # stream silence that makes a host a suspect
    confirm_s: float = 5.0  # probes must all fail for this long before a wedge
    probe_interval_s: float = 1.0
    probe_timeout_s: float = 1.5
    fleet_window_s: float = 5.0  # all hosts silent within this window -> the controller's network


@unique
class Verdict(str, Enum):
    LIVE = "live"
    SUSPECT = "suspect"  # silent, probes under way
    ALIVE_BUT_DETACHED = "reattach"  # silent stream, but the host answers: re-attach
    WEDGED = "wedged"
    CONTROLLER_NETWORK = "controller_network"  # everyone is silent: suspect ourselves


Probe = Callable[[], bool]


class _ProbeThread(threading.Thread):
    """Probes a suspect host until stopped; remembers whether any probe succeeded."""

    def __init__(self, probe: Probe, interval: float) -> None:
        super().__init__(daemon=True, name="liveness-probe")
        self._probe = probe
        self._interval = interval
        self._stop = threading.Event()
        self.answered = threading.Event()
        self.probes = 0

    def run(self) -> None:
        while not self._stop.is_set() and not self.answered.is_set():
            started = time.monotonic()
            ok = False
            try:
                ok = self._probe()
            except Exception:
                ok = False
            self.probes += 1
            if ok:
                self.answered.set()
                return
            self._stop.wait(max(0.0, self._interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()


class FleetLiveness:
    """Shared by the hosts of one campaign: who is silent, since when."""

    def __init__(self, window_s: float, network_ok: Callable[[], bool] | None = None) -> None:
        self._window = window_s
        self._network_ok = network_ok
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self._silent_since: dict[str, float] = {}

    def watching(self, host: str, active: bool) -> None:
        with self._lock:
            (self._watched.add if active else self._watched.discard)(host)
            if not active:
                self._silent_since.pop(host, None)

    def silent(self, host: str, since: float) -> None:
        with self._lock:
            self._silent_since[host] = since

    def heard(self, host: str) -> None:
        with self._lock:
            self._silent_since.pop(host, None)

    def controller_suspect(self) -> bool:
        """Everyone is silent and no witness says our own network works (see witness.py)."""
        if not self.everyone_silent():
            return False
        return self._network_ok is None or not self._network_ok()

    def everyone_silent(self) -> bool:
        """True when more than one host is watched and all went silent within one window."""
        with self._lock:
            if len(self._watched) < 2 or not self._watched <= self._silent_since.keys():
                return False
            times = [self._silent_since[h] for h in self._watched]
            return max(times) - min(times) <= self._window


class Watchdog:
    """One host's liveness during one attempt. Call :meth:`heard` on every stream line."""

    def __init__(
        self,
        host: str,
        probe: Probe,
        settings: WatchdogSettings,
        fleet: FleetLiveness | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self._probe = probe
        self.settings = settings
        self._fleet = fleet
        self._clock = clock
        self.last_heard = clock()
        self.suspect_since: float | None = None
        self._prober: _ProbeThread | None = None
        self._paused = False
        if fleet:
            fleet.watching(host, True)

    def heard(self) -> None:
        self.last_heard = self._clock()
        self._end_suspicion()
        if self._fleet:
            self._fleet.heard(self.host)

    def check(self) -> Verdict:
        now = self._clock()
        if now - self.last_heard < self.settings.silence_s:
            return Verdict.LIVE
        if self.suspect_since is None:
            self.suspect_since = now
            if self._fleet:
                self._fleet.silent(self.host, self.last_heard)
            self._prober = _ProbeThread(self._probe, self.settings.probe_interval_s)
            self._prober.start()
        assert self._prober is not None
        if self._prober.answered.is_set():
            return Verdict.ALIVE_BUT_DETACHED
        if self._fleet and self._fleet.controller_suspect():
            self._paused = True
            return Verdict.CONTROLLER_NETWORK
        if self._paused:  # our network is back: give the host a whole fresh confirm window
            self._paused = False
            self._restart_probes(now)
            return Verdict.SUSPECT
        if now - self.suspect_since >= self.settings.confirm_s and self._prober.probes >= 2:
            return Verdict.WEDGED
        return Verdict.SUSPECT

    def _restart_probes(self, now: float) -> None:
        if self._prober is not None:
            self._prober.stop()
        self.suspect_since = now
        self._prober = _ProbeThread(self._probe, self.settings.probe_interval_s)
        self._prober.start()

    def restart(self) -> None:
        """After a re-attach: the host is heard from again, start afresh."""
        self.heard()

    def _end_suspicion(self) -> None:
        if self._prober is not None:
            self._prober.stop()
            self._prober = None
        self.suspect_since = None

    def close(self) -> None:
        self._end_suspicion()
        if self._fleet:
            self._fleet.watching(self.host, False)
