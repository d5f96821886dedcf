"""A host's own reset and a freeze between attempts, decided at the host seam in virtual
time. Moved from tests/test_fleet_wedge.py; the power-cycle through every real device
protocol stays on the fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from seam_host import FakeHost, events, power_actions, records, recovery_path, run_host, seam_book, seam_context


@pytest.mark.parametrize("self_reset_s", [1.0, 6.0], ids=["seen-on-reattach", "seen-by-the-grace"])
def test_a_host_that_resets_itself_is_a_reboot_and_is_not_power_cycled(self_reset_s: float, tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "rst", script=("reboot", "clean"), self_reset_s=self_reset_s)
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30), tmp_path, clock, reboot_grace_s=10.0)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["reboot", "clean"]
    assert found[1]["boot_id"] != found[0]["boot_id"]
    assert not [p for p in power_actions(ctx) if p["action"] in ("on", "off", "cycle")]
    # a self-reset gets the same post-boot forensics as a wedge: the previous boot's kernel log
    assert found[0]["forensics"]["previous_boot_available"] is True
    assert found[0]["forensics"]["power_cycles"] == 0
    assert recovery_path(ctx) == ["booting", "booted", "stable", "forensics", "ready"]
    seen = "reboot" if self_reset_s < 3 else "wedge"  # re-attach saw the new boot / the watchdog declared first
    assert events(ctx, seen)


def test_a_host_that_froze_between_attempts_is_recovered_and_the_slot_is_not_judged(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "gap", script=("freeze-after", "clean", "clean"), boot_delay_s=0.3)
    ctx = seam_context(seam_book(tmp_path, attempts=3, attempt_timeout=30), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["clean", "infra", "clean"]
    assert "unreachable before the attempt" in found[1]["reason"]
    switching = [p["action"] for p in power_actions(ctx) if p["action"] != "status"]
    assert switching.count("cycle") == 1 and set(switching) <= {"off", "on", "cycle"}
    assert events(ctx, "unreachable")
