"""The by-hand tasks: `power` (asks first) and `policy --restore`, against the simulated fleet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.cli_process import reprofleet

pytestmark = pytest.mark.fleet


def test_power_asks_before_switching_and_switches_with_yes(sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("pwr", boot_delay_s=0.3)])
    host = fleet.hosts[0]
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}) as plug:
        inventory = str(sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")}))
        status = reprofleet("power", "pwr", "status", "--hosts", inventory, cwd=tmp_path)
        assert status.returncode == 0 and "pwr: on" in status.stdout.lower()
        unconfirmed = reprofleet("power", "pwr", "off", "--hosts", inventory, cwd=tmp_path)
        # no terminal to ask on and no --yes: nothing switched, and a script sees it failed
        assert unconfirmed.returncode == 2 and "pass --yes" in unconfirmed.stderr
        assert host.power == "on"
        first_boot = host.boot_id
        cycled = reprofleet("power", "pwr", "cycle", "--hosts", inventory, "--yes", "--dwell", "0.5", cwd=tmp_path)
        assert cycled.returncode == 0, cycled.stderr
    host.wait_ssh(timeout_s=20)
    assert host.boot_id != first_boot
    assert (tmp_path / "reports" / "manual-power.jsonl").read_text().count('"action": "cycle"') == 1


def test_policy_restore_puts_a_locked_gpu_back_to_its_defaults(sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("rst-pol")])
    host = fleet.hosts[0]
    locked = host.ssh("nvidia-smi -lgc 180,2800 && nvidia-smi -pl 400")
    assert host.gpu_state()["locked_graphics"] and host.gpu_state()["power_limit_w"] == 400.0, locked
    result = reprofleet("policy", "--hosts", str(fleet.inventory_path), "--restore", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    state = host.gpu_state()
    assert state["locked_graphics"] is None and state["power_limit_w"] == 600.0


def test_facts_prints_every_host_and_caches_them_for_preflight(sim_fleet: Any, tmp_path: Path) -> None:
    import json

    fleet = sim_fleet([SimHostSpec("fct-a"), SimHostSpec("fct-b")])
    result = reprofleet("facts", "--hosts", str(fleet.inventory_path), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted(line["host"] for line in lines) == ["fct-a", "fct-b"]
    assert all(line["gpus"][0]["power_limit_w"]["max"] == 600.0 for line in lines)
    assert (tmp_path / "reports" / ".facts" / "fct-a.json").exists()


def test_a_host_a_live_campaign_holds_is_not_switched_or_restored_by_hand_unless_told(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    import json
    import time

    fleet = sim_fleet([SimHostSpec("held", boot_delay_s=0.3)])
    host = fleet.hosts[0]
    state = host.paths.fs("root") / ".cache" / "reprofleet"
    state.mkdir(parents=True, exist_ok=True)
    (state / "lease.json").write_text(json.dumps({  # as collectors/host_lease.acquire writes it
        "controller": "night-laptop", "campaign": "night-7", "pid": 4242, "taken": time.time(),
        "renewed": time.time(), "ttl_s": 3600.0, "token": "the-campaigns", "boot_id": host.boot_id}))
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}) as plug:
        inventory = str(sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")}))
        refused = reprofleet("power", "held", "off", "--hosts", inventory, "--yes", cwd=tmp_path)
        assert refused.returncode == 1 and "campaign night-7 of night-laptop holds this host" in refused.stderr
        assert host.power == "on"
        restore = reprofleet("policy", "--hosts", inventory, "--restore", cwd=tmp_path)
        assert restore.returncode == 3 and "--ignore-lease" in restore.stdout + restore.stderr
        forced = reprofleet("policy", "--hosts", inventory, "--restore", "--ignore-lease", cwd=tmp_path)
        assert forced.returncode == 0, forced.stdout + forced.stderr


def test_a_campaign_on_a_host_without_nvidia_smi_runs_nothing_there_and_exits_non_zero_naming_it(
        sim_fleet: Any, tmp_path: Path) -> None:
    import json
    import os

    from tests.support.fleet_campaign import write_playbook

    fleet = sim_fleet([SimHostSpec("no-smi"), SimHostSpec("has-smi")])
    (fleet.hosts[0].paths.fs("bin") / "nvidia-smi").unlink()  # a host with the driver's utilities missing
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30)
    env = {**os.environ, "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports"),
           "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path), "INVOKE_REPROFLEET_SAMPLE_HZ": "5"}
    front_door = [sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(fleet.inventory_path),
                  "--playbook", str(book)]
    checked = subprocess.run([*front_door, "--dry-run", "--check-hosts"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert "no-smi: cannot run: nvidia-smi not found on PATH" in checked.stdout and "has-smi: ready" in checked.stdout
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*/attempts.jsonl"))
    done = subprocess.run(front_door, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no-smi: quarantined: cannot run here: nvidia-smi not found on PATH" in done.stderr
    (attempts,) = (tmp_path / "reports").glob("*/attempts.jsonl")
    records = [json.loads(line) for line in attempts.read_text().splitlines()]
    assert {r["outcome"] for r in records if r["host"] == "has-smi"} == {"clean"}
    assert all(r["reason"].startswith("not run") for r in records if r["host"] == "no-smi")
