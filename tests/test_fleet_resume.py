"""What a campaign finds on its hosts when it (re)starts: a lock a killed controller left, a
host left switched off, a lease another campaign holds, an attempt still running on the GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from reprofleet.remote.transport import TransportSettings, connect
from test_fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet


def _agent(fleet: Any) -> AgentClient:
    host = load_inventory(fleet.inventory_path).hosts[0]
    session = connect(host, TransportSettings(known_hosts=Path(fleet.known_hosts_path)))
    agent = AgentClient(session, load_bundle(), host.python)
    agent.push()
    return agent


def _events(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.directory.events.read_text().splitlines()]


def _run(fleet: Any, inventory: Path, book: Path, reports: Path, **overrides: Any) -> Any:
    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    return run_campaign(plan, settings_for(fleet, **overrides), reports, recovery_factory=recovery_factory)


def test_a_clock_lock_left_behind_is_reset_and_read_back_before_the_reference_runs(sim_fleet: Any,
                                                                                  tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("lock-left", script=("clean",), time_scale=0.05)])
    agent = _agent(fleet)
    agent.policy("apply", 0, {"graphics_clocks": [180, 2800]})  # what a killed controller leaves behind
    agent.session.close()
    assert fleet.hosts[0].gpu_state()["locked_graphics"]
    result = _run(fleet, fleet.inventory_path, write_playbook(tmp_path / "book", attempts=1), tmp_path / "reports")
    (record,) = list(read_records(result.directory.attempts))
    assert record["outcome"] == "clean"
    assert record["policy"]["graphics_clocks"] != [180, 2800]  # the reference ran at the card's defaults
    applied = [e for e in _events(result) if e["event"] == "policy_applied"]
    assert applied and applied[0]["policy"] == {}  # the default cell's policy, applied and read back


def test_a_lease_held_by_another_campaign_keeps_the_host_until_break_lease(sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("leased", script=("clean",) * 4, time_scale=0.05)])
    agent = _agent(fleet)
    taken = agent.lease("acquire", controller="other-laptop", campaign="night-7", pid=4242)
    agent.session.close()
    assert taken.ok
    book = write_playbook(tmp_path / "book", attempts=1)
    refused = _run(fleet, fleet.inventory_path, book, tmp_path / "reports")
    (record,) = list(read_records(refused.directory.attempts))
    assert record["outcome"] == "infra" and "leased to other-laptop (campaign night-7" in record["reason"]
    assert fleet.hosts[0].gpu_state()["load"] is None  # nothing ran on that GPU
    taken_over = _run(fleet, fleet.inventory_path, book, tmp_path / "reports2", break_leases=True)
    (record,) = list(read_records(taken_over.directory.attempts))
    assert record["outcome"] == "clean"
    broken = [e for e in _events(taken_over) if e["event"] == "lease_broken"]
    assert broken and broken[0]["previous"]["campaign"] == "night-7"
    agent = _agent(fleet)
    assert agent.lease("show").lease is None  # given back at the end
    agent.session.close()


def test_an_attempt_still_running_on_the_gpu_is_killed_before_the_first_attempt(sim_fleet: Any,
                                                                             tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("orphaned", script=("clean",) * 4, time_scale=0.05)])
    agent = _agent(fleet)
    stream = agent.run("orphan-1", ["sleep", "120"], timeout=300)
    stream.close()  # its controller is gone; the attempt goes on
    assert [a.id for a in agent.attempts(running_only=True)] == ["orphan-1"]
    agent.session.close()
    result = _run(fleet, fleet.inventory_path, write_playbook(tmp_path / "book", attempts=1), tmp_path / "reports")
    (record,) = list(read_records(result.directory.attempts))
    assert record["outcome"] == "clean"
    killed = [e for e in _events(result) if e["event"] == "orphan_killed"]
    assert [e["attempt"] for e in killed] == ["orphan-1"] and killed[0]["ours"] is False
    agent = _agent(fleet)
    assert agent.attempts(running_only=True) == ()
    agent.session.close()


def test_a_host_left_switched_off_is_switched_on_and_the_campaign_runs(sim_fleet: Any, sim_inventory: Any,
                                                                     tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("left-off", script=("clean",) * 4, time_scale=0.05, boot_delay_s=0.5)])
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}).start()
    try:
        inventory = sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")})
        host.power_off()  # a controller died with the outlet off
        result = _run(fleet, inventory, write_playbook(tmp_path / "book", attempts=1), tmp_path / "reports")
    finally:
        plug.stop()
    (record,) = list(read_records(result.directory.attempts))
    assert record["outcome"] == "clean"
    events = _events(result)
    assert any(e["event"] == "unreachable_at_start" for e in events)
    (switched,) = [e for e in events if e["event"] == "switched_on_at_start"]
    assert len(switched["outlets"]) == 1 and not any(e["event"] == "recovery" for e in events)  # not cycled
    assert host.power == "on"


def test_a_full_disk_on_the_controller_stops_the_campaign_cleanly(sim_fleet: Any, tmp_path: Path) -> None:
    import subprocess

    fleet = sim_fleet([SimHostSpec("disk-full", script=("clean",) * 8, time_scale=0.05)])
    reports = tmp_path / "reports"
    reports.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(reports)], check=True)
    try:
        book = write_playbook(tmp_path / "book", attempts=8,
                              cells="  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n")
        result = _run(fleet, fleet.inventory_path, book, reports)
        assert result.failure and "No space left on device" in result.failure
        for name in ("attempts.jsonl", "events.jsonl"):
            text = (result.directory.root / name).read_text()
            assert all(json.loads(line) for line in text.splitlines())  # no torn line
        assert len(list(read_records(result.directory.attempts))) < 8  # it stopped early
    finally:
        subprocess.run(["umount", "-l", str(reports)], check=False)
    state = fleet.hosts[0].gpu_state()
    assert state["locked_graphics"] is None  # the GPU was put back to its defaults
