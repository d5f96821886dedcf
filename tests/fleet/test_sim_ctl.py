"""sim.up / sim.status / sim.down: a fleet that outlives the command that started it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from reprofleet.inventory import load_inventory
from reprofleet.sim import SimError, simctl
from reprofleet.sim.layout import DEFAULT_BASE

pytestmark = pytest.mark.fleet


def in_new_process(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", "from pathlib import Path; import json\n"
                             "from reprofleet.sim import simctl\n" + code],
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


def test_a_fleet_started_by_one_process_is_seen_and_stopped_by_others(sim_ready: None) -> None:
    DEFAULT_BASE.mkdir(parents=True, exist_ok=True)
    sim_dir = Path(tempfile.mkdtemp(prefix="simctl-test-", dir=DEFAULT_BASE))
    fleet = None
    try:
        in_new_process(f"simctl.up(2, None, Path({str(sim_dir)!r}))")
        fleet = simctl.current(sim_dir)
        assert fleet is not None
        with pytest.raises(SimError, match="already up"):
            simctl.up(2, None, sim_dir)
        rows = json.loads(in_new_process(f"print(json.dumps(simctl.status(Path({str(sim_dir)!r}))))"))
        assert [(r["name"], r["power"], r["frozen"]) for r in rows] == [("sim0", "on", False), ("sim1", "on", False)]
        assert fleet.hosts[1].ssh("hostname").stdout.strip() == "sim1"
        port = load_inventory(fleet.inventory_path).hosts[1].pdu
        assert port is not None and (port.driver, port.outlet) == ("tasmota", "2")
        with urllib.request.urlopen(f"{port.address}/cm?cmnd=Power2%20Off", timeout=5) as reply:
            assert json.loads(reply.read()) == {"POWER2": "OFF"}
        deadline = time.monotonic() + 5
        while fleet.hosts[1].power != "off" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fleet.hosts[1].power == "off" and fleet.hosts[0].power == "on"
        in_new_process(f"simctl.down(Path({str(sim_dir)!r}))")
        assert simctl.current(sim_dir) is None
        with pytest.raises(OSError):  # the plug simulator was stopped with the fleet
            urllib.request.urlopen(f"{port.address}/cm?cmnd=Power2", timeout=2)
        assert fleet.leftovers() == {"netns": [], "links": [], "cgroups": [], "processes": []}
    finally:
        try:
            simctl.down(sim_dir)
        finally:
            # a fleet sim.up started outlives its caller and the stale sweep keeps it while its daemon
            # lives: if sim.down could not stop it (its files unreadable), stop it from the manifest
            # this process read, before its folder goes (a run left two namespaces up that way)
            if fleet is not None and any(fleet.leftovers().values()):
                fleet.down()
            shutil.rmtree(sim_dir, ignore_errors=True)
