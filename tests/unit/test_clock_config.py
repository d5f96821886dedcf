"""The injectable clock and the one timings object: what the seam tests stand on."""

from __future__ import annotations

import threading
from dataclasses import fields
from pathlib import Path

import pytest

from reprofleet.clock import Clock, SystemClock, VirtualClock
from reprofleet.config import DEFAULT_TIMINGS, Timings
from reprofleet.liveness.watchdog import WatchdogSettings
from reprofleet.power.base import DriverSettings
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner.context import RunSettings


def test_virtual_time_moves_only_when_someone_sleeps_or_waits() -> None:
    clock = VirtualClock(start=100.0, wall_start=1_700_000_000.0)
    assert clock.monotonic() == 100.0 and clock.monotonic() == 100.0
    clock.sleep(2.5)
    assert clock.monotonic() == 102.5 and clock.wall() == 1_700_000_002.5
    stop = threading.Event()
    assert clock.wait(stop, 24 * 3600.0) is False and clock.monotonic() == 102.5 + 24 * 3600.0
    stop.set()
    assert clock.wait(stop, 10.0) is True and clock.monotonic() == 102.5 + 24 * 3600.0  # set: no time passes
    clock.sleep(-1.0)
    assert clock.monotonic() == 102.5 + 24 * 3600.0  # never back


def test_both_clocks_are_clocks() -> None:
    assert isinstance(SystemClock(), Clock) and isinstance(VirtualClock(), Clock)
    stop = threading.Event()
    stop.set()
    assert SystemClock().wait(stop, 5.0) is True


def test_virtual_time_is_one_timeline_for_every_thread() -> None:
    clock = VirtualClock(start=0.0)
    threads = [threading.Thread(target=lambda: [clock.sleep(0.5) for _ in range(100)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock.monotonic() == pytest.approx(200.0)


def test_scaling_shrinks_every_duration_and_no_count() -> None:
    small = DEFAULT_TIMINGS.scaled(0.01)
    for f in fields(Timings):
        value, scaled = getattr(DEFAULT_TIMINGS, f.name), getattr(small, f.name)
        assert scaled == (pytest.approx(value * 0.01) if f.name.endswith("_s") else value), f.name
    assert small.retry_dwell(small.dwell_s) == pytest.approx(DEFAULT_TIMINGS.retry_dwell(10.0) * 0.01)
    with pytest.raises(ValueError):
        DEFAULT_TIMINGS.scaled(0)


def test_the_settings_objects_take_their_defaults_from_the_timings(tmp_path: Path) -> None:
    """No user-visible default changed: the values before the timings moved into one object."""
    assert DEFAULT_TIMINGS.controller_grace_s == 30.0 and DEFAULT_TIMINGS.human_wait_s == 24 * 3600.0
    assert (DEFAULT_TIMINGS.boot_poll_first_s, DEFAULT_TIMINGS.boot_poll_factor, DEFAULT_TIMINGS.boot_poll_cap_s) \
        == (1.0, 1.5, 10.0)
    assert WatchdogSettings() == WatchdogSettings(3.0, 1.0, 0.5, 1.0, 3, 60.0, 5.0, 300.0, 600.0, 3.0)
    assert WatchdogSettings.from_timings(DEFAULT_TIMINGS) == WatchdogSettings()
    assert DriverSettings() == DriverSettings(5.0, 10.0, 3, 0.25, 0.5, 5.0, 120.0)
    transport = TransportSettings(known_hosts=tmp_path)
    assert (transport.connect_timeout, transport.command_timeout, transport.dead_after) == (10.0, 60.0, 15.0)
    run = RunSettings(transport=transport)
    assert (run.dwell_s, run.stability_s, run.reboot_grace_s) == (10.0, 5.0, 30.0)
    fast = run.with_timings(DEFAULT_TIMINGS.scaled(0.1))
    assert (fast.dwell_s, fast.reboot_grace_s, fast.watchdog.silence_s) == pytest.approx((1.0, 3.0, 0.3))
    assert list(zip(range(5), DEFAULT_TIMINGS.boot_polls().delays())) == [
        (0, 1.0), (1, 1.5), (2, 2.25), (3, 3.375), (4, 5.0625)]
