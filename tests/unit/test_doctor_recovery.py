"""invoke doctor's items about the way back from a wedge: kdump readiness where the host's ladder
sends an NMI, and the plug's own behaviour (the items a campaign would refuse the host for are
``missing``, with the device's own fix)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reprofleet.campaign.doctor import Check, Diagnosis, Evidence, Status, diagnose
from reprofleet.model import Cell, Host, PowerPort, RecoveryRung
from reprofleet.power.plug_behaviour import PlugSettings, PowerOnState

HOST = Host("ws01", "10.20.0.11", user="lab", pdu=PowerPort(driver="tasmota", address="10.20.0.101", outlet="1"))
NMI_HOST = replace(HOST, recovery=(RecoveryRung.NMI, RecoveryRung.CYCLE))
DOCKER = Cell(name="default", index=0, factors={})
READY_KDUMP = {"crash_kernel_loaded": True, "unknown_nmi_panic": 1, "panic_on_unrecovered_nmi": 0,
               "vmcores": ["/var/crash/202612062350/dump.202612062350"], "crash_dir": "/var/crash"}
GPU_FACTS = {"gpus": [{"index": 0, "name": "NVIDIA H200", "power_limit_w": {"enforced": 700.0}}]}


def healthy(**changes: Any) -> dict[str, Any]:
    """Facts with what these items read (the other items judge what is missing as they do)."""
    return {"boot_id": "b1", "gpus": [], **changes}


def evidence(**fields: Any) -> Evidence:
    return Evidence(**{"facts": healthy(), "power": "on", **fields})


def check(diagnosis: Diagnosis, item: str) -> Check:
    return next(c for c in diagnosis.checks if c.item == item)


def missing(diagnosis: Diagnosis) -> list[str]:
    """The items of this module's concern that make the host not ready."""
    return [c.item for c in diagnosis.checks if c.status is Status.MISSING and c.item.startswith(("kdump", "plug"))]


def test_kdump_ready_for_the_nmi_rung_is_ok_and_names_the_last_vmcore() -> None:
    found = diagnose(NMI_HOST, [DOCKER], evidence(facts=healthy(kdump=READY_KDUMP)))
    kdump = check(found, "kdump")
    assert kdump.status is Status.OK and "unknown_nmi_panic = 1" in kdump.found and "dump.202612062350" in kdump.found


def test_an_nmi_rung_without_a_crash_kernel_or_the_sysctl_is_a_warning_with_the_fix() -> None:
    facts = healthy(kdump={**READY_KDUMP, "crash_kernel_loaded": False, "unknown_nmi_panic": 0, "vmcores": []})
    found = diagnose(NMI_HOST, [DOCKER], evidence(facts=facts))
    kdump = check(found, "kdump")
    assert kdump.status is Status.WARN and missing(found) == []
    assert "no crash kernel loaded" in kdump.found and "both 0" in kdump.found
    assert "kernel.unknown_nmi_panic=1" in kdump.fix
    # the same host without the nmi rung: reported, not a warning
    assert check(diagnose(HOST, [DOCKER], evidence(facts=facts)), "kdump").status is Status.OK


def test_a_plug_that_would_switch_the_host_off_is_missing_with_the_devices_fix() -> None:
    settings = PlugSettings(power_on=PowerOnState.OFF, auto_off_s=3600.0, power_limit_w=500.0, child_lock=True,
                            said={"power-on state": "PowerOnState 0"}, fixes={"power-on state": "PowerOnState 1"})
    found = diagnose(HOST, [DOCKER], evidence(facts=healthy(**GPU_FACTS), plugs=(("ws01: pdu tasmota", settings),)),
                     campaign_s=12 * 3600.0)
    assert missing(found) == ["plug: power-on state", "plug: auto-off", "plug: power limit"]
    power_on = check(found, "plug: power-on state")
    assert power_on.status is Status.MISSING and "PowerOnState 0" in power_on.found and "PowerOnState 1" in power_on.fix
    assert check(found, "plug: auto-off").status is Status.MISSING
    assert check(found, "plug: power limit").status is Status.MISSING and "700 W" in check(found, "plug: power limit").found
    assert check(found, "plug: child lock").status is Status.OK


def test_a_device_that_reports_nothing_is_unknown_and_one_that_fails_says_why() -> None:
    found = diagnose(HOST, [DOCKER], evidence(plugs=(("ws01: pdu snmp", None),)))
    assert missing(found) == [] and check(found, "plug: power-on state").status is Status.UNKNOWN
    assert "pull the plug from the wall" in check(found, "plug: power-on state").fix
    failed = diagnose(HOST, [DOCKER], evidence(plug_error="GET /cm: HTTP 500"))
    assert check(failed, "plug settings").status is Status.UNKNOWN and "HTTP 500" in check(failed, "plug settings").found
