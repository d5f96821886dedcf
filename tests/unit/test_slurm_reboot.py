"""``scontrol reboot`` as a power device, on a real Slurm 22.05's output (tests/fixtures/slurm/):
whether the cluster allows it, the command exactly, and the inventory form that selects it."""

from __future__ import annotations

import pytest

from reprofleet.inventory import load_inventory
from reprofleet.power.drivers.slurm import SlurmRebootDriver, reboot_reason
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.registry import driver_for
from reprofleet.scheduler import SlurmClient, reboot_argv, reboot_support
from reprofleet.scheduler.client import parse_config
from tests.support.fake_slurm import SLURM, GoldenReplay, golden


def test_the_golden_config_with_reboot_from_controller_allows_it_and_names_the_program() -> None:
    support = reboot_support(parse_config(golden("config_reboot_from_controller")["stdout"]))
    assert support.allowed and support.program == "/tmp/slurmlab37/reboot.sh" and support.why_not == ""


def test_the_golden_config_without_it_is_refused_naming_both_settings_and_the_fix() -> None:
    support = reboot_support(parse_config(golden("config_plain")["stdout"]))
    assert not support.allowed and support.program == ""
    assert support.why_not.startswith("slurm.conf needs SlurmctldParameters=reboot_from_controller")
    assert "RebootProgram=" in support.why_not and support.why_not.endswith("then `scontrol reconfigure`")


@pytest.mark.parametrize(("parameters", "program", "allowed"), [
    ("enable_configless,reboot_from_controller", "/usr/sbin/lab-ipmi-cycle", True),
    ("reboot_from_controller", "(null)", False),  # slurmctld would run nothing
    ("enable_configless", "/usr/sbin/lab-ipmi-cycle", False),  # slurmd on the locked node would run it
])
def test_both_the_parameter_and_a_program_are_needed(parameters: str, program: str, allowed: bool) -> None:
    assert reboot_support({"SlurmctldParameters": parameters, "RebootProgram": program}).allowed is allowed


def test_the_reboot_command_is_exactly_what_22_05_took() -> None:
    captured = golden("reboot_asap_down")
    node, reason = captured["command"][-1], captured["command"][-2].removeprefix("reason=")
    assert reboot_argv(node, reason) == tuple(captured["command"])
    assert reboot_argv("gpu01", "reprofleet:c1 x") == ("scontrol", "reboot", "ASAP", "nextstate=DOWN",
                                                       "reason=reprofleet:c1 x", "gpu01")
    replay = GoldenReplay("reboot_asap_down")
    SlurmClient(replay).reboot(node, reason)  # rc 0: no refusal raised
    assert replay.calls == [tuple(captured["command"])]


def test_the_reason_keeps_the_nodes_own_without_slurms_notes() -> None:
    after = golden("sinfo_reboot_complete")["stdout"]
    assert " : reboot issued : reboot complete" in after  # what Slurm appends (22.05)
    assert reboot_reason("reprofleet:c1 wedge in x, attempt a1, power cycle under way : reboot issued : reboot "
                         "timed out", "gpu01") == "reprofleet:c1 wedge in x, attempt a1, power cycle under way"
    assert reboot_reason("fan noise, ticket 4411", "gpu01") == "fan noise, ticket 4411"  # theirs stays theirs
    assert reboot_reason("", "gpu01") == "reprofleet: power cycle of gpu01 through scontrol reboot"


def test_a_whole_slurm_inventory_names_slurm_as_its_power_device_without_an_address() -> None:
    inventory = load_inventory(f"slurm:gpu + {SLURM / 'lab_slurm_power.yml'}",
                               slurm=SlurmClient(GoldenReplay("sinfo_idle")))
    gpu01, gpu02 = inventory.hosts
    assert gpu01.pdu is not None and (gpu01.pdu.driver, gpu01.pdu.address) == ("slurm", "slurmctld")
    assert gpu02.pdu is not None and gpu02.pdu.driver == "ipmi"
    driver = driver_for(gpu01.pdu, gpu01.name, PowerLog(None))
    assert isinstance(driver, SlurmRebootDriver) and driver.node == "gpu01" and not driver.reads_state


def test_device_cycle_false_is_refused_naming_the_field() -> None:
    inventory = load_inventory(f"slurm:gpu + {SLURM / 'lab_slurm_power.yml'}",
                               slurm=SlurmClient(GoldenReplay("sinfo_idle")))
    port = inventory.hosts[0].pdu
    assert port is not None
    with pytest.raises(PowerConfigError, match="Slurm has no off/on of its own") as refused:
        driver_for(type(port)(port.driver, port.address, options={"device_cycle": False}), "gpu01", PowerLog(None))
    assert refused.value.field == "device_cycle"
