"""Stopping never cuts power (issue 32 item 7): a stop while the correlated-silence hold waits
releases the hold with no power action at all, and a first stop on a frozen host returns within
seconds; played at the host seam in virtual time."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.liveness.watchdog import FleetLiveness
from reprofleet.model.events import CampaignEvent
from tests.support.seam_host import FakeHost, events, power_actions, records, run_host, seam_book, seam_context


def _silent_with_a_peer_then_stopped(ctx: Any, peer: str) -> dict[str, float]:
    """A peer falls silent just as the host is declared wedged (their switch is rebooting), so
    recovery's gate holds the cycle; the operator presses Ctrl-C when that hold begins.
    Returns when the stop came."""
    write_event = ctx.event
    stopped: dict[str, float] = {}

    def hook(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        name = str(getattr(what, "value", what))
        if what is CampaignEvent.WEDGE:
            ctx.fleet.silent(peer, ctx.clock.monotonic() - 1.0)
        if name == "silence_hold" and fields.get("before") == "power action" and "at" not in stopped:
            stopped["at"] = ctx.clock.monotonic()
            ctx.stop.set()

    ctx.event = hook
    ctx.fleet.report_to(ctx.event)
    return stopped


def test_a_stop_during_the_hold_releases_it_and_switches_nothing(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "behind-switch", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    ctx.fleet = FleetLiveness(5.0, lambda: True, hold_s=300.0, clock=clock.monotonic)
    stopped = _silent_with_a_peer_then_stopped(ctx, "peer")
    run_host(fake, ctx)
    assert stopped, "the hold never began"
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]
    assert "set off" not in fake.device.requests and "set on" not in fake.device.requests
    assert clock.monotonic() - stopped["at"] <= 5.0  # the first stop returns within 5 s
    first = records(ctx)[0]
    assert first["outcome"] == "wedge"  # what was seen stays on record
    assert "stopped" in first["forensics"]["recovery"]  # and it says nothing was switched


def test_a_stop_while_a_frozen_host_is_suspected_returns_within_seconds(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "frozen", script=("wedge", "clean"))
    ctx = seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock)
    stopped: dict[str, float] = {}
    write_event = ctx.event

    def hook(host: str, what: Any, **fields: Any) -> None:
        write_event(host, what, **fields)
        if what is CampaignEvent.SUSPECT and "at" not in stopped:
            stopped["at"] = clock.monotonic()
            ctx.stop.set()

    ctx.event = hook
    ctx.fleet.report_to(ctx.event)
    run_host(fake, ctx)
    assert stopped and clock.monotonic() - stopped["at"] <= 5.0
    assert not [a for a in power_actions(ctx) if a["action"] in ("off", "on", "cycle")]


def test_a_second_ctrl_c_in_a_cycles_off_dwell_switches_the_host_on_before_exiting(tmp_path: Path) -> None:
    """The host's own thread never gets to its "on" (the process is on its way out): the
    controller switches on every outlet it left off, says so, and only then exits."""
    from reprofleet.campaign.run import make_plan
    from reprofleet.playbook import load_playbook
    from reprofleet.power.base import PowerState
    from tests.support.fleet_campaign import write_playbook
    from tests.support.seam_host import run_fake_campaign, seam_settings

    released = threading.Event()
    main = threading.main_thread()

    class SecondCtrlCInTheDwell(VirtualClock):
        """The operator's second Ctrl-C lands while the cycle waits with the outlet off; the
        host's thread is never scheduled again before the exit."""

        def sleep(self, seconds: float) -> None:
            if fake.device.state is PowerState.OFF and threading.current_thread().name.startswith("host-") \
                    and not released.is_set():
                signal.pthread_kill(main.ident, signal.SIGINT)  # type: ignore[arg-type]
                released.wait(30.0)
            super().sleep(seconds)

    clock = SecondCtrlCInTheDwell()
    fake = FakeHost(clock, "mid-cycle", script=("wedge", "clean"))
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30)
    plan = make_plan(load_playbook(book), [fake.host])
    try:
        with pytest.raises(KeyboardInterrupt) as interrupted:
            run_fake_campaign(plan, [fake], seam_settings(tmp_path), tmp_path / "reports", clock)
    finally:
        released.set()
    assert fake.device.state is PowerState.ON  # switched on by the exit, not left off
    assert "switched back on before exiting: mid-cycle" in str(interrupted.value)
    folder = next(p for p in (tmp_path / "reports").iterdir() if (p / "events.jsonl").is_file())  # not .facts/
    said = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    assert [e["message"] for e in said if e["event"] == "power_on_at_exit"] == [
        "switched back on before exiting: mid-cycle"]
