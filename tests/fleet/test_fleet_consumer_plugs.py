"""Consumer plugs on the simulated fleet (issue 35 item 2), each family through a wedge and through
a plug that switches itself off, in one campaign through the real drivers (python-kasa's KLAP and
legacy XOR transports, Home Assistant's REST API) and their simulators: a Tapo plug over KLAP and
a Home Assistant switch each power-cycle a wedged host; a host behind another Home Assistant
switch and one behind a Kasa plug (the legacy protocol) whose plugs trip by themselves mid-attempt
are each one power loss, switched on and never cycled."""

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
from reprofleet.sim.power.plug_kasa import KasaKlapPlug, KasaXorPlug
from reprofleet.sim.power.switch import write_switch
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

ACCOUNT = ("owner@example.com", "tplink-account-pw")
TOKEN = "ha-long-lived-token-for-the-fleet"
ENTITY = "switch.workstation_hap"
WEDGED_ENTITY = "switch.workstation_haw"


def test_tapo_and_home_assistant_plugs_cycle_a_wedged_host_and_a_kasa_or_home_assistant_plug_that_trips_is_a_power_loss(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = sim_fleet([SimHostSpec("tap", script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.2),
                       SimHostSpec("hap", script=("clean", "clean"), boot_delay_s=0.5, time_scale=0.2),
                       SimHostSpec("haw", script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.2),
                       SimHostSpec("kap", script=("clean", "clean"), boot_delay_s=0.5, time_scale=0.2)])
    tap, hap, haw, kap = fleet.hosts
    tripping = {hap.name: hap, kap.name: kap}
    monkeypatch.setenv("RF_FLEET_TPLINK", ":".join(ACCOUNT))
    monkeypatch.setenv("RF_FLEET_HA_TOKEN", TOKEN)
    tapo = KasaKlapPlug([tap.paths.power], user=ACCOUNT[0], password=ACCOUNT[1])
    kasa = KasaXorPlug([kap.paths.power])
    home = HomeAssistantSim({ENTITY: hap.paths.power, WEDGED_ENTITY: haw.paths.power}, token=TOKEN)
    tripped: set[str] = set()
    lock = threading.Lock()

    def a_plug_trips(host: str, **fields: Any) -> None:  # its overload protection or timer, mid-attempt
        with lock:
            if host in tripping and fields.get("phase") == "torch_compile" and host not in tripped:
                tripped.add(host)
                write_switch(tripping[host].paths.power, False)

    try:
        inventory = sim_inventory(fleet, pdu={
            tap.name: {"driver": "kasa", "address": tapo.address, "transport": "klap",
                       "credentials": "env:RF_FLEET_TPLINK"},
            kap.name: {"driver": "kasa", "address": kasa.address, "transport": "xor"},
            hap.name: {"driver": "homeassistant", "address": home.address, "outlet": ENTITY,
                       "credentials": "env:RF_FLEET_HA_TOKEN"},
            haw.name: {"driver": "homeassistant", "address": home.address, "outlet": WEDGED_ENTITY,
                       "credentials": "env:RF_FLEET_HA_TOKEN"}})
        book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory,
                              progress=a_plug_trips)
        asked_home = home.served()
        asked_kasa = kasa.served()
    finally:
        tapo.stop()
        kasa.stop()
        home.stop()
    records = sorted(read_records(result.directory.attempts), key=lambda r: (r["host"], r["attempt_index"]))
    assert tripped == {hap.name, kap.name}
    assert [(r["host"], r["outcome"]) for r in records] == [
        ("hap", "power_loss"), ("hap", "clean"), ("haw", "wedge"), ("haw", "clean"),
        ("kap", "power_loss"), ("kap", "clean"), ("tap", "wedge"), ("tap", "clean")]
    by_host = {(r["host"], r["attempt_index"]): r for r in records}
    for wedged in (tap.name, haw.name):  # the plug's cycle brought it back with a new boot
        first, second = sorted(i for h, i in by_host if h == wedged)
        assert by_host[(wedged, second)]["boot_id"] != by_host[(wedged, first)]["boot_id"]
    power = list(read_log_lines(result.directory.power))
    for wedged in (tap.name, haw.name):
        assert [p["action"] for p in power if p["host"] == wedged and p["action"] in ("off", "on")] == ["off", "on"]
    for lost in (hap.name, kap.name):  # switched on again, never off, never cycled
        assert not [p for p in power if p["host"] == lost and p["action"] in ("off", "cycle")]
    # what reached the devices: Home Assistant's one turn_off was the wedged host's cycle; the Kasa
    # plug was switched once, on again after it tripped
    assert sum("turn_off" in a for a in asked_home) == 1
    assert sum("set_relay_state" in a for a in asked_kasa) == 1
    events = list(read_log_lines(result.directory.events))
    assert sorted(e["host"] for e in events if e["event"] == "wedge") == [haw.name, tap.name]
    assert sorted(e["host"] for e in events if e["event"] == "power_lost") == [hap.name, kap.name]
    assert not result.quarantined
    for where in (result.directory.power, result.directory.events, result.directory.attempts):
        text = where.read_text()
        assert ACCOUNT[1] not in text and TOKEN not in text
