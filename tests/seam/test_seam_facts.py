"""Facts after every boot: a driver that an unattended upgrade put in place for the next boot
shows up at the recovery's reboot as an event, and the records after it carry the new facts."""

from __future__ import annotations

from pathlib import Path

from reprofleet.clock import VirtualClock
from reprofleet.records.store import read_facts_by_hash
from tests.support.seam_host import FakeHost, events, records, run_host, seam_book, seam_context


def test_a_driver_upgraded_at_a_recovery_reboot_is_an_event_and_the_records_after_carry_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "upg", script=("clean", "wedge", "clean"))
    fake.facts.update(kernel="6.8.0-51-generic", driver_version="610.43.03", cuda_driver_version="13.3")
    fake.facts_next_boot = {"driver_version": "612.10.01"}  # installed, waiting for a reboot
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["clean", "wedge", "clean"]
    (changed,) = events(ctx, "facts_changed")
    assert changed["changes"] == {"driver": ["610.43.03", "612.10.01"]}
    assert found[0]["facts"] == found[1]["facts"] != found[2]["facts"]  # the wedge ran under the old driver
    ran_under = [read_facts_by_hash(ctx.directory, r["facts"]) for r in found]
    assert [f["driver_version"] for f in ran_under] == ["610.43.03", "610.43.03", "612.10.01"]  # type: ignore[index]


def test_a_reboot_into_the_same_software_is_no_event(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "same", script=("wedge", "clean"))
    fake.facts.update(kernel="6.8.0-51-generic", driver_version="610.43.03")
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert not events(ctx, "facts_changed")
    assert len({r["facts"] for r in records(ctx)}) == 2  # read again in the new boot (the boot id differs)
