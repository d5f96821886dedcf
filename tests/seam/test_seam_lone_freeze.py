"""A lone freeze among quiet peers, at the host seam in virtual time (issue 32 item 15): a DEAD
round taken while a host of the same segment answered is this host's silence, not the
network's; the verdict and the power gate both read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.watchdog import FleetLiveness
from tests.support.seam_host import FakeHost, events, power_actions, records, run_host, seam_book, seam_context

HOLD_S = 40.0


def _beside_a_stalled_peer(ctx: Any, fake: FakeHost, peer: str) -> None:
    """``peer`` stalls with this host (its stream silent since a second before this host became a
    suspect) while its kernel keeps answering its own probes, on the same grid as this host's."""
    from reprofleet.model.events import CampaignEvent

    write_event, probe = ctx.event, fake.probe

    def hook(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.SUSPECT and host == fake.name:
            ctx.fleet.silent(peer, ctx.clock.monotonic() - 1.0)

    def probed_beside_the_peer() -> ProbeAnswer:
        ctx.fleet.answered(peer, ctx.clock.monotonic())  # the stalled peer's watchdog got its kernel's echo
        return probe()

    ctx.event = hook
    ctx.fleet.report_to(ctx.event)
    fake.probe = probed_beside_the_peer  # type: ignore[method-assign]


def _run(tmp_path: Path, peer_evidence: bool) -> Any:
    clock = VirtualClock()
    fake = FakeHost(clock, "lone", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.fleet = FleetLiveness(5.0, lambda: True, hold_s=HOLD_S, clock=clock.monotonic,
                              segments={"lone": "rack", "stalled": "rack"}, peer_evidence=peer_evidence)
    _beside_a_stalled_peer(ctx, fake, "stalled")
    run_host(fake, ctx)
    return ctx


def test_a_freeze_beside_a_stalled_peer_whose_kernel_answers_is_declared_and_cycled_within_the_lone_freeze_budget(
        tmp_path: Path) -> None:
    ctx = _run(tmp_path, peer_evidence=True)
    first, second = records(ctx)
    assert first["outcome"] == "wedge" and second["outcome"] == "clean"
    assert first["detect_latency_s"] <= 4.0
    assert not events(ctx, "silence_hold")  # neither the verdict nor the power action waited
    assert [e["rule"] for e in events(ctx, "silence_release")] in ([], ["vouched"])
    assert [p["action"] for p in power_actions(ctx) if p["action"] in ("off", "on", "cycle")]


def test_without_peer_evidence_the_same_freeze_waits_out_the_hold(tmp_path: Path) -> None:
    """The rule before issue 32 item 15 (bench/lone_freeze.py's baseline)."""
    first = records(_run(tmp_path, peer_evidence=False))[0]
    assert first["outcome"] == "wedge" and first["detect_latency_s"] >= HOLD_S
