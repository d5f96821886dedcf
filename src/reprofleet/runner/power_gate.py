"""The gate every power action of a recovery passes: our own network must work, and a host
silent together with others waits while the correlated-silence hold says so.

A host is never cycled because the controller's network failed (the partition guard) or
because the switch in front of several hosts is rebooting (the hold, liveness/silence_hold).
Both wait on the campaign's clock and stop, bounded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from reprofleet.clock import Clock
from reprofleet.errors import ReprofleetError
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model.events import CampaignEvent
from reprofleet.runner.context import RunSettings
from reprofleet.runner.host_log import HostLog

__all__ = ["NetworkDown", "PowerGate"]


class NetworkDown(ReprofleetError):
    """The partition guard kept saying our own network is down past the pause cap."""


@dataclass(frozen=True)
class PowerGate:
    """Asked before a power action on one host."""

    host: str
    fleet: FleetLiveness
    log: HostLog
    clock: Clock
    stop: threading.Event
    settings: RunSettings

    def guard(self) -> bool:
        """Our own network must work (waits up to the pause cap). True when it had to wait
        (the host must then be probed again before it is cut); NetworkDown past the cap."""
        guard = self.fleet.network_ok
        if guard is None or guard():
            return False
        cap = self.settings.watchdog.pause_cap_s
        reason = getattr(guard, "reason", "") or "the partition guard says our network is down"
        self.log.event(CampaignEvent.GUARD, network="down", before="power action", message=reason)
        deadline = self.clock.monotonic() + cap
        while self.clock.monotonic() < deadline and not self.stop.is_set():
            self.clock.wait(self.stop, self.settings.timings.guard_poll_s)
            if guard():
                self.log.event(CampaignEvent.GUARD, network="up", before="power action")
                return True
        raise NetworkDown(f"not power-cycled: the controller's network stayed down for {cap:g} s ({reason})")

    def hold(self) -> bool:
        """A host silent together with others waits while the correlated-silence hold says so
        (bounded by ``correlated_hold_s``). True when it had to wait."""
        poll = self.settings.timings.guard_poll_s
        hold = self.fleet.hold(self.host, self.clock.monotonic())
        if not hold.holding:
            return False
        self.log.event(CampaignEvent.SILENCE_HOLD, before="power action", **hold.to_json())
        deadline = self.clock.monotonic() + self.fleet.hold_s + poll
        while hold.holding and self.clock.monotonic() < deadline and not self.stop.is_set():
            self.clock.wait(self.stop, poll)
            hold = self.fleet.hold(self.host, self.clock.monotonic())
        self.log.event(CampaignEvent.SILENCE_RELEASE, before="power action", **hold.to_json())
        return True
