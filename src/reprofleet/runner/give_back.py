"""What a host gets back when its runner ends: the GPU's settings, the lockup sysctls, netconsole,
its lease; then its session is closed.

Always on a host that ran its plan; on a quarantined one only when its sshd answers a short
probe (a host that never came back is not waited for). A quarantined host that still answers
must not keep locked clocks, lockup panics, printk 8 and netconsole aimed at this controller:
a production box that later hits a soft lockup would panic and reboot. A fenced host (another
controller holds it now) gets nothing back from this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprofleet.errors import AgentFenced
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model.events import CampaignEvent
from reprofleet.runner.host_debug import HostDebugSysctls
from reprofleet.runner.link import HostLink
from reprofleet.runner.netconsole import HostNetconsole
from reprofleet.runner.policy_keeper import PolicyKeeper

__all__ = ["GiveBack"]


@dataclass(frozen=True)
class GiveBack:
    """The parts of one host's runner that changed the host, and how long a last probe may take."""

    link: HostLink
    policy: PolicyKeeper
    sysctls: HostDebugSysctls
    netconsole: HostNetconsole
    banner_timeout_s: float

    def may_restore(self, quarantined: bool, prepared: bool) -> bool:
        """Whether the experiment's settings can be put back now (see the module's docstring)."""
        if self.link.fenced:
            return False  # the GPU is the other controller's now
        if not quarantined:
            return True
        if not (prepared or self.policy.applied is not None or self.sysctls.applied is not None):
            return False  # nothing of ours is on it (refused before the first change)
        return self.link.port.probe(self.banner_timeout_s) is ProbeAnswer.SSHD

    def __call__(self, quarantined: bool, prepared: bool) -> str:
        """Give back what may be given back; what was and was not, in words for the end message.
        The first fenced refusal ends it: the host is another controller's, whose settings the
        next restore would undo (its ``kernel.softlockup_panic`` reset to 0)."""
        give_back = self.may_restore(quarantined, prepared)
        said = "GPU settings NOT restored: " + ("another controller holds the host" if self.link.fenced
                                               else "it does not answer")
        try:
            if give_back:
                said = self.policy.restore(self.link.agent, prepared)
            self.sysctls.restore_at_end(self.link.agent, not give_back, prepared)
            self.netconsole.restore_at_end(self.link.agent, not give_back)
        except AgentFenced as exc:
            self.link.fenced = exc.reason
            self.link.log.event(CampaignEvent.FENCED, reason=exc.reason, message="another controller took this "
                                "host's lease: nothing of this campaign's was restored on it")
            said = "GPU settings NOT restored: another controller holds the host"
        self.link.release_lease()
        self.link.close()
        return said
