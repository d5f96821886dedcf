"""A host's own reset and a freeze between attempts, decided at the host seam in virtual
time. Moved from tests/fleet/test_fleet_wedge.py; the power-cycle through every real device
protocol stays on the fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.liveness.watchdog import FleetLiveness
from tests.support.seam_host import FakeHost, events, power_actions, records, recovery_path, run_host, seam_book, seam_context


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


# -- issue 18: correlated silence is held, a lone freeze is not

def _with_a_peer(ctx: Any, fake: Any, peer: str, answering: str | None = None) -> None:
    """Another host of the campaign falls silent with this one when it becomes a suspect (their
    switch, or a freeze together); ``answering``: a third host of the segment is heard after that."""
    from reprofleet.model.events import CampaignEvent

    write_event = ctx.event

    def hook(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.SUSPECT and host == fake.name:
            now = ctx.clock.monotonic()
            ctx.fleet.silent(peer, now - 1.0)
            if answering is not None:
                ctx.fleet.heard(answering, now)

    ctx.event = hook  # type: ignore[method-assign]
    ctx.fleet.report_to(ctx.event)  # the watchdogs' suspect/hold events go through the hook too


def test_hosts_frozen_together_are_declared_once_the_silence_outlasts_the_hold(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "together", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.fleet = FleetLiveness(5.0, lambda: True, hold_s=40.0, clock=clock.monotonic)
    _with_a_peer(ctx, fake, "peer")
    run_host(fake, ctx)
    first, second = records(ctx)
    assert first["outcome"] == "wedge" and second["outcome"] == "clean"
    (held,) = events(ctx, "silence_hold")
    (released,) = [e for e in events(ctx, "silence_release") if "before" not in e]
    assert held["rule"] == "correlated" and held["peers"] == ["peer"] and released["rule"] == "outlasted"
    assert 40.0 <= first["detect_latency_s"] <= 40.0 + 4.0  # the hold, plus the lone-freeze budget


def test_a_peer_heard_again_lets_a_frozen_host_go_at_once(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "alone-now", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.fleet = FleetLiveness(5.0, lambda: True, hold_s=300.0, clock=clock.monotonic,
                              segments={"alone-now": "rack", "peer": "rack", "third": "rack"})
    _with_a_peer(ctx, fake, "peer", answering="third")
    run_host(fake, ctx)
    first = records(ctx)[0]
    assert first["outcome"] == "wedge" and first["detect_latency_s"] < 6.0
    assert not events(ctx, "silence_hold")  # "third" answers on the same segment: never held


def test_a_controller_outage_of_120_s_after_a_kernel_answer_cycles_nothing(tmp_path: Path) -> None:
    """The stream stops and the kernel answers without sshd (a userspace stall); 10 s later the
    controller's own network is down for 120 s, twice the 60 s userspace window (every round
    DEAD, the guard down); then the kernel answers 40 s more and sshd is back. DEAD rounds
    restart the window and the userspace verdict asks the guard: no wedge, no power action."""
    from reprofleet.liveness.probes import ProbeAnswer

    clock = VirtualClock()
    fake = FakeHost(clock, "ko", script=("stuck", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=1, attempt_timeout=400), tmp_path, clock)
    stalled: list[float] = []
    write_event = ctx.event

    def note_the_stall(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if str(getattr(what, "value", what)) == "suspect" and not stalled:
            stalled.append(clock.monotonic())

    def since() -> float:
        return clock.monotonic() - stalled[0] if stalled else -1.0

    def probe() -> ProbeAnswer:
        t = since()
        if t < 0 or t >= 170.0:
            return ProbeAnswer.SSHD
        return ProbeAnswer.DEAD if 10.0 <= t < 130.0 else ProbeAnswer.KERNEL

    fake.probe = probe  # type: ignore[method-assign]
    ctx.event = note_the_stall  # type: ignore[method-assign]
    ctx.fleet.report_to(ctx.event)
    ctx.fleet.network_ok = lambda: not 10.0 <= since() < 130.0
    run_host(fake, ctx)
    assert stalled and [r["outcome"] for r in records(ctx)] != ["wedge"]
    assert not events(ctx, "wedge") and not events(ctx, "recovery")
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    answers = [e["answer"] for e in events(ctx, "probe")]
    assert answers[:3] == ["KERNEL", "DEAD", "KERNEL"]
    assert [e["network"] for e in events(ctx, "guard")][:2] == ["down", "up"]


def test_a_userspace_wedge_found_between_attempts_waits_the_boot_deadline_then_is_cycled(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "userland", script=("clean", "clean", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=3, boot=30), tmp_path, clock)

    def dies_before_the_second(host: str, **fields: Any) -> None:
        if fields.get("status") == "running" and fields.get("attempt") == 2 and len(fake.boot_ids) == 1:
            fake.freeze_userspace()  # sshd is gone, the kernel still answers

    ctx.progress = dies_before_the_second
    waited_from = clock.monotonic()
    run_host(fake, ctx)
    found = records(ctx)
    assert [r["outcome"] for r in found] == ["clean", "infra", "clean"]  # one infra, then cycled and back
    assert "unreachable before the attempt; recovered" in found[1]["reason"]
    assert "set off" in fake.device.requests and len(fake.boot_ids) == 2
    assert not events(ctx, "quarantined") and clock.monotonic() - waited_from >= 30  # the boot deadline first


# -- issue 36 item 1: where the log cannot tell before or inside capture, the record says so

SEED_0251 = ("engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache", "flashinfer_autotune",
             "attention_warmup", "kernel_warmup")  # 0.25.1's order; its last line the seed's "Skipping CuTeDSL warmup"


def test_a_freeze_after_the_last_warmup_line_is_recorded_with_capture_starts_next(tmp_path: Path) -> None:
    from reprofleet.records.reader import RecordedAttempt

    clock = VirtualClock()
    fake = FakeHost(clock, "cute", script=("wedge", "clean"), boot_delay_s=0.3)
    fake.phases = SEED_0251
    ctx = seam_context(seam_book(tmp_path, attempts=2, attempt_timeout=30), tmp_path, clock)
    run_host(fake, ctx)
    wedge, clean = records(ctx)
    assert (wedge["outcome"], wedge["last_phase"]) == ("wedge", "kernel_warmup")
    assert wedge["phase_note"] == "after kernel warmup; capture starts next"
    assert clean["outcome"] == "clean"
    assert RecordedAttempt.from_json(wedge).phase_note == wedge["phase_note"]
    through = {**wedge, "phases": [*SEED_0251, "cuda_graph_capture", "ready"], "last_phase": "ready",
               "phase_note": "anything a record file says"}
    assert RecordedAttempt.from_json(through).phase_note is None  # a reader derives it, never reads it
