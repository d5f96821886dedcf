"""Every host's power drivers, built once from the inventory, before anything runs.

A driver is cheap to build and building it contacts nothing, but it resolves the
credentials and checks the model and the options. Building them all when the inventory
is loaded (``--dry-run`` too) turns an unset ``env:`` variable or a mistyped ``model:``
into one line naming the host and the inventory line, instead of a host thread that dies
hours into a campaign at its first wedge.

Two hosts on one outlet are refused unless both say ``shared: true``: cycling the wrong
outlet silently power-cycles a healthy neighbour, and a copy-pasted ``outlet: 3`` is the
usual way it happens.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from reprofleet.clock import Clock
from reprofleet.credentials import SecretResolver, resolve
from reprofleet.errors import CredentialError, PowerError, ReprofleetError
from reprofleet.model import Host, PowerPort
from reprofleet.power.base import CycleCallback, PowerActionError, PowerDriver, PowerState
from reprofleet.power.log import PowerLog
from reprofleet.power.registry import driver_for


class PowerPreflightError(ReprofleetError):
    """One or more hosts' power ports are wrong; one line per problem, each naming host and line."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("power preflight failed:\n  " + "\n  ".join(self.problems))


@dataclass(frozen=True)
class HostPower:
    """The drivers of one host's outlets (two for a host with two power supplies)."""

    host: str
    drivers: tuple[PowerDriver, ...]


def _problem(host: str, port: PowerPort, text: str, where: str = "") -> str:
    """``file:line:field: host: text``; ``where`` overrides the pdu block's own line."""
    where = where or port.where
    return f"{where + ': ' if where else ''}{host}: {text}"


def build_host_power(hosts: Iterable[Host], log: PowerLog | None = None, *, secrets: SecretResolver = resolve,
                     lock_dir: Path | None = None, clock: Clock | None = None) -> Mapping[str, HostPower]:
    """Build every driver of every host (contacting nothing); raise one error listing every problem."""
    log = log or PowerLog(None)
    built: dict[str, HostPower] = {}
    problems: list[str] = []
    for host in hosts:
        drivers = []
        for port in host.power_ports:
            try:
                drivers.append(driver_for(port, host.name, log, secrets=secrets, lock_dir=lock_dir, clock=clock))
            except CredentialError as exc:  # the line that names the credential, not the block's first
                problems.append(_problem(host.name, port, str(exc).removeprefix(f"{host.name}: "),
                                         port.credentials.where if port.credentials else ""))
            except ReprofleetError as exc:
                problems.append(_problem(host.name, port, str(exc).removeprefix(f"{host.name}: ")))
        if host.power_ports and len(drivers) == len(host.power_ports):
            built[host.name] = HostPower(host.name, tuple(drivers))
    problems.extend(duplicate_outlets(built.values()))
    if problems:
        raise PowerPreflightError(problems)
    return built


def outlet_keys(hosts: Iterable[Host]) -> dict[str, frozenset[str]]:
    """Each host's outlets as ``outlet_key`` s (a host whose driver cannot be built has none):
    which hosts a cycle of one also cuts (``shared: true``)."""
    keys: dict[str, frozenset[str]] = {}
    for host in hosts:
        found = set()
        for port in host.power_ports:
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
        for driver in power.drivers:
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

    Raises PowerPreflightError naming each host whose device did not answer. An outlet that
    answers "off" is no error: a controller that died mid-cycle leaves one, and the host's
    runner switches it on through the normal recovery path; the caller reports it.
    """
    states: dict[str, tuple[PowerState, ...]] = {}
    problems: list[str] = []
    for name, power in powers.items():
        answered = []
        for driver in power.drivers:
            try:
                state = driver.status()
            except ReprofleetError as exc:
                problems.append(_problem(name, driver.port, f"the power device does not answer: {exc}"))
                continue
            answered.append(state)
        states[name] = tuple(answered)
    if problems:
        raise PowerPreflightError(problems)
    return states


def cycle_host(power: HostPower, dwell_s: float, on_state: CycleCallback | None = None) -> PowerState:
    """Power-cycle a host through every outlet that feeds it: all off, dwell, all on.

    A host with two power supplies is only off when both are; cycling one leaves it running
    (or half-running). Every outlet that was sent "off" is sent "on", whatever failed; the
    first error is raised after that.
    """
    if len(power.drivers) == 1:
        return power.drivers[0].cycle(dwell_s, on_state)
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
    errors = []
    for driver in sent:
        try:
            driver.on()
        except PowerActionError as exc:
            errors.append(exc.reason)
    if failure is not None and not isinstance(failure, ReprofleetError):
        raise failure
    if failure is not None or errors:
        first = [failure.reason if isinstance(failure, PowerActionError) else str(failure)] if failure else []
        raise PowerError("; ".join(first + [f"switching back on failed: {e}" for e in errors]))
    tell("on")
    return PowerState.ON if all(d.reads_state for d in sent) else PowerState.UNKNOWN
