"""A host frozen mid-attempt is declared a wedge, power-cycled through its PDU/BMC, comes
back, gets its policy re-applied, and the campaign completes every planned attempt.

(A host that resets itself, and one that froze between attempts, are runner decisions:
tests/seam/test_seam_wedge.py plays them at the host seam in virtual time.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet  # outcomes and forensics; the latency bound (15 s) holds beside another module

LGC_CELL = "  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n"


# One protocol here: the wedge -> cycle -> back path is the runner's, the same for every driver.
# Each driver is proven where that is cheaper: off/on/cycle with read-back against its real
# simulator (tests/fleet/test_power_snmp.py, test_power_bmc.py, test_power_http_plugs.py,
# test_power_pdudaemon.py; the protocols' pure pieces in tests/unit/test_power_protocols.py, the
# command driver in tests/unit/test_power_command.py), a whole wedge campaign through every
# driver at once (tests/fleet/test_power_fleet_trust.py's secret sweep), Redfish and IPMI wedges
# with their BMC logs (tests/fleet/test_fleet_bmc_events.py) and SNMP (tests/fleet/test_power_fleet.py).
# Tasmota stays: the plug meters, so the wall power at the freeze is checked on the way.
SIMULATORS: dict[str, Callable[[Path, dict[str, Path]], Any]] = {
    "tasmota": lambda workdir, outlets: HttpPlugServer(workdir, "tasmota", outlets, password="s3cret-plug"),
}


def run_wedge_campaign(sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       simulator: str) -> tuple[list[dict], Any, Path]:
    fleet = sim_fleet([SimHostSpec(f"wg-{simulator[:6]}".rstrip("-"), script=("wedge", "clean"), boot_delay_s=0.5)])
    host = fleet.hosts[0]
    outlet = "1"
    sim = SIMULATORS[simulator](tmp_path / "pdu", {outlet: host.paths.power}).start()
    try:
        credentials = None
        if sim.secret is not None:
            monkeypatch.setenv("RF_FLEET_PDU_SECRET", sim.secret)
            credentials = "env:RF_FLEET_PDU_SECRET"
        block = sim.pdu_block(outlet, credentials)
        inventory = sim_inventory(fleet, pdu={host.name: block})
        book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=LGC_CELL)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory)
    finally:
        sim.stop()
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    return records, result, host


@pytest.mark.parametrize("simulator", sorted(SIMULATORS))
def test_a_wedged_host_is_power_cycled_and_the_campaign_completes(
        simulator: str, sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records, result, host = run_wedge_campaign(sim_fleet, sim_inventory, tmp_path, monkeypatch, simulator)
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
    wedge, after = records
    assert wedge["detect_latency_s"] is not None and wedge["detect_latency_s"] < 15
    assert wedge["last_phase"] and wedge["last_log_line"]
    assert wedge["last_heartbeat"] < wedge["wedge_declared"] <= wedge["ended"]
    assert wedge["telemetry"]["last_sample"]["gfx_mhz"] > 0
    assert wedge["forensics"]["previous_boot_available"] is True
    assert after["boot_id"] != wedge["boot_id"]
    # the driver forgot -lgc at the power cycle: it was re-applied and read back
    assert after["policy"]["graphics_clocks"] == [180, 2800]
    power = [json.loads(line) for line in result.directory.power.read_text().splitlines()]
    assert any(p["action"] in ("cycle", "off") for p in power)
    if simulator in ("tasmota", "shelly-gen2"):  # the plugs meter: the wall power as it froze is in the record
        assert wedge["telemetry"]["wall_w"] is not None and wedge["telemetry"]["wall_w"] > 0
        assert wedge["telemetry"]["wall_last"][-1]["k"] == "wall"
        stream = [json.loads(line) for line in (result.directory.root / wedge["stream"]).read_text().splitlines()]
        assert any(line.get("k") == "wall" for line in stream)
    for entry in power:
        assert "s3cret" not in json.dumps(entry)
    events = [json.loads(line) for line in result.directory.events.read_text().splitlines()]
    states = [e["to"] for e in events if e["event"] == "recovery"]
    assert states == ["off", "dwell", "on", "booting", "booted", "stable", "forensics", "ready"]


def test_forensics_find_an_xid_and_warn_about_a_volatile_journal(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("xid", script=("wedge", "clean"), xid_on_wedge=True, boot_delay_s=0.3),
                       SimHostSpec("volatile", script=("wedge", "clean"), journal_persistent=False,
                                   boot_delay_s=0.3)])
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {str(i + 1): h.paths.power for i, h in enumerate(fleet.hosts)})
    plug.start()
    try:
        inventory = sim_inventory(fleet, pdu={h.name: plug.pdu_block(str(i + 1)) for i, h in enumerate(fleet.hosts)})
        book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory)
    finally:
        plug.stop()
    wedges = {r["host"]: r for r in read_records(result.directory.attempts) if r["outcome"] == "wedge"}
    assert set(wedges) == {"xid", "volatile"}
    findings = wedges["xid"]["forensics"]["findings"]
    assert any("xid" in f["tags"] for f in findings), findings
    assert wedges["volatile"]["forensics"]["journal_persistent"] is False
    assert "not persistent" in wedges["volatile"]["forensics"]["warning"]
    assert wedges["volatile"]["forensics"]["previous_boot_available"] is False

