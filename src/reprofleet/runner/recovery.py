"""Bringing a wedged host back, as a state machine, and reading what its last boot left.

wedged -> [nmi ->] off -> dwell -> on -> booting (SSH back within the boot deadline, polled with
backoff) -> booted (boot_id differs from before) -> stable (still up after a short window)
-> forensics (previous boot's kernel log, pstore) -> ready. The policy is re-applied and
verified by the host runner before the next attempt, because the boot_id changed.

Every way out is bounded: a PDU that fails, a host that does not return by the boot
deadline, or a spent power-cycle budget quarantines that host with a clear reason, and the
campaign goes on with the rest. Where the host's ladder says ``recovery: [nmi, cycle]``, an NMI
goes first (runner/nmi_rung.py): a kernel that panics on it reboots by itself, with a vmcore,
and no power is cut. A host without a power port is polled until a person
brings it back; if it comes back with the same boot_id it was never frozen (``infra``).

Off, dwell and on are logged as the driver reaches them (a controller killed mid-cycle has
recorded how far it got). The partition guard is asked before every power action: a host
is never cycled because our own network failed.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from enum import Enum, unique
from typing import Any, Callable, Mapping

from reprofleet.clock import Clock
from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.errors import HostKeyError, PowerError, ReprofleetError
from reprofleet.liveness.probes import IcmpMode, ProbeAnswer, icmp_mode
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model import Host, Outcome, Record, Timeouts
from reprofleet.model.events import CampaignEvent
from reprofleet.model.reasons import ReasonCode
from reprofleet.model.shutdown import as_host_shutdown
from reprofleet.power.base import PowerState
from reprofleet.power.control import PowerControl, power_control
from reprofleet.power.ports import HostPower
from reprofleet.records.store import CampaignDir, power_cycles_logged
from reprofleet.remote import host_commands
from reprofleet.runner.context import RunSettings
from reprofleet.runner.host_debug import HostDebugState
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink
from reprofleet.runner.nmi_rung import NmiRung, NmiTry, ladder_forensics, nmi_record, vmcore_forensics
from reprofleet.runner.policy_keeper import PolicyKeeper
from reprofleet.runner.power_gate import NetworkDown, PowerGate

DEFAULT_NMI_REBOOT_S = Timeouts().nmi_reboot
HUMAN_WAIT_S = DEFAULT_TIMINGS.human_wait_s  # a host without a power port: poll this long for a person
NOT_BACK_CAUSES = (
    "Likely causes: the BIOS is set to stay off after power loss (set 'restore on AC power loss' to "
    "power on); a second power supply on another outlet kept the host up (list both under pdu: outlets:); "
    "the inventory names the wrong outlet (check the wiring with: invoke power HOST verify --hosts INVENTORY)"
)
GUARD_POLL_S = DEFAULT_TIMINGS.guard_poll_s  # while our own network is down: ask the guard again this often
log = logging.getLogger(__name__)


@unique
class RecoveryState(str, Enum):
    WEDGED = "wedged"
    NMI = "nmi"  # the ladder's first rung: an NMI sent, waiting for the panic reboot
    OFF = "off"
    DWELL = "dwell"
    ON = "on"
    BOOTING = "booting"
    BOOTED = "booted"
    STABLE = "stable"
    FORENSICS = "forensics"
    READY = "ready"
    QUARANTINED = "quarantined"
    STOPPED = "stopped"  # the campaign stopped before any power action: nothing switched


_NEXT = {
    RecoveryState.WEDGED: {RecoveryState.NMI, RecoveryState.OFF, RecoveryState.ON, RecoveryState.BOOTING,
                           RecoveryState.QUARANTINED, RecoveryState.STOPPED},
    RecoveryState.NMI: {RecoveryState.BOOTING, RecoveryState.OFF, RecoveryState.QUARANTINED, RecoveryState.STOPPED},
    RecoveryState.OFF: {RecoveryState.DWELL, RecoveryState.QUARANTINED},
    RecoveryState.DWELL: {RecoveryState.ON, RecoveryState.OFF, RecoveryState.QUARANTINED},  # OFF: the retry
    RecoveryState.ON: {RecoveryState.BOOTING, RecoveryState.OFF, RecoveryState.QUARANTINED},
    RecoveryState.BOOTING: {RecoveryState.BOOTED, RecoveryState.QUARANTINED},
    RecoveryState.BOOTED: {RecoveryState.STABLE, RecoveryState.BOOTING, RecoveryState.QUARANTINED},
    RecoveryState.STABLE: {RecoveryState.FORENSICS},
    RecoveryState.FORENSICS: {RecoveryState.READY, RecoveryState.QUARANTINED},  # QUARANTINED: the health gate
}


class RecoveryError(ReprofleetError):
    """Recovery cannot go on; the host is quarantined."""


class NeverFrozen(RecoveryError):
    """A host without a power port came back with the same boot_id: it was not wedged."""


class LeaseMayHaveLapsed(ReprofleetError):
    """This controller may no longer hold the host: it neither declares it wedged nor switches
    its power on its own word (issue 34 item 6); the host is fenced off for this controller."""


class StoppedBeforeSwitching(ReprofleetError):
    """The campaign was stopped before the power action: stopping never cuts power."""

    WORDS = ("stopped before the power action: the campaign was stopped, nothing was switched "
             "and the host is left as it was")


class Sequence:
    """The state of one recovery; refuses moves the diagram does not have."""

    def __init__(self, on_change: Callable[[RecoveryState, RecoveryState, dict[str, Any]], None]) -> None:
        self.state = RecoveryState.WEDGED
        self._on_change = on_change
        self.booted: str | None = None  # the boot_id seen coming up; the stability check compares with it

    def transition(self, new: RecoveryState, **detail: Any) -> None:
        if new is self.state:
            return
        if new not in _NEXT.get(self.state, set()):
            raise RecoveryError(f"recovery cannot go from {self.state.value} to {new.value}")
        old, self.state = self.state, new
        if new is RecoveryState.BOOTED:
            self.booted = detail.get("boot_id")
        self._on_change(old, new, detail)


def backoff_delays(first: float = DEFAULT_TIMINGS.boot_poll_first_s, factor: float = DEFAULT_TIMINGS.boot_poll_factor,
                   cap: float = DEFAULT_TIMINGS.boot_poll_cap_s) -> Any:
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * factor)


@dataclass
class PowerBudget:
    """One host's power cycles against the campaign's budget; it survives a controller restart
    (the cycles this campaign already made are read back from power.jsonl)."""

    limit: int
    used: int = 0

    def sync(self, directory: CampaignDir, host: str) -> None:
        self.used = max(self.used, power_cycles_logged(directory.power, host))


@dataclass(frozen=True)
class RecoveryBinding:
    """Exactly what one host's recovery uses, and nothing of the runner's own state."""

    host: Host
    link: HostLink
    policy: PolicyKeeper  # re-applies the last attempt's settings once the host is back
    log: HostLog
    clock: Clock
    settings: RunSettings
    boot_deadline_s: float  # the playbook's timeouts.boot
    stop: threading.Event  # the campaign's stop
    fleet: FleetLiveness  # the partition guard and the correlated-silence hold
    power: PowerControl
    power_of: Callable[[], HostPower]  # the drivers of every outlet that feeds the host
    budget: PowerBudget
    after_budget: str  # the playbook's ``after_budget``: "cycle" (one last, left booted) or "off" (left off)
    facts: Callable[[], Mapping[str, Any] | None]  # the host's facts as last read (the health gate, the grace)
    sysctls_in_force: Callable[[], HostDebugState | None]  # the lockup sysctls this boot was given
    host_outlets: Mapping[str, frozenset[str]]  # host -> its outlet keys: who shares an outlet with this host
    note_cut: Callable[[str, str], None]  # (neighbour, why): its attempt ends by this host's cycle
    cut_since: Callable[[str, float], str | None]  # (host, since): why a neighbour's cycle cut its power, if it did
    nmi_reboot_s: float = DEFAULT_NMI_REBOOT_S  # the playbook's timeouts.nmi_reboot (a host's nmi_reboot_s wins)


@dataclass(frozen=True)
class Recovered:
    """What a recovery found: the record as it now stands, and why the host must be
    quarantined (None: it rejoins the campaign)."""

    record: Record
    quarantine: str | None = None


class HostRecovery:
    """Brings one host back: built with exactly what it uses, and it decides; it never
    changes the runner's state. What it found is a :class:`Recovered`: the record as it now
    stands, and why the host must be quarantined, if it must (the runner quarantines it)."""

    def __init__(self, binding: RecoveryBinding) -> None:
        self.b = binding
        self.host = binding.host
        self.link = binding.link
        self.log = binding.log
        self.clock = binding.clock  # every wait below: virtual in seam tests
        self.settings = binding.settings
        self.timings = binding.settings.timings
        self.stop = binding.stop
        self.fleet = binding.fleet
        self.budget = binding.budget
        self.gate = PowerGate(self.host.name, self.fleet, self.log, self.clock, self.stop, self.settings)
        self.nmi = NmiRung(self.host, self.link, self.log, self.clock, self.stop, self.timings)

    def _sequence(self) -> Sequence:
        return Sequence(lambda old, new, d: self.log.event(CampaignEvent.RECOVERY,
                                                           **{"from": old.value, "to": new.value, **d}))

    def explain(self, record: Record, since: float) -> Record:
        """What a silence declared as a wedge (or a reset) was, read before the record is written:
        a neighbour's cycle through a shared outlet (``infra``: not this host's doing), or a power
        device that reads off before this controller switched anything (``power_loss``)."""
        cut = self.b.cut_since(self.host.name, since)
        if cut is not None:
            return replace(record, outcome=Outcome.INFRA, reason=ReasonCode.CUT.words(cut), detect_latency_s=None)
        if record.outcome is not Outcome.WEDGE:
            return record
        lost = self.power_off_words()
        if lost is None:
            return record
        self.log.event(CampaignEvent.POWER_LOST, attempt=record.attempt, device=lost)
        return replace(record, outcome=Outcome.POWER_LOSS, reason=lost)

    def power_off_words(self) -> str | None:
        return power_off_words(self.host, self.b.power_of, self.log)

    def recover(self, record: Record) -> Recovered:
        if self.link.lease_may_have_lapsed():  # the silence may be another campaign's cycle: not ours to cut
            return Recovered(not_declared(self.link, record))
        if record.outcome is not Outcome.POWER_LOSS:
            lost = self.power_off_words()
            if lost is not None:  # silent because it is off: switched on, never cycled
                self.log.event(CampaignEvent.POWER_LOST, attempt=record.attempt, device=lost)
                return self.switch_back_on(replace(record, reason=f"{record.reason}; {lost}"))
        seq = self._sequence()
        old_boot = self.link.boot.boot_id
        try:
            came_back = grace_for_self_reboot(self.b, old_boot, record)
            if came_back is not None:  # a reboot, whatever the checks below find; forensics as for a wedge
                return self._came_back(seq, came_back_record(record, came_back), came_back, "itself", None)
            tried: NmiTry | None = None
            if self.host.pdu is None:
                self._wait_for_person(seq)
            else:
                answered = self._answers_before_switching(record)
                if answered is not None:
                    return Recovered(answered)
                tried = self._nmi_first(seq, old_boot)
                if tried is not None and tried.boot_id is not None:  # it panicked on the NMI and rebooted
                    return self._came_back(seq, nmi_record(record, tried), tried.boot_id, "nmi", tried)
                if self.budget.used >= self.settings.power_cycle_budget:
                    return self._after_budget(seq, record, old_boot)
                self._power_cycle(seq)
            self._bring_back(seq, old_boot)
            forensics = {**self._forensics(seq, record), **self._bmc_events(record), **self._ladder("cycle", tried)}
        except NeverFrozen as exc:
            seq.transition(RecoveryState.BOOTED, boot_id=old_boot, same_boot=True)
            self.link.stop_attempt(record.attempt, "the host came back with the same boot: its attempt may still run")
            return Recovered(replace(record, outcome=Outcome.INFRA, detect_latency_s=None, reason=str(exc)))
        except NetworkDown as exc:
            return Recovered(replace(record, outcome=Outcome.INFRA, reason=str(exc)))
        except StoppedBeforeSwitching as exc:
            seq.transition(RecoveryState.STOPPED, reason=str(exc))
            return Recovered(replace(record, forensics={"recovery": str(exc)}))
        except LeaseMayHaveLapsed:
            return Recovered(not_declared(self.link, record))
        except (RecoveryError, PowerError) as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            # a BMC that failed the cycle would only fail again; a host that never came back is worth the read
            bmc = self._bmc_events(record) if not isinstance(exc, PowerError) else {}
            return Recovered(replace(record, forensics={"recovery": "failed", "error": str(exc), **bmc}),
                             quarantine=f"recovery failed: {exc}")
        return self._rejoin(seq, record, forensics)

    def _came_back(self, seq: Sequence, record: Record, boot_id: str, rung: str, tried: NmiTry | None) -> Recovered:
        """A host back with a new boot_id without a power cycle (by itself, or by the NMI rung)."""
        seq.transition(RecoveryState.BOOTING, by=rung)
        seq.transition(RecoveryState.BOOTED, boot_id=boot_id)
        self._check_stable(seq)
        forensics = {**self._forensics(seq, record), **self._bmc_events(record), **self._ladder(rung, tried)}
        return self._rejoin(seq, record, forensics)

    def _nmi_first(self, seq: Sequence, old_boot: str | None) -> NmiTry | None:
        """The ladder's NMI rung, where the inventory asks for it; a stop in its wait cuts no power."""
        if not self.nmi.wanted:
            return None
        wait_s = self.host.nmi_reboot_s or self.b.nmi_reboot_s
        try:
            power = self.b.power_of()
        except ReprofleetError as exc:
            raise RecoveryError(f"cannot build the power driver: {exc}") from exc
        tried = self.nmi.climb(power, wait_s, lambda d: seq.transition(RecoveryState.NMI, **d), old_boot)
        if tried is None or tried.boot_id is None:  # the cycle is next: the waits may have been long
            if self.stop.is_set():
                raise StoppedBeforeSwitching(StoppedBeforeSwitching.WORDS)
            if self.link.lease_may_have_lapsed():
                raise LeaseMayHaveLapsed("the lease may have lapsed during the NMI's wait")
        return tried

    def _ladder(self, rung: str, tried: NmiTry | None) -> dict[str, Any]:
        """Which rung brought the host back (hosts whose ladder has an NMI), and the vmcore its facts list."""
        if not self.nmi.wanted:
            return {}
        try:
            facts = self.link.agent().facts().as_json if tried is not None and tried.sent else None
        except ReprofleetError:
            facts = None
        return {**ladder_forensics(rung, tried), **(vmcore_forensics(facts) if tried is not None and tried.sent else {})}

    def switch_back_on(self, record: Record) -> Recovered:
        """A host that lost power: every outlet switched on (none ever "off"), the boot awaited,
        forensics read, and the host rejoins through the health gate. Never counts against the
        power-cycle budget: nothing was cycled."""
        seq = self._sequence()
        old_boot = self.link.boot.boot_id
        try:
            power = self.b.power_of()
            from reprofleet.power.ports import switch_on_until

            switch_on_until(power, self.timings.power_on_deadline_s, self.clock)
            seq.transition(RecoveryState.ON, after="power loss", outlets=[d.outlet_key for d in power.drivers])
            self._bring_back(seq, old_boot)
        except (RecoveryError, PowerError, ReprofleetError) as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            return Recovered(replace(record, forensics={"recovery": "failed", "error": str(exc)}),
                             quarantine=f"recovery failed: {exc}")
        forensics = {**self._forensics(seq, record), **self._bmc_events(record)}
        return self._rejoin(seq, record, forensics)

    def _after_budget(self, seq: Sequence, record: Record, old_boot: str | None) -> Recovered:
        """The power-cycle budget is spent and a host froze again: it is never left frozen. One
        last cycle leaves it booted (its settings given back when its runner ends), or, where
        the playbook says ``after_budget: off``, it is switched off and left off on purpose; the
        record says which, and the host is quarantined either way."""
        from reprofleet.power.ports import cycle_host

        spent = f"power-cycle budget of {self.settings.power_cycle_budget} spent"
        power = self.b.power_of()
        if self.b.after_budget == "off":
            for driver in power.drivers:
                driver.off()
            seq.transition(RecoveryState.OFF, after_budget="off", outlets=[d.outlet_key for d in power.drivers])
            return Recovered(replace(record, forensics={"recovery": "after_budget", "after_budget": "left off"}),
                             quarantine=f"{spent}: switched off and left off (after_budget: off)")
        self.budget.used += 1
        cycle_host(power, self.settings.dwell_s, on_state=lambda state: seq.transition(RecoveryState(state),
                                                                                      after_budget="cycle"))
        self._bring_back(seq, old_boot)
        forensics = {**self._forensics(seq, record), **self._bmc_events(record), "after_budget": "cycled once more, booted"}
        return Recovered(replace(record, forensics=forensics),
                         quarantine=f"{spent}: cycled once more so it is left booted (after_budget: cycle)")

    def _answers_before_switching(self, record: Record) -> Record | None:
        """The last word before a host's power is cut: probe it; ask the partition guard and
        the correlated-silence hold (waiting while either says no); probe again after a wait.
        A host that answers is not cycled: its record becomes ``infra`` with the reason."""
        def answered(why: str) -> Record:
            self.link.stop_attempt(record.attempt, why)
            return replace(record, outcome=Outcome.INFRA, detect_latency_s=None, reason=f"{why}; not cycled")

        if self.link.banner(self.timings.banner_timeout_s):
            return answered("declared wedged, but the host answered before the power cycle")
        waited = self.gate.guard()
        held = self.gate.hold()
        if self.stop.is_set():  # a stop releases the hold (or the guard), and never into a cut
            raise StoppedBeforeSwitching(StoppedBeforeSwitching.WORDS)
        if self.link.lease_may_have_lapsed():  # the guard or the hold may have waited long
            raise LeaseMayHaveLapsed("the lease may have lapsed")
        if (waited or held) and self.link.banner(self.timings.banner_timeout_s):
            # it was our network, or its switch, all along: the host answers now that it is back
            return answered(("declared wedged while the controller's network was down" if waited else
                             "declared wedged while silent with other hosts (a switch outage?)")
                            + "; the host answered once it was back")
        return None

    def _bring_back(self, seq: Sequence, old_boot: str | None) -> None:
        """Booting, booted, stable; a late failure (a read-back, a flaky plug, a connection that
        dropped right after boot) sends the host back to *booting* once, after a probe, instead of
        quarantining a host that came back."""
        try:
            self._wait_for_boot(seq, old_boot)
            self._check_stable(seq)
        except (NeverFrozen, NetworkDown):
            raise
        except (RecoveryError, PowerError) as exc:
            if seq.state not in (RecoveryState.BOOTED, RecoveryState.BOOTING) or not self.link.banner(
                    self.timings.banner_timeout_s) or self.stop.is_set():
                raise
            self.log.event(CampaignEvent.WARNING,
                           message=f"{exc}; the host answers: waiting for its boot once more")
            if seq.state is RecoveryState.BOOTED:
                seq.transition(RecoveryState.BOOTING, after=str(exc))
            self._wait_for_boot(seq, old_boot)
            self._check_stable(seq)

    def _rejoin(self, seq: Sequence, record: Record, forensics: dict[str, Any]) -> Recovered:
        """Ready only when its GPU is still there (runner/health_gate.py); else quarantined,
        with the failing checks' words in the forensics (``gpu_health``) and the reason."""
        from reprofleet.runner import health_gate

        record = as_host_shutdown(replace(record, forensics=forensics))  # an orderly reboot is infra, runs again
        after = "the wedge" if record.outcome is Outcome.WEDGE else \
            "the reset" if record.outcome is Outcome.REBOOT else "recovery"
        try:
            agent = self.link.agent()
        except ReprofleetError as exc:  # gone again since the stability check: the gate cannot pass
            verdict = health_gate.GateVerdict(False, health_gate.UNASKED.format(after=after, error=exc),
                                              {"ok": False, "error": str(exc)})
        else:
            verdict = health_gate.check(agent, self.host.gpu_index, self.b.facts(),
                                        after)
        forensics = {**forensics, "gpu_health": dict(verdict.forensics)}
        refused = self.b.policy.reapply(self.link.agent) if verdict.healthy else None
        if refused is not None:
            forensics["policy"] = refused
            seq.transition(RecoveryState.QUARANTINED, reason=refused)
            return Recovered(replace(record, forensics=forensics), quarantine=refused)
        if verdict.healthy:
            seq.transition(RecoveryState.READY)
            return Recovered(replace(record, forensics=forensics))
        seq.transition(RecoveryState.QUARANTINED, reason=verdict.reason)
        return Recovered(replace(record, forensics=forensics), quarantine=str(verdict.reason))

    def _power_cycle(self, seq: Sequence) -> None:
        """Cycle every outlet of the host; once more with a longer dwell if it does not come back.

        A PDU that reads "on" while the host never answers is usually not a flaky PDU: a BIOS
        set to stay off after power loss, a second power supply on another outlet, or the
        wrong outlet in the inventory. One retry with a longer dwell (within the power-cycle
        budget) covers a supply that needed longer to drain; after that the host is
        quarantined with an error that names those causes.
        """
        from reprofleet.power.ports import cycle_host

        budget = self.settings.power_cycle_budget
        try:  # checked at campaign start; a credential file removed since is a quarantine, not a dead thread
            power = self.b.power_of()
        except ReprofleetError as exc:
            raise RecoveryError(f"cannot build the power driver: {exc}") from exc
        dwells = (self.settings.dwell_s, self.timings.retry_dwell(self.settings.dwell_s))
        boot_s = self.b.boot_deadline_s
        problem = ""
        for attempt, dwell in enumerate(dwells):
            if self.budget.used >= budget:
                switch_on_round(power, self.clock, self.log)
                raise RecoveryError(f"power-cycle budget of {budget} spent" + (f" ({problem})" if problem else ""))
            if attempt > 0 and self._back_after_guard():
                return  # our network was down during the boot wait: the host was back all along
            self.budget.used += 1
            details: dict[str, dict[str, Any]] = {
                "off": {"outlets": [d.outlet_key for d in power.drivers], "driver": self.host.power_ports[0].driver,
                        "attempt": attempt + 1},
                "dwell": {"seconds": dwell},
                "on": {"power_cycles": self.budget.used},
            }
            note_neighbours_cut(self.host.name, power, self.b.host_outlets, self.b.note_cut)
            # off, read back off, dwell, on, read back on; "on" always follows a sent "off";
            # each state is logged when the driver reaches it, not after the cycle returned.
            try:
                # the retry's longer dwell must be ours: a BMC's own cycle keeps its own off time
                cycle_host(power, dwell, on_state=lambda state: seq.transition(RecoveryState(state), **details[state]),
                           device=attempt == 0)
                problem = ""
            except PowerError as exc:  # "on" was still sent: the host may well be booting
                problem = f"the power cycle failed: {exc}"
            if self._answers_within(boot_s, retry_on=power if problem else None):
                if problem:
                    self.log.event(CampaignEvent.WARNING, message=f"{problem}; the host came back anyway")
                    for state in (RecoveryState.DWELL, RecoveryState.ON):  # where the failed cycle stopped
                        if seq.state in (RecoveryState.OFF, RecoveryState.DWELL):
                            seq.transition(state, after=problem)
                return
            problem = problem or f"the power device reads on, but the host did not answer within {boot_s:g} s"
            if attempt + 1 < len(dwells):
                self.log.event(CampaignEvent.POWER_RETRY, reason=problem, dwell_s=dwells[attempt + 1])
        switch_on_round(power, self.clock, self.log)
        raise RecoveryError(f"{problem}, after {len(dwells)} power cycles (dwell {dwells[0]:g} s, then "
                            f"{dwells[1]:g} s). {NOT_BACK_CAUSES}")

    def _back_after_guard(self) -> bool:
        """Before a second cycle: if our network went down while we waited for the boot, wait
        for it and look again; a host that answers then is not cut a second time."""
        return self.gate.guard() and self.link.banner(self.timings.banner_timeout_s)

    def _answers_within(self, deadline_s: float, retry_on: Any = None) -> bool:
        """Does the host's SSH port answer within ``deadline_s`` (polled with backoff)?

        ``retry_on``: the host's power after a failed cycle: until every outlet reads on, each
        poll first sends one round of "on", so one lost reply never leaves a host off until the
        deadline, and a host that boots meanwhile is seen at once (a BMC that keeps failing its
        read-backs never holds the boot polls back for its whole retry budget).
        """
        deadline = self.clock.monotonic() + deadline_s
        delays = self.timings.boot_polls().delays()
        switching = retry_on is not None
        while self.clock.monotonic() < deadline:
            if self.stop.is_set():
                raise RecoveryError("campaign stopped while waiting for the host to boot")
            if switching:
                switching = not switch_on_round(retry_on, self.clock, self.log, warn=False)
            if self.link.banner(self.timings.banner_timeout_s):
                return True
            self.clock.wait(self.stop, min(next(delays), max(0.0, deadline - self.clock.monotonic())))
        if switching:  # said once, with the last round's words
            switch_on_round(retry_on, self.clock, self.log)
        return False

    def _wait_for_person(self, seq: Sequence) -> None:
        self.log.event(CampaignEvent.NEEDS_PERSON,
                       message="wedged and no power port: power-cycle it by hand; polling until it answers")
        seq.transition(RecoveryState.BOOTING, waiting_for="a person", deadline_s=self.timings.human_wait_s)

    def _wait_for_boot(self, seq: Sequence, old_boot: str | None) -> None:
        if seq.state is not RecoveryState.BOOTING:
            seq.transition(RecoveryState.BOOTING, deadline_s=self.b.boot_deadline_s)
        deadline_s = self.timings.human_wait_s if self.host.pdu is None else self.b.boot_deadline_s
        deadline = self.clock.monotonic() + deadline_s
        delays = self.timings.boot_polls().delays()
        while self.clock.monotonic() < deadline:
            if self.stop.is_set():
                raise RecoveryError("campaign stopped while waiting for the host to boot")
            if not self.link.banner(self.timings.banner_timeout_s):
                self.clock.wait(self.stop, next(delays))
                continue
            try:
                agent = self.link.connect()
                boot_id = self.link.current_boot(agent)
            except HostKeyError as exc:  # a different machine, or a reinstalled one: never accepted
                raise RecoveryError(f"the host came back with a different SSH host key; refused: {exc}") from exc
            except ReprofleetError:
                self.clock.wait(self.stop, next(delays))
                continue
            if boot_id != old_boot:
                seq.transition(RecoveryState.BOOTED, boot_id=boot_id, **boots_since(agent, old_boot))
                return
            if self.host.pdu is None:
                raise NeverFrozen("the host went silent and came back with the same boot_id: it was never "
                                  "frozen (a stall or a network fault, not a wedge)")
            raise RecoveryError("the host answers with the same boot_id: it was never power-cycled")
        raise RecoveryError(f"the host did not come back within {deadline_s:g} s")

    def _check_stable(self, seq: Sequence) -> None:
        self.clock.wait(self.stop, self.settings.stability_s)
        try:
            agent = self.link.connect()
            boot_id = self.link.current_boot(agent)
        except ReprofleetError as exc:
            raise RecoveryError(f"the host went away again right after booting: {exc}") from exc
        if seq.booted is not None and boot_id != seq.booted:
            raise RecoveryError(f"the host rebooted again during the stability window "
                                f"(came up as {seq.booted}, now {boot_id})")
        seq.transition(RecoveryState.STABLE)

    def forensics_after_the_fact(self, record: Record) -> Recovered:
        """A reproduction found on resume (the host froze or reset while the controller was
        away, and is back now): what the previous boot left and what the BMC logged, as a
        recovery would have attached; nothing is switched."""
        seq = self._sequence()
        seq.transition(RecoveryState.BOOTING, by="itself", found_on_resume=True)  # while the controller was away
        seq.transition(RecoveryState.BOOTED, boot_id=self.link.boot.boot_id)
        try:
            self._check_stable(seq)
        except RecoveryError as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            return Recovered(replace(record, forensics={"recovery": "failed", "error": str(exc)}),
                             quarantine=f"recovery failed: {exc}")
        forensics = {**self._forensics(seq, record), **self._bmc_events(record)}
        return self._rejoin(seq, record, forensics)

    def _forensics(self, seq: Sequence, record: Record) -> dict[str, Any]:
        seq.transition(RecoveryState.FORENSICS)
        return postboot_forensics(self.link.agent, self.budget.used, self.log, record.boot_id)

    def _bmc_events(self, record: Record) -> dict[str, Any]:
        """What the host's BMC logged since the attempt started ({} without a BMC; see power/event_log)."""
        from reprofleet.power.bmc_log.events import bmc_forensics

        return bmc_forensics(self.host, record.started, log=self.b.power.power_log, lock_dir=self.b.power.lock_dir)


