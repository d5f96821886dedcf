"""Bringing a wedged host back, as a state machine, and reading what its last boot left.

wedged -> off -> dwell -> on -> booting (SSH back within the boot deadline, polled with
backoff) -> booted (boot_id differs from before) -> stable (still up after a short window)
-> forensics (previous boot's kernel log, pstore) -> ready. The policy is re-applied and
verified by the host runner before the next attempt, because the boot_id changed.

Every way out is bounded: a PDU that fails, a host that does not return by the boot
deadline, or a spent power-cycle budget quarantines that host with a clear reason, and the
campaign goes on with the rest. A host without a power port is polled until a person
brings it back.
"""

from __future__ import annotations

import time
from dataclasses import replace
from enum import Enum, unique
from typing import TYPE_CHECKING, Any, Callable

from .errors import PowerError, ReprofleetError
from .model import Outcome, Record
from .probes import probe_ssh_banner

if TYPE_CHECKING:
    from .host_runner import CampaignContext, HostRunner

HUMAN_WAIT_S = 24 * 3600.0  # a host without a power port: poll this long for a person


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
    RecoveryState.DWELL: {RecoveryState.ON, RecoveryState.QUARANTINED},
    RecoveryState.ON: {RecoveryState.BOOTING, RecoveryState.QUARANTINED},
    RecoveryState.BOOTING: {RecoveryState.BOOTED, RecoveryState.QUARANTINED},
    RecoveryState.BOOTED: {RecoveryState.STABLE, RecoveryState.BOOTING, RecoveryState.QUARANTINED},
    RecoveryState.STABLE: {RecoveryState.FORENSICS},
    RecoveryState.FORENSICS: {RecoveryState.READY},
}


class RecoveryError(ReprofleetError):
    """Recovery cannot go on; the host is quarantined."""


class Sequence:
    """The state of one recovery; refuses moves the diagram does not have."""

    def __init__(self, on_change: Callable[[RecoveryState, RecoveryState, dict[str, Any]], None]) -> None:
        self.state = RecoveryState.WEDGED
        self._on_change = on_change

    def transition(self, new: RecoveryState, **detail: Any) -> None:
        if new is self.state:
            return
        if new not in _NEXT.get(self.state, set()):
            raise RecoveryError(f"recovery cannot go from {self.state.value} to {new.value}")
        old, self.state = self.state, new
        self._on_change(old, new, detail)


def backoff_delays(first: float = 1.0, factor: float = 1.5, cap: float = 10.0) -> Any:
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * factor)


