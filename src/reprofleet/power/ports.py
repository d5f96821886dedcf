"""Every host's power drivers, built once from the inventory, before anything runs.

A driver is cheap to build and building it contacts nothing, but it resolves the
credentials and checks the model and the options. Building them all when the inventory
is loaded (``--dry-run`` too) turns an unset ``env:`` variable or a mistyped ``model:``
into one line naming the host and the inventory line, instead of a host thread that dies
hours into a campaign at its first wedge.

Two hosts on one outlet are refused unless both say ``shared: true``: cycling the wrong
outlet silently power-cycles a healthy neighbour, and a copy-pasted ``outlet: 3`` is the
usual way it happens.

A host may list further devices under its ``pdu:`` block's ``fallback:`` (Pacemaker's fencing
levels): a cycle goes through the first device (every outlet of it), and only when that
cannot verify its cycle through the next, and so on; once a later one has cycled the host,
the earlier ones get one "on" each (an outlet left off by a failed cycle is never left so).
``outlets:`` is not that: every outlet of ``outlets:`` is switched, always.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from reprofleet.clock import Clock
from reprofleet.credentials import SecretResolver, resolve
from reprofleet.errors import CredentialError, PowerError, ReprofleetError
from reprofleet.model import Host, PowerPort, RecoveryRung
from reprofleet.power.base import CycleCallback, PowerActionError, PowerDriver, PowerState
from reprofleet.power.log import PowerLog
from reprofleet.power.registry import driver_for
from reprofleet.power.settings import backoff_delays

ON_RETRY_FIRST_S = 2.0  # switch_on_until: the first pause between tries of a failed "on" ...
ON_RETRY_CAP_S = 30.0  # ... doubling up to this
ON_RETRY_ROUNDS = 40  # and at most this many rounds, whatever the deadline


class PowerPreflightError(ReprofleetError):
    """One or more hosts' power ports are wrong; one line per problem, each naming host and line."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("power preflight failed:\n  " + "\n  ".join(self.problems))


@dataclass(frozen=True)
class HostPower:
    """The drivers of one host's outlets (two for a host with two power supplies), and of its
    fallback devices, each level every outlet it switches, in the order they are tried."""

    host: str
    drivers: tuple[PowerDriver, ...]
    fallbacks: tuple[tuple[PowerDriver, ...], ...] = ()

    @property
    def levels(self) -> tuple[tuple[PowerDriver, ...], ...]:
        """The host's own outlets, then each fallback device's."""
        return (self.drivers, *self.fallbacks)

    def every_driver(self) -> tuple[PowerDriver, ...]:
        return tuple(driver for level in self.levels for driver in level)


def _problem(host: str, port: PowerPort, text: str, where: str = "") -> str:
    """``file:line:field: host: text``; ``where`` overrides the pdu block's own line."""
    where = where or port.where
    return f"{where + ': ' if where else ''}{host}: {text}"


def nmi_problems(host: Host, drivers: Iterable[PowerDriver]) -> list[str]:
    """A ladder with ``nmi`` on a host none of whose own devices can send one: one line naming
    the inventory's ``recovery`` line (the rung would only ever be skipped)."""
    if RecoveryRung.NMI not in host.recovery or any(d.sends_nmi for d in drivers):
        return []
    where = f"{host.recovery_where}: " if host.recovery_where else ""
    names = ", ".join(sorted({p.driver for p in host.power_ports})) or "no pdu"
    return [f"{where}{host.name}: recovery: nmi needs a device that sends an NMI (driver ipmi, redfish, or fence "
            f"with an agent that has diag); this host's is {names}: use recovery: [cycle]"]