def power_off_words(host: Host, power_of: Callable[[], HostPower], log: HostLog) -> str | None:
    """Read a silent host's power before acting on its silence: the device's own words when any
    outlet (or the chassis) reads off, else None (on, or a device that cannot say: a warning)."""
    if host.pdu is None:
        return None
    try:
        off = [d.outlet_key for d in power_of().drivers if d.status() is PowerState.OFF]
    except (PowerError, ReprofleetError) as exc:
        log.event(CampaignEvent.WARNING, message=f"the power device could not be read before acting on the silence: {exc}")
        return None
    if not off:
        return None
    return (f"{', '.join(off)} ({host.power_ports[0].driver}) read off before this controller switched anything: "
            "the host lost power (a plug's own timer, an overload trip, a switch by someone else, or its power supply)")


def note_neighbours_cut(host: str, power: HostPower, host_outlets: Mapping[str, frozenset[str]],
                        note_cut: Callable[[str, str], None]) -> None:
    """Hosts on a ``shared: true`` outlet of ``host`` lose power with it: their running attempt
    ends by this cut, and is recorded as ``infra`` (never a reboot or a wedge)."""
    mine = {d.outlet_key for d in power.drivers}
    for other, outlets in host_outlets.items():
        shared = mine & outlets
        if other != host and shared:
            note_cut(other, f"{host} was cycled through the shared outlet {', '.join(sorted(shared))}")


