"""Consumer plugs on the simulated fleet (issue 35 item 2): a Tapo plug over KLAP power-cycles a
wedged host, and a host behind a Home Assistant switch whose plug trips by itself mid-attempt is
one power loss, switched on and never cycled, in one campaign through the real drivers
(python-kasa's KLAP transport, Home Assistant's REST API) and their simulators."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power.plug_homeassistant import HomeAssistantSim
from reprofleet.sim.power.plug_kasa import KasaKlapPlug
from reprofleet.sim.power.switch import write_switch
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

ACCOUNT = ("owner@example.com", "tplink-account-pw")
TOKEN = "ha-long-lived-token-for-the-fleet"
ENTITY = "switch.workstation_hap"


def test_a_tapo_plug_cycles_a_wedged_host_and_a_home_assistant_plug_that_trips_is_a_power_loss(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = sim_fleet([SimHostSpec("tap", script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.2),
                       SimHostSpec("hap", script=("clean", "clean"), boot_delay_s=0.5, time_scale=0.2)])
    tap, hap = fleet.hosts
    monkeypatch.setenv("RF_FLEET_TPLINK", ":".join(ACCOUNT))
    monkeypatch.setenv("RF_FLEET_HA_TOKEN", TOKEN)
    tapo = KasaKlapPlug([tap.paths.power], user=ACCOUNT[0], password=ACCOUNT[1])
    home = HomeAssistantSim({ENTITY: hap.paths.power}, token=TOKEN)
    tripped = threading.Event()

    def the_plug_trips(host: str, **fields: Any) -> None:  # its overload protection, mid-attempt
        if host == hap.name and fields.get("phase") == "torch_compile" and not tripped.is_set():
            tripped.set()
            write_switch(hap.paths.power, False)

    try:
        inventory = sim_inventory(fleet, pdu={
            tap.name: {"driver": "kasa", "address": tapo.address, "transport": "klap",
                       "credentials": "env:RF_FLEET_TPLINK"},
            hap.name: {"driver": "homeassistant", "address": home.address, "outlet": ENTITY,
                       "credentials": "env:RF_FLEET_HA_TOKEN"}})
        book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory,
                              progress=the_plug_trips)
        asked_home = home.served()
    finally:
        tapo.stop()
        home.stop()
    records = sorted(read_records(result.directory.attempts), key=lambda r: (r["host"], r["attempt_index"]))
    assert tripped.is_set()
    assert [(r["host"], r["outcome"]) for r in records] == [
        ("hap", "power_loss"), ("hap", "clean"), ("tap", "wedge"), ("tap", "clean")]
    assert records[3]["boot_id"] != records[2]["boot_id"]  # the Tapo plug's cycle brought it back
    power = list(read_log_lines(result.directory.power))
    assert [p["action"] for p in power if p["host"] == tap.name and p["action"] in ("off", "on")] == ["off", "on"]
    assert not [p for p in power if p["host"] == hap.name and p["action"] in ("off", "cycle")]
    assert not [a for a in asked_home if "turn_off" in a]  # the controller never switched it off
    events = list(read_log_lines(result.directory.events))
    assert [e["host"] for e in events if e["event"] == "wedge"] == [tap.name]
    assert [e["host"] for e in events if e["event"] == "power_lost"] == [hap.name]
    assert not result.quarantined
    for where in (result.directory.power, result.directory.events, result.directory.attempts):
        text = where.read_text()
        assert ACCOUNT[1] not in text and TOKEN not in text