def build_host_power(hosts: Iterable[Host], log: PowerLog | None = None, *, secrets: SecretResolver = resolve,
                     lock_dir: Path | None = None, clock: Clock | None = None) -> Mapping[str, HostPower]:
    """Build every driver of every host (contacting nothing); raise one error listing every problem."""
    log = log or PowerLog(None)
    built: dict[str, HostPower] = {}
    problems: list[str] = []
    for host in hosts:
        levels = (host.power_ports, *host.power_fallbacks) if host.power_ports else ()
        made = [_build_level(host.name, ports, level, log, problems, secrets=secrets, lock_dir=lock_dir, clock=clock)
                for level, ports in enumerate(levels)]
        if levels and all(len(drivers) == len(ports) for drivers, ports in zip(made, levels)):
            built[host.name] = HostPower(host.name, made[0], tuple(made[1:]))
        problems.extend(nmi_problems(host, made[0] if made else ()))
    problems.extend(duplicate_outlets(built.values()))
    if problems:
        raise PowerPreflightError(problems)
    return built


def _build_level(host: str, ports: Iterable[PowerPort], level: int, log: PowerLog, problems: list[str], *,
                 secrets: SecretResolver, lock_dir: Path | None, clock: Clock | None) -> tuple[PowerDriver, ...]:
    """The drivers of one level (0: the pdu block's own outlets; n: its n-th fallback device); each
    problem appended as one line naming the inventory line and field."""
    drivers = []
    for port in ports:
        try:
            drivers.append(driver_for(port, host, log, secrets=secrets, lock_dir=lock_dir, clock=clock,
                                      fallback=level or None))
        except CredentialError as exc:  # the line that names the credential, not the block's first
            problems.append(_problem(host, port, str(exc).removeprefix(f"{host}: "),
                                     port.credentials.where if port.credentials else ""))
        except ReprofleetError as exc:
            field = getattr(exc, "field", None)  # a PowerConfigError naming the block's key at fault
            where = f"{port.where}.{field}" if field and port.where else ""
            problems.append(_problem(host, port, str(exc).removeprefix(f"{host}: "), where))
    return tuple(drivers)


def outlet_keys(hosts: Iterable[Host]) -> dict[str, frozenset[str]]:
    """Each host's outlets as ``outlet_key`` s (a host whose driver cannot be built has none):
    which hosts a cycle of one also cuts (``shared: true``)."""
    keys: dict[str, frozenset[str]] = {}
    for host in hosts:
        found = set()
        for port in (*host.power_ports, *(p for level in host.power_fallbacks for p in level)):
            try:
                found.add(driver_for(port, host.name, PowerLog(None)).outlet_key)
            except ReprofleetError:
                continue
        keys[host.name] = frozenset(found)
    return keys


def duplicate_outlets(powers: Iterable[HostPower]) -> list[str]:
    """One line per outlet that feeds two hosts when not both are marked ``shared: true``."""
    feeding: dict[str, list[PowerDriver]] = defaultdict(list)
    for power in powers:
        for driver in power.every_driver():
            feeding[driver.outlet_key].append(driver)
    problems = []
    for key, drivers in feeding.items():
        hosts = sorted({d.host for d in drivers})
        if len(hosts) > 1 and not all(d.port.shared for d in drivers):
            first = drivers[0]
            problems.append(_problem(
                first.host, first.port,
                f"outlet {key} also feeds {', '.join(h for h in hosts if h != first.host)}: cycling one host would "
                "cycle the other; fix the outlet, or mark every such pdu block 'shared: true'"))
    return problems


def ask_power_states(powers: Mapping[str, HostPower]) -> dict[str, tuple[PowerState, ...]]:
    """Ask every outlet for its state (campaign start): a PDU that does not answer is found now.

    Raises PowerPreflightError naming each host whose device did not answer, its ``fallback:``
    devices included: a fallback is what a wedge at 3 a.m. leans on when the first device cannot
    verify its cycle, so a dead one is found before the first attempt, not then. An outlet that
    answers "off" is no error: a controller that died mid-cycle leaves one, and the host's
    runner switches it on through the normal recovery path; the caller reports it. The states
    returned are the host's own outlets' (its fallbacks switch only when those fail).
    """
    states: dict[str, tuple[PowerState, ...]] = {}
    problems: list[str] = []
    for name, power in powers.items():
        answered = []
        for level, drivers in enumerate(power.levels):
            for driver in drivers:
                try:
                    state = driver.status()
                except ReprofleetError as exc:
                    which = f"fallback device {level}" if level else "the power device"
                    problems.append(_problem(name, driver.port, f"{which} does not answer: {exc}"))
                    continue
                if level == 0:
                    answered.append(state)
        states[name] = tuple(answered)
    if problems:
        raise PowerPreflightError(problems)
    return states


