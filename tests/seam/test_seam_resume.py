"""What a campaign finds on its host when it (re)starts, decided at the host seam in virtual
time: a lock a killed controller left, a lease another campaign holds, an attempt still
running on the GPU, a host left switched off, a controller whose disk fills up.

Moved from tests/test_fleet_resume.py; the agent's own lease, orphan and policy handling on
a real host is tested in tests/agent/test_agent_*.py (over real sshd: tests/fleet/test_agent_ssh.py).
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.power.base import PowerState
from tests.support.seam_host import Device, FakeHost, events, power_actions, records, run_host, seam_book, seam_context
from tests.support.scripted_runner import cell


def test_a_clock_lock_left_behind_is_reset_and_read_back_before_the_reference_runs(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "lock-left", script=("clean",))
    fake.policy = {"graphics_clocks": [180, 2800]}  # what a killed controller leaves behind
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert record["outcome"] == "clean"
    assert record["policy"].get("graphics_clocks") != [180, 2800]  # the reference ran at the card's defaults
    applied = events(ctx, "policy_applied")
    assert applied and applied[0]["policy"] == {}  # the default cell's policy, applied and read back


def test_a_lease_held_by_another_campaign_keeps_the_host_until_break_lease(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "leased", script=("clean",) * 4)
    fake.lease_holder = {"controller": "other-laptop", "campaign": "night-7", "pid": 4242, "token": "theirs",
                         "renewed": clock.monotonic(), "ttl_s": 3600.0}
    refused = seam_context(seam_book(tmp_path / "a", attempts=1), tmp_path / "a", clock)
    run_host(fake, refused)
    (record,) = records(refused)
    assert record["outcome"] == "infra" and "leased to other-laptop (campaign night-7" in record["reason"]
    assert fake.attempts_run == 0  # nothing ran on that GPU
    taken_over = seam_context(seam_book(tmp_path / "b", attempts=1), tmp_path / "b", clock, break_leases=True)
    run_host(fake, taken_over)
    (record,) = records(taken_over)
    assert record["outcome"] == "clean"
    broken = events(taken_over, "lease_broken")
    assert broken and broken[0]["previous"]["campaign"] == "night-7"
    assert fake.lease_holder is None  # given back at the end


def test_an_attempt_still_running_on_the_gpu_is_killed_before_the_first_attempt(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "orphaned", script=("clean",) * 4)
    fake.orphans = [{"id": "orphan-1", "age_s": 42.0}]  # its controller is gone; the attempt goes on
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert record["outcome"] == "clean"
    killed = events(ctx, "orphan_killed")
    assert [e["attempt"] for e in killed] == ["orphan-1"] and killed[0]["ours"] is False
    assert fake.orphans == [] and fake.killed[0] == "orphan-1"
    names = [e["event"] for e in events(ctx)]
    assert names.index("orphan_killed") < names.index("attempt_started")  # before the first attempt


def test_a_container_left_running_without_its_supervisor_is_killed_and_the_event_names_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "boxed", script=("clean",) * 4)
    # what the agent lists for a container whose supervisor died (the docker client's death left it running)
    fake.orphans = [{"id": "orphan-2", "status": "running", "container": "reprofleet-orphan-2",
                     "supervisor_alive": False}]
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    run_host(fake, ctx)
    (killed,) = events(ctx, "orphan_killed")
    assert killed["attempt"] == "orphan-2" and killed["container"] == "reprofleet-orphan-2"
    assert killed["container_killed"] is True and fake.killed[0] == "orphan-2"


def test_a_docker_attempt_gives_the_agent_its_container_name(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "named", script=("clean",) * 2)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert len(fake.containers) == 2
    assert all(name == f"reprofleet-{attempt}" for attempt, name in fake.containers.items())


def _died_mid_cycle(ctx: Any, host: str) -> None:
    """The campaign's power log, as a controller killed in a cycle's dwell leaves it: its "off"."""
    ctx.directory.power.parent.mkdir(parents=True, exist_ok=True)
    with ctx.directory.power.open("a") as log:
        log.write(json.dumps({"time": "2026-12-01T00:00:00Z", "host": host, "driver": "fake", "address": "fake",
                              "outlet": "1", "action": "off", "result": "ok", "state": "off"}) + "\n")


def test_an_outlet_that_reads_off_on_a_host_never_seen_is_not_switched_on(tmp_path: Path) -> None:
    """A mistyped address whose outlet happens to read off: someone else's machine, left alone."""
    clock = VirtualClock()
    device = Device(state=PowerState.OFF)
    fake = FakeHost(clock, "typo", script=("clean",), boot_delay_s=0.5, device=device)
    fake.off, fake.up_at = True, None
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert record["outcome"] == "infra" and "never answered" in record["reason"] and "reads off" in record["reason"]
    assert device.state is PowerState.OFF and not events(ctx, "switched_on_at_start")
    assert not [a for a in power_actions(ctx) if a["action"] in ("on", "off", "cycle")]


