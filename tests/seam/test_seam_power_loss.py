"""A host that lost power is a ``power_loss``, never a wedge: the power device is read before
any action on a silence, an outlet that reads off is switched on (never cycled), and the
campaign goes on. Played at the host seam in virtual time (tests/seam_host.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.model import Judging, Outcome, Role
from tests.support.seam_host import Device, FakeHost, events, records, recovery_path, run_host, seam_book, seam_context


def test_a_plug_that_switches_itself_off_mid_attempt_is_a_power_loss_switched_on_never_cycled(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "plug", script=("power_off", "clean", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["power_loss", "clean", "clean"]  # the campaign went on
    assert "read off before this controller switched anything" in found[0]["reason"]
    assert found[0]["detect_latency_s"] is not None and found[0]["forensics"]["power_cycles"] == 0
    assert "set off" not in fake.device.requests and "set on" in fake.device.requests  # switched on, not cycled
    assert len(fake.boot_ids) == 2
    (lost,) = events(ctx, "power_lost")
    assert lost["attempt"] == found[0]["attempt"]
    assert not events(ctx, "wedge") and recovery_path(ctx)[:3] == ["on", "booting", "booted"]


def test_a_host_found_off_between_attempts_is_switched_on_and_its_slot_stays_infra(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "plug", script=("clean", "clean", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)

    def off_before_the_second(host: str, **fields: Any) -> None:
        if fields.get("status") == "running" and fields.get("attempt") == 2 and len(fake.boot_ids) == 1:
            fake.lose_power()  # someone switched the plug off in its app

    ctx.progress = off_before_the_second
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["clean", "infra", "clean"]
    assert "read off before this controller switched anything" in found[1]["reason"]
    assert "set off" not in fake.device.requests and "set on" in fake.device.requests
    assert events(ctx, "power_lost")


def test_a_wedge_behind_an_outlet_that_reads_on_is_still_a_wedge_and_is_cycled(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "wedged", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"]
    assert fake.device.requests.index("read") < fake.device.requests.index("set off")  # read before any action
    assert not events(ctx, "power_lost")


def test_a_power_device_that_cannot_be_read_leaves_the_wedge_a_wedge_and_says_so(tmp_path: Path) -> None:
    clock = VirtualClock()
    device = Device(dead=True)
    fake = FakeHost(clock, "mute", script=("wedge", "clean"), device=device)
    ctx = seam_context(seam_book(tmp_path, attempts=2, boot=15), tmp_path, clock)
    run_host(fake, ctx)
    assert records(ctx)[0]["outcome"] == "wedge"
    assert any("could not be read before acting" in e.get("message", "") for e in events(ctx, "warning"))


def test_a_power_loss_is_never_a_reproduction_unless_the_playbook_lists_it() -> None:
    assert Judging().role(Outcome.POWER_LOSS) is Role.EXCLUDED
    assert "never a reproduction" in Judging().exclusion_reason(Outcome.POWER_LOSS)
    listed = Judging(reproductions=(Outcome.WEDGE, Outcome.REBOOT, Outcome.POWER_LOSS))
    assert listed.role(Outcome.POWER_LOSS) is Role.REPRODUCTION
