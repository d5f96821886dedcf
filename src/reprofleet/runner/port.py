"""The host seam: everything a host runner asks of its host, behind one small protocol.

A runner's decisions (when a silence is a wedge, when to cycle, how long to wait for a
boot, what a record says) depend on a handful of answers from the host: an agent to talk
to, what a probe of its ports finds, and the outlets that feed it. :class:`SshHostPort`
gives the real answers (SSH, TCP/ICMP probes, the power drivers of the inventory); a test
gives scripted ones from an in-process fake host and plays the same decisions in virtual
time (``reprofleet.clock.VirtualClock``), in milliseconds instead of a fleet's minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from reprofleet.errors import ReprofleetError
from reprofleet.liveness.probes import HostProbe, ProbeAnswer, Resolver, UnresolvedName, probe_ssh_banner, resolve_now
from reprofleet.model import Host
from reprofleet.power.wall import WallLine, WallPowerSampler, wall_sampler
from reprofleet.remote.agent import AgentClient
from reprofleet.remote.transport import connect

if TYPE_CHECKING:
    from reprofleet.power.log import PowerLog
    from reprofleet.power.ports import HostPower
    from reprofleet.runner.context import CampaignContext

__all__ = ["HostPort", "SshHostPort"]


class HostPort(Protocol):
    """What a host runner and its recovery need from one host."""

    def connect(self) -> AgentClient:
        """A fresh session with the agent pushed; ``agent.session`` is that session."""
        ...

    def probe(self, timeout_s: float) -> ProbeAnswer:
        """Independent of any session: SSHD (a banner), KERNEL (echo or handshake) or DEAD."""
        ...

    def banner(self, timeout_s: float) -> bool:
        """Does sshd send its banner within ``timeout_s``?"""
        ...

    def power(self, log: "PowerLog") -> "HostPower":
        """The drivers of every outlet that feeds the host (raises if they cannot be built)."""
        ...

    def wall_sampler(self, write: Callable[[WallLine], None]) -> WallPowerSampler:
        """An attempt's wall-power sampler (one that does nothing where no outlet meters power)."""
        ...


class SshHostPort:
    """The real host: SSH for the agent, TCP/ICMP probes, the inventory's power drivers."""

    def __init__(self, ctx: "CampaignContext", host: Host, resolver: Resolver = resolve_now) -> None:
        self._ctx = ctx
        self._host = host
        self._resolver = resolver  # asked on every probe and banner check: a name DHCP moved is followed
        self._probes: dict[float, HostProbe] = {}  # one per timeout; each resolves the name on every round

    @property
    def _lock_dir(self) -> Path:
        from reprofleet.power.locks import lock_folder

        return lock_folder(self._ctx.directory.root.parent)

    def connect(self) -> AgentClient:
        session = connect(self._host, self._ctx.settings.transport)
        try:
            agent = AgentClient(session, self._ctx.bundle, self._host.python)
            agent.push()
        except (ReprofleetError, OSError):
            session.close()
            raise
        return agent

    def probe(self, timeout_s: float) -> ProbeAnswer:
        if timeout_s not in self._probes:
            self._probes[timeout_s] = HostProbe(self._host.address, self._host.port, timeout_s, self._resolver)
        return self._probes[timeout_s]()

    def banner(self, timeout_s: float) -> bool:
        try:
            address = self._resolver(self._host.address)
        except UnresolvedName:
            return False  # no banner was seen: nothing could be asked
        return probe_ssh_banner(address, self._host.port, timeout_s)

    def power(self, log: "PowerLog") -> "HostPower":
        from reprofleet.power.ports import build_host_power

        return build_host_power([self._host], log, lock_dir=self._lock_dir, clock=self._ctx.clock)[self._host.name]

    def wall_sampler(self, write: Callable[[WallLine], None]) -> WallPowerSampler:
        return wall_sampler(self._host, self._ctx.directory.root.parent, write, clock=self._ctx.clock)
