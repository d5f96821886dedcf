"""The attempt deadline at the host seam, with every controller timing shrunk at once
(``Timings.scaled``): a host that answers while its attempt never ends is a ``hang`` the
controller kills at the agent's timeout plus its own grace, never a wedge."""

from __future__ import annotations

from pathlib import Path

from reprofleet.clock import VirtualClock
from reprofleet.config import Timings
from seam_host import FakeHost, events, power_actions, records, run_host, seam_book, seam_context


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
