"""A Slurm node power-cycled through Slurm (``pdu: {driver: slurm}``: ``scontrol reboot``, where
the lab set ``reboot_from_controller``), decided at the host seam in virtual time against a fake
Slurm at the command seam built from a real 22.05's golden output (tests/fixtures/slurm/
config_*.json, reboot_asap_down.json, sinfo_reboot_*.json): a wedged node is rebooted by
slurmctld's RebootProgram and comes back with a new boot, its power log and recovery say the
device was Slurm and the cycle unverified; a cluster without the parameter is refused before
anything runs, one line naming the host and the fix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.clock import VirtualClock
from reprofleet.model import PowerPort
from reprofleet.playbook import load_playbook
from reprofleet.power.base import PowerState
from reprofleet.power.drivers.slurm import SlurmRebootDriver
from reprofleet.power.log import PowerLog
from reprofleet.power.ports import HostPower, PowerPreflightError
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.context import CampaignContext
from reprofleet.runner.recovery import recovery_factory
from reprofleet.scheduler import SlurmClient
from tests.support.fake_slurm import FakeNode, FakeSlurm
from tests.support.fleet_campaign import write_playbook
from tests.support.seam_host import FakeHost, FakePort, seam_settings

FACTS = {"nvml": "ok", "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0", "name": "NVIDIA RTX PRO 6000"}]}
SLURM_PDU = PowerPort("slurm", "slurmctld", where="inventory/lab.yml:12:pdu")


class SlurmPoweredPort(FakePort):
    """The fake host whose power device is the real Slurm driver, asking the fake Slurm."""

    def __init__(self, fake: FakeHost, ctx: CampaignContext, slurm: FakeSlurm) -> None:
        super().__init__(fake, ctx)
        self.slurm = slurm

    def power(self, log: PowerLog) -> HostPower:
        driver = SlurmRebootDriver(SLURM_PDU, self.fake.name, log)
        driver.client = SlurmClient(self.slurm)
        driver.clock = self.ctx.clock
        return HostPower(self.fake.name, (driver,))


def _node(clock: VirtualClock, name: str, script: tuple[str, ...]) -> FakeHost:
    fake = FakeHost(clock, name, script=script, boot_delay_s=0.5)
    fake.host = replace(fake.host, vars={"slurm_node": name}, pdu=SLURM_PDU)
    fake.facts = dict(FACTS)
    return fake


def _rebooted_by_program(fake: FakeHost) -> Any:
    """The lab's RebootProgram, run by slurmctld: it power-cycles the host (its IPMI, its PDU)."""
    def program(node: str) -> None:
        assert node == fake.name
        fake.switched(PowerState.OFF)
        fake.switched(PowerState.ON)
    return program


def _campaign(tmp_path: Path, clock: VirtualClock, fake: FakeHost, slurm: FakeSlurm) -> Any:
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, boot=60)
    plan = make_plan(load_playbook(book), [fake.host])
    return run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                        clock=clock, port_for=lambda ctx, h: SlurmPoweredPort(fake, ctx, slurm),
                        network_ok=lambda: True, slurm_client=SlurmClient(slurm))


def test_a_wedged_node_rebooted_through_slurm_comes_back_with_a_new_boot_and_says_which_device(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node(clock, "gpu01", ("wedge", "clean"))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"), config="config_reboot_from_controller")
    slurm.reboot_program = _rebooted_by_program(fake)
    result = _campaign(tmp_path, clock, fake, slurm)
    found = list(read_records(result.directory.attempts))
    assert [r["outcome"] for r in found] == ["wedge", "clean"] and not result.quarantined
    assert len(fake.boot_ids) == 2 and found[1]["boot_id"] == fake.boot_ids[1] != found[0]["boot_id"]
    # the reboot: once, ASAP, down after it, the campaign's wedge reason (Slurm's notes appended to it)
    wedge_reason = (f"reprofleet:{result.directory.root.name} wedge in {found[0]['last_phase']}, "
                    f"attempt {found[0]['attempt']}, power cycle under way")
    assert slurm.reboots == [("scontrol", "reboot", "ASAP", "nextstate=DOWN", f"reason={wedge_reason}", "gpu01")]
    # down on the wedge; after the health gate resume + drain (the reboot left it down); given back at the end
    assert slurm.updates_of("gpu01") == ["drain", "down", "resume", "drain", "resume"]
    assert slurm.nodes["gpu01"].reason == "" and not slurm.nodes["gpu01"].flags
    said = read_log_lines(result.directory.events)
    (off,) = [e for e in said if e["event"] == "recovery" and e.get("to") == "off"]
    assert off["driver"] == "slurm" and off["outlets"] == ["slurm:slurmctld:80#gpu01"]
    (booted,) = [e for e in said if e["event"] == "recovery" and e.get("to") == "booted"]
    assert booted["boot_id"] == fake.boot_ids[1]
    power = [line for line in read_log_lines(result.directory.power) if line["action"] in ("cycle", "off")]
    assert [(p["driver"], p["action"], p["result"]) for p in power] == [("slurm", "off", "unverified"),
                                                                        ("slurm", "cycle", "unverified")]
    assert "scontrol reboot ASAP nextstate=DOWN gpu01: slurmctld runs /tmp/slurmlab37/reboot.sh" in power[1]["note"]


def test_a_cluster_without_reboot_from_controller_is_refused_before_anything_runs(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node(clock, "gpu01", ("clean",))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"), config="config_plain")
    with pytest.raises(PowerPreflightError) as refused:
        _campaign(tmp_path, clock, fake, slurm)
    (line,) = refused.value.problems
    assert line.startswith("inventory/lab.yml:12:pdu: gpu01: pdu driver slurm: scontrol reboot cannot cycle a "
                           "hard-locked node on this cluster: slurm.conf needs SlurmctldParameters=reboot_from_controller")
    assert "RebootProgram=" in line and "scontrol reconfigure" in line
    assert fake.attempts_run == 0 and slurm.updates == [] and slurm.reboots == []
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_a_cycle_asked_by_hand_on_a_cluster_without_it_is_refused_with_the_fix_and_nothing_sent(
        tmp_path: Path) -> None:
    slurm = FakeSlurm(VirtualClock().monotonic, FakeNode("gpu01"), config="config_plain")
    driver = SlurmRebootDriver(SLURM_PDU, "gpu01", PowerLog(tmp_path / "power.jsonl"))
    driver.client = SlurmClient(slurm)
    with pytest.raises(Exception, match="cannot cycle a hard-locked gpu01: slurm.conf needs SlurmctldParameters"):
        driver.cycle(5.0)
    with pytest.raises(Exception, match="Slurm has no power off of its own"):
        driver.off()
    assert slurm.reboots == [] and slurm.updates == []
