"""Sure before acting: no false wedges under loss and stalls, nothing cycled when the
controller's own network fails, and a broken PDU quarantines its host in bounded time."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records import read_records, read_stream
from reprofleet.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from test_fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet


def _campaign(fleet: Any, inventory: Path, book: Path, reports: Path, **kwargs: Any):
    plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
    return run_campaign(plan, settings_for(fleet), reports, recovery_factory=recovery_factory, **kwargs)


def _events(result: Any) -> list[dict]:
    path = result.directory.events
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _switching_actions(result: Any) -> list[dict]:
    """Power actions that switch something (status reads, e.g. by the network witness, do not)."""
    path = result.directory.power
    entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in entries if e["action"] in ("on", "off", "cycle")]


def _plugged(fleet: Any, sim_inventory: Any, workdir: Path, outlet_for: dict[str, str] | None = None) -> tuple[Any, Path]:
    plug = HttpPlugServer(workdir, "tasmota", {str(i + 1): h.paths.power for i, h in enumerate(fleet.hosts)}).start()
    blocks = {h.name: plug.pdu_block((outlet_for or {}).get(h.name, str(i + 1))) for i, h in enumerate(fleet.hosts)}
    return plug, sim_inventory(fleet, pdu=blocks)


def test_loss_and_stalls_make_no_false_wedge_and_no_power_action(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("lossy", script=("clean",) * 4, time_scale=0.08)])
    host = fleet.hosts[0]
    plug, inventory = _plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=4, attempt_timeout=40)
    done = threading.Event()
    stalls: list[float] = []

    def harass() -> None:
        rng = random.Random(7)
        while not done.wait(rng.uniform(1.0, 3.0)):
            seconds = rng.uniform(0.5, 2.5)
            stalls.append(seconds)
            host.stall(seconds)

    host.set_packet_loss(10)
    stalling = threading.Thread(target=harass, daemon=True)
    stalling.start()
    try:
        result = _campaign(fleet, inventory, book, tmp_path / "reports")
    finally:
        done.set()
        stalling.join(10)
        host.set_packet_loss(0)
        plug.stop()
    assert len(stalls) >= 3
    assert [r["outcome"] for r in result.records] == ["clean"] * 4
    assert _switching_actions(result) == []
    assert not [e for e in _events(result) if e["event"] in ("wedge", "recovery")]


def test_cutting_every_link_at_the_controller_cycles_nothing(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("cut-a", script=("clean",), time_scale=0.25),
                       SimHostSpec("cut-b", script=("clean",), time_scale=0.25)])
    plug, inventory = _plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=90)
    cut = threading.Event()

    def cut_once(host: str, **fields: Any) -> None:
        if fields.get("phase") == "torch_compile" and not cut.is_set():
            cut.set()
            threading.Thread(target=outage, daemon=True).start()

    def outage() -> None:
        fleet.cut_controller_network()
        time.sleep(12.0)  # longer than silence + confirm
        fleet.restore_controller_network()

    try:
        result = _campaign(fleet, inventory, book, tmp_path / "reports", progress=cut_once)
    finally:
        fleet.restore_controller_network()
        plug.stop()
    assert cut.is_set()
    assert sorted(r["outcome"] for r in result.records) == ["clean", "clean"]
    assert _switching_actions(result) == []
    events = _events(result)
    assert any(e["event"] == "controller_network_suspect" for e in events)
    assert not [e for e in events if e["event"] == "wedge"]
    for record in result.records:
        stream = read_stream(result.directory.root / record["stream"])
        seqs = [line["seq"] for line in stream if line["k"] != "hb"]
        assert seqs == list(range(len(seqs)))


@pytest.mark.parametrize("fault", ["wrong-outlet", "dead-pdu"])
def test_a_broken_pdu_quarantines_its_host_in_bounded_time(
        fault: str, sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("brk", script=("wedge", "clean", "clean"))])
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}).start()
    block = plug.pdu_block("9" if fault == "wrong-outlet" else "1")
    if fault == "dead-pdu":
        plug.stop()
    inventory = sim_inventory(fleet, pdu={host.name: {**block, "timeout_s": 1, "tries": 2}})
    book = write_playbook(tmp_path / "book", attempts=3, attempt_timeout=30)
    started = time.monotonic()
    try:
        result = _campaign(fleet, inventory, book, tmp_path / "reports")
    finally:
        plug.stop()
        host.power_cycle()
    assert time.monotonic() - started < 90
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "infra", "infra"]
    assert "recovery failed" in records[1]["reason"]
    quarantine = [e for e in _events(result) if e["event"] == "recovery" and e["to"] == "quarantined"]
    assert quarantine and ("outlet" in quarantine[0]["reason"].lower() or fault == "dead-pdu")


def test_a_host_without_a_power_port_waits_for_a_person(sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("manual", script=("wedge", "clean"), boot_delay_s=0.3)])
    host = fleet.hosts[0]
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30)
    rescued = threading.Event()

    def person() -> None:  # notices the frozen machine a while later and power-cycles it by hand
        deadline = time.monotonic() + 60
        while not host.is_frozen and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(12.0)  # after the controller declared the wedge and started waiting
        host.power_cycle()
        rescued.set()

    threading.Thread(target=person, daemon=True).start()
    result = _campaign(fleet, fleet.inventory_path, book, tmp_path / "reports")
    assert rescued.is_set()
    records = sorted(read_records(result.directory.attempts), key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
    assert any(e["event"] == "needs_person" for e in _events(result))
