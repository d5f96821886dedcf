"""Recovery on its own: a HostRecovery bound to exactly what it uses (a link to a scripted host,
a policy keeper, an event log, a clock, the power device), with no host runner anywhere.

It decides and returns: the record as it now stands, and a reason to quarantine when the host
cannot rejoin. It changes nothing of a runner's (there is none here to change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.model import GpuPolicy, Outcome
from tests.support.recovery_alone import Bound, wedge_record
from tests.support.seam_host import Device, FakeHost


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
    result = bound.recovery.recover(wedge_record("solo", old_boot))
    assert result.quarantine is None
    assert result.record.outcome is Outcome.WEDGE and result.record.forensics is not None
    assert result.record.forensics["power_cycles"] == 1 and "gpu_health" in result.record.forensics
    assert bound.path() == ["off", "dwell", "on", "booting", "booted", "stable", "forensics", "ready"]
    assert bound.budget.used == 1 and bound.fake.boot_id != old_boot
    assert bound.cuts and bound.cuts[0][0] == "peer"  # the neighbour on the shared outlet is told


def test_a_dead_power_device_is_a_reason_to_quarantine_and_the_record_says_recovery_failed(tmp_path: Path) -> None:
    bound = _bound_to_a_frozen_host(tmp_path, device=Device(dead=True))
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert result.quarantine is not None and result.quarantine.startswith("recovery failed")
    assert result.record.forensics is not None and result.record.forensics["recovery"] == "failed"
    assert bound.path()[-1] == "quarantined"


def test_a_host_that_answers_before_the_cut_is_not_cycled_and_its_record_becomes_infra(tmp_path: Path) -> None:
    fake = FakeHost(VirtualClock(), "solo")
    bound = Bound(fake, tmp_path)
    bound.link.current_boot(bound.link.connect())  # alive all along: a stall, not a freeze
    result = bound.recovery.recover(wedge_record("solo", fake.boot_id))
    assert result.quarantine is None and result.record.outcome is Outcome.INFRA
    assert "not cycled" in str(result.record.reason)
    assert bound.budget.used == 0 and bound.fake.device.requests == ["read"]  # its power read, nothing switched


def test_a_card_that_refuses_its_settings_after_the_cycle_is_a_reason_to_quarantine(tmp_path: Path) -> None:
    bound = _bound_to_a_frozen_host(tmp_path)
    bound.policy.last_requested = GpuPolicy(graphics_clocks=(180, 2800))  # what the last attempt asked
    bound.fake.policy_broken = "nvidia-smi: command not found"
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert result.quarantine is not None and "could not be re-applied" in result.quarantine
    assert result.record.forensics is not None and "policy" in result.record.forensics
    assert bound.path()[-1] == "quarantined"
