"""Lockup-to-panic sysctls on a host (the agent's ``host-debug``): apply, verify, restore.

A cell's ``host_debug:`` asks the kernel to panic on a lockup its watchdogs see, and to
reboot ``panic`` seconds later: a wedge the kernel noticed then comes back by itself as a
``reboot`` with the panic text in pstore and the previous boot's journal. Like a GPU policy
this is an experimental factor, so what the record keeps is what the kernel reads back, and
an apply that does not hold makes the attempt ``infra``.

A reboot resets every sysctl, so the runner forgets what it applied when the boot_id
changes and applies again before the next attempt (the first attempt of every boot).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from reprofleet.remote.agent import AgentClient
from reprofleet.errors import AgentFenced, PolicyError, ReprofleetError
from reprofleet.model import HostDebug, Playbook
from reprofleet.model.events import CampaignEvent
from reprofleet.runner.host_log import HostLog

NMI_WATCHDOG = "nmi_watchdog"


@dataclass(frozen=True)
class HostDebugState:
    """The settings a cell asked for, and the sysctls the kernel reported back."""

    requested: HostDebug
    values: Mapping[str, Any]

    def for_record(self) -> dict[str, Any]:
        return {"requested": self.requested.as_dict(), "sysctls": dict(self.values)}


def sysctls(wanted: HostDebug) -> dict[str, int]:
    """kernel.* names and values; a hard-lockup panic needs the NMI watchdog, so it is set too."""
    values = {name: int(value) for name, value in wanted.as_dict().items()}
    if wanted.hardlockup_panic:
        values[NMI_WATCHDOG] = 1
    return values


def verify(wanted: Mapping[str, int], values: Mapping[str, Any]) -> list[str]:
    """What the kernel reports differently from what was asked (empty: verified)."""
    return [f"kernel.{name}: asked {value}, the kernel reports {values.get(name)}"
            for name, value in sorted(wanted.items()) if values.get(name) != value]


def uses_host_debug(playbook: Playbook) -> bool:
    """Only campaigns with a host_debug cell touch the sysctls (plain cells are then put back
    to the host's own values before they run)."""
    return any(not cell.host_debug.is_default for cell in playbook.cells)


def apply(agent: AgentClient, requested: HostDebug) -> HostDebugState:
    wanted = sysctls(requested)
    report = agent.host_debug(["apply", "--json", json.dumps(wanted, sort_keys=True)])
    values = dict(report.values)
    problems = [str(e) for e in report.errors] or verify(wanted, values)
    if not report.ok or problems:
        raise PolicyError(f"{agent.host}: host_debug not applied: {'; '.join(problems) or 'agent said not ok'}")
    return HostDebugState(requested, values)


def read(agent: AgentClient) -> Mapping[str, Any]:
    return dict(agent.host_debug(["read"]).values)


def restore(agent: AgentClient) -> Mapping[str, Any]:
    """This boot's saved values back; returns what the kernel reads afterwards."""
    report = agent.host_debug(["restore"])
    if not report.ok:
        raise PolicyError(f"{agent.host}: host_debug restore failed: {list(report.errors)}")
    return dict(report.values)


class HostDebugSysctls:
    """One host's lockup-to-panic sysctls through a campaign: what this boot has applied.

    Owned by the host runner; it knows only the campaign's playbook (whether any cell uses
    host_debug), where its events go, and its own state.
    """

    def __init__(self, log: HostLog, playbook: Playbook) -> None:
        self.log = log
        self.in_use = uses_host_debug(playbook)
        self.applied: HostDebugState | None = None  # in this boot

    def forget(self) -> None:
        """A new boot: the kernel has its own sysctls again."""
        self.applied = None

    def ensure(self, agent: AgentClient, wanted: HostDebug) -> dict[str, Any] | None:
        """The cell's sysctls in force before an attempt, for its record; None in a campaign
        without host_debug cells (nothing is read or written there)."""
        if not self.in_use:
            return None
        applied = self.applied
        if applied is None or applied.requested != wanted:  # a new boot, or another cell
            applied = apply(agent, wanted)
            self.log.event(CampaignEvent.HOST_DEBUG_APPLIED, requested=wanted.as_dict(),
                           sysctls=dict(applied.values))
            self.applied = applied
        return applied.for_record()

    def restore_at_end(self, agent: Callable[[], AgentClient], skip: bool, prepared: bool) -> None:
        """The host's own sysctls back when its campaign ends (stopped or not); a failure is an
        event, never an exception that reaches the other hosts."""
        if not self.in_use or skip or (self.applied is None and not prepared):
            return
        try:
            values = restore(agent())
            self.log.event(CampaignEvent.HOST_DEBUG_RESTORED, sysctls=dict(values))
            self.applied = None
        except AgentFenced:
            raise  # another controller's host now: nothing more is sent to it
        except ReprofleetError as exc:
            self.log.event(CampaignEvent.HOST_DEBUG_RESTORE_FAILED, error=str(exc))