class Recovery:
    """Power-cycles wedged hosts of one campaign through their ports."""

    def __init__(self, ctx: "CampaignContext") -> None:
        from .power.base import PowerLog

        self.ctx = ctx
        self.power_log = PowerLog(ctx.directory.power)

    def recover(self, runner: "HostRunner", record: Record) -> Record:
        name = runner.host.name
        seq = Sequence(lambda old, new, d: self.ctx.event(name, "recovery", **{"from": old.value, "to": new.value, **d}))
        old_boot = runner.state.boot_id
        try:
            came_back = self._grace_for_self_reboot(runner, old_boot)
            if came_back is not None:  # a reboot, whatever the checks below find; forensics as for a wedge
                record = came_back_record(record, came_back)
                seq.transition(RecoveryState.BOOTING, by="itself")
                seq.transition(RecoveryState.BOOTED, boot_id=came_back)
                self._check_stable(runner, seq)
                forensics = self._forensics(runner, seq)
                seq.transition(RecoveryState.READY)
                return replace(record, forensics=forensics)
            if runner.host.pdu is None:
                self._wait_for_person(runner, seq)
            else:
                if probe_ssh_banner(runner.host.address, runner.host.port, 2.0):
                    return replace(record, outcome=Outcome.INFRA,
                                   reason="declared wedged, but the host answered before the power cycle; not cycled")
                self._power_cycle(runner, seq)
            self._wait_for_boot(runner, seq, old_boot)
            self._check_stable(runner, seq)
            forensics = self._forensics(runner, seq)
        except (RecoveryError, PowerError) as exc:
            seq.transition(RecoveryState.QUARANTINED, reason=str(exc))
            runner.state.quarantined = f"recovery failed: {exc}"
            return replace(record, forensics={"recovery": "failed", "error": str(exc)})
        seq.transition(RecoveryState.READY)
        return replace(record, forensics=forensics)

    def _grace_for_self_reboot(self, runner: "HostRunner", old_boot: str | None) -> str | None:
        """Give a host that resets itself (watchdog, panic) the chance to come back uncycled."""
        deadline = time.monotonic() + self.ctx.settings.reboot_grace_s
        while time.monotonic() < deadline and not self.ctx.stop.is_set():
            if probe_ssh_banner(runner.host.address, runner.host.port, 1.0):
                try:
                    boot_id = runner.current_boot(runner.connect())
                except ReprofleetError:
                    boot_id = None
                if boot_id and boot_id != old_boot:
                    return boot_id
            self.ctx.stop.wait(1.0)
        return None

    def _power_cycle(self, runner: "HostRunner", seq: Sequence) -> None:
        from .power.registry import driver_for

        if runner.state.power_cycles >= self.ctx.settings.power_cycle_budget:
            raise RecoveryError(f"power-cycle budget of {self.ctx.settings.power_cycle_budget} spent")
        assert runner.host.pdu is not None
        driver = driver_for(runner.host.pdu, runner.host.name, self.power_log)
        runner.state.power_cycles += 1
        dwell = self.ctx.settings.dwell_s
        # cycle() = off, read back off, dwell, on, read back on (and a device-side
        # flip-back timer where the device has one, so no host is left off if we die).
        driver.cycle(dwell)
        seq.transition(RecoveryState.OFF, outlet=runner.host.pdu.outlet, driver=runner.host.pdu.driver)
        seq.transition(RecoveryState.DWELL, seconds=dwell)
        seq.transition(RecoveryState.ON, power_cycles=runner.state.power_cycles)

    def _wait_for_person(self, runner: "HostRunner", seq: Sequence) -> None:
        self.ctx.event(runner.host.name, "needs_person",
                       message="wedged and no power port: power-cycle it by hand; polling until it answers")
        seq.transition(RecoveryState.BOOTING, waiting_for="a person", deadline_s=HUMAN_WAIT_S)

    def _wait_for_boot(self, runner: "HostRunner", seq: Sequence, old_boot: str | None) -> None:
        if seq.state is not RecoveryState.BOOTING:
            seq.transition(RecoveryState.BOOTING, deadline_s=self.ctx.playbook.timeouts.boot)
        deadline_s = HUMAN_WAIT_S if runner.host.pdu is None else self.ctx.playbook.timeouts.boot
        deadline = time.monotonic() + deadline_s
        delays = backoff_delays()
        while time.monotonic() < deadline:
            if self.ctx.stop.is_set():
                raise RecoveryError("campaign stopped while waiting for the host to boot")
            if not probe_ssh_banner(runner.host.address, runner.host.port, 2.0):
                self.ctx.stop.wait(next(delays))
                continue
            try:
                agent = runner.connect()
                boot_id = runner.current_boot(agent)
            except ReprofleetError:
                self.ctx.stop.wait(next(delays))
                continue
            if boot_id != old_boot:
                seq.transition(RecoveryState.BOOTED, boot_id=boot_id)
                return
            raise RecoveryError("the host answers with the same boot_id: it was never power-cycled")
        raise RecoveryError(f"the host did not come back within {deadline_s:g} s")

    def _check_stable(self, runner: "HostRunner", seq: Sequence) -> None:
        self.ctx.stop.wait(self.ctx.settings.stability_s)
        try:
            agent = runner.connect()
            boot_id = runner.current_boot(agent)
        except ReprofleetError as exc:
            raise RecoveryError(f"the host went away again right after booting: {exc}") from exc
        if boot_id != runner.state.boot_id:
            raise RecoveryError("the host rebooted again during the stability window")
        seq.transition(RecoveryState.STABLE)

    def _forensics(self, runner: "HostRunner", seq: Sequence) -> dict[str, Any]:
        seq.transition(RecoveryState.FORENSICS)
        try:
            postboot = runner.agent().postboot()
        except ReprofleetError as exc:
            return {"error": f"post-boot forensics failed: {exc}"}
        previous = postboot.get("previous_boot") or {}
        forensics = {
            "journal_persistent": postboot.get("journal_persistent"),
            "previous_boot_available": previous.get("available"),
            "findings": previous.get("findings") or [],
            "tail": (previous.get("tail") or [])[-20:],
            "pstore": postboot.get("pstore") or [],
            "power_cycles": runner.state.power_cycles,
        }
        if not postboot.get("journal_persistent"):
            forensics["warning"] = ("the host's journal is not persistent: nothing from the frozen boot "
                                    "survives (set Storage=persistent in journald.conf)")
            self.ctx.event(runner.host.name, "warning", message=forensics["warning"])
        return forensics


def came_back_record(record: Record, boot_id: str) -> Record:
    """A host that returned by itself with a new boot_id rebooted; it did not wedge.

    A record that is a reboot already (the agent saw the new boot on re-attach) keeps its reason.
    """
    reason = record.reason if record.outcome is Outcome.REBOOT else \
        f"the host went silent and came back by itself (new boot_id {boot_id})"
    return replace(record, outcome=Outcome.REBOOT, detect_latency_s=None, reason=reason)


def recovery_factory(ctx: "CampaignContext") -> Recovery:
    return Recovery(ctx)
