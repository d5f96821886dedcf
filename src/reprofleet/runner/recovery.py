"""Bringing a wedged host back, as a state machine, and reading what its last boot left.

wedged -> off -> dwell -> on -> booting (SSH back within the boot deadline, polled with
backoff) -> booted (boot_id differs from before) -> stable (still up after a short window)
-> forensics (previous boot's kernel log, pstore) -> ready. The policy is re-applied and
verified by the host runner before the next attempt, because the boot_id changed.

Every way out is bounded: a PDU that fails, a host that does not return by the boot
deadline, or a spent power-cycle budget quarantines that host with a clear reason, and the
campaign goes on with the rest. A host without a power port is polled until a person
brings it back; if it comes back with the same boot_id it was never frozen (``infra``).

Off, dwell and on are logged as the driver reaches them (a controller killed mid-cycle has
recorded how far it got). The partition guard is asked before every power action: a host
is never cycled because our own network failed.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from enum import Enum, unique
from typing import TYPE_CHECKING, Any, Callable

from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.errors import HostKeyError, PowerError, ReprofleetError
from reprofleet.model import Outcome, Record
from reprofleet.liveness.probes import IcmpMode, ProbeAnswer, icmp_mode
from reprofleet.model.events import CampaignEvent

if TYPE_CHECKING:
    from reprofleet.runner.host import CampaignContext, HostRunner

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
    OFF = "off"
    DWELL = "dwell"
    ON = "on"
    BOOTING = "booting"
    BOOTED = "booted"
    STABLE = "stable"
    FORENSICS = "forensics"
    READY = "ready"
    QUARANTINED = "quarantined"


_NEXT = {
    RecoveryState.WEDGED: {RecoveryState.OFF, RecoveryState.BOOTING, RecoveryState.QUARANTINED},
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


class NetworkDown(RecoveryError):
    """The partition guard kept saying our own network is down past the pause cap."""


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


class Recovery:
    """Power-cycles wedged hosts of one campaign through their ports."""

    def __init__(self, ctx: "CampaignContext") -> None:
        from reprofleet.power.base import PowerLog

        self.ctx = ctx
        self.clock = ctx.clock  # every wait below: virtual in seam tests
        self.timings = ctx.settings.timings
        self.power_log = PowerLog(ctx.directory.power)
        ctx.fleet.report_to(ctx.event)  # the watchdogs' suspect/probe/clear events
        if icmp_mode() is IcmpMode.NONE:
            message = ("no ICMP socket can be opened here (no raw-socket privilege, and "
                       "net.ipv4.ping_group_range excludes our group): liveness probes use TCP only")
            log.warning(message)
            ctx.event("controller", CampaignEvent.ICMP_UNAVAILABLE, message=message)

    def recover(self, runner: "HostRunner", record: Record) -> Record:
        name = runner.host.name
        seq = Sequence(lambda old, new, d: self.ctx.event(name, CampaignEvent.RECOVERY, **{"from": old.value, "to": new.value, **d}))
        old_boot = runner.state.boot_id
        try:
            came_back = self._grace_for_self_reboot(runner, old_boot, record)
            if came_back is not None:  # a reboot, whatever the checks below find; forensics as for a wedge
                record = came_back_record(record, came_back)
                seq.transition(RecoveryState.BOOTING, by="itself")
                seq.transition(RecoveryState.BOOTED, boot_id=came_back)
                self._check_stable(runner, seq)
                forensics = {**self._forensics(runner, seq), **self._bmc_events(runner, record)}
                return self._rejoin(runner, seq, record, forensics)
            if runner.host.pdu is None:
                self._wait_for_person(runner, seq)
            else:
                answered = self._answers_before_switching(runner, record)
                if answered is not None:
                    return answered
                self._power_cycle(runner, seq)
            self._bring_back(runner, seq, old_boot)
            forensics = {**self._forensics(runner, seq), **self._bmc_events(runner, record)}
        except NeverFrozen as exc:
            seq.transition(RecoveryState.BOOTED, boot_id=old_boot, same_boot=True)
            runner.stop_attempt(record.attempt, "the host came back with the same boot: its attempt may still run")
            return replace(record, outcome=Outcome.INFRA, detect_latency_s=None, reason=str(exc))
        except NetworkDown as exc:
            return replace(record, outcome=Outcome.INFRA, reason=str(exc))
        except (RecoveryError, PowerError) as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            runner.state.quarantined = f"recovery failed: {exc}"
            # a BMC that failed the cycle would only fail again; a host that never came back is worth the read
            bmc = self._bmc_events(runner, record) if not isinstance(exc, PowerError) else {}
            return replace(record, forensics={"recovery": "failed", "error": str(exc), **bmc})
        return self._rejoin(runner, seq, record, forensics)

    def _answers_before_switching(self, runner: "HostRunner", record: Record) -> Record | None:
        """The last word before a host's power is cut: probe it; ask the partition guard and
        the correlated-silence hold (waiting while either says no); probe again after a wait.
        A host that answers is not cycled: its record becomes ``infra`` with the reason."""
        def answered(why: str) -> Record:
            runner.stop_attempt(record.attempt, why)
            return replace(record, outcome=Outcome.INFRA, detect_latency_s=None, reason=f"{why}; not cycled")

        if runner.port.banner(self.timings.banner_timeout_s):
            return answered("declared wedged, but the host answered before the power cycle")
        waited = self._guard(runner)
        held = self._hold(runner)
        if (waited or held) and runner.port.banner(self.timings.banner_timeout_s):
            # it was our network, or its switch, all along: the host answers now that it is back
            return answered(("declared wedged while the controller's network was down" if waited else
                             "declared wedged while silent with other hosts (a switch outage?)")
                            + "; the host answered once it was back")
        return None

    def _bring_back(self, runner: "HostRunner", seq: Sequence, old_boot: str | None) -> None:
        """Booting, booted, stable; a late failure (a read-back, a flaky plug, a connection that
        dropped right after boot) sends the host back to *booting* once, after a probe, instead of
        quarantining a host that came back."""
        try:
            self._wait_for_boot(runner, seq, old_boot)
            self._check_stable(runner, seq)
        except (NeverFrozen, NetworkDown):
            raise
        except (RecoveryError, PowerError) as exc:
            if seq.state not in (RecoveryState.BOOTED, RecoveryState.BOOTING) or not runner.port.banner(
                    self.timings.banner_timeout_s) or self.ctx.stop.is_set():
                raise
            self.ctx.event(runner.host.name, CampaignEvent.WARNING,
                           message=f"{exc}; the host answers: waiting for its boot once more")
            if seq.state is RecoveryState.BOOTED:
                seq.transition(RecoveryState.BOOTING, after=str(exc))
            self._wait_for_boot(runner, seq, old_boot)
            self._check_stable(runner, seq)

    def _grace_for_self_reboot(self, runner: "HostRunner", old_boot: str | None, record: Record) -> str | None:
        """Give a host that resets itself (watchdog, panic) the chance to come back uncycled.

        The grace is ``reboot_grace_s`` (0 s where the host's facts show it cannot reset
        itself: runner/self_reset_grace.py), extended up to the boot deadline while the host
        shows signs of booting: it was silent (DEAD) and its kernel answers again. A host whose
        kernel answered from the start (a userspace wedge) is not booting: no extension.
        """
        def probe() -> ProbeAnswer:
            return runner.port.probe(self.timings.self_reboot_probe_s)

        grace = self._self_reset_grace(runner, record)
        if grace <= 0:
            return None
        started = self.clock.monotonic()
        deadline = started + grace
        was_dead = probe() is ProbeAnswer.DEAD
        for _ in range(100000):  # bounded by the deadline; the count only guards the loop
            if self.clock.monotonic() >= deadline or self.ctx.stop.is_set():
                return None
            answer = probe()
            if answer is ProbeAnswer.SSHD:
                boot_id = self._boot_now(runner)
                if boot_id and boot_id != old_boot:
                    return boot_id
            if was_dead and answer is not ProbeAnswer.DEAD:
                deadline = max(deadline, started + self.ctx.playbook.timeouts.boot)  # it is booting
            was_dead = was_dead or answer is ProbeAnswer.DEAD
            self.clock.wait(self.ctx.stop, self.timings.self_reboot_poll_s)
        return None

    # -- issue 18: the health gate before a host rejoins, and the grace from its facts ------
    def _rejoin(self, runner: "HostRunner", seq: Sequence, record: Record, forensics: dict[str, Any]) -> Record:
        """Ready only when its GPU is still there (runner/health_gate.py); else quarantined,
        with the failing checks' words in the forensics (``gpu_health``) and the reason."""
        from reprofleet.records.store import read_facts
        from reprofleet.runner import health_gate

        after = "the wedge" if record.outcome is Outcome.WEDGE else \
            "the reset" if record.outcome is Outcome.REBOOT else "recovery"
        try:
            agent = runner.agent()
        except ReprofleetError as exc:  # gone again since the stability check: the gate cannot pass
            verdict = health_gate.GateVerdict(False, health_gate.UNASKED.format(after=after, error=exc),
                                              {"ok": False, "error": str(exc)})
        else:
            verdict = health_gate.check(agent, runner.host.gpu_index, read_facts(self.ctx.directory, runner.host.name),
                                        after)
        forensics = {**forensics, "gpu_health": dict(verdict.forensics)}
        refused = runner.reapply_after_recovery() if verdict.healthy else None
        if refused is not None:
            forensics["policy"] = refused
            seq.transition(RecoveryState.QUARANTINED, reason=refused)
            runner.quarantine(refused)
        elif verdict.healthy:
            seq.transition(RecoveryState.READY)
        else:
            seq.transition(RecoveryState.QUARANTINED, reason=verdict.reason)
            runner.quarantine(str(verdict.reason))
        return replace(record, forensics=forensics)

    def _self_reset_grace(self, runner: "HostRunner", record: Record) -> float:
        """The grace from the host's prepare-time facts and the sysctls in force when it went
        silent (what this boot was given: also when it froze between attempts, whose record has
        none), logged with its reason as it starts."""
        from reprofleet.records.store import read_facts
        from reprofleet.runner.self_reset_grace import self_reset_grace_s

        in_boot = runner.sysctls.applied
        applied = in_boot.values if in_boot is not None else (record.host_debug or {}).get("sysctls")
        grace, why = self_reset_grace_s(read_facts(self.ctx.directory, runner.host.name),
                                        self.ctx.settings.reboot_grace_s, applied)
        self.ctx.event(runner.host.name, CampaignEvent.SELF_RESET_GRACE, attempt=record.attempt, grace_s=grace,
                       configured_s=self.ctx.settings.reboot_grace_s, message=why)
        return grace
    # -- end of issue 18 ------------------------------------------------------------------

    @staticmethod
    def _boot_now(runner: "HostRunner") -> str | None:
        try:
            return runner.current_boot(runner.connect())
        except ReprofleetError:
            return None

    def _guard(self, runner: "HostRunner") -> bool:
        """Before any power action: our own network must work (waits up to the pause cap).
        True when it had to wait (the host must then be probed again before it is cut)."""
        guard = self.ctx.fleet.network_ok
        if guard is None or guard():
            return False
        cap = self.ctx.settings.watchdog.pause_cap_s
        reason = getattr(guard, "reason", "") or "the partition guard says our network is down"
        self.ctx.event(runner.host.name, CampaignEvent.GUARD, network="down", before="power action", message=reason)
        deadline = self.clock.monotonic() + cap
        while self.clock.monotonic() < deadline and not self.ctx.stop.is_set():
            self.clock.wait(self.ctx.stop, self.timings.guard_poll_s)
            if guard():
                self.ctx.event(runner.host.name, CampaignEvent.GUARD, network="up", before="power action")
                return True
        raise NetworkDown(f"not power-cycled: the controller's network stayed down for {cap:g} s ({reason})")

    def _hold(self, runner: "HostRunner") -> bool:
        """Before any power action: a host silent together with others waits while the
        correlated-silence hold says so (bounded by ``correlated_hold_s``; see liveness/silence_hold).
        True when it had to wait."""
        fleet, name = self.ctx.fleet, runner.host.name
        hold = fleet.hold(name, self.clock.monotonic())
        if not hold.holding:
            return False
        self.ctx.event(name, CampaignEvent.SILENCE_HOLD, before="power action", **hold.to_json())
        deadline = self.clock.monotonic() + fleet.hold_s + self.timings.guard_poll_s
        while hold.holding and self.clock.monotonic() < deadline and not self.ctx.stop.is_set():
            self.clock.wait(self.ctx.stop, self.timings.guard_poll_s)
            hold = fleet.hold(name, self.clock.monotonic())
        self.ctx.event(name, CampaignEvent.SILENCE_RELEASE, before="power action", **hold.to_json())
        return True

    def _power_cycle(self, runner: "HostRunner", seq: Sequence) -> None:
        """Cycle every outlet of the host; once more with a longer dwell if it does not come back.

        A PDU that reads "on" while the host never answers is usually not a flaky PDU: a BIOS
        set to stay off after power loss, a second power supply on another outlet, or the
        wrong outlet in the inventory. One retry with a longer dwell (within the power-cycle
        budget) covers a supply that needed longer to drain; after that the host is
        quarantined with an error that names those causes.
        """
        from reprofleet.power.ports import cycle_host

        budget = self.ctx.settings.power_cycle_budget
        try:  # checked at campaign start; a credential file removed since is a quarantine, not a dead thread
            power = runner.port.power(self.power_log)
        except ReprofleetError as exc:
            raise RecoveryError(f"cannot build the power driver: {exc}") from exc
        dwells = (self.ctx.settings.dwell_s, self.timings.retry_dwell(self.ctx.settings.dwell_s))
        boot_s = self.ctx.playbook.timeouts.boot
        problem = ""
        for attempt, dwell in enumerate(dwells):
            if runner.state.power_cycles >= budget:
                self._last_on(runner, power)
                raise RecoveryError(f"power-cycle budget of {budget} spent" + (f" ({problem})" if problem else ""))
            if attempt > 0 and self._back_after_guard(runner):
                return  # our network was down during the boot wait: the host was back all along
            runner.state.power_cycles += 1
            details: dict[str, dict[str, Any]] = {
                "off": {"outlets": [d.outlet_key for d in power.drivers], "driver": runner.host.power_ports[0].driver,
                        "attempt": attempt + 1},
                "dwell": {"seconds": dwell},
                "on": {"power_cycles": runner.state.power_cycles},
            }
            self._note_neighbours_cut(runner, power)
            # off, read back off, dwell, on, read back on; "on" always follows a sent "off";
            # each state is logged when the driver reaches it, not after the cycle returned.
            try:
                # the retry's longer dwell must be ours: a BMC's own cycle keeps its own off time
                cycle_host(power, dwell, on_state=lambda state: seq.transition(RecoveryState(state), **details[state]),
                           device=attempt == 0)
                problem = ""
            except PowerError as exc:  # "on" was still sent: the host may well be booting
                problem = f"the power cycle failed: {exc}"
            if self._answers_within(runner, boot_s, retry_on=power if problem else None):
                if problem:
                    self.ctx.event(runner.host.name, CampaignEvent.WARNING, message=f"{problem}; the host came back anyway")
                    for state in (RecoveryState.DWELL, RecoveryState.ON):  # where the failed cycle stopped
                        if seq.state in (RecoveryState.OFF, RecoveryState.DWELL):
                            seq.transition(state, after=problem)
                return
            problem = problem or f"the power device reads on, but the host did not answer within {boot_s:g} s"
            if attempt + 1 < len(dwells):
                self.ctx.event(runner.host.name, CampaignEvent.POWER_RETRY, reason=problem, dwell_s=dwells[attempt + 1])
        self._last_on(runner, power)
        raise RecoveryError(f"{problem}, after {len(dwells)} power cycles (dwell {dwells[0]:g} s, then "
                            f"{dwells[1]:g} s). {NOT_BACK_CAUSES}")

    def _back_after_guard(self, runner: "HostRunner") -> bool:
        """Before a second cycle: if our network went down while we waited for the boot, wait
        for it and look again; a host that answers then is not cut a second time."""
        return self._guard(runner) and runner.port.banner(self.timings.banner_timeout_s)

    def _note_neighbours_cut(self, runner: "HostRunner", power: Any) -> None:
        """Hosts on a ``shared: true`` outlet of this one lose power with it: their running
        attempt ends by this cut, and is recorded as ``infra`` (never a reboot or a wedge)."""
        mine = {d.outlet_key for d in power.drivers}
        for other in self.ctx.host_outlets:
            if other == runner.host.name:
                continue
            shared = mine & self.ctx.host_outlets[other]
            if shared:
                self.ctx.note_cut(other, f"{runner.host.name} was cycled through the shared outlet "
                                         f"{', '.join(sorted(shared))}")

    def _on_again(self, runner: "HostRunner", power: Any, warn: bool = True) -> bool:
        """One round of "on" to every outlet of ``power`` not reading on (``switch_on_until``
        with no time to spare); True when all read on. What still failed is a warning."""
        from reprofleet.power.ports import switch_on_until

        try:
            switch_on_until(power, 0.0, self.clock)
        except PowerError as exc:
            if warn:
                self.ctx.event(runner.host.name, CampaignEvent.WARNING, message=str(exc))
            return False
        return True

    def _last_on(self, runner: "HostRunner", power: Any) -> None:
        """Before a host is quarantined: no outlet of it may be left reading off without a last "on"."""
        self._on_again(runner, power)

    def _answers_within(self, runner: "HostRunner", deadline_s: float, retry_on: Any = None) -> bool:
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
            if self.ctx.stop.is_set():
                raise RecoveryError("campaign stopped while waiting for the host to boot")
            if switching:
                switching = not self._on_again(runner, retry_on, warn=False)
            if runner.port.banner(self.timings.banner_timeout_s):
                return True
            self.clock.wait(self.ctx.stop, min(next(delays), max(0.0, deadline - self.clock.monotonic())))
        if switching:  # said once, with the last round's words
            self._on_again(runner, retry_on)
        return False

    def _wait_for_person(self, runner: "HostRunner", seq: Sequence) -> None:
        self.ctx.event(runner.host.name, CampaignEvent.NEEDS_PERSON,
                       message="wedged and no power port: power-cycle it by hand; polling until it answers")
        seq.transition(RecoveryState.BOOTING, waiting_for="a person", deadline_s=self.timings.human_wait_s)

    def _wait_for_boot(self, runner: "HostRunner", seq: Sequence, old_boot: str | None) -> None:
        if seq.state is not RecoveryState.BOOTING:
            seq.transition(RecoveryState.BOOTING, deadline_s=self.ctx.playbook.timeouts.boot)
        deadline_s = self.timings.human_wait_s if runner.host.pdu is None else self.ctx.playbook.timeouts.boot
        deadline = self.clock.monotonic() + deadline_s
        delays = self.timings.boot_polls().delays()
        while self.clock.monotonic() < deadline:
            if self.ctx.stop.is_set():
                raise RecoveryError("campaign stopped while waiting for the host to boot")
            if not runner.port.banner(self.timings.banner_timeout_s):
                self.clock.wait(self.ctx.stop, next(delays))
                continue
            try:
                agent = runner.connect()
                boot_id = runner.current_boot(agent)
            except HostKeyError as exc:  # a different machine, or a reinstalled one: never accepted
                raise RecoveryError(f"the host came back with a different SSH host key; refused: {exc}") from exc
            except ReprofleetError:
                self.clock.wait(self.ctx.stop, next(delays))
                continue
            if boot_id != old_boot:
                seq.transition(RecoveryState.BOOTED, boot_id=boot_id, **self._boots_since(agent, old_boot))
                return
            if runner.host.pdu is None:
                raise NeverFrozen("the host went silent and came back with the same boot_id: it was never "
                                  "frozen (a stall or a network fault, not a wedge)")
            raise RecoveryError("the host answers with the same boot_id: it was never power-cycled")
        raise RecoveryError(f"the host did not come back within {deadline_s:g} s")

    @staticmethod
    def _boots_since(agent: Any, old_boot: str | None) -> dict[str, Any]:
        """Did the host also reset itself? The journal lists every boot since the frozen one."""
        try:
            listing = agent.session.run("journalctl --list-boots --no-pager", timeout=15).stdout
        except ReprofleetError:
            return {}
        after = _boot_ids_after(listing, old_boot)
        if after is None:
            return {"boots_since": None}
        return {"boots_since": len(after), "reset_itself_too": len(after) > 1}

    def _check_stable(self, runner: "HostRunner", seq: Sequence) -> None:
        self.clock.wait(self.ctx.stop, self.ctx.settings.stability_s)
        try:
            agent = runner.connect()
            boot_id = runner.current_boot(agent)
        except ReprofleetError as exc:
            raise RecoveryError(f"the host went away again right after booting: {exc}") from exc
        if seq.booted is not None and boot_id != seq.booted:
            raise RecoveryError(f"the host rebooted again during the stability window "
                                f"(came up as {seq.booted}, now {boot_id})")
        seq.transition(RecoveryState.STABLE)

    def forensics_after_the_fact(self, runner: "HostRunner", record: Record) -> Record:
        """A reproduction found on resume (the host froze or reset while the controller was
        away, and is back now): what the previous boot left and what the BMC logged, as a
        recovery would have attached; nothing is switched."""
        name = runner.host.name
        seq = Sequence(lambda old, new, d: self.ctx.event(name, CampaignEvent.RECOVERY,
                                                          **{"from": old.value, "to": new.value, **d}))
        seq.transition(RecoveryState.BOOTING, by="itself", found_on_resume=True)  # while the controller was away
        seq.transition(RecoveryState.BOOTED, boot_id=runner.state.boot_id)
        try:
            self._check_stable(runner, seq)
        except RecoveryError as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            runner.state.quarantined = f"recovery failed: {exc}"
            return replace(record, forensics={"recovery": "failed", "error": str(exc)})
        forensics = {**self._forensics(runner, seq), **self._bmc_events(runner, record)}
        return self._rejoin(runner, seq, record, forensics)

    def _bmc_events(self, runner: "HostRunner", record: Record) -> dict[str, Any]:
        """What the host's BMC logged since the attempt started ({} without a BMC; see power/event_log)."""
        from reprofleet.power.bmc_log.events import bmc_forensics
        from reprofleet.power.locks import lock_folder

        return bmc_forensics(runner.host, record.started, log=self.power_log,
                             lock_dir=lock_folder(self.ctx.directory.root.parent))

    def _forensics(self, runner: "HostRunner", seq: Sequence) -> dict[str, Any]:
        seq.transition(RecoveryState.FORENSICS)
        try:
            postboot = runner.agent().postboot()
        except ReprofleetError as exc:
            return {"error": f"post-boot forensics failed: {exc}"}
        previous = postboot.previous_boot
        forensics: dict[str, Any] = {
            "journal_persistent": postboot.journal_persistent,
            "previous_boot_available": previous.available,
            "findings": list(previous.findings),
            "tail": list(previous.tail)[-20:],
            "pstore": list(postboot.pstore),
            "power_cycles": runner.state.power_cycles,
        }
        if not postboot.journal_persistent:
            forensics["warning"] = ("the host's journal is not persistent: nothing from the frozen boot "
                                    "survives (set Storage=persistent in journald.conf)")
            self.ctx.event(runner.host.name, CampaignEvent.WARNING, message=forensics["warning"])
        return forensics


def came_back_record(record: Record, boot_id: str) -> Record:
    """A host that returned by itself with a new boot_id rebooted; it did not wedge.

    A record that is a reboot already (the agent saw the new boot on re-attach) keeps its reason.
    """
    reason = record.reason if record.outcome is Outcome.REBOOT else \
        f"the host went silent and came back by itself (new boot_id {boot_id})"
    return replace(record, outcome=Outcome.REBOOT, detect_latency_s=None, reason=reason)


def _boot_ids_after(listing: str, old_boot: str | None) -> list[str] | None:
    """Boot ids after ``old_boot`` in ``journalctl --list-boots`` output; None if it is not listed."""
    ids = [line.split()[1] for line in listing.splitlines()[1:] if len(line.split()) > 1]
    wanted = (old_boot or "").replace("-", "")
    return ids[ids.index(wanted) + 1:] if wanted in ids else None


def recovery_factory(ctx: "CampaignContext") -> Recovery:
    return Recovery(ctx)
