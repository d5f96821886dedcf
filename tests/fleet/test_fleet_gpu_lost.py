"""A simulated host wedges, is power-cycled through its plug, comes back with its GPU off the
bus, and is quarantined with the words of the agent's health checks: the whole path on the
real fleet (sshd, the agent, the sim's sysfs, NVML and nvidia-smi, a Tasmota plug simulator).

The runner's decisions around it are pinned in virtual time by tests/seam/test_seam_health_gate.py;
this one proves that the real agent on a real (simulated) host reads a lost GPU as lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet  # records and words are checked, not timing: it may run beside others

WORDS = ("the GPU fell off the bus after the wedge (NVML: GPU is lost, lspci rev ff, nvidia-smi exit 15): "
         "power the host off and on by hand or reseat; quarantined")


def test_a_host_back_from_a_wedge_without_its_gpu_is_quarantined_with_the_words(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = sim_fleet([SimHostSpec("lost", script=("wedge", "clean", "clean"), gpu_lost_after_wedge=True,
                                   time_scale=0.02, boot_delay_s=0.3)])
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp_path / "pdu", "tasmota", {"1": host.paths.power}, password="s3cret-plug").start()
    try:
        monkeypatch.setenv("RF_FLEET_PDU_SECRET", str(plug.secret))
        inventory = sim_inventory(fleet, pdu={host.name: plug.pdu_block("1", "env:RF_FLEET_PDU_SECRET")})
        book = write_playbook(tmp_path / "book", attempts=3, attempt_timeout=30)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory)
    finally:
        plug.stop()
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "infra", "infra"]
    assert all(r["reason"].startswith("not run") for r in records[1:])
    health = records[0]["forensics"]["gpu_health"]
    assert health["lost"] is True and health["bus_id"] == "00000000:01:00.0"
    assert [c["name"] for c in health["checks"] if c["ok"] is False] == ["nvml", "pci", "nvidia_smi"]
    assert any("GPU is lost.  Reboot the system to recover this GPU" in line for line in health["failed"])
    # read from the host's own sysfs (REPROFLEET_SYSFS), not the machine running the fleet
    assert "pci: 0000:01:00.0 reads all ones (lspci: rev ff): the GPU fell off the bus" in health["failed"]
    events = [json.loads(line) for line in result.directory.events.read_text().splitlines()]
    assert [e["to"] for e in events if e["event"] == "recovery"] == [
        "off", "dwell", "on", "booting", "booted", "stable", "forensics", "quarantined"]
    assert [e["reason"] for e in events if e["event"] == "quarantined"] == [WORDS]
    # the simulated host has no watchdog, kernel.panic=0 and no lockup panics: cycled without a grace
    (grace,) = [e for e in events if e["event"] == "self_reset_grace"]
    assert grace["grace_s"] == 0.0
    assert any(e["event"] == "gpu_lost" for e in fleet.events() if e.get("host") == "lost")
