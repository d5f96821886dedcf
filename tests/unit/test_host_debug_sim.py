"""The simulated kernel's lockup watchdog: what it prints and whether it panics follows the
host's sysctls; the wedge model decides whether the kernel saw the lock at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.sim.rfsim import kernel_panic
from reprofleet.sim.rfsim.wedge import Conditions, WedgeParams, decide
from reprofleet.sim.spec import SimHostSpec

DEFAULT = Conditions(graphics_ceiling_mhz=3090, power_limit_w=600.0, spec_tokens=9)


@pytest.fixture
def hw(tmp_path: Path) -> Path:
    kernel_panic.reset_sysctls(tmp_path)
    return tmp_path


def set_sysctl(hw: Path, name: str, value: int) -> None:
    (kernel_panic.proc_sys(hw) / "kernel" / name).write_text(f"{value}\n")


def messages(report: kernel_panic.Report) -> list[str]:
    return [message for _, message in report.lines]


def test_a_soft_lockup_without_softlockup_panic_is_reported_and_the_host_stays_hung(hw: Path) -> None:
    report = kernel_panic.report(hw, "soft", "VLLM::EngineCor", 4242)
    assert messages(report)[0] == "watchdog: BUG: soft lockup - CPU#5 stuck for 22s! [VLLM::EngineCor:4242]"
    assert not report.panics and report.reboot_after_s is None
    assert not any("Kernel panic" in m for m in messages(report))


def test_softlockup_panic_panics_and_reboots_after_kernel_panic_seconds(hw: Path) -> None:
    set_sysctl(hw, "softlockup_panic", 1)
    set_sysctl(hw, "panic", 10)
    report = kernel_panic.report(hw, "soft", "VLLM::EngineCor", 4242)
    said = messages(report)
    assert report.panics and report.reboot_after_s == 10.0
    assert "Kernel panic - not syncing: softlockup: hung tasks" in said
    assert said[said.index("Kernel panic - not syncing: softlockup: hung tasks") + 5:][:4] == [
        " <IRQ>", " dump_stack_lvl+0x5d/0x80", " panic+0x118/0x2f0", " watchdog_timer_fn+0x1f1/0x220"]
    assert said[-1] == "Rebooting in 10 seconds.."


def test_with_kernel_panic_0_the_panicked_host_stays_hung(hw: Path) -> None:
    set_sysctl(hw, "softlockup_panic", 1)
    report = kernel_panic.report(hw, "soft", "python3", 7)
    assert report.panics and report.reboot_after_s is None
    assert messages(report)[-1] == "---[ end Kernel panic - not syncing: softlockup: hung tasks ]---"


def test_a_hard_lockup_needs_the_nmi_watchdog_to_be_seen_and_hardlockup_panic_to_panic(hw: Path) -> None:
    set_sysctl(hw, "hardlockup_panic", 1)
    assert kernel_panic.report(hw, "hard", "python3", 7).lines == ()  # no NMI watchdog: nobody sees it
    set_sysctl(hw, "nmi_watchdog", 1)
    report = kernel_panic.report(hw, "hard", "python3", 7)
    assert messages(report)[0] == "watchdog: Watchdog detected hard LOCKUP on cpu 5"
    assert "Kernel panic - not syncing: Hard LOCKUP" in messages(report)
    set_sysctl(hw, "hardlockup_panic", 0)
    assert not kernel_panic.report(hw, "hard", "python3", 7).panics


def test_the_panic_goes_to_pstore_as_ramoops_keeps_it(hw: Path) -> None:
    set_sysctl(hw, "softlockup_panic", 1)
    path = kernel_panic.write_pstore(hw, kernel_panic.report(hw, "soft", "python3", 7).lines, 123.5)
    lines = path.read_text().splitlines()
    assert path.name == "dmesg-ramoops-0" and lines[0] == "Panic#1 Part1"
    assert "<0>[  123.500000] Kernel panic - not syncing: softlockup: hung tasks" in lines


def test_a_new_boot_starts_from_the_hosts_own_sysctls(hw: Path) -> None:
    set_sysctl(hw, "softlockup_panic", 1)
    kernel_panic.reset_sysctls(hw)
    assert kernel_panic.sysctl(hw, "softlockup_panic") == 0


def test_the_script_entry_lockup_is_a_wedge_the_kernel_sees() -> None:
    decision = decide(WedgeParams(lockup_kind="hard"), DEFAULT, attempt=0, seed=1, script=["lockup"])
    assert (decision.outcome, decision.lockup) == ("wedge", "hard")
    assert decide(WedgeParams(), DEFAULT, attempt=0, seed=1, script=["wedge"]).lockup is None


def test_p_lockup_seen_is_the_share_of_random_wedges_the_kernel_sees() -> None:
    params = WedgeParams(p_wedge=1.0, p_error=0.0, p_hang=0.0, p_lockup_seen=0.25)
    seen = [decide(params, DEFAULT, attempt=i, seed=3).lockup for i in range(2000)]
    assert 0.21 < seen.count("soft") / len(seen) < 0.29
    assert all(decide(WedgeParams(p_wedge=1.0, p_error=0.0, p_hang=0.0), DEFAULT, attempt=i, seed=3).lockup is None
               for i in range(50))


def test_the_spec_accepts_lockup_and_rejects_a_bad_kind() -> None:
    assert SimHostSpec("a", script=("lockup",)).wedge_params().lockup_kind == "soft"
    with pytest.raises(ValueError, match="lockup_kind"):
        SimHostSpec("a", lockup_kind="medium")
