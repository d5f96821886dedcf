"""``invoke doctor --cycle``: one supervised power cycle of each chosen idle host, before the first night.

The first wedge of a campaign is the worst moment to learn that the inventory names the
neighbour's outlet, that the BIOS leaves the machine off when its power comes back, or that
a boot takes longer than ``timeouts.boot``. This cycle proves each on a quiet afternoon,
with a person watching, on one host at a time:

1. the host is seen alive (its sshd, its agent, its boot_id) and no campaign holds its lease
   (read as a campaign reads it); a host not seen alive or held is refused, never switched;
2. its outlets are switched off and read back off;
3. the host goes dark (no probe answers at all) and no other host of the inventory that
   answered before does: the outlet mapping;
4. after the dwell the outlets are switched on and read back on;
5. sshd answers within the boot deadline: a host that stays dark is named with the BIOS fix
   ("restore on AC power loss"), since its outlet reads on;
6. the boot_id is new (it did boot, not merely drop off the network) and the GPU passes the
   health gate a campaign applies after a recovery.

Off → sshd is measured and turned into a suggested ``timeouts.boot``. Every "off" is
followed by an "on", whatever happens between.

The host is reached only through a :class:`CycleLab` (the real one is
``campaign/cycle_lab.py``) and time only through the injected clock, so the decisions are
tested at the seam in virtual time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from reprofleet.campaign.doctor import Check, Status
from reprofleet.clock import Clock
from reprofleet.errors import ReprofleetError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.model import Host
from reprofleet.power.base import PowerState

BIOS_FIX = ('set the BIOS/UEFI option "restore on AC power loss" (also "AC back", "after power failure") to '
            '"power on" (or "last state"); the campaign restores power this way after every wedge')
BOOT_MARGIN = 2.0  # a suggested boot deadline is twice the slowest measured off -> sshd ...
BOOT_ROUND_S = 30  # ... rounded up to half minutes ...
BOOT_FLOOR_S = 120  # ... and never below two minutes (an fsck, a firmware update on the next boot)


@dataclass(frozen=True)
class Look:
    """A host as seen alive before its cycle: its boot, its lease (None: no live one), its facts."""

    boot_id: str
    lease: Mapping[str, Any] | None
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejoin:
    """The host after its boot: the new boot_id and the health gate's words (empty: healthy)."""

    boot_id: str
    health_problem: str | None = None


class CycleLab(Protocol):
    """What the cycle asks of the fleet; every method names the host it acts on."""

    def look(self, host: Host) -> Look:
        """Log in, read the boot_id, the lease and the facts; ReprofleetError when it cannot."""
        ...

    def probe(self, host: Host) -> ProbeAnswer:
        """SSHD, KERNEL (it answers below sshd) or DEAD: independent of any session."""
        ...

    def switch(self, host: Host, state: PowerState) -> PowerState:
        """Switch every outlet of ``host`` and read them back (UNKNOWN when they disagree)."""
        ...

    def rejoin(self, host: Host, before: Look) -> Rejoin:
        """Log in after the boot: the boot_id and the GPU health gate; ReprofleetError when it cannot."""
        ...


@dataclass(frozen=True)
class CycleTimings:
    """How long each step may take. ``boot_s`` is the playbook's ``timeouts.boot``."""

    dwell_s: float = 10.0  # off this long before "on" (a PSU's capacitors drain, as a campaign's cycle)
    dark_window_s: float = 30.0  # the host must stop answering within this of its outlet reading off
    watch_after_dark_s: float = 3.0  # neighbours are watched this much longer once the host went dark
    boot_s: float = 600.0
    poll_s: float = 1.0


