"""Sure before acting, quick when sure, judged against the wall clock (so nothing runs beside
these): no false wedges under loss, SIGSTOP stalls and a starved CPU; a frozen host declared
within seconds; hosts frozen together declared once the correlated hold is outlasted. (The
paths that judge no latency: tests/fleet/test_fleet_liveness_paths.py. A broken PDU and a host with
no power port are runner decisions: tests/seam/test_seam_recovery.py plays them at the host seam in
virtual time.)

Each test asserts the suspect/probe/clear events its behaviour depends on: a stall that never
made the host a suspect would prove nothing."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.fleet_campaign import write_playbook
from tests.support.fleet_liveness import (campaign_events, liveness_events, plugged, probe_answers, run_fleet_campaign,
                            switching_actions, until)

from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.sim.spec import SimHostSpec

pytestmark = [pytest.mark.fleet, pytest.mark.alone]  # timing is judged: nothing may run beside it


def _once_running(action: Any) -> Any:
    """A progress callback that starts ``action`` in a thread when the first attempt has a phase."""
    started = threading.Event()

    def progress(host: str, **fields: Any) -> None:
        if fields.get("phase") and not started.is_set():
            started.set()
            threading.Thread(target=action, daemon=True).start()

    progress.started = started  # type: ignore[attr-defined]
    return progress


def test_loss_and_stalls_make_no_false_wedge_and_no_power_action(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("lossy", script=("clean",) * 2, time_scale=0.08)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=40)
    done = threading.Event()
    stalls: list[float] = []

    def harass() -> None:
        rng = random.Random(7)
        while not done.wait(rng.uniform(1.0, 3.0)):
            seconds = rng.uniform(0.5, 2.5)
            stalls.append(seconds)
            host.stall(seconds)

    host.set_packet_loss(10, both_ways=True)
    stalling = threading.Thread(target=harass, daemon=True)
    stalling.start()
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports")
    finally:
        done.set()
        stalling.join(10)
        host.set_packet_loss(0)
        plug.stop()
    assert len(stalls) >= 3
    assert [r["outcome"] for r in result.records] == ["clean"] * 2
    assert switching_actions(result) == []
    assert not [e for e in campaign_events(result) if e["event"] in ("wedge", "recovery")]
    kinds = [e["event"] for e in liveness_events(result, host.name)]
    assert "suspect" in kinds and "clear" in kinds  # stalls over a second made suspects, all cleared


def test_sigstop_of_sshd_and_the_agent_for_3_6_and_10_s_makes_suspects_the_kernel_clears(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("stop", script=("hang",), time_scale=0.05)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=33)  # the last stall ends ~29 s in
    stalls: list[float] = []

    def stall_three_times() -> None:
        for seconds in (3.0, 6.0, 10.0):
            time.sleep(3.0)
            host.stall(seconds)
            stalls.append(seconds)
            time.sleep(seconds)

    progress = _once_running(stall_three_times)
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=progress)
    finally:
        plug.stop()
    assert stalls == [3.0, 6.0, 10.0]
    assert [r["outcome"] for r in result.records] == ["hang"]  # the PoC's own timeout, never a wedge
    assert switching_actions(result) == []
    kinds = [e["event"] for e in liveness_events(result, host.name)]
    assert kinds.count("suspect") == 3 and kinds.count("clear") == 3
    assert "KERNEL" in probe_answers(result, host.name) and "DEAD" not in probe_answers(result, host.name)
    longest = max(e["suspect_s"] for e in liveness_events(result, host.name) if e["event"] == "clear")
    assert longest > 7.0  # the 10 s stall was judged (a suspect for longer than the silence threshold)


def test_a_cpu_starved_host_is_slow_not_wedged(sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("slow", script=("hang",), time_scale=0.05)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=24)

    throttled: list[int] = []

    def starve() -> None:
        time.sleep(2.0)
        host.starve_cpu(5)
        try:  # starved until the quota has bitten for 12 s of 100 ms periods: three times what declaring a freeze takes
            until(lambda: host.cpu.throttled() > 120, 30.0)
            throttled.append(host.cpu.throttled())
        finally:
            host.starve_cpu(None)

    progress = _once_running(starve)
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=progress)
    finally:
        host.starve_cpu(None)
        plug.stop()
    assert throttled and throttled[0] > 100  # the quota really bit (periods of 100 ms over 16 s)
    assert [r["outcome"] for r in result.records] == ["hang"]
    assert switching_actions(result) == []
    assert not [e for e in campaign_events(result) if e["event"] in ("wedge", "recovery")]
    assert "DEAD" not in probe_answers(result, host.name)  # if it was ever a suspect, its kernel answered


def test_a_frozen_host_is_declared_within_four_seconds_of_the_freeze(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("fast", script=("hang", "clean"), time_scale=0.05, boot_delay_s=0.3)])
    host = fleet.hosts[0]
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
    frozen_at: list[float] = []
    progress = _once_running(lambda: (time.sleep(2.0), host.freeze(), frozen_at.append(time.time())))
    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=progress)
    finally:
        plug.stop()
    records = sorted(result.records, key=lambda r: r["attempt_index"])
    assert [r["outcome"] for r in records] == ["wedge", "clean"]
    from datetime import datetime

    declared = datetime.fromisoformat(records[0]["wedge_declared"].replace("Z", "+00:00")).timestamp()
    assert 0 < declared - frozen_at[0] < 4.0
    kinds = [e["event"] for e in liveness_events(result, host.name)]
    assert kinds[:2] == ["suspect", "probe"] and probe_answers(result, host.name)[0] == "DEAD"


HOLD_S = 10.0  # correlated_hold_s for the hosts frozen together (300 s by default)


def test_three_hosts_frozen_together_are_declared_and_cycled_once_the_hold_is_outlasted(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec(f"tog-{c}", script=("hang", "clean"), time_scale=0.05, boot_delay_s=0.3)
                       for c in "abc"])
    plug, inventory = plugged(fleet, sim_inventory, tmp_path / "plug")
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
    frozen_at: list[float] = []

    running: set[str] = set()

    def freeze_once_every_host_runs(host: str, **fields: Any) -> None:
        """Freeze them all at once, when each has reached torch.compile (evidence, not a sleep)."""
        if fields.get("phase") == "torch_compile":
            running.add(host)
        if len(running) == len(fleet.hosts) and not frozen_at:
            for each in fleet.hosts:
                each.freeze(wait=False)
            frozen_at.append(time.time())

    try:
        result = run_fleet_campaign(fleet, inventory, book, tmp_path / "reports", progress=freeze_once_every_host_runs,
                           settings={"watchdog": WatchdogSettings(correlated_hold_s=HOLD_S)})
    finally:
        plug.stop()
    from datetime import datetime

    wedges = [r for r in result.records if r["attempt_index"] == 0]
    assert sorted(r["outcome"] for r in wedges) == ["wedge"] * 3
    assert sorted(r["outcome"] for r in result.records if r["attempt_index"] == 1) == ["clean"] * 3
    for record in wedges:
        declared = datetime.fromisoformat(record["wedge_declared"].replace("Z", "+00:00")).timestamp()
        # held from the last line heard (up to a heartbeat before the freeze), released HOLD_S later
        assert HOLD_S - 1.0 <= declared - frozen_at[0] < HOLD_S + 4.0  # the hold, plus the lone-freeze budget
    events = campaign_events(result)
    for host in fleet.hosts:
        mine = [e for e in events if e["host"] == host.name]
        assert [e["rule"] for e in mine if e["event"] == "silence_hold" and "before" not in e] == ["correlated"]
        assert [e["rule"] for e in mine if e["event"] == "silence_release" and "before" not in e] == ["outlasted"]
    offs = [e for e in switching_actions(result) if e["action"] == "off"]
    assert sorted(e["host"] for e in offs) == [h.name for h in fleet.hosts]  # each cycled once
