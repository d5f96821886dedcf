"""Power control a lab can trust, decided at the host seam in virtual time: a host is never
stranded off, and a host that does not come back is retried once and then named with the
likely causes.

Moved from tests/fleet/test_power_fleet_trust.py (the simulated PDU's faults are the fake
device's: an off outlet whose reads are lost, an outlet that feeds another machine). What
only a real device protocol can show (secrets never written, every simulated device) stays
on the fleet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from tests.support.seam_host import Device, FakeHost, events, power_actions, records, recovery_path, run_host, seam_book, seam_context


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
    assert "stay off after power loss" in reason and "second power supply" in reason and "invoke power HOST verify" in reason


def test_a_quarantined_host_that_still_answers_gets_its_gpu_defaults_back(tmp_path: Path) -> None:
    from dataclasses import replace

    from reprofleet.model import CampaignEvent, GpuPolicy
    from tests.support.scripted_runner import cell

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


# -- issue 18: a shared outlet's neighbour, a failed "on", a late error after the host came back

def test_a_neighbour_cut_by_a_shared_outlet_is_infra_never_a_reproduction(tmp_path: Path) -> None:
    """ws-b shares its outlet with ws-a (both ``shared: true``); ws-a's cycle cuts ws-b mid-attempt,
    ws-b comes back when the outlet does: its attempt is ``infra`` and runs again on resume."""
    from reprofleet.model.events import CampaignEvent
    from reprofleet.model.reasons import ReasonCode, reason_code

    clock = VirtualClock()
    fake = FakeHost(clock, "ws-b", script=("reboot", "clean"))  # the power goes, the host boots when it returns
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.host_outlets = {"ws-a": frozenset({"fake:pdu#1"}), "ws-b": frozenset({"fake:pdu#1"})}
    write_event = ctx.event

    def cut_when_it_starts(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.ATTEMPT_STARTED and fields.get("index") == 0:
            ctx.note_cut("ws-b", "ws-a was cycled through the shared outlet fake:pdu#1")

    ctx.event = cut_when_it_starts  # type: ignore[method-assign]
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "infra" and reason_code(first["reason"]) is ReasonCode.CUT
    assert "ws-a was cycled" in first["reason"]
    assert second["outcome"] == "clean"
    assert events(ctx, "cut_by_neighbour")
    assert not events(ctx, "wedge") and not events(ctx, "reboot")


def test_a_cut_noted_before_the_attempt_began_does_not_excuse_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "ws-b", script=("reboot", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.note_cut("ws-b", "ws-a was cycled long ago")
    clock.sleep(5.0)
    run_host(fake, ctx)
    first = records(ctx)[0]
    assert first["outcome"] in ("wedge", "reboot") and "neighbour" not in first["reason"]


def test_a_cycle_whose_on_is_lost_is_switched_on_again_never_left_off(tmp_path: Path) -> None:
    """The "on" of the cycle is lost (both tries); recovery sends it again while it waits for the
    boot: the host comes back after one cycle, not after a boot timeout spent off and a second cycle."""
    from reprofleet.power.base import PowerState

    clock = VirtualClock()
    device = Device(lose_ons=2)
    fake = FakeHost(clock, "lost-on", script=("wedge", "clean"), device=device)
    ctx = seam_context(seam_book(tmp_path, attempts=2, boot=60), tmp_path, clock)
    device.lose_ons = 0
    started = {"armed": False}
    write_event = ctx.event

    def arm_at_the_wedge(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if str(getattr(what, "value", what)) == "wedge" and not started["armed"]:
            started["armed"] = True
            device.lose_ons = 2

    ctx.event = arm_at_the_wedge  # type: ignore[method-assign]
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "wedge" and first["forensics"].get("recovery") != "failed"
    assert second["outcome"] == "clean" and device.state is PowerState.ON
    offs = [a for a in power_actions(ctx) if a["action"] == "off"]
    assert len(offs) == 1  # one cycle: the lost "on" was sent again, not a second cycle
    assert not events(ctx, "power_retry")


def test_a_host_that_came_back_is_not_quarantined_for_a_late_error(tmp_path: Path) -> None:
    """Booted, then the stability check's connection drops (sshd restarting late in the boot):
    the host answers, so recovery goes back to booting once instead of quarantining it."""
    clock = VirtualClock()
    fake = FakeHost(clock, "late", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    write_event = ctx.event
    armed: list[bool] = []

    def drop_after_boot(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if fields.get("to") == "booted" and not armed:
            armed.append(True)
            fake.drop_connects = 1

    ctx.event = drop_after_boot  # type: ignore[method-assign]
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "wedge" and first["forensics"].get("recovery") != "failed"
    assert second["outcome"] == "clean"
    path = recovery_path(ctx)
    assert "quarantined" not in path and path[-6:] == ["booted", "booting", "booted", "stable", "forensics", "ready"]


def test_a_late_bmc_error_after_power_on_does_not_quarantine_a_host_that_came_back(tmp_path: Path) -> None:
    """"On" was sent, then every read-back is lost until the settle time passes (a BMC busy
    after power-on): the cycle fails, but the host boots, and a host that came back is not
    quarantined for the device's late error."""
    clock = VirtualClock()
    device = Device()
    fake = FakeHost(clock, "late-bmc", script=("wedge", "clean"), device=device, pdu_options={"timeout_s": 1, "tries": 2, "settle_s": 2})
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    write_event = ctx.event

    def lose_readbacks_after_on(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if fields.get("to") == "dwell":
            device.lose_on_readbacks = 50

    ctx.event = lose_readbacks_after_on  # type: ignore[method-assign]
    run_host(fake, ctx)
    device.lose_on_readbacks = 0
    first, second = records(ctx)
    assert first["outcome"] == "wedge" and first["forensics"].get("recovery") != "failed"
    assert second["outcome"] == "clean"
    assert "quarantined" not in recovery_path(ctx)
    warnings = [e["message"] for e in events(ctx, "warning")]
    assert any("the host came back anyway" in w for w in warnings)