def switch_on_round(power: HostPower, clock: Clock, log: HostLog, warn: bool = True) -> bool:
    """One round of "on" to every outlet of ``power`` not reading on (``switch_on_until`` with no
    time to spare); True when all read on. What still failed is a warning. Before a host is
    quarantined, no outlet of it may be left reading off without this last "on"."""
    from reprofleet.power.ports import switch_on_until

    try:
        switch_on_until(power, 0.0, clock)
    except PowerError as exc:
        if warn:
            log.event(CampaignEvent.WARNING, message=str(exc))
        return False
    return True


def postboot_forensics(agent: Callable[[], Any], power_cycles: int, log: HostLog,
                       boot_id: str | None = None) -> dict[str, Any]:
    """What the boot the attempt ran in left (its kernel log's findings and tail, how it shut
    down, pstore), read through the agent; boot -1 where the record names no boot."""
    try:
        postboot = agent().postboot(boot_id) if boot_id else agent().postboot()
    except ReprofleetError as exc:
        return {"error": f"post-boot forensics failed: {exc}"}
    previous = postboot.previous_boot
    forensics: dict[str, Any] = {
        "shutdown": previous.shutdown.as_json(),  # systemd's stop lines: someone rebooted it, not the bug
        "journal_persistent": postboot.journal_persistent,
        "previous_boot_available": previous.available,
        "findings": list(previous.findings),
        "tail": list(previous.tail)[-20:],
        "pstore": list(postboot.pstore),
        "power_cycles": power_cycles,
    }
    if not postboot.journal_persistent:
        forensics["warning"] = ("the host's journal is not persistent: nothing from the frozen boot "
                                "survives (set Storage=persistent in journald.conf)")
        log.event(CampaignEvent.WARNING, message=forensics["warning"])
    return forensics


