"""Power control a lab can trust, decided at the host seam in virtual time: a host is never
stranded off, and a host that does not come back is retried once and then named with the
likely causes.

Moved from tests/test_power_fleet_trust.py (the simulated PDU's faults are the fake
device's: an off outlet whose reads are lost, an outlet that feeds another machine). What
only a real device protocol can show (secrets never written, every simulated device) stays
on the fleet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from seam_host import Device, FakeHost, events, power_actions, records, run_host, seam_book, seam_context


def test_a_cycle_whose_off_read_back_is_lost_still_switches_the_host_back_on(tmp_path: Path) -> None:
    clock = VirtualClock()
    device = Device(lose_off_readbacks=10**6)  # "off" takes effect, every read of the off outlet fails
    fake = FakeHost(clock, "lost", script=("wedge", "clean"), boot_delay_s=0.5, device=device,
                    pdu_options={"timeout_s": 1, "settle_s": 1.0, "tries": 2})
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30), tmp_path, clock)
    run_host(fake, ctx)
    recovery = [(e["to"], e.get("reason")) for e in events(ctx, "recovery")]
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"], (recovery, power_actions(ctx))
    power = power_actions(ctx)
    switched = [(p["action"], p["result"]) for p in power if p["action"] in ("off", "on")]
    assert switched[:2] == [("off", "failed"), ("on", "ok")]
    cycle = next(p for p in power if p["action"] == "cycle")
    assert cycle["result"] == "failed" and "switched back on" in cycle["error"]
    assert device.state.value == "on"


def test_a_host_that_never_returns_is_cycled_once_more_with_a_longer_dwell_then_named_with_causes(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    device = Device(feeds_host=False)  # the inventory's outlet really feeds a neighbour
    fake = FakeHost(clock, "gone", script=("wedge", "clean"), boot_delay_s=0.5, device=device)
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30, boot=6), tmp_path, clock)
    run_host(fake, ctx)
    dwells = [e["seconds"] for e in events(ctx, "recovery") if e["to"] == "dwell"]
    assert dwells == [1.0, 11.0]
    assert [e["dwell_s"] for e in events(ctx, "power_retry")] == [11.0]
    reason = next(e["reason"] for e in events(ctx, "recovery") if e["to"] == "quarantined")
    assert "did not answer within 6 s, after 2 power cycles" in reason
    assert "stay off after power loss" in reason and "second power supply" in reason and "--verify" in reason


def test_a_quarantined_host_that_still_answers_gets_its_gpu_defaults_back(tmp_path: Path) -> None:
    from dataclasses import replace

    from reprofleet.model import CampaignEvent, GpuPolicy
    from test_campaign_stopping import cell

    clock = VirtualClock()
    fake = FakeHost(clock, "miswired", script=("wedge", "clean"), device=Device(feeds_host=False))
    locked = replace(cell("lgc-2800", 0), gpu=GpuPolicy(graphics_clocks=(180, 2800)))
    ctx = seam_context(seam_book(tmp_path, locked, attempts=2, attempt_timeout=30, boot=6), tmp_path, clock)
    write_event = ctx.event

    def stall_ends_during_the_dwell(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.RECOVERY and fields.get("to") == "dwell":
            fake.frozen_at = None  # the outlet fed a neighbour; this host was only stalled: same boot

    ctx.event = stall_ends_during_the_dwell  # type: ignore[method-assign]
    run_host(fake, ctx)
    quarantined = next(e for e in events(ctx, "recovery") if e["to"] == "quarantined")
    assert "same boot_id" in quarantined["reason"]
    assert fake.policy == {} and fake.policy_calls[-1] == "restore"  # not left locked at 2800 MHz
    assert events(ctx, "policy_restored")
