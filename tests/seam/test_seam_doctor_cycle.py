"""``invoke doctor --cycle``'s decisions at the seam: a fake lab of hosts on outlets, in virtual time.

The lab (tests/support/cycle_lab_fake.py) plays what real hardware does. Each test ends on the
cycle's result (and the switches the lab saw), never on a sleep.
"""

from __future__ import annotations

from reprofleet.campaign.cycle_test import (
    BIOS_FIX,
    CycleResult,
    CycleTimings,
    cycle_hosts,
    suggested_boot_s,
)
from reprofleet.campaign.doctor import Status
from reprofleet.clock import VirtualClock
from reprofleet.model import Host
from tests.support.cycle_lab_fake import FakeLab, Machine, host

TIMINGS = CycleTimings(dwell_s=10.0, dark_window_s=30.0, boot_s=600.0, poll_s=1.0)


def lab_of(**machines: Machine) -> tuple[FakeLab, VirtualClock]:
    clock = VirtualClock()
    return FakeLab(clock, dict(machines)), clock


def run(lab: FakeLab, clock: VirtualClock, chosen: list[Host], inventory: list[Host]) -> list[CycleResult]:
    heard: list[CycleResult] = []
    results = cycle_hosts(lab, chosen, inventory, clock, TIMINGS, done=heard.append)
    assert heard == results  # each result is told (and recorded) as its cycle ends
    return results


def check(result: CycleResult, item: str) -> tuple[Status, str, str]:
    found = [c for c in result.checks if c.item == item]
    assert found, f"no {item!r} check in {[c.item for c in result.checks]}"
    return found[-1].status, found[-1].found, found[-1].fix


def test_a_host_on_its_own_outlet_goes_dark_alone_boots_anew_and_its_boot_time_is_measured() -> None:
    lab, clock = lab_of(ws1=Machine("1", boot_s=95.0), ws2=Machine("2"))
    inventory = [host("ws1", "1"), host("ws2", "2")]
    (result,) = run(lab, clock, inventory[:1], inventory)
    assert result.ok and result.refused is None
    assert check(result, "outlet mapping")[0] is Status.OK
    assert check(result, "BIOS power-on")[0] is Status.OK
    assert check(result, "boot")[0] is Status.OK and result.boot_after != result.boot_before
    assert check(result, "GPU health")[0] is Status.OK
    assert result.dark_after_s == 0.0 and result.others_dark == ()
    assert result.sshd_after_on_s == 95.0  # the lab's boot, exactly: virtual time
    assert result.off_to_sshd_s == 105.0  # the 10 s dwell, then the boot
    assert lab.switches == [("ws1", "off"), ("ws1", "on")]
    assert result.to_json()["suggested_boot_s"] == 210  # 2 x 105 s, rounded up to 30 s


def test_an_inventory_naming_the_neighbours_outlet_is_caught_both_ways() -> None:
    # ws1's pdu: block says outlet 2, which feeds ws2; ws1 is really on outlet 1
    lab, clock = lab_of(ws1=Machine("1"), ws2=Machine("2"))
    inventory = [host("ws1", "2"), host("ws2", "2-typo")]
    (result,) = run(lab, clock, inventory[:1], inventory)
    assert not result.ok
    assert result.dark_after_s is None and result.others_dark == ("ws2",)
    words = [c.found for c in result.checks if c.item == "outlet mapping" and c.status is Status.MISSING]
    assert any("ws1 kept answering" in w for w in words)
    assert any("ws2 went dark too" in w for w in words)
    assert not any(c.item == "BIOS power-on" for c in result.checks)  # nothing learnt of ws1's BIOS
    assert result.off_to_sshd_s is None and result.to_json()["suggested_boot_s"] is None  # nor of its boot
    assert lab.switches == [("ws1", "off"), ("ws1", "on")]  # the outlet was put back on


