"""An orderly reboot under an attempt (someone's ``reboot``, unattended-upgrades' automatic
reboot) is not the bug: recovery reads the previous boot's journal, finds systemd's stop
sequence, and the record is ``infra`` with who asked; a fixed plan runs the slot again at once.
A watchdog reset (no stop sequence in the journal) stays a ``reboot``. Played at the host seam
in virtual time (tests/support/seam_host.py).
"""

from __future__ import annotations

from pathlib import Path

from reprofleet.clock import VirtualClock
from reprofleet.model import Judging, Outcome, ReasonCode, Role, reason_code
from reprofleet.records.reader import attempts_of
from tests.support.seam_host import FakeHost, events, records, run_host, seam_book, seam_context


def test_an_orderly_reboot_mid_attempt_is_infra_with_who_asked_and_the_slot_runs_again(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "upgraded", script=("orderly_reboot", "clean", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [(r["outcome"], r["attempt_index"]) for r in found] == [("infra", 0), ("clean", 0), ("clean", 1)]
    assert reason_code(found[0]["reason"]) is ReasonCode.HOST_SHUTDOWN
    assert "unattended-upgrades" in found[0]["reason"] and "(was " in found[0]["reason"]
    assert found[0]["forensics"]["shutdown"]["orderly"] is True
    assert found[0]["detect_latency_s"] is None
    assert fake.postboot_asked[0] == fake.boot_ids[0]  # the boot it ran in, not boot -1 (a cycle may follow)
    roles = [a.classified(Judging()).role for a in attempts_of(found)]
    assert Role.REPRODUCTION not in roles


def test_a_watchdog_reset_without_a_stop_sequence_stays_a_reboot(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "reset", script=("reboot", "clean"), self_reset_s=1)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["reboot", "clean"]
    assert found[0]["forensics"]["shutdown"]["orderly"] is False


def test_a_host_that_reboots_in_order_at_every_try_stops_after_the_bounded_reruns(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "loop", script=("orderly_reboot",) * 5 + ("clean",) * 5)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    first_slot = [r for r in records(ctx) if r["attempt_index"] == 0]
    assert [r["outcome"] for r in first_slot] == ["infra", "infra", "infra"]  # tried 1 + 2 times, then on
    assert any(r["attempt_index"] == 1 for r in records(ctx))


def test_after_the_agent_says_the_host_is_shutting_down_the_slot_runs_again_only_in_the_next_boot(
        tmp_path: Path) -> None:
    """The stopping host still answers for a while (systemd stops its units): a rerun started then
    is stopped with it, and a slot's reruns spent on one shutdown would all be ``infra`` in a boot
    that has ended (the simulated fleet's flaky case). The runner waits for the next boot."""
    clock = VirtualClock()
    fake = FakeHost(clock, "stopping", script=("orderly_stop", "clean", "clean"))
    fake.stopping_s = 20.0
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [(r["outcome"], r["attempt_index"]) for r in found] == [("infra", 0), ("clean", 0), ("clean", 1)], found
    assert reason_code(found[0]["reason"]) is ReasonCode.HOST_SHUTDOWN
    assert found[0]["boot_id"] == fake.boot_ids[0]
    assert [r["boot_id"] for r in found[1:]] == [fake.boot_ids[1]] * 2  # the rerun ran in the next boot
    assert [r["attempt_in_boot"] for r in found[1:]] == [1, 2]
    (awaited,) = events(ctx, "boot_awaited")
    assert awaited["why"] == "host_shutdown" and awaited["boot_id"] == fake.boot_ids[1]
    assert awaited["waited_s"] >= fake.stopping_s
