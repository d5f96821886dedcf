"""Resume records everything that ran while the controller was dead, decided at the host seam
in virtual time: an attempt that finished, one still running, a reset of the host under it,
a freeze under it, one that never reached the host, and a host found booting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from tests.support.seam_host import (FakeHost, events, outcomes, power_actions, records, run_host, seam_book, seam_context,
                       started_by_a_dead_controller)


def test_an_attempt_that_finished_while_the_controller_was_dead_is_recorded_from_the_host_and_not_run_again(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "done-away", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "ran-away", index=0)
    fake.finished["ran-away"] = "error"  # it ended with exit 1 while nobody watched
    run_host(fake, ctx)
    assert outcomes(ctx) == [(0, "error"), (1, "clean")]  # slot 0 once, from the host's own exit
    assert records(ctx)[0]["attempt"] == "ran-away" and records(ctx)[0]["exit_code"] == 1
    assert fake.attempts_run == 1  # only slot 1 was started
    (resumed,) = events(ctx, "attempt_resumed")
    assert resumed["status"] == "exited"


def test_an_attempt_still_running_is_followed_to_its_end_not_killed(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "still-running", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "running-away", index=0)
    fake.orphans = [{"id": "running-away", "age_s": 12.0, "outcome": "clean"}]
    run_host(fake, ctx)
    assert outcomes(ctx) == [(0, "clean"), (1, "clean")]
    assert fake.killed == [] and not events(ctx, "orphan_killed")
    assert records(ctx)[0]["attempt"] == "running-away" and records(ctx)[0]["stream"]


def test_a_host_that_reset_itself_under_the_attempt_is_a_reboot_declared_on_resume_with_forensics(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "reset-away", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "reset", index=0)
    fake.lost["reset"] = "boot-before"
    run_host(fake, ctx)
    first = records(ctx)[0]
    assert outcomes(ctx) == [(0, "reboot"), (1, "clean")]
    assert first["reason"].startswith("declared on resume:") and first["boot_id"] == "boot-before"
    assert first["forensics"] is not None
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]  # nothing switched


def test_a_host_frozen_under_the_attempt_is_a_wedge_on_that_attempt_and_recovery_amends_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "frozen-away", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "froze", index=0)
    fake.freeze()
    run_host(fake, ctx)
    first = records(ctx)[0]
    assert outcomes(ctx) == [(0, "wedge"), (1, "clean")]  # the wedge is the attempt's own record, once
    assert first["attempt"] == "froze" and first["reason"].startswith("declared on resume: the host stopped answering")
    assert first["forensics"] and first.get("amended")  # recovery's findings on the real record
    assert [a["action"] for a in power_actions(ctx) if a["action"] in ("off", "on")] == ["off", "on"]
    assert not [r for r in records(ctx) if r["attempt_index"] == -1]  # no placeholder


def test_an_attempt_the_host_never_saw_is_interrupted_and_runs_again(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "never-saw", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    started_by_a_dead_controller(ctx, fake, "lost-in-transit", index=0)
    run_host(fake, ctx)
    assert [(r["outcome"], r["reason"][:11]) for r in records(ctx)] == [("infra", "interrupted"), ("clean", "exit 0")]


def test_a_host_found_booting_at_resume_is_waited_for_not_quarantined(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "booting", script=("clean",) * 2, boot_delay_s=20.0)
    fake._boot(clock.monotonic())  # its kernel is up, its sshd in 20 s (a kill -9 during its recovery)
    original_probe = fake.probe

    def kernel_first() -> Any:
        answer = original_probe()
        return answer if fake.up else type(answer).KERNEL

    fake.probe = kernel_first  # type: ignore[method-assign]
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert outcomes(ctx) == [(0, "clean"), (1, "clean")]
    assert not events(ctx, "quarantined") and not events(ctx, "unreachable_at_start")
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]  # booting: not cycled


def test_a_host_this_campaign_never_saw_answer_is_not_cycled_at_the_start(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "typo", script=("clean",) * 2)
    fake.freeze()  # what a mistyped ansible_host looks like: silent, its outlet on (someone else's machine)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    run_host(fake, ctx)
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    (quarantined,) = events(ctx, "quarantined")
    assert "never answered at 192.0.2.10:22 in this campaign: not switched" in quarantined["reason"]
    assert "--bring-up" in quarantined["reason"]


def test_bring_up_or_having_seen_it_lets_the_campaign_cycle_a_silent_host(tmp_path: Path) -> None:
    for name, kwargs, seen in (("asked", {"bring_up": True}, set()), ("seen", {}, {"seen"})):
        clock = VirtualClock()
        fake = FakeHost(clock, name, script=("clean",) * 2)
        fake.freeze()
        ctx = seam_context(seam_book(tmp_path / name, attempts=1), tmp_path / name, clock, **kwargs)
        ctx.seen_alive = seen
        run_host(fake, ctx)
        assert [a["action"] for a in power_actions(ctx) if a["action"] in ("off", "on")] == ["off", "on"], name
        assert [r["outcome"] for r in records(ctx)] == ["clean"], name


def test_a_host_silent_at_the_start_with_another_is_held_and_not_cut_if_it_answers(tmp_path: Path) -> None:
    """Resumed during a switch outage: this host and another are silent at once. The cycle waits
    for the correlated-silence hold; the switch comes back (and the host with it) within the
    hold, so nothing is switched."""
    from reprofleet.liveness.watchdog import FleetLiveness

    clock = VirtualClock()
    fake = FakeHost(clock, "behind-tor", script=("clean",) * 2)
    fake.freeze()
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    ctx.seen_alive = {"behind-tor"}
    ctx.fleet = FleetLiveness(5.0, lambda: True, hold_s=60.0, clock=clock.monotonic)
    ctx.fleet.report_to(ctx.event)
    ctx.fleet.silent("neighbour", clock.monotonic())
    write_event = ctx.event

    def switch_back_during_the_hold(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if str(getattr(what, "value", what)) == "silence_hold":
            fake.frozen_at = None  # the switch is back 0 s into the hold: the host was fine all along

    ctx.event = switch_back_during_the_hold  # type: ignore[method-assign]
    run_host(fake, ctx)
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    (held,) = events(ctx, "silence_hold")
    assert held["before"] == "power action" and held["rule"] == "correlated" and held["peers"] == ["neighbour"]
    assert [r["outcome"] for r in records(ctx)][-1] == "clean"


def test_a_wedge_recorded_on_resume_carries_the_runtime_its_attempt_ran_so_the_cell_stays_one(tmp_path: Path) -> None:
    """The dead controller had resolved the image on the host; the host froze under its attempt.
    The resume records that wedge before it can prepare the host itself: the record carries the
    image the earlier controller found there (caught on the fleet: the wedge's record had no
    digest, its cell split into two identities, "lgc-2800 ran with 2 different contents")."""
    from reprofleet.campaign.run import resolved_runtimes
    from reprofleet.model.events import CampaignEvent

    clock = VirtualClock()
    fake = FakeHost(clock, "froze-resolved", script=("clean",) * 4)
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    cell = started_by_a_dead_controller(ctx, fake, "froze", index=0)
    tag = str(cell.runtime.image)
    digest = f"{tag.rsplit(':', 1)[0]}@{fake.image_now().replace('img', 'digest')}"  # what the host's docker says
    ctx.event(fake.name, CampaignEvent.RUNTIME_RESOLVED, runtime=cell.runtime.label, kind="docker",
              image_digest=digest, image_id=fake.image_now())  # the dead controller's own line
    fake.freeze()
    run_host(fake, ctx, resolved_before=resolved_runtimes(ctx.directory).get(fake.name, []))
    first, second = records(ctx)
    assert (first["outcome"], second["outcome"]) == ("wedge", "clean")
    assert first["runtime"]["image_digest"] == second["runtime"]["image_digest"] == digest
    assert first["cell_id"] == second["cell_id"]
