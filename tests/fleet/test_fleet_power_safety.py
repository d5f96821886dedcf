"""Power control that never harms a lab, on the simulated fleet (issue 18's acceptance):

- a switch outage of 45 s between the controller and every host, the PDU still answering,
  during attempts: 0 wedges, 0 power actions, the attempts go on and are judged;
- an inventory with one wrong address whose outlet feeds a live machine: that machine is never
  switched, in a fresh campaign and in its resume.

(Hosts frozen together judge timing: tests/fleet/test_fleet_liveness.py, which runs alone. A
controller outage of 120 s after a KERNEL answer is played at the host seam in virtual time:
tests/seam/test_seam_wedge.py.)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.playbook import load_playbook
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook
from tests.support.fleet_liveness import campaign_events, live_events, plugged, switching_actions, until

pytestmark = pytest.mark.fleet

OUTAGE_S = 45.0


def test_a_switch_outage_of_45_s_during_attempts_cycles_nothing_and_the_attempts_go_on(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec(f"tor-{c}", script=("clean",), time_scale=0.25) for c in "abc"])
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=90)
    started = threading.Event()
    outage: dict[str, float] = {}

    def every_host_held() -> bool:
        held = {e["host"] for e in live_events(tmp_path / "reports") if e["event"] == "silence_hold"}
        return all(h.name in held for h in fleet.hosts)

    def switch_reboot() -> None:
        fleet.switch_outage(True)
        outage["down"] = time.monotonic()
        until(every_host_held, OUTAGE_S)  # the assertions below say if it never came
        # the switch stays down its 45 s (the fault's own length, not a guess at the code's speed)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - outage["down"])))
        fleet.switch_outage(False)
        outage["up"] = time.monotonic()

    def during_attempts(host: str, **fields: Any) -> None:
        if fields.get("phase") == "torch_compile" and not started.is_set():
            started.set()
            threading.Thread(target=switch_reboot, daemon=True).start()

    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    try:
        result = run_campaign(plan, settings_for(fleet, watchdog=WatchdogSettings()),  # the default 300 s hold
                              tmp_path / "reports", recovery_factory=recovery_factory, progress=during_attempts)
    finally:
        fleet.switch_outage(False)
        plug.stop()
    assert started.is_set() and outage["up"] - outage["down"] >= OUTAGE_S
    assert sorted(r["outcome"] for r in result.records) == ["clean"] * 3  # judged, from their own exit lines
    assert switching_actions(result) == []
    events = campaign_events(result)
    assert not [e for e in events if e["event"] in ("wedge", "recovery", "controller_network_suspect")]
    for host in fleet.hosts:
        mine = [e for e in events if e["host"] == host.name]
        (held,) = [e for e in mine if e["event"] == "silence_hold"]
        assert held["rule"] == "correlated" and len(held["peers"]) == 2
        # it ended by the hosts answering: the first one back may release the others (peer, or
        # lone once every other host is heard), who are then judged by the rounds a peer vouched
        # for and fresh ones, and answer them; never by the silence outlasting the hold
        assert {e["rule"] for e in mine if e["event"] == "silence_release"} <= {"peer", "lone"}
        assert [e["event"] for e in mine if e["event"] in ("suspect", "clear")][-1] == "clear"


def _inventory_with_a_typo(fleet: Any, sim_inventory: Any, plug: Any, tmp_path: Path) -> Path:
    """``real`` is right; ``typo`` names the live ``victim``'s outlet with an address nothing
    answers at (a mistyped ansible_host); ``victim`` itself is not in the inventory."""
    real, victim = fleet.hosts
    written = sim_inventory(fleet, hosts=[real.name, victim.name],
                            pdu={real.name: plug.pdu_block("1"), victim.name: plug.pdu_block("2")})
    data = yaml.safe_load(written.read_text())
    group = next(g for g in data["all"]["children"].values() if victim.name in (g.get("hosts") or {}))
    entry = group["hosts"].pop(victim.name)
    octets = str(entry["ansible_host"]).split(".")
    entry["ansible_host"] = ".".join([*octets[:3], str((int(octets[3]) + 100) % 250 + 2)])
    group["hosts"]["typo"] = entry
    path = tmp_path / "typo-inventory.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_mistyped_address_never_switches_the_live_machine_on_its_outlet_fresh_or_resumed(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    from reprofleet.sim.power import HttpPlugServer

    fleet = sim_fleet([SimHostSpec("real", script=("clean",) * 2, time_scale=0.02),
                       SimHostSpec("victim", script=("clean",), time_scale=0.02)])
    real, victim = fleet.hosts
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {"1": real.paths.power, "2": victim.paths.power}).start()
    boot = victim.boot_id
    try:
        inventory = _inventory_with_a_typo(fleet, sim_inventory, plug, tmp_path)
        plan = make_plan(load_playbook(write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30)),
                         load_inventory(inventory).hosts)
        results = [run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory)
                   for _ in ("fresh", "resumed")]
    finally:
        plug.stop()
    fresh, resumed = results
    for result in results:
        assert switching_actions(result) == []
        assert "never answered" in result.quarantined.get("typo", "")
        assert "not switched" in result.quarantined["typo"] and "--bring-up" in result.quarantined["typo"]
    assert [r["outcome"] for r in fresh.records if r["host"] == "real"] == ["clean"]
    assert victim.boot_id == boot  # the machine on that outlet never lost power
    assert not [e for e in fleet.events() if e.get("host") == victim.name and e.get("event") == "power_off"]
    assert not [e for e in campaign_events(resumed) if e["host"] == "typo" and e["event"] in ("recovery", "switched_on_at_start")]