def test_a_host_whose_bios_stays_off_after_ac_loss_is_named_with_the_fix() -> None:
    lab, clock = lab_of(ws1=Machine("1", bios_stays_off=True))
    inventory = [host("ws1", "1")]
    (result,) = run(lab, clock, inventory, inventory)
    status, found, fix = check(result, "BIOS power-on")
    assert status is Status.MISSING and not result.ok
    assert "ws1 stayed off for 600 s after its outlet came back on" in found
    assert fix.startswith(BIOS_FIX) and "restore on AC power loss" in fix
    assert check(result, "outlet mapping")[0] is Status.OK  # it did go dark: the mapping holds
    assert result.off_to_sshd_s is None and result.to_json()["suggested_boot_s"] is None
    assert lab.switches[-1] == ("ws1", "on")


def test_a_host_another_campaign_holds_is_refused_and_never_switched() -> None:
    lease = {"campaign": "night-7", "controller": "pi@lab", "age_s": 12.0}
    lab, clock = lab_of(ws1=Machine("1", lease=lease), ws2=Machine("2"))
    inventory = [host("ws1", "1"), host("ws2", "2")]
    held, free = run(lab, clock, inventory, inventory)
    assert held.refused is not None and "campaign night-7 of pi@lab holds this host" in held.refused
    assert not held.ok and not held.switched
    assert free.ok  # one refused host stops nothing
    assert lab.switches == [("ws2", "off"), ("ws2", "on")]


def test_a_host_not_seen_alive_is_refused_and_never_switched() -> None:
    lab, clock = lab_of(ws1=Machine("1", alive=False))
    inventory = [host("ws1", "1")]
    (result,) = run(lab, clock, inventory, inventory)
    assert result.refused is not None and result.refused.startswith("not seen alive, so not switched")
    assert "connection timed out" in result.refused
    assert lab.switches == []


def test_a_host_without_a_pdu_is_refused() -> None:
    lab, clock = lab_of(ws1=Machine("1"))
    (result,) = run(lab, clock, [Host(name="ws1", address="ws1.lab")], [])
    assert result.refused is not None and "no pdu:" in result.refused and lab.switches == []


def test_a_gpu_that_fails_the_health_gate_after_the_cycle_is_a_finding() -> None:
    lab, clock = lab_of(ws1=Machine("1", gpu_problem="the GPU fell off the bus after the test cycle (nvml)"))
    inventory = [host("ws1", "1")]
    (result,) = run(lab, clock, inventory, inventory)
    status, found, _ = check(result, "GPU health")
    assert status is Status.MISSING and "fell off the bus" in found and not result.ok


def test_the_suggested_boot_timeout_covers_the_slowest_host_twice_and_never_goes_below_two_minutes() -> None:
    lab, clock = lab_of(ws1=Machine("1", boot_s=20.0), ws2=Machine("2", boot_s=170.0))
    inventory = [host("ws1", "1"), host("ws2", "2")]
    fast, slow = run(lab, clock, inventory, inventory)
    assert fast.off_to_sshd_s == 30.0 and slow.off_to_sshd_s == 180.0
    assert suggested_boot_s([fast]) == 120  # 2 x 30 s = 60 s, raised to the floor
    assert suggested_boot_s([fast, slow]) == 360  # 2 x 180 s
    assert suggested_boot_s([CycleResult("x", refused="held")]) is None


def test_a_boot_slower_than_the_playbooks_deadline_is_not_blamed_on_the_bios() -> None:
    lab, clock = lab_of(ws1=Machine("1", boot_s=700.0, kernel_s=30.0))
    inventory = [host("ws1", "1")]
    (result,) = run(lab, clock, inventory, inventory)
    status, found, fix = check(result, "boot")
    assert status is Status.MISSING and "its kernel answers but sshd did not within 600 s" in found
    assert "timeouts.boot" in fix
    assert not any(c.item == "BIOS power-on" for c in result.checks)  # it powered on: its kernel answered
    assert result.sshd_after_on_s is None and not result.ok