def boots_since(agent: Any, old_boot: str | None) -> dict[str, Any]:
    """Did the host also reset itself? The journal lists every boot since the frozen one."""
    try:
        boots = host_commands.run_command(agent, host_commands.boots_listed())
    except ReprofleetError:
        return {}
    after = _boot_ids_after(boots, old_boot)
    if after is None:
        return {"boots_since": None}
    return {"boots_since": len(after), "reset_itself_too": len(after) > 1}



def came_back_record(record: Record, boot_id: str) -> Record:
    """A host that returned by itself with a new boot_id rebooted; it did not wedge.

    A record that is a reboot already (the agent saw the new boot on re-attach) keeps its reason.
    """
    reason = record.reason if record.outcome is Outcome.REBOOT else \
        f"the host went silent and came back by itself (new boot_id {boot_id})"
    return replace(record, outcome=Outcome.REBOOT, detect_latency_s=None, reason=reason)


def _boot_ids_after(boots: tuple[str, ...], old_boot: str | None) -> list[str] | None:
    """Boot ids listed after ``old_boot`` (``journalctl --list-boots`` order); None if it is not listed."""
    wanted = (old_boot or "").replace("-", "")
    return list(boots[boots.index(wanted) + 1:]) if wanted in boots else None


def recovery_factory(directory: CampaignDir) -> PowerControl:
    """The power control of a campaign whose wedged hosts are power-cycled (``run_campaign``'s
    ``recovery_factory``): each host's :class:`HostRecovery` is bound to it by its runner."""
    return power_control(directory.root, directory.power)


