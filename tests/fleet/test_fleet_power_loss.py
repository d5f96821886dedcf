"""A plug that switches itself off mid-attempt is a power loss, not a wedge, on the simulated fleet.

Shelly's Gen1 relay API takes a one-shot flip-back timer with a command (``GET
/relay/0?turn=on&timer=S``: "flip back after S seconds", Shelly Gen1 API docs, /relay/{index});
the owner's app sets one mid-attempt here, so the plug switches the host off by itself. The
runner must read the plug before acting on the silence: one ``power_loss`` record (never a
wedge), no "off" from the controller (the outlet is switched on, never cycled), and the
campaign goes on.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

FLIP_BACK_S = 2
# The fake vLLM's pace: an engine start takes ~73 s x this, ~10 s of it after torch.compile is
# entered, so the plug's 2 s timer still lands mid-attempt with ~8 s to spare (0.5, as before,
# made each of the three attempts ~36 s; what is pinned is the order of events, not the pace).
TIME_SCALE = 0.2


def test_a_plug_timer_that_switches_the_host_off_mid_attempt_is_one_power_loss_switched_on_never_cycled(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("plugtimer", script=("clean",) * 3, boot_delay_s=0.5, time_scale=TIME_SCALE)])
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp_path / "plug", "shelly1", {"0": host.paths.power}).start()
    timer_set = threading.Event()

    def the_owners_app_sets_a_timer(name: str, **fields: Any) -> None:
        if fields.get("phase") == "torch_compile" and not timer_set.is_set():
            timer_set.set()
            with urllib.request.urlopen(f"{plug.address}/relay/0?turn=on&timer={FLIP_BACK_S}", timeout=5) as reply:
                assert reply.status == 200

    try:
        inventory = sim_inventory(fleet, pdu={host.name: plug.pdu_block("0")})
        book = write_playbook(tmp_path / "book", attempts=3, attempt_timeout=60)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory,
                              progress=the_owners_app_sets_a_timer)
        served = plug.requests_served()
    finally:
        plug.stop()
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert timer_set.is_set()
    assert [r["outcome"] for r in records] == ["power_loss", "clean", "clean"]
    assert "read off before this controller switched anything" in records[0]["reason"]
    events = list(read_log_lines(result.directory.events))
    assert [e for e in events if e["event"] == "power_lost"] and not [e for e in events if e["event"] == "wedge"]
    assert not [r for r in served if "turn=off" in r]  # the controller never switched it off
    actions = [line for line in read_log_lines(result.directory.power) if line.get("action") in ("off", "cycle")]
    assert actions == [] and not result.quarantined
