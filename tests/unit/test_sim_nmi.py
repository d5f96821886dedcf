"""The simulated fleet's NMI: the Redfish BMC lists ``Nmi`` and hands it to the host's hardware,
and the host's kernel panics on it (a vmcore where kdump is loaded, then a reboot) only when
``kernel.unknown_nmi_panic`` or ``kernel.panic_on_unrecovered_nmi`` says so (rfsim/nmi.py)."""

from __future__ import annotations

import json
from pathlib import Path

from reprofleet.sim.power.redfish_front import Front
from reprofleet.sim.power.switch import write_switch
from reprofleet.sim.rfsim import kernel_panic, nmi


def _hw(tmp_path: Path, *, sysctls: dict[str, int], kexec: str | None = None) -> Path:
    hw = tmp_path / "ws01" / "hw"
    kernel_panic.reset_sysctls(hw)
    for name, value in sysctls.items():
        (kernel_panic.proc_sys(hw) / "kernel" / name).write_text(f"{value}\n")
    if kexec is not None:
        (hw / "sys" / "kernel").mkdir(parents=True)
        (hw / "sys" / "kernel" / "kexec_crash_loaded").write_text(kexec + "\n")
    return hw


def test_a_kernel_without_the_nmi_sysctls_logs_the_nmi_and_stays_as_it_was(tmp_path: Path) -> None:
    said = nmi.effect(_hw(tmp_path, sysctls={}))
    assert not said.panics and said.reboot_after_s is None
    assert "NMI received for unknown reason" in said.lines[0][1]


def test_unknown_nmi_panic_with_kdump_panics_writes_a_vmcore_and_reboots(tmp_path: Path) -> None:
    hw = _hw(tmp_path, sysctls={"unknown_nmi_panic": 1, "panic": 0}, kexec="1")
    said = nmi.effect(hw)
    assert said.panics and said.kdump and said.reboot_after_s == nmi.KDUMP_REBOOT_S  # kdump reboots, panic=0 or not
    assert said.lines[0][1] == "Kernel panic - not syncing: NMI: Not continuing"
    dump = nmi.write_vmcore(hw, 1_797_000_000.0)
    assert dump.parent.parent == nmi.crash_dir(hw) and dump.name.startswith("dump.") and dump.read_bytes()[:4] == b"\x7fELF"


def test_a_panic_without_kdump_reboots_after_kernel_panic_seconds_or_never(tmp_path: Path) -> None:
    assert nmi.effect(_hw(tmp_path / "a", sysctls={"panic_on_unrecovered_nmi": 1, "panic": 5})).reboot_after_s == 5.0
    hung = nmi.effect(_hw(tmp_path / "b", sysctls={"unknown_nmi_panic": 1, "panic": 0}))
    assert hung.panics and hung.reboot_after_s is None and not hung.kdump


def test_the_redfish_bmc_lists_nmi_and_hands_it_to_the_hosts_hardware(tmp_path: Path) -> None:
    hw = _hw(tmp_path, sysctls={})
    write_switch(hw / "power", True)
    bare = tmp_path / "bare-switch"
    write_switch(bare, True)
    front = Front("http://127.0.0.1:9", {"ws01": {"uuid": "u1", "switch": str(hw / "power")},
                                         "pdu": {"uuid": "u2", "switch": str(bare)}})
    system = front.system_json("ws01", {"Actions": {"#ComputerSystem.Reset": {
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff"]}}})
    assert "Nmi" in system["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]
    assert not front.nmi("ws01")  # no state.json yet: not a simulated host
    (hw / "state.json").write_text(json.dumps({"frozen": True}))
    assert front.nmi("ws01")
    (request,) = (hw / "requests").iterdir()
    assert json.loads(request.read_text())["kind"] == "nmi"
    assert not front.nmi("pdu")


def test_the_owners_sysctl_conf_and_kdump_come_back_with_every_boot_and_a_sysctl_w_does_not(tmp_path: Path) -> None:
    """What a host's /etc/sysctl.d and kdump-tools do: the boot's kernel starts from its defaults,
    then the owner's settings; a ``sysctl -w`` of the last boot is gone."""
    from reprofleet.sim.rfsim import sysfs
    from reprofleet.sim.spec import spec_from_mapping

    spec = spec_from_mapping({"name": "ws01", "sysctl_conf": {"unknown_nmi_panic": 1}, "kdump_loaded": True})
    hw = tmp_path / "hw"
    kernel_panic.reset_sysctls(hw, spec.sysctl_conf)
    sysfs.write_boot(hw, spec.hardware_watchdog, spec.kdump_loaded)
    (kernel_panic.proc_sys(hw) / "kernel" / "softlockup_panic").write_text("1\n")  # sysctl -w, this boot only
    assert nmi.effect(hw).panics and nmi.effect(hw).kdump
    kernel_panic.reset_sysctls(hw, spec.sysctl_conf)  # the next boot
    assert kernel_panic.sysctl(hw, "unknown_nmi_panic") == 1 and kernel_panic.sysctl(hw, "softlockup_panic") == 0
    plain = tmp_path / "plain"
    kernel_panic.reset_sysctls(plain)
    sysfs.write_boot(plain, False)
    assert not nmi.effect(plain).panics and not nmi.effect(plain).kdump


def test_a_sysctl_name_that_is_not_a_kernel_name_is_refused_in_the_fleet_config() -> None:
    import pytest

    from reprofleet.sim.spec import spec_from_mapping

    with pytest.raises(ValueError, match="sysctl_conf"):
        spec_from_mapping({"name": "ws01", "sysctl_conf": {"../../etc/passwd": 1}})