def announce_power_control(fleet: FleetLiveness, event: Callable[..., None]) -> None:
    """Once per campaign that may switch power: the watchdogs report their suspect/probe/clear
    events, and a controller that cannot send ICMP says so."""
    fleet.report_to(event)
    if icmp_mode() is IcmpMode.NONE:
        message = ("no ICMP socket can be opened here (no raw-socket privilege, and "
                   "net.ipv4.ping_group_range excludes our group): liveness probes use TCP only")
        log.warning(message)
        event("controller", CampaignEvent.ICMP_UNAVAILABLE, message=message)


def not_declared(link: HostLink, record: Record) -> Record:
    """A wedge or reset seen by a controller that may no longer hold the host (its lease may
    have lapsed): ``infra`` with the reason, never a reproduction on a silence another campaign
    may have caused; nothing is switched, and the link is fenced, so the runner touches the
    host no more (no restore either)."""
    why = link.lease_may_have_lapsed() or "this controller may no longer hold the host's lease"
    link.fenced = why
    return replace(record, outcome=Outcome.INFRA, detect_latency_s=None,
                   reason=f"{why}; was {record.outcome.value}: not declared, nothing switched")


def logged_self_reset_grace(binding: RecoveryBinding, record: Record) -> float:
    """The grace from the host's prepare-time facts and the sysctls in force when it went
    silent (what this boot was given: also when it froze between attempts, whose record has
    none), logged with its reason as it starts."""
    from reprofleet.runner.self_reset_grace import self_reset_grace_s

    in_boot = binding.sysctls_in_force()
    applied = in_boot.values if in_boot is not None else (record.host_debug or {}).get("sysctls")
    grace, why = self_reset_grace_s(binding.facts(), binding.settings.reboot_grace_s, applied)
    binding.log.event(CampaignEvent.SELF_RESET_GRACE, attempt=record.attempt, grace_s=grace,
                      configured_s=binding.settings.reboot_grace_s, message=why)
    return grace


