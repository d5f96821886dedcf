"""Recovery on its own: a HostRecovery bound to exactly what it uses (a link to a scripted host,
a policy keeper, an event log, a clock, the power device), with no host runner anywhere.

It decides and returns: the record as it now stands, and a reason to quarantine when the host
cannot rejoin. It changes nothing of a runner's (there is none here to change).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.config import Timings
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model import GpuPolicy, Outcome, Record
from reprofleet.power.control import power_control
from reprofleet.runner.context import RunSettings
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink, LeaseTerms
from reprofleet.runner.policy_keeper import PolicyKeeper
from reprofleet.runner.recovery import HostRecovery, PowerBudget, RecoveryBinding
from reprofleet.remote.transport import TransportSettings
from tests.support.seam_host import Device, FakeHost, FakePort

BOOT_DEADLINE_S = 15.0


class Bound:
    """One recovery and the fakes it was bound to, with what they saw."""

    def __init__(self, fake: FakeHost, root: Path) -> None:
        self.fake = fake
        self.events: list[dict[str, Any]] = []
        self.cuts: list[tuple[str, str]] = []
        clock = fake.clock
        timings = Timings()
        settings = RunSettings(transport=TransportSettings(known_hosts=root / "known_hosts"), dwell_s=1.0,
                               stability_s=1.0, reboot_grace_s=0.0).with_timings(timings)
        log = HostLog(fake.name, lambda host, what, **fields: self.events.append({"event": what.value, **fields}))
        fleet = FleetLiveness(timings.fleet_window_s, clock=clock.monotonic)
        port = FakePort(fake, None)  # type: ignore[arg-type]  # the fake agent's lease needs no campaign here
        self.link = HostLink(fake.host, port, log, fleet, clock, LeaseTerms("t0k3n", "pytest", "alone", 3600.0),
                             probe_timeout_s=0.5)
        self.policy = PolicyKeeper(fake.host, log)
        self.budget = PowerBudget(limit=4)
        power = power_control(root / "campaign", root / "power.jsonl")
        outlets = frozenset(d.outlet_key for d in port.power(power.power_log).drivers)
        self.recovery = HostRecovery(RecoveryBinding(
            host=fake.host, link=self.link, policy=self.policy, log=log, clock=clock, settings=settings,
            boot_deadline_s=BOOT_DEADLINE_S, stop=threading.Event(), fleet=fleet, power=power,
            power_of=lambda: port.power(power.power_log), budget=self.budget, after_budget="cycle", facts=lambda: {},
            sysctls_in_force=lambda: None, host_outlets={fake.name: outlets, "peer": outlets}, cut_since=lambda h, t: None,
            note_cut=lambda host, why: self.cuts.append((host, why))))

    def path(self) -> list[str]:
        return [e["to"] for e in self.events if e["event"] == "recovery"]


def _wedge_record(host: str, boot_id: str) -> Record:
    now = "2026-12-06T00:00:00Z"
    return Record(campaign="alone", attempt=str(uuid.uuid4()), controller="pytest", host=host, cell="ref",
                  factors={}, policy=None, runtime={}, cache=None, attempt_index=0, attempt_in_boot=1,
                  cold_boot=False, boot_id=boot_id, started=now, ended=now, outcome=Outcome.WEDGE,
                  reason="silent", detect_latency_s=3.0)


def _bound_to_a_frozen_host(tmp_path: Path, **fake_options: Any) -> Bound:
    fake = FakeHost(VirtualClock(), "solo", **fake_options)
    bound = Bound(fake, tmp_path)
    bound.link.current_boot(bound.link.connect())  # the boot it froze in
    fake.freeze()
    bound.link.drop()
    return bound


def test_a_frozen_host_is_cycled_back_and_rejoins_with_no_reason_to_quarantine(tmp_path: Path) -> None:
    bound = _bound_to_a_frozen_host(tmp_path)
    old_boot = bound.fake.boot_id
    result = bound.recovery.recover(_wedge_record("solo", old_boot))
    assert result.quarantine is None
    assert result.record.outcome is Outcome.WEDGE and result.record.forensics is not None
    assert result.record.forensics["power_cycles"] == 1 and "gpu_health" in result.record.forensics
    assert bound.path() == ["off", "dwell", "on", "booting", "booted", "stable", "forensics", "ready"]
    assert bound.budget.used == 1 and bound.fake.boot_id != old_boot
    assert bound.cuts and bound.cuts[0][0] == "peer"  # the neighbour on the shared outlet is told


def test_a_dead_power_device_is_a_reason_to_quarantine_and_the_record_says_recovery_failed(tmp_path: Path) -> None:
    bound = _bound_to_a_frozen_host(tmp_path, device=Device(dead=True))
    result = bound.recovery.recover(_wedge_record("solo", bound.fake.boot_id))
    assert result.quarantine is not None and result.quarantine.startswith("recovery failed")
    assert result.record.forensics is not None and result.record.forensics["recovery"] == "failed"
    assert bound.path()[-1] == "quarantined"


def test_a_host_that_answers_before_the_cut_is_not_cycled_and_its_record_becomes_infra(tmp_path: Path) -> None:
    fake = FakeHost(VirtualClock(), "solo")
    bound = Bound(fake, tmp_path)
    bound.link.current_boot(bound.link.connect())  # alive all along: a stall, not a freeze
    result = bound.recovery.recover(_wedge_record("solo", fake.boot_id))
    assert result.quarantine is None and result.record.outcome is Outcome.INFRA
    assert "not cycled" in str(result.record.reason)
    assert bound.budget.used == 0 and bound.fake.device.requests == ["read"]  # its power read, nothing switched


def test_a_card_that_refuses_its_settings_after_the_cycle_is_a_reason_to_quarantine(tmp_path: Path) -> None:
    bound = _bound_to_a_frozen_host(tmp_path)
    bound.policy.last_requested = GpuPolicy(graphics_clocks=(180, 2800))  # what the last attempt asked
    bound.fake.policy_broken = "nvidia-smi: command not found"
    result = bound.recovery.recover(_wedge_record("solo", bound.fake.boot_id))
    assert result.quarantine is not None and "could not be re-applied" in result.quarantine
    assert result.record.forensics is not None and "policy" in result.record.forensics
    assert bound.path()[-1] == "quarantined"
