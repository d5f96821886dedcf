"""The controller's own disk at the host seam: a floor of free space is checked before every
attempt, and a wedge whose record cannot be written still gets its power action; the end says
exactly what each host got back."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.runner import slot_record
from tests.support.seam_host import FakeHost, records, run_host, seam_book, seam_context


def test_below_the_disk_floor_no_attempt_starts_and_the_campaign_stops_with_the_path_and_the_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slot_record, "_free_bytes", lambda path: 100 * 2**20)  # 100 MiB left
    clock = VirtualClock()
    fake = FakeHost(clock, "full", script=("clean",) * 3)
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)
    runner = run_host(fake, ctx)
    assert fake.attempts_run == 0 and records(ctx) == []
    assert ctx.failure is not None and str(ctx.directory.root) in ctx.failure
    assert "100 MiB free, below the floor of 512 MiB" in ctx.failure
    assert runner.state.given_back == "GPU settings restored"  # prepared, so put back as it stops


def test_a_wedge_whose_record_cannot_be_written_is_still_power_cycled(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "wedged", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    append = ctx.attempt_log.append_record

    def full_at_the_wedge(record: Any) -> None:
        if record.outcome.value == "wedge":
            raise OSError(errno.ENOSPC, "No space left on device")
        append(record)

    ctx.attempt_log.append_record = full_at_the_wedge  # type: ignore[method-assign]
    runner = run_host(fake, ctx)
    assert "set off" in fake.device.requests and fake.device.requests[-1] != "set off"  # cycled, never left off
    assert len(fake.boot_ids) == 2  # the frozen host came back
    assert ctx.failure is not None and "No space left on device" in ctx.failure
    assert "GPUs restored" not in ctx.failure and runner.state.given_back == "GPU settings restored"