def grace_for_self_reboot(b: RecoveryBinding, old_boot: str | None, record: Record) -> str | None:
    """Give a host that resets itself (watchdog, panic) the chance to come back uncycled.

    The grace is ``reboot_grace_s`` (0 s where the host's facts show it cannot reset
    itself: runner/self_reset_grace.py), extended up to the boot deadline while the host
    shows signs of booting: it was silent (DEAD) and its kernel answers again. A host whose
    kernel answered from the start (a userspace wedge) is not booting: no extension.
    """
    def probe() -> ProbeAnswer:
        return b.link.port.probe(b.settings.timings.self_reboot_probe_s)

    grace = logged_self_reset_grace(b, record)
    if grace <= 0:
        return None
    started = b.clock.monotonic()
    deadline = started + grace
    was_dead = probe() is ProbeAnswer.DEAD
    for _ in range(100000):  # bounded by the deadline; the count only guards the loop
        if b.clock.monotonic() >= deadline or b.stop.is_set():
            return None
        answer = probe()
        if answer is ProbeAnswer.SSHD:
            boot_id = b.link.boot_now()
            if boot_id and boot_id != old_boot:
                return boot_id
        if was_dead and answer is not ProbeAnswer.DEAD:
            deadline = max(deadline, started + b.boot_deadline_s)  # it is booting
        was_dead = was_dead or answer is ProbeAnswer.DEAD
        b.clock.wait(b.stop, b.settings.timings.self_reboot_poll_s)
    return None