def cycle_host(power: HostPower, dwell_s: float, on_state: CycleCallback | None = None, *,
               on_deadline_s: float = 0.0, device: bool = True) -> PowerState:
    """Power-cycle a host through its first device that can verify the cycle (see ``_cycle_level``).

    Without ``fallback:`` devices this is the one device's cycle. With them, a level whose cycle
    fails (it could not switch, or could not read its switch back) hands over to the next at
    once (its own "on" was sent, once, as every cycle's is: the deadline of retried "on"s is the
    last level's); once a later level has cycled the host, every earlier level gets one round
    of "on" (those that read on are left as they are). When every level fails, one PowerError
    names each level's reason.
    """
    levels = power.levels
    failures: list[PowerError] = []
    for index, drivers in enumerate(levels):
        last = index == len(levels) - 1
        try:
            state = _cycle_level(HostPower(power.host, drivers), dwell_s, on_state,
                                 on_deadline_s=on_deadline_s if last else 0.0, device=device)
        except PowerError as exc:
            if len(levels) == 1:
                raise
            failures.append(exc)
            continue
        if index:
            _earlier_levels_on(power.host, levels[:index])
        return state
    raise _every_level_failed(power.host, failures)


def _level_name(index: int) -> str:
    return "its pdu block" if index == 0 else f"fallback {index}"


def _every_level_failed(host: str, failures: list[PowerError]) -> PowerError:
    said = "; ".join(f"{_level_name(i)}: {_reason(exc)}" for i, exc in enumerate(failures))
    return PowerError(f"{host}: no power device could verify its cycle: {said}")


def _earlier_levels_on(host: str, levels: Iterable[tuple[PowerDriver, ...]]) -> None:
    """One round of "on" for the devices whose cycle failed: an outlet their failure left off is
    switched back on (best effort: the host is back through a later device already)."""
    for drivers in levels:
        try:
            switch_on_until(HostPower(host, drivers), 0.0)
        except ReprofleetError:
            continue  # logged by the drivers; the host has power through the later device


def _cycle_level(power: HostPower, dwell_s: float, on_state: CycleCallback | None = None, *,
                 on_deadline_s: float = 0.0, device: bool = True) -> PowerState:
    """Power-cycle a host through every outlet of one device level that feeds it: all off, dwell, all on.

    A host with two power supplies is only off when both are; cycling one leaves it running
    (or half-running). Every outlet that was sent "off" is sent "on", whatever failed: an
    "off" failing on the second supply after the first went off, an "on" failing on the
    first while the second's is still to go. An "on" that fails is retried with backoff
    until ``on_deadline_s`` (``switch_on_until``; 0: each outlet's "on" is tried once, as its
    driver's own retries allow; recovery should pass ``DEFAULT_TIMINGS.power_on_deadline_s``);
    the first error is raised after that.

    One outlet cycles through its driver, by the device's own cycle where it has one
    (``device``); two or more are switched here, off, dwell, on, so that both are off at once.
    """
    if len(power.drivers) == 1:
        return _cycle_one(power, dwell_s, on_state, on_deadline_s, device)
    tell = on_state or (lambda state: None)
    sent: list[PowerDriver] = []
    failure: BaseException | None = None
    try:
        for driver in power.drivers:
            sent.append(driver)
            driver.off()
        tell("off")
        tell("dwell")
        power.drivers[0].clock.sleep(max(0.0, dwell_s))  # the drivers' clock: a test's virtual one
    except BaseException as exc:  # Ctrl-C included: every outlet sent "off" gets "on"
        failure = exc
    try:
        state = switch_on_until(HostPower(power.host, tuple(sent)), on_deadline_s)
    except PowerError as exc:
        if failure is not None and not isinstance(failure, ReprofleetError):
            raise failure from None
        first = [_reason(failure)] if failure is not None else []
        raise PowerError("; ".join(first + [f"switching back on failed: {exc}"])) from None
    if failure is not None:
        if not isinstance(failure, ReprofleetError):
            raise failure
        raise PowerError(f"{_reason(failure)} (switched back on: every outlet reads {state.value})") from None
    tell("on")
    return state