@dataclass(frozen=True)
class CycleResult:
    """One host's cycle: what was proven, measured and found wrong (``problems``), or why it was
    refused before anything was switched (``refused``)."""

    host: str
    refused: str | None = None
    switched: bool = False
    off_state: str | None = None
    on_state: str | None = None
    dark_after_s: float | None = None  # None: it never stopped answering
    others_dark: tuple[str, ...] = ()
    not_watched: tuple[str, ...] = ()  # did not answer before: nothing learnt from them
    sshd_after_on_s: float | None = None
    off_to_sshd_s: float | None = None
    boot_before: str | None = None
    boot_after: str | None = None
    checks: tuple[Check, ...] = ()

    @property
    def ok(self) -> bool:
        return self.refused is None and not any(c.status is Status.MISSING for c in self.checks)

    def lines(self) -> list[str]:
        """What a person reads: the verdict, then each item with its fix."""
        if self.refused is not None:
            return [f"{self.host}: refused: {self.refused}"]
        out = [f"{self.host}: {'cycle proven' if self.ok else 'cycle NOT proven'}"]
        for check in self.checks:
            out.append(f"  {check.status.value:<7} {check.item}: {check.found}" + (f" (fix: {check.fix})"
                                                                                  if check.fix else ""))
        if self.off_to_sshd_s is not None:
            out.append(f"  off -> sshd {self.off_to_sshd_s:.0f} s (on -> sshd {self.sshd_after_on_s or 0:.0f} s)")
        return out

    def to_json(self) -> dict[str, Any]:
        """One line of ``invoke doctor --cycle --json`` and of the doctor folder's ``cycles.jsonl``."""
        return {"host": self.host, "cycle": True, "ok": self.ok, "refused": self.refused, "switched": self.switched,
                "off_state": self.off_state, "on_state": self.on_state, "dark_after_s": _round(self.dark_after_s),
                "others_dark": list(self.others_dark), "not_watched": list(self.not_watched),
                "sshd_after_on_s": _round(self.sshd_after_on_s), "off_to_sshd_s": _round(self.off_to_sshd_s),
                "suggested_boot_s": suggested_boot_s([self]), "boot_before": self.boot_before,
                "boot_after": self.boot_after, "checks": [c.to_json() for c in self.checks]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def suggested_boot_s(results: Sequence[CycleResult]) -> int | None:
    """``timeouts.boot`` for these hosts: twice the slowest off → sshd, rounded up to 30 s, at
    least 120 s (None when no host came back)."""
    measured = [r.off_to_sshd_s for r in results if r.off_to_sshd_s is not None]
    if not measured:
        return None
    rounded = math.ceil(max(measured) * BOOT_MARGIN / BOOT_ROUND_S) * BOOT_ROUND_S
    return int(max(BOOT_FLOOR_S, rounded))


def cycle_hosts(lab: CycleLab, chosen: Sequence[Host], inventory: Sequence[Host], clock: Clock,
                timings: CycleTimings, done: Callable[[CycleResult], None] = lambda result: None) -> list[CycleResult]:
    """Cycle each chosen host in turn (one at a time, so who went dark names one outlet);
    ``done`` hears each result as soon as it is known (the doctor folder writes it then)."""
    results = []
    for host in chosen:
        result = cycle_one(lab, host, [h for h in inventory if h.name != host.name], clock, timings)
        done(result)
        results.append(result)
    return results


def cycle_one(lab: CycleLab, host: Host, others: Sequence[Host], clock: Clock, timings: CycleTimings) -> CycleResult:
    """One host's supervised cycle; refused (nothing switched) unless seen alive and not held."""
    if not host.power_ports:
        return CycleResult(host.name, refused="no pdu: in the inventory: nothing to switch (README, Power control)")
    try:
        before = lab.look(host)
    except ReprofleetError as exc:
        return CycleResult(host.name, refused=f"not seen alive, so not switched: {exc}")
    if before.lease is not None:
        return CycleResult(host.name, refused=_held(before.lease), boot_before=before.boot_id)
    watched = [o for o in others if _answers(lab.probe(o))]
    not_watched = tuple(sorted(o.name for o in others if o not in watched))
    return _Cycle(lab, host, watched, clock, timings, before, not_watched).run()


def _answers(answer: ProbeAnswer) -> bool:
    """Anything of the host answers (sshd, or its kernel: an echo, a handshake)."""
    return answer in (ProbeAnswer.SSHD, ProbeAnswer.KERNEL)


def _held(lease: Mapping[str, Any]) -> str:
    age = float(lease.get("age_s") or 0)
    return (f"campaign {lease.get('campaign')} of {lease.get('controller')} holds this host (lease renewed "
            f"{age:.0f} s ago): not switched")


@dataclass
class _Cycle:
    """The steps of one host's cycle, each noting what it saw."""

    lab: CycleLab
    host: Host
    watched: Sequence[Host]
    clock: Clock
    timings: CycleTimings
    before: Look
    not_watched: tuple[str, ...]
    checks: list[Check] = field(default_factory=list)
    dark_after: float | None = None
    others_dark: set[str] = field(default_factory=set)

    def run(self) -> CycleResult:
        off_state, on_state = PowerState.UNKNOWN, PowerState.UNKNOWN
        off_at = self.clock.monotonic()
        try:
            off_state = self._switch(PowerState.OFF)
            self._note_off(off_state)
            if off_state is PowerState.OFF:
                self._watch_dark(off_at)
            self.clock.sleep(max(0.0, off_at + self.timings.dwell_s - self.clock.monotonic()))
        finally:
            on_state = self._switch(PowerState.ON)  # every off is followed by an on
        on_at = self.clock.monotonic()
        self._note_mapping(off_state)
        sshd_at = self._note_on(on_state) if off_state is PowerState.OFF else None
        if self.dark_after is None:
            sshd_at = None  # it never lost power: nothing was measured, nothing booted
        boot_after = self._note_boot() if sshd_at is not None else None
        return CycleResult(self.host.name, switched=True, off_state=off_state.value, on_state=on_state.value,
                           dark_after_s=self.dark_after, others_dark=tuple(sorted(self.others_dark)),
                           not_watched=self.not_watched,
                           sshd_after_on_s=None if sshd_at is None else sshd_at - on_at,
                           off_to_sshd_s=None if sshd_at is None else sshd_at - off_at,
                           boot_before=self.before.boot_id, boot_after=boot_after, checks=tuple(self.checks))

    def _switch(self, state: PowerState) -> PowerState:
        """The outlets switched and read back; a device that fails is a finding, not the end."""
        try:
            return self.lab.switch(self.host, state)
        except ReprofleetError as exc:
            self.checks.append(Check(f"outlet {state.value}", Status.MISSING, f"the device failed: {exc}",
                                     "invoke power HOST status --hosts INVENTORY; check its address and credentials"))
            return PowerState.UNKNOWN

    def _note_off(self, state: PowerState) -> None:
        if state is PowerState.OFF:
            self.checks.append(Check("outlet off", Status.OK, "the device reads off"))
        elif state is not PowerState.UNKNOWN:
            self.checks.append(Check("outlet off", Status.MISSING, f"the device reads {state.value} after off",
                                     "invoke power HOST status --hosts INVENTORY; check the pdu: block's outlet"))

    def _watch_dark(self, off_at: float) -> None:
        """Probe the host and every watched neighbour until the host is dark and its neighbours
        were watched a little longer, or the window ends."""
        deadline = off_at + self.timings.dark_window_s
        while True:
            now = self.clock.monotonic()
            self.others_dark |= {o.name for o in self.watched
                                 if o.name not in self.others_dark and not _answers(self.lab.probe(o))}
            if self.dark_after is None and not _answers(self.lab.probe(self.host)):
                self.dark_after = now - off_at
            if now >= deadline or (self.dark_after is not None
                                   and now - off_at >= self.dark_after + self.timings.watch_after_dark_s):
                return
            self.clock.sleep(self.timings.poll_s)

    def _note_mapping(self, off_state: PowerState) -> None:
        if off_state is not PowerState.OFF:
            return
        name = self.host.name
        if self.dark_after is None:
            self.checks.append(Check("outlet mapping", Status.MISSING,
                                     f"{name} kept answering for {self.timings.dark_window_s:g} s with its outlet(s) "
                                     "off: the pdu: block names an outlet that does not feed it",
                                     f"find {name}'s outlet (invoke power HOST verify) and fix its pdu: block"))
        if self.others_dark:
            dark = ", ".join(sorted(self.others_dark))
            self.checks.append(Check("outlet mapping", Status.MISSING,
                                     f"{dark} went dark too while {name}'s outlet(s) were off: that outlet feeds them",
                                     f"fix the pdu: blocks of {name} and {dark} (two hosts on one outlet need "
                                     "shared: true on both); check that they came back"))
        if self.dark_after is not None and not self.others_dark:
            self.checks.append(Check("outlet mapping", Status.OK,
                                     f"{name} went dark {self.dark_after:.1f} s after its outlet(s) read off; no "
                                     "other host of the inventory did"))

    def _note_on(self, on_state: PowerState) -> float | None:
        """Wait for sshd; name a host that stays dark with its outlet on (the BIOS setting)."""
        if on_state not in (PowerState.ON, PowerState.UNKNOWN):
            self.checks.append(Check("outlet on", Status.MISSING, f"the device reads {on_state.value} after on",
                                     "switch it on by hand now: invoke power HOST on --hosts INVENTORY"))
        deadline = self.clock.monotonic() + self.timings.boot_s
        answered = False
        while self.clock.monotonic() < deadline:
            answer = self.lab.probe(self.host)
            if answer is ProbeAnswer.SSHD:
                return self.clock.monotonic()
            answered = answered or answer is ProbeAnswer.KERNEL
            self.clock.sleep(self.timings.poll_s)
        if self.dark_after is None:
            return None  # it never went dark: the mapping's check says what matters
        boot = f"{self.timings.boot_s:g} s"
        if answered:
            self.checks.append(Check("boot", Status.MISSING, f"its kernel answers but sshd did not within {boot}",
                                     "look at its console: a boot waiting on a disk or a service; or raise "
                                     "timeouts.boot"))
        elif on_state is PowerState.ON:
            self.checks.append(Check("BIOS power-on", Status.MISSING,
                                     f"{self.host.name} stayed off for {boot} after its outlet came back on",
                                     BIOS_FIX + "; then press its power button once"))
        return None

    def _note_boot(self) -> str | None:
        self.checks.append(Check("BIOS power-on", Status.OK, "it powered on by itself when its outlet came back"))
        try:
            after = self.lab.rejoin(self.host, self.before)
        except ReprofleetError as exc:
            self.checks.append(Check("boot", Status.MISSING, f"sshd answers but the login failed: {exc}",
                                     "invoke doctor --hosts INVENTORY (the login item)"))
            return None
        if after.boot_id == self.before.boot_id:
            self.checks.append(Check("boot", Status.MISSING, f"the boot_id did not change ({after.boot_id}): it "
                                     "went dark but did not lose power", "the pdu: block's outlet does not feed it "
                                     "alone (a second supply on another outlet? list both under outlets:)"))
        else:
            self.checks.append(Check("boot", Status.OK, f"a new boot_id ({after.boot_id[:8]}...)"))
        self.checks.append(Check("GPU health", Status.MISSING, after.health_problem, "") if after.health_problem
                           else Check("GPU health", Status.OK, "the health gate passes"))
        return after.boot_id
