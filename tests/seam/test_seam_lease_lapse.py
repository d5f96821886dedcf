"""A controller that may no longer hold a host never declares it wedged nor switches its power
(issue 34 item 6, the power side). A live controller shows it holds a host's lease at every
attempt start; one whose last proof is older than the lease's TTL (a laptop asleep, a SIGSTOP)
may find a silence another campaign caused, so it records ``infra`` with the reason and lets
the host go."""

from __future__ import annotations

from pathlib import Path

from reprofleet.clock import VirtualClock
from reprofleet.runner.host import HostRunner
from tests.support.seam_host import FakeHost, events, plan_of, power_actions, records, seam_book, seam_context


def _suspended_runner(fake: FakeHost, ctx: object, clock: VirtualClock) -> HostRunner:
    """A runner whose every proof of holding the lease is dated a TTL and more before now: what a
    controller woken from a long suspend sees (its lease lapsed while it slept)."""
    runner = HostRunner(ctx, fake.host, plan_of(ctx.playbook), port=fake.port(ctx))  # type: ignore[arg-type, attr-defined]
    link = runner.link

    def held_long_ago(at: float | None = None) -> None:
        link.lease_held_at = clock.monotonic() - link.lease.ttl_s - 60.0

    link.held_now = held_long_ago  # type: ignore[method-assign]
    return runner


def test_a_wedge_seen_after_the_lease_may_have_lapsed_is_not_declared_and_nothing_is_switched(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "slept", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30), tmp_path, clock)
    _suspended_runner(fake, ctx, clock).run()
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    first, *rest = records(ctx)
    assert first["outcome"] == "infra" and "longer than its TTL" in first["reason"] and "was wedge" in first["reason"]
    assert not events(ctx, "wedge"), "no wedge is declared on a host this controller may not hold"
    (fenced,) = events(ctx, "fenced")
    assert "another campaign may hold the host" in fenced["reason"]
    assert all(r["outcome"] == "infra" for r in rest), "the host is not used again"
    assert fake.attempts_run == 1


def test_a_controller_that_held_the_host_within_its_ttl_declares_and_recovers_as_ever(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "awake", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30), tmp_path, clock)
    HostRunner(ctx, fake.host, plan_of(ctx.playbook), port=fake.port(ctx)).run()  # type: ignore[arg-type]
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"]
    assert [a["action"] for a in power_actions(ctx) if a["action"] in ("off", "on")] == ["off", "on"]