def test_a_host_left_switched_off_is_switched_on_and_the_campaign_runs(tmp_path: Path) -> None:
    clock = VirtualClock()
    device = Device(state=PowerState.OFF)  # a controller died with the outlet off
    fake = FakeHost(clock, "left-off", script=("clean",) * 4, boot_delay_s=0.5, device=device)
    fake.off, fake.up_at = True, None
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    _died_mid_cycle(ctx, fake.name)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert record["outcome"] == "clean"
    assert events(ctx, "unreachable_at_start")
    (switched,) = events(ctx, "switched_on_at_start")
    assert len(switched["outlets"]) == 1 and not events(ctx, "recovery")  # not cycled
    assert device.state is PowerState.ON


def test_a_full_disk_on_the_controller_stops_the_campaign_cleanly(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "disk-full", script=("clean",) * 8)
    book = seam_book(tmp_path, cell("lgc-2800", 0), attempts=8)
    book = book.__class__(**{**book.__dict__, "cells": (_locked(book.cells[0]),)})
    ctx = seam_context(book, tmp_path, clock)
    append = ctx.attempt_log.append_record

    def filling(record: Any) -> None:  # the disk fills up after three records
        if len(records(ctx)) >= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        append(record)

    ctx.attempt_log.append_record = filling  # type: ignore[method-assign]
    run_host(fake, ctx)
    assert ctx.failure and "No space left on device" in ctx.failure
    for path in (ctx.directory.attempts, ctx.directory.events):
        assert all(json.loads(line) for line in path.read_text().splitlines())  # no torn line
    assert len(records(ctx)) < 8  # it stopped early
    assert fake.policy == {} and fake.policy_calls[-1] == "restore"  # the GPU was put back to its defaults


def _locked(c: Any) -> Any:
    from dataclasses import replace

    from reprofleet.model import GpuPolicy

    return replace(c, gpu=GpuPolicy(graphics_clocks=(180, 2800)))


def test_a_policy_changed_by_hand_between_attempts_is_seen_and_re_applied_before_the_next(tmp_path: Path) -> None:
    from dataclasses import replace as with_fields

    from reprofleet.model import GpuPolicy

    clock = VirtualClock()
    fake = FakeHost(clock, "by-hand", script=("clean",) * 3)
    locked = with_fields(cell("locked", 0), gpu=GpuPolicy(graphics_clocks=(180, 2800)))
    ctx = seam_context(seam_book(tmp_path, locked, attempts=3), tmp_path, clock)

    def someone_restores_by_hand(host: str, **fields: Any) -> None:
        if fields.get("outcome") and not events(ctx, "policy_changed"):
            fake.policy = {}  # `invoke policy --restore` (or nvidia-smi -rgc) from another shell

    ctx.progress = someone_restores_by_hand
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["clean"] * 3
    assert all(r["policy"]["graphics_clocks"] == [180, 2800] for r in records(ctx))  # never credited wrongly
    (changed,) = events(ctx, "policy_changed")
    assert changed["changes"] == ["graphics_clocks: was [180, 2800], now None"]
    assert len(events(ctx, "policy_applied")) == 2  # at the start, and again after the change


def test_a_second_controller_of_the_same_campaign_is_refused_while_the_first_holds_the_lease(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "shared", script=("clean",) * 4)
    first = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    fake.lease_holder = {"controller": "suspended-laptop", "campaign": first.campaign_id, "pid": 4242,
                         "token": "the-first-controllers", "renewed": clock.monotonic(), "ttl_s": 3600.0}
    second = seam_context(seam_book(tmp_path / "b", attempts=1), tmp_path / "b", clock)  # same campaign id
    run_host(fake, second)
    (record,) = records(second)
    assert record["outcome"] == "infra" and "leased to suspended-laptop" in record["reason"]
    assert fake.attempts_run == 0


def test_with_break_lease_the_first_controller_is_fenced_and_never_records_over_the_second(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "taken", script=("clean",) * 8)
    first = seam_context(seam_book(tmp_path / "a", attempts=4), tmp_path / "a", clock)
    second = seam_context(seam_book(tmp_path / "b", attempts=1), tmp_path / "b", clock, break_leases=True)

    def a_person_resumes_elsewhere_with_break_lease(host: str, **fields: Any) -> None:
        if fields.get("outcome") and not records(second):
            run_host(fake, second)  # the second controller runs its slot between the first's attempts

    first.progress = a_person_resumes_elsewhere_with_break_lease
    run_host(fake, first)
    assert [r["outcome"] for r in records(second)] == ["clean"]
    assert events(second, "lease_broken")
    assert [r["outcome"] for r in records(first)] == ["clean"]  # one attempt, then nothing more: fenced
    (fenced,) = events(first, "fenced")
    assert "taken over" in fenced["reason"]
    assert fake.attempts_run == 2  # the first's one attempt and the second's; the fenced start ran nothing
    assert not events(first, "policy_restored")  # the GPU is the second's: the fenced one touches nothing
