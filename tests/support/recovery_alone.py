"""A HostRecovery bound to exactly what it uses (a link to a scripted host, a policy keeper, an
event log, a clock, the power device), with no host runner anywhere: for the seam tests of
recovery on its own (tests/seam/test_seam_recovery_alone.py, test_seam_nmi_ladder.py)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from reprofleet.config import Timings
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model import Outcome, Record
from reprofleet.power.control import power_control
from reprofleet.runner.context import RunSettings
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.link import HostLink, LeaseTerms
from reprofleet.runner.policy_keeper import PolicyKeeper
from reprofleet.runner.recovery import HostRecovery, PowerBudget, RecoveryBinding
from reprofleet.remote.transport import TransportSettings
from tests.support.seam_host import FakeHost, FakePort

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


def wedge_record(host: str, boot_id: str) -> Record:
    now = "2026-12-06T00:00:00Z"
    return Record(campaign="alone", attempt=str(uuid.uuid4()), controller="pytest", host=host, cell="ref",
                  factors={}, policy=None, runtime={}, cache=None, attempt_index=0, attempt_in_boot=1,
                  cold_boot=False, boot_id=boot_id, started=now, ended=now, outcome=Outcome.WEDGE,
                  reason="silent", detect_latency_s=3.0)
