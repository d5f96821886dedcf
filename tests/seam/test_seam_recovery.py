"""Recovery's decisions at the host seam, in virtual time: a broken PDU, a host with no port.

Moved from the simulated fleet (tests/fleet/test_fleet_liveness.py), where each played its
waits in real time (two boot deadlines, a person's 12 s): the same records and events,
from the same runner and recovery code, against a scripted host (tests/support/seam_host.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from tests.support.seam_host import Device, FakeHost, events, records, recovery_path, run_host, seam_book, seam_context


@pytest.mark.parametrize("fault", ["wrong-outlet", "dead-pdu"])
def test_a_broken_pdu_quarantines_its_host_in_bounded_time(fault: str, tmp_path: Path) -> None:
    clock = VirtualClock()
    device = Device(dead=fault == "dead-pdu", feeds_host=fault != "wrong-outlet")
    fake = FakeHost(clock, "brk", script=("wedge", "clean", "clean"), device=device)
    ctx = seam_context(seam_book(tmp_path, attempts=3, attempt_timeout=30, boot=15), tmp_path, clock)
    started = clock.monotonic()
    run_host(fake, ctx)
    # two cycles (the second with a longer dwell), each waiting up to the playbook's 15 s boot timeout
    assert clock.monotonic() - started < 80
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["wedge", "infra", "infra"]
    assert "recovery failed" in found[1]["reason"]
    quarantine = [e for e in events(ctx, "recovery") if e["to"] == "quarantined"]
    assert quarantine and ("outlet" in quarantine[0]["reason"].lower() or fault == "dead-pdu")
    assert device.state.value == "on" or fault == "dead-pdu"  # never left off


def test_a_host_without_a_power_port_waits_for_a_person(tmp_path: Path) -> None:
    clock = VirtualClock()
    # a person notices the frozen machine a while later and power-cycles it by hand
    fake = FakeHost(clock, "manual", script=("wedge", "clean"), power=False, boot_delay_s=0.3, rescued_after_s=12.0)
    # the person takes longer than a boot deadline: a host with no port is waited for, not quarantined
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=10), tmp_path, clock)
    run_host(fake, ctx)
    assert len(fake.boot_ids) == 2  # rescued
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"]
    assert events(ctx, "needs_person")
    assert recovery_path(ctx)[:2] == ["booting", "booted"]


def test_a_host_frozen_once_the_budget_is_spent_gets_one_last_cycle_and_is_left_booted(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "spent", script=("wedge", "wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock, power_cycle_budget=1)
    runner = run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["wedge", "wedge", "infra"]
    assert found[1]["forensics"]["after_budget"] == "cycled once more, booted"
    assert len(fake.boot_ids) == 3 and fake.up and fake.device.state.value == "on"  # never left frozen
    assert "budget of 1 spent: cycled once more so it is left booted" in str(runner.state.quarantined)
    assert events(ctx, "policy_restored")  # it answers: its settings were given back at the end


def test_after_budget_off_leaves_a_host_that_froze_past_the_budget_switched_off_and_says_so(tmp_path: Path) -> None:
    from dataclasses import replace

    clock = VirtualClock()
    fake = FakeHost(clock, "spent", script=("wedge", "wedge", "clean"))
    ctx = seam_context(replace(seam_book(tmp_path, attempts=3), after_budget="off"), tmp_path, clock,
                       power_cycle_budget=1)
    runner = run_host(fake, ctx)
    found = records(ctx)
    assert found[1]["forensics"]["after_budget"] == "left off"
    assert fake.device.state.value == "off" and len(fake.boot_ids) == 2
    assert "switched off and left off (after_budget: off)" in str(runner.state.quarantined)
