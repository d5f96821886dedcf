"""The recovery ladder's first rung: an NMI before the AC cut (the inventory's ``recovery: [nmi, cycle]``).

A silent lock-up leaves no evidence once power is cut. Where the host's BMC can send a
diagnostic interrupt (IPMI ``chassis power diag``, Redfish ``ComputerSystem.Reset Nmi``, a
fence agent's ``diag``) and the kernel still takes NMIs, ``kernel.unknown_nmi_panic`` (or
``panic_on_unrecovered_nmi``) turns the NMI into a panic, kdump writes a vmcore, and the
host reboots by itself with a new boot_id. So: the NMI, once (a second could land in the
kdump the first started), then a wait (``nmi_reboot_s`` of the host, else the playbook's
``timeouts.nmi_reboot``) for a new boot_id. A new boot in the wait: the NMI brought the host
back (its record is a ``reboot``, and says so, with the vmcore the next boot's facts list).
None: the NMI was refused, or nothing came back in the wait, and the next rung (the power
cycle) goes on. A device that sends no NMI skips the rung with a warning.

This module decides and returns; it never switches power and never changes the runner's state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from reprofleet.clock import Clock
from reprofleet.config import Timings
from reprofleet.errors import PowerError, ReprofleetError
from reprofleet.model import Host, Outcome, Record, RecoveryRung
from reprofleet.model.events import CampaignEvent
from reprofleet.power.ports import HostPower
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink


@dataclass(frozen=True)
class NmiTry:
    """What the NMI rung did: the device asked, whether it took the NMI, the new boot (None: none in the wait)."""

    device: str
    sent: bool
    waited_s: float
    boot_id: str | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"device": self.device, "sent": self.sent, "waited_s": round(self.waited_s, 3),
                "boot_id": self.boot_id, "error": self.error}


class NmiRung:
    """Sends one host's NMI and waits for the panic reboot it should cause."""

    def __init__(self, host: Host, link: HostLink, log: HostLog, clock: Clock, stop: threading.Event,
                 timings: Timings) -> None:
        self.host = host
        self.link = link
        self.log = log
        self.clock = clock
        self.stop = stop
        self.timings = timings

    @property
    def wanted(self) -> bool:
        return RecoveryRung.NMI in self.host.recovery

    def climb(self, power: HostPower, wait_s: float, entered: Callable[[dict[str, Any]], None],
              old_boot: str | None) -> NmiTry | None:
        """The NMI and the wait for a new boot_id; None when the host's devices send no NMI.

        ``entered`` hears the rung as it starts (the recovery's ``nmi`` state), before the NMI goes out.
        """
        senders = [d for d in power.drivers if d.sends_nmi]
        if not senders:
            self.log.event(CampaignEvent.WARNING, message="recovery: nmi is skipped: none of this host's power "
                                                          "devices sends an NMI; going straight to the power cycle")
            return None
        driver = senders[0]
        entered({"device": driver.outlet_key, "wait_s": wait_s})
        try:
            driver.nmi()
        except (PowerError, ReprofleetError) as exc:
            self.log.event(CampaignEvent.WARNING, message=f"the NMI was not sent ({exc}): going on to the power cycle")
            return NmiTry(driver.outlet_key, False, 0.0, error=str(exc))
        started = self.clock.monotonic()
        boot_id = self._new_boot_within(wait_s, old_boot)
        return NmiTry(driver.outlet_key, True, self.clock.monotonic() - started, boot_id)

    def _new_boot_within(self, wait_s: float, old_boot: str | None) -> str | None:
        """Poll (with the boot polls' backoff) for a boot_id other than ``old_boot``; None after ``wait_s``."""
        deadline = self.clock.monotonic() + wait_s
        delays = self.timings.boot_polls().delays()
        while self.clock.monotonic() < deadline and not self.stop.is_set():
            if self.link.banner(self.timings.banner_timeout_s):
                boot_id = self.link.boot_now()
                if boot_id and boot_id != old_boot:
                    return boot_id
            self.clock.wait(self.stop, min(next(delays), max(0.0, deadline - self.clock.monotonic())))
        return None


def nmi_record(record: Record, tried: NmiTry) -> Record:
    """A host the NMI brought back rebooted (its kernel panicked on the NMI): a ``reboot`` that says
    which rung brought it back; the wedge it was declared stays in the reason."""
    reason = (f"declared wedged ({record.reason}); an NMI through {tried.device} made its kernel panic and it "
              f"rebooted (new boot_id {tried.boot_id}, {tried.waited_s:.0f} s after the NMI): no power cycle")
    return replace(record, outcome=Outcome.REBOOT, reason=reason)


def vmcore_forensics(facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the next boot's facts say of a kdump's vmcore (``kdump.vmcores`` under /var/crash)."""
    kdump = (facts or {}).get("kdump")
    if not isinstance(kdump, Mapping):
        return {"vmcore": {"present": None, "paths": [], "why": "the host's facts say nothing of kdump"}}
    paths = [str(p) for p in kdump.get("vmcores") or () if isinstance(p, str)]
    return {"vmcore": {"present": bool(paths), "paths": paths[-5:]}}


def ladder_forensics(rung: str, tried: NmiTry | None) -> dict[str, Any]:
    """The record's note of the ladder: which rung brought the host back, and the NMI's try."""
    return {"recovery_rung": rung, **({"nmi": tried.as_json()} if tried is not None else {})}
