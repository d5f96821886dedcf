"""The attempt deadline at the host seam, with every controller timing shrunk at once
(``Timings.scaled``): a host that answers while its attempt never ends is a ``hang`` the
controller kills at the agent's timeout plus its own grace, never a wedge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.config import Timings
from reprofleet.model import CampaignEvent
from tests.support.seam_host import PHASES, FakeHost, events, power_actions, records, run_host, seam_book, seam_context


def test_an_attempt_that_never_ends_on_a_host_that_answers_is_killed_as_a_hang_after_the_grace(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    timings = Timings().scaled(0.1)  # a 3 s controller grace instead of 30 s
    fake = FakeHost(clock, "stuck", script=("stuck",))
    ctx = seam_context(seam_book(tmp_path, attempts=1, attempt_timeout=5), tmp_path, clock, timings)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert (record["outcome"], record["reason"]) == ("hang", "no exit within the timeout; killed by the controller")
    assert fake.killed == [record["attempt"]]
    assert not power_actions(ctx) and not events(ctx, "wedge")  # it answered: never cycled
    assert events(ctx, "suspect") and {e["answer"] for e in events(ctx, "probe")} == {"SSHD"}
    # the controller stepped in at the agent's timeout plus its (scaled) grace, not before
    assert 5 + timings.controller_grace_s <= clock.monotonic() - 1000.0 < 5 + timings.controller_grace_s + 2


def test_a_start_the_agent_refuses_is_not_run_the_orphan_is_killed_and_the_slot_runs_again(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "busy", script=("clean",) * 3)
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)

    def a_stray_attempt_appears(host: str, **fields: Any) -> None:
        if fields.get("outcome") and not fake.refused:
            fake.orphans = [{"id": "stray-1", "age_s": 42.0}]  # e.g. a by-hand run beside the campaign

    ctx.progress = a_stray_attempt_appears
    run_host(fake, ctx)
    outcomes = [(r["attempt_index"], r["outcome"]) for r in records(ctx)]
    assert outcomes == [(0, "clean"), (1, "infra"), (1, "clean"), (2, "clean")]
    assert records(ctx)[1]["reason"].startswith("not run: the agent refused to start it (attempt stray-1 is still")
    assert fake.killed == ["stray-1"] and len(fake.refused) == 1
    (refused,) = events(ctx, "start_refused")
    assert refused["attempt"] == fake.refused[0]
    assert not events(ctx, "reattach_failed")  # a refusal is no broken stream: no reconnect storm


def test_a_host_whose_old_attempt_never_dies_is_quarantined_after_the_infra_streak_not_spun_through(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "undying", script=("clean",) * 20)
    fake.orphans = [{"id": "stuck-1", "age_s": 600.0, "undying": True}]  # in D state: no kill ends it
    ctx = seam_context(seam_book(tmp_path, attempts=20), tmp_path, clock)
    started = clock.monotonic()
    run_host(fake, ctx)
    found = records(ctx)
    refused = [r for r in found if (r["reason"] or "").startswith("not run: the agent refused to start it")]
    assert len(refused) == ctx.settings.infra_streak  # one streak's worth of refusals, then it stops asking
    (quarantined,) = events(ctx, "quarantined")
    assert "in a row were infra" in quarantined["reason"] and "refused" in quarantined["reason"]
    assert len(found) == len(refused) + 18  # slots 0 and 1 refused, the 18 others recorded as not run, each once
    assert len(fake.refused) == ctx.settings.infra_streak and clock.monotonic() - started < 60


def test_re_attaches_that_keep_failing_back_off_instead_of_storming_the_host(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "stuck", script=("stuck",))  # answers every probe, streams nothing, cannot be attached
    ctx = seam_context(seam_book(tmp_path, attempts=1, attempt_timeout=30), tmp_path, clock)
    run_host(fake, ctx)
    (record,) = records(ctx)
    assert record["outcome"] == "hang"  # alive at the deadline: killed, never a wedge
    gaps = [b - a for a, b in zip(fake.attaches, fake.attaches[1:])]
    assert len(fake.attaches) >= 4 and len(fake.attaches) <= 15  # ~50 s of trying, not one try per read
    assert gaps[-1] >= 4 * gaps[0] and max(gaps) <= Timings().reattach_backoff_cap_s + 1.0


def test_a_bug_under_a_running_attempt_kills_it_before_the_host_is_quarantined(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "buggy", script=("clean",) * 2)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)

    def broken_view(host: str, **fields: Any) -> None:
        if fields.get("phase") == PHASES[1]:
            raise RuntimeError("a bug in the progress view")

    ctx.progress = broken_view
    run_host(fake, ctx)
    first = records(ctx)[0]
    assert first["outcome"] == "infra" and first["reason"].startswith("unexpected error: RuntimeError")
    (killed,) = events(ctx, "attempt_killed")
    assert killed["attempt"] == first["attempt"] and killed["ok"] and "RuntimeError" in killed["why"]
    assert fake.killed == [first["attempt"]]


def test_a_wedge_whose_host_answers_before_the_cycle_has_its_attempt_killed_not_left_running(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "thaws", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    write_event = ctx.event

    def thaw_once_declared(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.WEDGE:
            fake.frozen_at = None  # a long stall, not a freeze: it answers before the outlet is touched

    ctx.event = thaw_once_declared  # type: ignore[method-assign]
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "infra" and "answered before the power cycle" in first["reason"]
    assert second["outcome"] == "clean"
    assert [e["attempt"] for e in events(ctx, "attempt_killed")] == [first["attempt"]]
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]


def test_a_host_that_answers_once_the_guard_lets_go_is_not_cycled(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "net-out", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    down_until: list[float] = []

    def guard() -> bool:
        if not down_until or clock.monotonic() >= down_until[0]:
            if down_until:
                fake.frozen_at = None  # the outage ends, and the host was fine all along
            return True
        return False

    ctx.fleet.network_ok = guard
    write_event = ctx.event

    def outage_right_after_the_declaration(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.WEDGE and not down_until:
            down_until.append(clock.monotonic() + 20.0)

    ctx.event = outage_right_after_the_declaration  # type: ignore[method-assign]
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "infra" and "answered once it was back; not cycled" in first["reason"]
    assert second["outcome"] == "clean"
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    assert [e["network"] for e in events(ctx, "guard")] == ["down", "up"]
