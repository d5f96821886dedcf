"""The recovery ladder ``recovery: [nmi, cycle]`` at the seam, in virtual time: an NMI first, a
wait for the panic reboot it should cause, and the power cycle only when none came.

A HostRecovery bound to a scripted host (tests/support/seam_host.py) whose fake BMC takes the
NMI and tells the host: a host set to panic on an NMI reboots by itself (a new boot_id, its
next boot's facts list a vmcore); one that is not stays frozen.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.model import Outcome, RecoveryRung
from tests.support.recovery_alone import Bound, wedge_record
from tests.support.seam_host import Device, FakeHost

NMI_WAIT_S = 60.0
VMCORE = "/var/crash/127.0.0.1-2026-12-06-23:50:01/vmcore"


def _frozen(tmp_path: Path, *, ladder: tuple[RecoveryRung, ...] = (RecoveryRung.NMI, RecoveryRung.CYCLE),
            panics: bool, **device: Any) -> Bound:
    fake = FakeHost(VirtualClock(), "solo", device=Device(**{"sends_nmi": True, **device}))
    fake.host = replace(fake.host, recovery=ladder, nmi_reboot_s=NMI_WAIT_S)
    fake.panics_on_nmi = panics
    fake.facts_next_boot = {"kdump": {"crash_kernel_loaded": True, "vmcores": [VMCORE] if panics else []}}
    bound = Bound(fake, tmp_path)
    bound.link.current_boot(bound.link.connect())  # the boot it froze in
    fake.freeze()
    bound.link.drop()
    return bound


def test_an_nmi_that_panics_the_host_brings_it_back_as_a_reboot_by_rung_nmi_with_its_vmcore(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, panics=True)
    old_boot = bound.fake.boot_id
    result = bound.recovery.recover(wedge_record("solo", old_boot))
    assert result.quarantine is None
    assert result.record.outcome is Outcome.REBOOT and "NMI" in str(result.record.reason)
    forensics = result.record.forensics or {}
    assert forensics["recovery_rung"] == "nmi" and forensics["nmi"]["sent"] is True
    assert forensics["vmcore"] == {"present": True, "paths": [VMCORE]}
    assert bound.path() == ["nmi", "booting", "booted", "stable", "forensics", "ready"]
    assert bound.fake.device.requests.count("nmi") == 1 and "set off" not in bound.fake.device.requests
    assert bound.budget.used == 0 and bound.fake.boot_id != old_boot  # no power was cut


def test_an_nmi_that_changes_nothing_is_followed_by_the_power_cycle_after_the_wait(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, panics=False)
    started = bound.fake.clock.monotonic()
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert result.quarantine is None and result.record.outcome is Outcome.WEDGE
    assert bound.path()[:4] == ["nmi", "off", "dwell", "on"] and bound.path()[-1] == "ready"
    forensics = result.record.forensics or {}
    assert forensics["recovery_rung"] == "cycle"
    assert forensics["nmi"]["sent"] is True and forensics["nmi"]["boot_id"] is None
    assert forensics["nmi"]["waited_s"] >= NMI_WAIT_S and forensics["vmcore"]["present"] is False
    assert bound.fake.device.requests.index("nmi") < bound.fake.device.requests.index("set off")
    assert bound.budget.used == 1 and bound.fake.clock.monotonic() - started >= NMI_WAIT_S


def test_a_device_without_an_nmi_goes_straight_to_the_power_cycle(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, panics=True, sends_nmi=False)
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert result.record.outcome is Outcome.WEDGE and bound.path()[0] == "off"
    assert "nmi" not in bound.fake.device.requests and bound.fake.nmis == []
    assert any("nmi is skipped" in str(e.get("message")) for e in bound.events if e["event"] == "warning")
    assert (result.record.forensics or {})["recovery_rung"] == "cycle"


def test_an_nmi_the_bmc_refuses_is_followed_by_the_power_cycle_at_once(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, panics=True, refuses_nmi=True)
    started = bound.fake.clock.monotonic()
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert result.record.outcome is Outcome.WEDGE and bound.path()[:2] == ["nmi", "off"]
    forensics = result.record.forensics or {}
    assert forensics["nmi"]["sent"] is False and "0xc1" in forensics["nmi"]["error"]
    assert bound.fake.clock.monotonic() - started < NMI_WAIT_S  # no wait for a panic that cannot come


def test_the_default_ladder_sends_no_nmi_and_adds_nothing_to_the_record(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, ladder=(RecoveryRung.CYCLE,), panics=True)
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert bound.path()[0] == "off" and bound.fake.nmis == []
    assert "recovery_rung" not in (result.record.forensics or {})


def test_a_campaign_stopped_during_the_nmis_wait_cuts_no_power(tmp_path: Path) -> None:
    bound = _frozen(tmp_path, panics=False)
    bound.fake.nmi = bound.recovery.stop.set  # type: ignore[method-assign]  # stopped as the NMI lands
    result = bound.recovery.recover(wedge_record("solo", bound.fake.boot_id))
    assert bound.path() == ["nmi", "stopped"] and "set off" not in bound.fake.device.requests
    assert "nothing was switched" in str((result.record.forensics or {}).get("recovery"))
