"""`invoke power`: one host's power, by hand, through the same drivers a campaign uses.

Manual actions are logged like a campaign's, to ``reports/manual-power.jsonl``, so the
history of every power action on a host is in one place. They take the same locks as a
campaign (files under ``reports/.power-locks``): a manual cycle waits for a campaign's
cycle of the same outlet, and the other way round.

``--verify`` proves the wiring: it switches the host's outlets off, checks that this host
and no other host of the inventory stops answering, switches them back on and waits for
the boot. An inventory that names the wrong outlet cycles a healthy neighbour at the
first wedge; this finds it on a quiet afternoon instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from reprofleet.errors import PowerError, ReprofleetError
from reprofleet.inventory import load_inventory
from reprofleet.model import Host
from reprofleet.power import PowerDriver, PowerLog, PowerState
from reprofleet.power.locks import lock_folder
from reprofleet.power.ports import HostPower, build_host_power, cycle_host
from reprofleet.liveness.probes import probe_ssh_banner
from reprofleet.remote.session import with_agent

Probe = Callable[[Host], bool]


def answers(host: Host) -> bool:
    """Does the host's SSH port give a banner now (a powered host whose sshd runs)?"""
    return probe_ssh_banner(host.address, host.port, 2.0)


def _powers(inventory_path: str, reports: Path) -> tuple[list[Host], dict[str, HostPower]]:
    inventory = load_inventory(inventory_path)
    reports.mkdir(parents=True, exist_ok=True)
    log = PowerLog(reports / "manual-power.jsonl")
    return list(inventory.hosts), dict(build_host_power(inventory.hosts, log, lock_dir=lock_folder(reports)))


def _power_of(powers: dict[str, HostPower], hosts: list[Host], host_name: str) -> HostPower:
    if host_name not in {h.name for h in hosts}:
        raise PowerError(f"no host {host_name!r} in the inventory")
    if host_name not in powers:
        raise PowerError(f"{host_name}: no `pdu:` in the inventory, so reprofleet cannot switch its power")
    return powers[host_name]


def live_lease(inventory_path: str, host_name: str, transport: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The live campaign lease on a host (None when free), or why it could not be read.

    A by-hand switch of a host a campaign holds cuts into its attempts (a wedge declared
    that is none, an attempt credited to a cell that never ran); a host that does not
    answer cannot say, and is often why a person reaches for the switch: that is a warning.
    """
    host = next((h for h in load_inventory(inventory_path).hosts if h.name == host_name), None)
    if host is None:
        return None, None
    answer = with_agent(host, transport, lambda agent: agent.lease("show"))
    if isinstance(answer, ReprofleetError):
        return None, str(answer)
    return (dict(answer.live) if answer.live else None), None


@dataclass(frozen=True)
class PowerOutcome:
    """What ``invoke power HOST on|off|status|cycle`` ended with: the state the device reads
    back (``unknown`` when its outlets disagree)."""

    host: str
    action: str
    state: PowerState

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "action": self.action, "state": self.state.value, "ok": True}


def power_action(inventory_path: str, host_name: str, action: str, reports: Path, dwell_s: float) -> PowerState:
    hosts, powers = _powers(inventory_path, reports)
    power = _power_of(powers, hosts, host_name)
    if action == "cycle":
        return cycle_host(power, dwell_s)
    states = []
    for driver in power.drivers:
        states.append(driver.on() if action == "on" else driver.off() if action == "off" else driver.status())
    return states[0] if len(set(states)) == 1 else PowerState.UNKNOWN


@dataclass(frozen=True)
class WiringReport:
    """What ``--verify`` saw: when the host went silent and came back, and who else went silent."""

    host: str
    silent_after_s: float | None  # None: it never stopped answering
    back_after_s: float | None  # None: it did not come back within the boot deadline
    others_silent: tuple[str, ...]  # hosts that answered before and stopped while the outlet was off
    not_checked: tuple[str, ...]  # hosts that did not answer before: nothing to learn from them

    @property
    def ok(self) -> bool:
        return self.silent_after_s is not None and self.back_after_s is not None and not self.others_silent

    def lines(self) -> list[str]:
        out = []
        if self.silent_after_s is None:
            out.append(f"{self.host} kept answering with its outlet(s) off: the inventory's outlet does not feed it")
        else:
            out.append(f"{self.host} stopped answering {self.silent_after_s:.1f} s after its outlet(s) went off")
        if self.others_silent:
            out.append(f"also silent while it was off: {', '.join(self.others_silent)}: that outlet feeds them")
        else:
            out.append("no other host of the inventory stopped answering")
        if self.not_checked:
            out.append(f"not checked (did not answer before): {', '.join(self.not_checked)}")
        out.append(f"{self.host} answered again {self.back_after_s:.1f} s after power on" if self.back_after_s
                   is not None else f"{self.host} did not answer again within the boot deadline")
        out.append("wiring confirmed" if self.ok else "wiring NOT confirmed")
        return out

    def to_json(self) -> dict[str, Any]:
        """``invoke power HOST verify --json`` (docs/schema/power.schema.json)."""
        return {"host": self.host, "action": "verify", "ok": self.ok, "silent_after_s": self.silent_after_s,
                "back_after_s": self.back_after_s, "others_silent": list(self.others_silent),
                "not_checked": list(self.not_checked), "lines": self.lines()}


def verify_wiring(inventory_path: str, host_name: str, reports: Path, *, off_window_s: float = 20.0,
                  boot_s: float = 300.0, probe: Probe = answers) -> WiringReport:
    """Off, see who goes silent, on, wait for the boot; the outlets are switched back on whatever happens."""
    hosts, powers = _powers(inventory_path, reports)
    power = _power_of(powers, hosts, host_name)
    target = next(h for h in hosts if h.name == host_name)
    if not probe(target):
        raise PowerError(f"{host_name} does not answer now: verify needs it up, to see it go silent")
    others = [h for h in hosts if h.name != host_name]
    watched = [h for h in others if probe(h)]
    silent_after: float | None = None
    others_silent: set[str] = set()
    sent: list[PowerDriver] = []
    try:
        for driver in power.drivers:
            sent.append(driver)
            driver.off()
        off_at = time.monotonic()
        deadline = off_at + off_window_s
        for _ in range(int(off_window_s / 0.5) + 2):
            others_silent |= {h.name for h in watched if h.name not in others_silent and not probe(h)}
            if silent_after is None and not probe(target):
                silent_after = time.monotonic() - off_at
            if (silent_after is not None and time.monotonic() - off_at >= min(off_window_s, silent_after + 3.0)) \
                    or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
    finally:
        for driver in sent:
            driver.on()
    on_at = time.monotonic()
    back_after = None
    for _ in range(int(boot_s) + 2):
        if probe(target):
            back_after = time.monotonic() - on_at
            break
        if time.monotonic() - on_at >= boot_s:
            break
        time.sleep(1.0)
    return WiringReport(host_name, silent_after, back_after, tuple(sorted(others_silent)),
                        tuple(sorted(h.name for h in others if h not in watched)))
