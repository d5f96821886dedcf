"""The real fleet behind ``invoke doctor --cycle`` (campaign/cycle_test.py's :class:`CycleLab`).

Each call reaches one host the way a campaign does: the agent over a fresh SSH session for
the boot_id, the lease (``lease show``, judged live as a campaign judges it) and the facts;
the campaign's independent probes (ICMP echo and a TCP banner, the name resolved each time);
the inventory's power drivers, under the same outlet locks, logged to the doctor folder's
``power.jsonl``; and after the boot, the runner's own GPU health gate.

Also here: the doctor folder, ``reports/doctor/cycle-<UTC time>/``, private like a campaign's
(0700, files 0600, never written through a link), with one line per host in ``cycles.jsonl``
appended and fsync'd as each cycle ends.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprofleet.campaign.cycle_test import CycleResult, CycleTimings, Look, Rejoin, cycle_hosts, suggested_boot_s
from reprofleet.campaign.doctor import DoctorRequest
from reprofleet.campaign.preflight import chosen_hosts
from reprofleet.clock import Clock, SystemClock
from reprofleet.errors import PowerError, ReprofleetError
from reprofleet.liveness.probes import HostProbe, ProbeAnswer
from reprofleet.model import Host
from reprofleet.playbook import load_playbook
from reprofleet.power import PowerLog, PowerState
from reprofleet.power.locks import lock_folder
from reprofleet.power.ports import HostPower, build_host_power
from reprofleet.records.private_files import make_folder
from reprofleet.records.store import append_line
from reprofleet.remote import host_commands
from reprofleet.remote.session import with_agent
from reprofleet.runner import health_gate

PROBE_TIMEOUT_S = 2.0


class SshCycleLab:
    """The inventory's hosts over SSH, probes and their power devices."""

    def __init__(self, hosts: list[Host], transport: Any, folder: Path, reports: Path) -> None:
        self._transport = transport
        self._log = PowerLog(folder / "power.jsonl")
        self._powers: dict[str, HostPower] = dict(build_host_power([h for h in hosts if h.power_ports], self._log,
                                                                   lock_dir=lock_folder(reports)))
        self._probes = {h.name: HostProbe(h.address, h.port, PROBE_TIMEOUT_S) for h in hosts}

    def look(self, host: Host) -> Look:
        def ask(agent: Any) -> Look:
            boot = host_commands.run_command(agent, host_commands.boot_now())
            lease = agent.lease("show").live
            return Look(boot.boot_id, dict(lease) if lease else None, dict(agent.facts().as_json))

        return _raised(with_agent(host, self._transport, ask))

    def probe(self, host: Host) -> ProbeAnswer:
        return self._probes[host.name]()

    def switch(self, host: Host, state: PowerState) -> PowerState:
        power = self._powers.get(host.name)
        if power is None:
            raise PowerError(f"{host.name}: no `pdu:` in the inventory, so reprofleet cannot switch its power")
        states = {(driver.on() if state is PowerState.ON else driver.off()) for driver in power.drivers}
        return states.pop() if len(states) == 1 else PowerState.UNKNOWN

    def rejoin(self, host: Host, before: Look) -> Rejoin:
        def ask(agent: Any) -> Rejoin:
            boot = host_commands.run_command(agent, host_commands.boot_now())
            verdict = health_gate.check(agent, host.gpu_index, before.facts, after="the test cycle")
            return Rejoin(boot.boot_id, None if verdict.healthy else verdict.reason)

        return _raised(with_agent(host, self._transport, ask))


def _raised(answer: Any) -> Any:
    if isinstance(answer, ReprofleetError):
        raise answer
    return answer


def doctor_folder(reports: Path, now: float | None = None) -> Path:
    """A new private folder for one ``doctor --cycle`` run: ``reports/doctor/cycle-<UTC time>``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    folder = Path(reports) / "doctor" / f"cycle-{stamp}"
    suffix = 1
    while folder.exists():  # two runs in one second: each its own folder
        suffix += 1
        folder = Path(reports) / "doctor" / f"cycle-{stamp}-{suffix}"
    return make_folder(folder)


def record(folder: Path, result: CycleResult) -> None:
    """Append one host's result to ``cycles.jsonl``, fsync'd, before the next host is switched."""
    append_line(folder / "cycles.jsonl", json.dumps(result.to_json(), sort_keys=True))


@dataclass(frozen=True)
class CyclePlan:
    """The hosts ``doctor --cycle`` will switch (asked about before anything is), and the deadlines."""

    playbook: str
    chosen: tuple[Host, ...]
    inventory: tuple[Host, ...]  # every host of the inventory: the neighbours watched while one is off
    timings: CycleTimings


@dataclass(frozen=True)
class CycleRun:
    """What one ``doctor --cycle`` found, and where it wrote it."""

    folder: Path
    results: tuple[CycleResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def suggested_boot_s(self) -> int | None:
        return suggested_boot_s(self.results)


def plan_cycle(request: DoctorRequest) -> CyclePlan:
    """Read the playbook (its ``hosts:`` and ``timeouts.boot``) and the inventory; switch nothing."""
    book = load_playbook(request.playbook)
    whole, chosen = chosen_hosts(book, request.inventory, request.limit)
    timings = CycleTimings(dwell_s=request.config.dwell_s, boot_s=float(book.timeouts.boot))
    return CyclePlan(book.path, tuple(chosen.hosts), tuple(whole.hosts), timings)


def run_cycle(plan: CyclePlan, request: DoctorRequest, clock: Clock | None = None) -> CycleRun:
    """Cycle every chosen host, one at a time; each result is on disk before the next host is switched."""
    request.config.configure_power()
    folder = doctor_folder(request.reports)
    lab = SshCycleLab(list(plan.inventory), request.config.run_settings(request.accept_new).transport, folder,
                      request.reports)
    results = cycle_hosts(lab, plan.chosen, plan.inventory, clock or SystemClock(), plan.timings,
                          done=lambda result: record(folder, result))
    return CycleRun(folder, tuple(results))
