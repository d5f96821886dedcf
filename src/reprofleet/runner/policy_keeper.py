"""One host's GPU settings through a campaign: ensured before every attempt, re-applied after a
recovery, restored at the end; on an observe-only host only read.

The keeper owns what was applied in this boot and what the last attempt asked for; a new
boot (``forget``) makes the applied state stale, so the next attempt applies and reads back
again whatever its cell asks, the default cell included: a lock left by a killed controller
must not run the reference.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from reprofleet.errors import AgentFenced, PolicyError, ReprofleetError
from reprofleet.model import GpuPolicy, Host
from reprofleet.model.events import CampaignEvent
from reprofleet.remote.agent import AgentClient
from reprofleet.runner import gpu_policy as policy
from reprofleet.runner.host_log import HostLog

__all__ = ["PolicyKeeper"]


class PolicyKeeper:
    """The GPU settings of one host, as this campaign asked for them and the card read them back."""

    def __init__(self, host: Host, log: HostLog) -> None:
        self.host = host
        self.log = log
        self.applied: policy.PolicyState | None = None  # in force in this boot, as read back
        self.last_requested: GpuPolicy | None = None  # the policy the last attempt asked for (recovery re-applies it)
        self.observed: Mapping[str, Any] | None = None  # an observe-only host: the card's last read-back (never set)

    def forget(self) -> None:
        """A new boot: the driver forgot -lgc/-pl."""
        self.applied = None

    def ensure(self, agent: AgentClient, wanted: GpuPolicy) -> Mapping[str, Any]:
        """The cell's policy in force, and what the GPU reports right now (one read per attempt)."""
        if self.host.observe_only:
            return self._observe(agent, wanted)
        if self.applied is not None and self.applied.requested == wanted:
            now = policy.read(agent, self.host.gpu_index)
            changes = policy.changed_since(self.applied.readback, now)
            if not changes:
                return now
            self.log.event(CampaignEvent.POLICY_CHANGED, policy=wanted.as_dict(), changes=changes,
                           message="the card no longer reads what was applied (changed by hand or by another "
                                   "tool?): re-applied before the attempt")
        self.last_requested = wanted
        state = policy.apply(agent, self.host, wanted)  # its read-back is fresh
        self.log.event(CampaignEvent.POLICY_APPLIED, policy=wanted.as_dict(), readback=dict(state.readback))
        self.applied = state
        return state.readback

    def _observe(self, agent: AgentClient, wanted: GpuPolicy) -> Mapping[str, Any]:
        """An observe-only host: the card is read, never set. A cell that asks for a setting
        was refused before the campaign started; one that reaches here all the same (a plan
        built by other code) is infra, never run under settings it did not ask for."""
        if not wanted.is_default:
            raise PolicyError(f"{self.host.name}: the host is observe-only (gpu_policy: observe) and the cell asks "
                              f"{wanted.as_dict()}: not run")
        now = policy.read(agent, self.host.gpu_index)
        changes = policy.changed_since(self.observed, now) if self.observed is not None else []
        if changes:
            self.log.event(CampaignEvent.POLICY_CHANGED, policy={}, changes=changes,
                           message="observe-only host: the card's settings changed between attempts (by its owner?); "
                                   "left as they are, the record carries the new read-back")
        self.observed = now
        return now

    def reapply(self, agent: Callable[[], AgentClient]) -> str | None:
        """After a recovery the new boot has lost the card's settings: the last attempt's policy
        is applied and read back now, so a card that refuses it is quarantined with its words at
        once, not after ``infra_streak`` attempts. Returns why it failed, or None."""
        wanted = self.last_requested
        if wanted is None:
            return None
        try:
            self.ensure(agent(), wanted)
        except ReprofleetError as exc:
            return f"the GPU policy could not be re-applied after recovery: {exc}"
        return None

    def restore(self, agent: Callable[[], AgentClient], prepared: bool) -> str:
        """Defaults back at the end. A host this run prepared is restored even when this run
        applied nothing: a resume with no slot left on it must still undo the lock a killed
        controller left between its last record and its own restore."""
        if self.host.observe_only or (self.applied is None and not prepared):
            return "GPU settings: nothing to restore"  # an observe-only host's card was never set
        try:
            readback = policy.restore(agent(), self.host)
            self.log.event(CampaignEvent.POLICY_RESTORED, readback=dict(readback))
            self.applied = None
        except AgentFenced:
            raise  # not a failure to restore: the host is another controller's now (GiveBack stops there)
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.POLICY_RESTORE_FAILED, error=str(exc))
            return f"GPU settings NOT restored: {exc}"
        return "GPU settings restored"
