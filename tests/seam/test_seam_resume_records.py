"""Resume records everything that ran while the controller was dead, decided at the host seam
in virtual time: an attempt that finished, one still running, a reset of the host under it,
a freeze under it, one that never reached the host, and a host found booting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.clock import VirtualClock
from reprofleet.model.events import CampaignEvent
from reprofleet.records.host_hold import epoch_of
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
    ctx.event("behind-tor", CampaignEvent.PREPARED)  # it held the host a moment ago: no other campaign can
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


def _switched_on_by_this_campaign(fake: FakeHost, ctx: Any, seconds_ago: float) -> None:
    """The power log of a controller killed ``seconds_ago`` s after it switched ``fake`` back on
    (through the real driver base, so the line is what a real switch writes); the host boots."""
    from reprofleet.power.log import PowerLog

    fake.lose_power()
    fake.port(ctx).power(PowerLog(ctx.directory.power)).drivers[0].on()
    fake.clock.advance(seconds_ago)


def test_a_resume_waits_for_a_boot_this_campaign_switched_on_before_deciding_anything(tmp_path: Path) -> None:
    """Issue 32 item 6: resumed 5 s after it switched a wedged host on, the host is still booting
    (silent: not even its kernel answers). Its boot is awaited, then it is prepared; nothing is
    switched again and no slot is lost."""
    clock = VirtualClock()
    fake = FakeHost(clock, "booting", script=("clean",) * 2, boot_delay_s=40.0)
    ctx = seam_context(seam_book(tmp_path, attempts=2, boot=60.0), tmp_path, clock)
    _switched_on_by_this_campaign(fake, ctx, seconds_ago=5.0)
    ctx.seen_alive = {"booting"}
    switched_before = len(power_actions(ctx))
    run_host(fake, ctx)
    assert [a["action"] for a in power_actions(ctx)[switched_before:] if a["action"] in ("off", "on", "cycle")] == []
    (awaited,) = events(ctx, "boot_awaited")
    assert awaited["why"] == "switched_on_here" and awaited["switched_s_ago"] == 5.0
    assert [r["outcome"] for r in records(ctx)] == ["clean", "clean"]
    assert not events(ctx, "unreachable_at_start", "quarantined")


def test_a_booting_host_that_never_comes_up_is_a_wedge_in_boot_after_its_deadline(tmp_path: Path) -> None:
    """... and only then decides: a boot this campaign started that does not answer within the
    boot deadline is recovered (cycled), as at any other moment."""
    clock = VirtualClock()
    fake = FakeHost(clock, "stuck-boot", script=("clean",), boot_delay_s=40.0)
    ctx = seam_context(seam_book(tmp_path, attempts=1, boot=60.0), tmp_path, clock)
    _switched_on_by_this_campaign(fake, ctx, seconds_ago=5.0)
    fake.freeze()  # it hangs in its boot
    ctx.seen_alive = {"stuck-boot"}
    switched_before = len(power_actions(ctx))
    started = clock.monotonic()
    run_host(fake, ctx)
    (awaited,) = events(ctx, "boot_awaited")
    assert awaited["why"] == "switched_on_here"
    cut = [a for a in power_actions(ctx)[switched_before:] if a["action"] in ("off", "cycle")]
    assert cut, "a boot that never answered is recovered"
    assert [r["outcome"] for r in records(ctx)] == ["clean"]
    assert clock.monotonic() - started >= 55.0, "the rest of the boot deadline was waited first"


def test_a_silent_host_this_campaign_did_not_hold_within_a_lease_ttl_is_waited_for_and_its_lease_read(
        tmp_path: Path) -> None:
    """Issue 32 item 8: a resume of an older campaign that had this host finds it silent. Another
    campaign holds it now and is bringing it back; this one waits the boot deadline, reads the
    lease and leaves the host alone: no switch of a host another campaign holds."""
    clock = VirtualClock()
    fake = FakeHost(clock, "shared", script=("clean",), boot_delay_s=30.0)
    ctx = seam_context(seam_book(tmp_path, attempts=1, boot=60.0), tmp_path, clock)
    ctx.seen_alive = {"shared"}  # this campaign prepared it once, long ago (its events are older than a TTL)
    fake._boot(clock.monotonic())  # the other campaign's recovery switched it on a moment ago
    fake.lease_holder = {"campaign": "other", "controller": "ctl-b", "pid": 7, "token": "their-token",
                         "renewed": clock.monotonic() + 30.0, "ttl_s": 3600.0}
    run_host(fake, ctx)
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    (awaited,) = events(ctx, "boot_awaited")
    assert awaited["why"] == "may_be_held" and awaited["held_s_ago"] is None
    assert fake.attempts_run == 0
    assert fake.lease_holder["campaign"] == "other"


def test_a_silent_host_this_campaign_held_a_moment_ago_is_recovered_without_waiting(tmp_path: Path) -> None:
    """... while a host this campaign held less than a lease TTL ago is its own to recover: no wait."""
    clock = VirtualClock()
    fake = FakeHost(clock, "mine", script=("clean",))
    fake.freeze()
    ctx = seam_context(seam_book(tmp_path, attempts=1, boot=60.0), tmp_path, clock)
    ctx.seen_alive = {"mine"}
    ctx.event("mine", CampaignEvent.ATTEMPT_STARTED)
    clock.advance(120.0)
    started = clock.wall()
    run_host(fake, ctx)
    assert not events(ctx, "boot_awaited")
    first_cut = next(a for a in power_actions(ctx) if a["action"] in ("off", "cycle"))
    assert epoch_of(first_cut["time"]) - started < 60.0, "cycled before a boot deadline could have passed"
    assert [r["outcome"] for r in records(ctx)] == ["clean"]


def test_a_host_whose_name_does_not_resolve_at_the_start_is_never_switched(tmp_path: Path) -> None:
    """A name that does not resolve (DNS down, a typo) is no proof of silence: even with
    --bring-up, the host is not cut; its slots are not run, with the connect error as reason."""
    from reprofleet.liveness.probes import ProbeAnswer

    clock = VirtualClock()
    fake = FakeHost(clock, "nxdomain", script=("clean",))
    fake.freeze()
    fake.probe = lambda: ProbeAnswer.UNRESOLVED  # type: ignore[method-assign]
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock, bring_up=True)
    run_host(fake, ctx)
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    assert fake.attempts_run == 0 and [r["outcome"] for r in records(ctx)] == ["infra"]
