"""A fake lab for ``doctor --cycle`` (campaign/cycle_test.py's CycleLab port), in virtual time.

It plays what real hardware does: an outlet switched off takes down every host it feeds (the
inventory may name another one); an outlet switched on boots each of them after its boot delay
with a new boot_id, unless its BIOS leaves it off after AC loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from reprofleet.campaign.cycle_test import Look, Rejoin
from reprofleet.clock import VirtualClock
from reprofleet.errors import ConnectError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model import Host, PowerPort
from reprofleet.power.base import PowerState

__all__ = ["FakeLab", "Machine", "host"]


@dataclass
class Machine:
    """One host of the fake lab: fed by ``outlet`` (really, whatever the inventory says)."""

    outlet: str
    boot_s: float = 95.0
    kernel_s: float | None = None  # after power-on, it answers pings this soon (before sshd)
    bios_stays_off: bool = False
    lease: Mapping[str, Any] | None = None
    alive: bool = True
    gpu_problem: str | None = None
    powered: bool = True
    sshd_at: float = 0.0
    kernel_at: float = 0.0
    boots: int = 1


@dataclass
class FakeLab:
    """The CycleLab port over machines and outlets; ``switches`` is every (host, state) asked."""

    clock: VirtualClock
    machines: dict[str, Machine]
    switches: list[tuple[str, str]] = field(default_factory=list)
    outlet_of: Callable[[Host], str] = field(default=lambda host: str(host.pdu.outlet if host.pdu else ""))

    def _fed_by(self, outlet: str) -> list[Machine]:
        return [m for m in self.machines.values() if m.outlet == outlet]

    def look(self, host: Host) -> Look:
        machine = self.machines[host.name]
        if not machine.alive or self.probe(host) is not ProbeAnswer.SSHD:
            raise ConnectError(host.name, "connection timed out")
        return Look(f"boot-{host.name}-{machine.boots}", machine.lease, {"nvml": "ok"})

    def probe(self, host: Host) -> ProbeAnswer:
        machine = self.machines[host.name]
        if not machine.alive or not machine.powered:
            return ProbeAnswer.DEAD
        now = self.clock.monotonic()
        if now >= machine.sshd_at:
            return ProbeAnswer.SSHD
        return ProbeAnswer.KERNEL if now >= machine.kernel_at else ProbeAnswer.DEAD

    def switch(self, host: Host, state: PowerState) -> PowerState:
        self.switches.append((host.name, state.value))
        for machine in self._fed_by(self.outlet_of(host)):
            if state is PowerState.OFF:
                machine.powered = False
            elif not machine.powered and not machine.bios_stays_off:
                machine.powered, machine.boots = True, machine.boots + 1
                machine.sshd_at = self.clock.monotonic() + machine.boot_s
                machine.kernel_at = self.clock.monotonic() + (machine.kernel_s if machine.kernel_s is not None
                                                              else machine.boot_s)
        return state

    def rejoin(self, host: Host, before: Look) -> Rejoin:
        machine = self.machines[host.name]
        return Rejoin(f"boot-{host.name}-{machine.boots}", machine.gpu_problem)


def host(name: str, outlet: str) -> Host:
    """A host whose inventory names ``outlet`` (the lab may feed it from another)."""
    return Host(name=name, address=f"{name}.lab", pdu=PowerPort("fake", "http://pdu.lab", outlet=outlet))