def _cycle_one(power: HostPower, dwell_s: float, on_state: CycleCallback | None, on_deadline_s: float,
               device: bool) -> PowerState:
    """One outlet's cycle; when it fails, its "on" is made sure of until the deadline before raising."""
    try:
        return power.drivers[0].cycle(dwell_s, on_state, device=device)
    except PowerActionError as exc:
        if on_deadline_s <= 0:
            raise
        try:
            switch_on_until(power, on_deadline_s)  # reads first: an outlet that is on is not switched again
        except PowerError as still:
            raise PowerError(f"{exc.reason}; {still}") from None
        raise


def switch_on_until(power: HostPower, deadline_s: float, clock: Clock | None = None) -> PowerState:
    """Switch every outlet of ``power`` on, retrying each that fails with backoff until ``deadline_s``.

    Each outlet is its own: one that fails (a BMC answering 409 for a while, a PDU that lost
    a reply) never holds back another, and a Ctrl-C during one outlet's "on" still lets the
    others' go out before it propagates. An outlet that already reads on is left as it is.
    Retries back off from ``ON_RETRY_FIRST_S`` doubling to ``ON_RETRY_CAP_S``, at most
    ``ON_RETRY_ROUNDS`` rounds; a try in progress at the deadline ends within its own
    driver's bounds. Returns ON (UNKNOWN when a driver cannot read state); raises a
    PowerError naming every outlet still off and why.

    A host's ``fallback:`` devices get one round first, each outlet that reads off switched on
    (a controller that died in a fallback's cycle left it off); the answer is the host's own
    outlets': a fallback that reads on says nothing of the device before it.
    """
    clock = clock or power.drivers[0].clock
    deadline = clock.monotonic() + max(0.0, deadline_s)
    for fallback in power.fallbacks:  # one a controller left off mid-cycle (it may feed the devices above): on
        _on_round(fallback, {})  # reads first: one that reads on is left as it is
    pending = list(power.drivers)
    reasons: dict[str, str] = {}
    delays = iter(backoff_delays(ON_RETRY_ROUNDS, ON_RETRY_FIRST_S, 2.0, ON_RETRY_CAP_S))
    for _ in range(ON_RETRY_ROUNDS):
        pending = _on_round(pending, reasons)
        remaining = deadline - clock.monotonic()
        if not pending or remaining <= 0:
            break
        clock.sleep(min(next(delays, ON_RETRY_CAP_S), remaining))
    if pending:
        still = "; ".join(f"outlet {d.outlet_key} ({reasons.get(d.outlet_key, 'not on')})" for d in pending)
        raise PowerError(f"{power.host}: still off after {deadline_s:g} s of tries: {still}")
    return PowerState.ON if all(d.reads_state for d in power.drivers) else PowerState.UNKNOWN


def _on_round(drivers: Iterable[PowerDriver], reasons: dict[str, str]) -> list[PowerDriver]:
    """Try "on" once for each driver (after a read that finds it off); returns those still not on."""
    still: list[PowerDriver] = []
    interrupted: BaseException | None = None
    for driver in drivers:
        try:
            if driver.reads_state and _reads_on(driver):
                continue
            driver.on()
        except ReprofleetError as exc:
            reasons[driver.outlet_key] = _reason(exc)
            still.append(driver)
        except BaseException as exc:  # Ctrl-C: the other outlets' "on" still goes out
            interrupted = interrupted or exc
            still.append(driver)
    if interrupted is not None:
        raise interrupted
    return still


def _reads_on(driver: PowerDriver) -> bool:
    try:
        return driver.status() is PowerState.ON
    except ReprofleetError:
        return False  # cannot tell: send "on"


def _reason(error: BaseException) -> str:
    return error.reason if isinstance(error, PowerActionError) else str(error)
