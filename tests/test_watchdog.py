"""Silence makes a suspect; only probes that all fail for the confirm window make a wedge."""

from __future__ import annotations

import threading
import time

from reprofleet.watchdog import FleetLiveness, Verdict, Watchdog, WatchdogSettings

FAST = WatchdogSettings(silence_s=3.0, confirm_s=5.0, probe_interval_s=0.01, probe_timeout_s=0.01)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _wait_probes(dog: Watchdog, count: int) -> None:
    deadline = time.monotonic() + 2
    while dog._prober is not None and dog._prober.probes < count and time.monotonic() < deadline:
        time.sleep(0.005)


def test_a_host_that_keeps_streaming_is_live() -> None:
    clock = FakeClock()
    dog = Watchdog("ws01", lambda: False, FAST, clock=clock)
    for _ in range(10):
        clock.now += 1.0
        dog.heard()
        assert dog.check() is Verdict.LIVE


def test_silence_then_failing_probes_for_the_confirm_window_is_a_wedge() -> None:
    clock = FakeClock()
    dog = Watchdog("ws01", lambda: False, FAST, clock=clock)
    clock.now += 3.5
    assert dog.check() is Verdict.SUSPECT
    _wait_probes(dog, 3)
    clock.now += 4.0
    assert dog.check() is Verdict.SUSPECT  # confirm window not over yet
    clock.now += 1.5
    assert dog.check() is Verdict.WEDGED
    dog.close()


def test_a_silent_host_that_answers_a_probe_is_reattached_not_wedged() -> None:
    clock = FakeClock()
    dog = Watchdog("ws01", lambda: True, FAST, clock=clock)
    clock.now += 4.0
    dog.check()
    _wait_probes(dog, 1)
    clock.now += 10.0
    assert dog.check() is Verdict.ALIVE_BUT_DETACHED
    dog.restart()
    assert dog.check() is Verdict.LIVE


def test_every_host_silent_at_once_blames_the_controller_network() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0)
    dogs = [Watchdog(f"ws0{i}", lambda: False, FAST, fleet=fleet, clock=clock) for i in range(3)]
    clock.now += 4.0
    verdicts = [d.check() for d in dogs]
    for dog in dogs:
        _wait_probes(dog, 3)
    clock.now += 10.0
    verdicts = [d.check() for d in dogs]
    assert verdicts == [Verdict.CONTROLLER_NETWORK] * 3
    for dog in dogs:
        dog.close()


def test_one_silent_host_among_live_ones_is_still_a_wedge() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0)
    silent = Watchdog("ws01", lambda: False, FAST, fleet=fleet, clock=clock)
    live = Watchdog("ws02", lambda: True, FAST, fleet=fleet, clock=clock)
    clock.now += 4.0
    silent.check()
    live.heard()
    _wait_probes(silent, 3)
    clock.now += 6.0
    live.heard()
    assert silent.check() is Verdict.WEDGED
    silent.close()
    live.close()


def test_a_probe_that_raises_counts_as_failed() -> None:
    clock = FakeClock()
    calls = threading.Event()

    def broken() -> bool:
        calls.set()
        raise OSError("network unreachable")

    dog = Watchdog("ws01", broken, FAST, clock=clock)
    clock.now += 4.0
    dog.check()
    assert calls.wait(2)
    _wait_probes(dog, 2)
    clock.now += 6.0
    assert dog.check() is Verdict.WEDGED
    dog.close()


def test_hosts_that_wedge_together_are_wedges_when_a_witness_says_our_network_works() -> None:
    clock = FakeClock()
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: True)
    dogs = [Watchdog(f"ws0{i}", lambda: False, FAST, fleet=fleet, clock=clock) for i in range(2)]
    clock.now += 4.0
    for dog in dogs:
        dog.check()
        _wait_probes(dog, 3)
    clock.now += 6.0
    assert [d.check() for d in dogs] == [Verdict.WEDGED, Verdict.WEDGED]
    for dog in dogs:
        dog.close()


def test_a_cached_witness_is_asked_at_most_once_per_ttl() -> None:
    from reprofleet.witness import CachedWitness

    asked = []
    witness = CachedWitness(lambda: asked.append(1) or True, ttl_s=60)
    assert witness() and witness() and len(asked) == 1


def test_when_our_network_comes_back_each_host_gets_a_fresh_confirm_window() -> None:
    clock = FakeClock()
    network = {"ok": False}
    fleet = FleetLiveness(window_s=5.0, network_ok=lambda: network["ok"])
    dogs = [Watchdog(f"ws0{i}", lambda: False, FAST, fleet=fleet, clock=clock) for i in range(2)]
    clock.now += 4.0
    for dog in dogs:
        dog.check()
        _wait_probes(dog, 3)
    clock.now += 60.0
    assert [d.check() for d in dogs] == [Verdict.CONTROLLER_NETWORK] * 2
    network["ok"] = True
    assert [d.check() for d in dogs] == [Verdict.SUSPECT] * 2  # not wedged at once
    for dog in dogs:
        _wait_probes(dog, 3)
    clock.now += 5.5
    assert [d.check() for d in dogs] == [Verdict.WEDGED] * 2
    for dog in dogs:
        dog.close()
