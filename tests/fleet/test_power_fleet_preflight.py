"""Power problems are found before anything runs, and a by-hand ``invoke power`` never cuts
into a campaign's cycle: the front door on the simulated fleet, with real plugs.

Each test pins a bullet of the power-trust issue that failed on the old main: drivers built
only at the first wedge (an unset credential ended a host's thread with no record), two
hosts on one outlet accepted, and a manual ``power on`` switching a host on in the middle
of a campaign's dwell.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.power.switch import write_switch
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet


def front_door(*args: str, cwd: Path, env: dict[str, str] | None = None,
               timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def attempts_written(reports: Path) -> list[Path]:
    return sorted(reports.rglob("attempts.jsonl")) if reports.exists() else []


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_an_unset_credential_stops_the_campaign_before_any_host_is_contacted(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("pf-ok", script=("wedge",)), SimHostSpec("pf-cred", script=("wedge",))])
    ok, cred = fleet.hosts
    boots = {ok.name: ok.boot_id, cred.name: cred.boot_id}
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": ok.paths.power, "2": cred.paths.power},
                        password="pf-Pw-1") as plug:
        inventory = sim_inventory(fleet, pdu={ok.name: plug.pdu_block("1", "env:RF_PF_SET"),
                                              cred.name: plug.pdu_block("2", "env:RF_PF_NEVER_SET")})
        book = write_playbook(tmp_path / "book", attempts=1)
        result = front_door("campaign", "--hosts", str(inventory), "--playbook", str(book), "--accept-new-host-keys",
                            cwd=tmp_path, env={"RF_PF_SET": "pf-Pw-1"})
        dry = front_door("campaign", "--hosts", str(inventory), "--playbook", str(book), "--dry-run",
                         cwd=tmp_path, env={"RF_PF_SET": "pf-Pw-1"})
        requests_seen = plug.requests_served()
    expected = (f"{inventory}:{line_of(inventory, 'RF_PF_NEVER_SET')}:pdu.credentials: pf-cred: credential env:RF_PF_NEVER_SET: "
                "environment variable RF_PF_NEVER_SET is not set")
    for run in (result, dry):
        assert run.returncode != 0
        problem_lines = [line.strip() for line in run.stderr.splitlines() if "RF_PF_NEVER_SET" in line]
        assert problem_lines == [expected], run.stderr
        assert "pf-ok" not in run.stderr
    assert attempts_written(tmp_path / "reports") == []  # nothing ran
    assert {ok.name: ok.boot_id, cred.name: cred.boot_id} == boots and ok.power == cred.power == "on"
    assert requests_seen == []  # not even a state read reached the plug


def test_two_hosts_on_one_outlet_are_refused_before_anything_runs_unless_both_say_shared(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("dup-a", script=("wedge",)), SimHostSpec("dup-b", script=("wedge",))])
    a, b = fleet.hosts
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": a.paths.power, "2": b.paths.power}) as plug:
        book = write_playbook(tmp_path / "book", attempts=1)
        same = sim_inventory(fleet, pdu={a.name: plug.pdu_block("1"), b.name: plug.pdu_block("1")})
        refused = front_door("campaign", "--hosts", str(same), "--playbook", str(book), "--accept-new-host-keys",
                             cwd=tmp_path)
        shared_block = {**plug.pdu_block("1"), "shared": True}
        shared = sim_inventory(fleet, pdu={a.name: shared_block, b.name: shared_block})
        accepted = front_door("campaign", "--hosts", str(shared), "--playbook", str(book), "--dry-run", cwd=tmp_path)
    assert refused.returncode != 0
    problem = [line for line in refused.stderr.splitlines() if "outlet" in line]
    assert len(problem) == 1 and "dup-a" in problem[0] and "dup-b" in problem[0], refused.stderr
    assert str(same) in problem[0] and "shared" in problem[0]
    assert attempts_written(tmp_path / "reports") == []
    assert a.power == b.power == "on"
    assert accepted.returncode == 0, accepted.stderr


def test_an_outlet_found_off_at_campaign_start_is_reported_and_switched_on_with_bring_up(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("pf-off", script=("clean",), boot_delay_s=0.3, time_scale=0.01)])
    host = fleet.hosts[0]
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}) as plug:
        inventory = sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")})
        write_switch(host.paths.power, False)
        deadline = time.monotonic() + 10
        while host.ssh_banner(timeout_s=0.5) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        # a fresh campaign never saw this host answer: only the user's --bring-up lets it switch it (issue 18),
        # and only after its boot deadline (another campaign may be cycling it: issue 32 item 8), kept short here
        book = write_playbook(tmp_path / "book", attempts=1, boot=5)
        run = front_door("campaign", "--hosts", str(inventory), "--playbook", str(book), "--accept-new-host-keys",
                         "--bring-up", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "pf-off: its outlet reads off; it is switched on before its first attempt" in run.stdout
    [log] = attempts_written(tmp_path / "reports")
    assert [r["outcome"] for r in read_records(log)] == ["clean"]


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_manual_power_on_waits_for_the_campaign_cycle_it_would_cut_into(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("lk-host", script=("wedge", "clean"), boot_delay_s=0.3, time_scale=0.01)])
    host = fleet.hosts[0]
    reports = tmp_path / "reports"
    dwell_s = 4.0
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}) as plug:
        inventory = sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")})
        plan = make_plan(load_playbook(write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30)),
                         load_inventory(inventory).hosts)
        outcome: dict[str, Any] = {}
        campaign = threading.Thread(target=lambda: outcome.setdefault("result", run_campaign(
            plan, settings_for(fleet, dwell_s=dwell_s), reports, recovery_factory=recovery_factory)))
        campaign.start()
        deadline = time.monotonic() + 60
        while host.power != "off" and time.monotonic() < deadline and campaign.is_alive():
            time.sleep(0.02)
        assert host.power == "off", "the campaign never switched the wedged host off"
        off_seen = time.time()
        # --ignore-lease: what is pinned is the outlet's lock, not the lease (a loaded machine can take
        # longer than the dwell to start this process, and the booted host's lease would refuse it first)
        manual = front_door("power", host.name, "on", "--yes", "--ignore-lease", "--hosts", str(inventory),
                            cwd=tmp_path)
        campaign.join(timeout=120)
    assert not campaign.is_alive() and manual.returncode == 0, manual.stderr
    result = outcome["result"]
    power = [json.loads(line) for line in result.directory.power.read_text().splitlines()]
    cycle = next(p for p in power if p["action"] == "cycle")
    cycle_end = _stamp(cycle["time"]) + cycle["duration_s"]
    manual_on = next(json.loads(line) for line in (reports / "manual-power.jsonl").read_text().splitlines()
                     if json.loads(line)["action"] == "on")
    assert _stamp(manual_on["time"]) >= cycle_end - 0.05, (cycle, manual_on)  # it waited for the whole cycle
    assert _stamp(manual_on["time"]) - off_seen >= dwell_s - 1.0  # ...which the dwell made long
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
