"""Liveness paths on the simulated fleet that judge no latency, so they run two at a time
beside other fleet tests (the latency, stall and starvation tests stay alone:
tests/fleet/test_fleet_liveness.py): the controller's own network cut with one host (the guard alone
holds it), a kernel that answers while userspace never does (a ``userspace`` wedge), a stalled
suspect that then freezes (a wedge, not userspace), a host without a power port that comes back
with the same boot (never frozen: infra, a person needed).

Each asserts the suspect/probe/clear events its behaviour depends on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from tests.support.fleet_campaign import write_playbook
from tests.support.fleet_liveness import (
    campaign_events,
    live_events,
    liveness_events,
    plugged,
    probe_answers,
    run_fleet_campaign,
    switching_actions,
    until,
)

from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.records.store import read_stream
from reprofleet.sim.spec import SimHostSpec

pytestmark = pytest.mark.fleet


def _once_at_phase(phase: str, action: Any) -> Any:
    """A progress callback that starts ``action`` in a thread the first time a host reports
    ``phase`` (the attempt is under way: evidence, not a guessed sleep)."""
    started = threading.Event()

    def progress(host: str, **fields: Any) -> None:
        if fields.get("phase") == phase and not started.is_set():
            started.set()
            threading.Thread(target=action, daemon=True).start()

    return progress


def test_cutting_every_link_at_the_controller_cycles_nothing(sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    """One host: the guard alone must hold it (no other host's silence to correlate with).
    Several hosts silent at once with the guard up: tests/fleet/test_fleet_power_safety.py."""
    hosts = 1
    fleet = sim_fleet([SimHostSpec(f"cut-{c}", script=("clean",), time_scale=0.25) for c in "ab"[:hosts]])
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=90)
    cut = threading.Event()

    def cut_once(host: str, **fields: Any) -> None:
        if fields.get("phase") == "torch_compile" and not cut.is_set():
            cut.set()
            threading.Thread(target=outage, daemon=True).start()

    def every_host_dead_and_the_guard_down() -> bool:
        seen = live_events(tmp_path / "reports")
        dead = {e["host"] for e in seen if e["event"] == "probe" and e.get("answer") == "DEAD"}
        down = {e["host"] for e in seen if e["event"] == "guard" and e.get("network") == "down"}
        return all(h.name in dead and h.name in down for h in fleet.hosts)

    def outage() -> None:
        fleet.cut_controller_network()
        until(every_host_dead_and_the_guard_down, 30.0)  # the assertions below say if it never came
        fleet.restore_controller_network()

    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=cut_once)
    finally:
        fleet.restore_controller_network()
        plug.stop()
    assert cut.is_set()
    assert sorted(r["outcome"] for r in result.records) == ["clean"] * hosts
    assert switching_actions(result) == []
    events = campaign_events(result)
    assert any(e["event"] == "controller_network_suspect" for e in events)
    for host in fleet.hosts:  # each went DEAD, the guard saw no carrier, then the stream came back
        liveness = liveness_events(result, host.name)
        assert "DEAD" in probe_answers(result, host.name)
        assert [e["network"] for e in liveness if e["event"] == "guard"][:1] == ["down"]
        assert liveness[-1]["event"] == "clear"
    assert not [e for e in events if e["event"] == "wedge"]
    for record in result.records:
        stream = read_stream(result.directory.root / record["stream"])
        # the host's own lines, each once and in order (the controller's wall-power lines have no seq)
        seqs = [line["seq"] for line in stream if line["k"] not in ("hb", "wall")]
        assert seqs == list(range(len(seqs)))


def test_a_kernel_that_answers_while_userspace_never_does_is_a_userspace_wedge(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("usr", script=("hang", "clean"), time_scale=0.05, boot_delay_s=0.3)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
    progress = _once_at_phase("torch_compile", lambda: host.stall(300.0))
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=progress,
                           settings={"watchdog": WatchdogSettings(userspace_s=8.0)})
    finally:
        plug.stop()
    records = sorted(result.records, key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
    assert records[0]["reason"].startswith("userspace:")
    assert set(probe_answers(result, host.name)) == {"KERNEL"}
    events = campaign_events(result)
    states = [(e["to"], e["t"]) for e in events if e["event"] == "recovery"]
    assert [s for s, _ in states][:3] == ["off", "dwell", "on"]
    assert states[2][1] > states[0][1]  # logged as they happened, not together after the cycle
    booted = next(e for e in events if e["event"] == "recovery" and e["to"] == "booted")
    assert booted["boots_since"] == 1 and booted["reset_itself_too"] is False  # only our cycle


def test_a_stalled_suspect_that_then_freezes_is_a_wedge(sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("sticky", script=("hang", "clean"), time_scale=0.05, boot_delay_s=0.3)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)

    def kernel_answered() -> bool:
        return any(e["event"] == "probe" and e.get("answer") == "KERNEL" and e["host"] == host.name
                   for e in live_events(tmp_path / "reports"))

    def stall_then_freeze() -> None:
        host.stall(30.0)
        until(kernel_answered, 30.0)  # a suspect whose kernel answers (the assertions say if it never did)
        host.freeze()

    progress = _once_at_phase("torch_compile", stall_then_freeze)
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=progress)
    finally:
        plug.stop()
    records = sorted(result.records, key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
    assert not records[0]["reason"].startswith("userspace")
    answers = probe_answers(result, host.name)
    assert answers[:2] == ["KERNEL", "DEAD"]


def test_a_host_without_a_port_that_comes_back_with_the_same_boot_was_never_frozen(
        sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("same", script=("hang", "clean"), time_scale=0.05)])
    host = fleet.hosts[0]
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=40)
    boot = host.boot_id
    progress = _once_at_phase("torch_compile", lambda: host.stall(14.0))
    result = run_fleet_campaign(fleet, fleet.inventory_path, book, tmp_path / "reports", progress=progress,
                       settings={"watchdog": WatchdogSettings(userspace_s=5.0)})
    records = sorted(result.records, key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["infra", "clean"]
    assert "same boot_id" in records[0]["reason"] and host.boot_id == boot
    assert set(probe_answers(result, host.name)) == {"KERNEL"}
    assert any(e["event"] == "needs_person" for e in campaign_events(result))
