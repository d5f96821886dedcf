"""Every outlet of a host ends on, whatever fails: ``switch_on_until`` retries each outlet's
"on" with backoff until a deadline, and ``cycle_host`` switches every supply back on even
when the other supply's "off" or "on" failed. In virtual time, against scripted outlets."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, TransientPowerError
from reprofleet.power.base import PowerDriver
from reprofleet.power.ports import HostPower, cycle_host, switch_on_until


class Supply(PowerDriver):
    """One outlet: ``fail_on``/``fail_off`` requests fail (transiently) that many times first."""

    name = "supply"

    def __init__(self, log: PowerLog, clock: VirtualClock, outlet: str, *, fail_on: int = 0, fail_off: int = 0,
                 interrupt_on: bool = False, journal: list[str] | None = None) -> None:
        options = {"settle_s": 1.0, "poll_s": 0.1, "tries": 1, "stagger_window_s": 0}
        super().__init__(PowerPort("supply", "10.9.9.7", outlet, options=frozen_mapping(options)), "ws01", log)
        self.clock = clock
        self.state = PowerState.ON
        self.fail_on, self.fail_off, self.interrupt_on = fail_on, fail_off, interrupt_on
        self.journal = journal if journal is not None else []
        self.on_tries: list[float] = []

    def _set(self, state: PowerState) -> None:
        if state is PowerState.ON:
            self.on_tries.append(self.clock.monotonic())
            if self.interrupt_on:
                self.interrupt_on = False
                raise KeyboardInterrupt
            if self.fail_on:
                self.fail_on -= 1
                raise TransientPowerError("HTTP 409: the BMC is busy with an earlier power change")
        elif self.fail_off:
            self.fail_off -= 1
            raise TransientPowerError("no answer")
        self.journal.append(f"{self.port.outlet} {state.value}")
        self.state = state

    def _read(self) -> PowerState:
        return self.state


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog.for_campaign(tmp_path, "c1")


def test_an_on_that_fails_is_retried_with_backoff_until_it_reads_on(log: PowerLog) -> None:
    clock = VirtualClock()
    flaky = Supply(log, clock, "1", fail_on=3)
    flaky.state = PowerState.OFF
    started = clock.monotonic()
    assert switch_on_until(HostPower("ws01", (flaky,)), 60.0) is PowerState.ON
    gaps = [b - a for a, b in zip(flaky.on_tries, flaky.on_tries[1:])]
    assert len(flaky.on_tries) == 4 and gaps[0] < gaps[1] < gaps[2]  # backed off, doubling
    assert clock.monotonic() - started < 60.0


def test_each_outlet_is_retried_on_its_own_and_the_one_still_off_is_named(log: PowerLog) -> None:
    clock = VirtualClock()
    good, stuck = Supply(log, clock, "1"), Supply(log, clock, "2", fail_on=10**6)
    good.state = stuck.state = PowerState.OFF
    started = clock.monotonic()
    still_off = r"still off after 30 s of tries: outlet supply:10.9.9.7:80#2 \(.*409"
    with pytest.raises(PowerError, match=still_off) as caught:
        switch_on_until(HostPower("ws01", (stuck, good)), 30.0)
    assert "#1" not in str(caught.value)
    assert good.state is PowerState.ON and len(good.on_tries) == 1  # on at the first round, never again
    assert 30.0 <= clock.monotonic() - started <= 31.0  # the deadline bounds the tries
    assert len(stuck.on_tries) < 10


def test_an_outlet_that_already_reads_on_is_not_switched_again(log: PowerLog) -> None:
    clock = VirtualClock()
    already = Supply(log, clock, "1")
    assert switch_on_until(HostPower("ws01", (already,)), 30.0) is PowerState.ON
    assert already.on_tries == []


def test_ctrl_c_during_one_outlets_on_still_lets_the_other_outlets_on_go_out(log: PowerLog) -> None:
    clock = VirtualClock()
    first, second = Supply(log, clock, "1", interrupt_on=True), Supply(log, clock, "2")
    first.state = second.state = PowerState.OFF
    with pytest.raises(KeyboardInterrupt):
        switch_on_until(HostPower("ws01", (first, second)), 30.0)
    assert second.state is PowerState.ON


def test_with_no_deadline_each_supplys_on_is_tried_once_and_the_failure_named(log: PowerLog) -> None:
    clock = VirtualClock()
    first, second = Supply(log, clock, "1", fail_on=1), Supply(log, clock, "2")
    with pytest.raises(PowerError, match=r"switching back on failed: ws01: still off after 0 s of tries: .*#1 "):
        cycle_host(HostPower("ws01", (first, second)), 5.0)
    assert second.state is PowerState.ON and len(first.on_tries) == 1


def test_when_the_second_supplys_off_fails_after_the_first_went_off_both_end_on(log: PowerLog) -> None:
    clock = VirtualClock()
    journal: list[str] = []
    first, second = Supply(log, clock, "1", journal=journal), Supply(log, clock, "2", fail_off=10**6, journal=journal)
    with pytest.raises(PowerError, match="gave up after 1 tries.*switched back on"):
        cycle_host(HostPower("ws01", (first, second)), 5.0)
    assert journal == ["1 off", "1 on"] and first.state is second.state is PowerState.ON


def test_when_the_first_supplys_on_fails_the_second_is_still_switched_on_and_the_first_retried(log: PowerLog) -> None:
    clock = VirtualClock()
    journal: list[str] = []
    first, second = Supply(log, clock, "1", fail_on=2, journal=journal), Supply(log, clock, "2", journal=journal)
    assert cycle_host(HostPower("ws01", (first, second)), 5.0, on_deadline_s=60.0) is PowerState.ON
    assert journal == ["1 off", "2 off", "2 on", "1 on"]  # the second did not wait for the first's retries
    assert first.state is second.state is PowerState.ON


def test_a_supply_that_never_comes_on_is_named_after_the_deadline_and_the_other_is_on(log: PowerLog) -> None:
    clock = VirtualClock()
    first, second = Supply(log, clock, "1", fail_on=10**6), Supply(log, clock, "2")
    with pytest.raises(PowerError, match=r"switching back on failed: ws01: still off after 20 s.*#1 "):
        cycle_host(HostPower("ws01", (first, second)), 5.0, on_deadline_s=20.0)
    assert second.state is PowerState.ON


def test_one_outlets_failed_cycle_keeps_trying_its_on_until_the_deadline(log: PowerLog) -> None:
    clock = VirtualClock()
    alone = Supply(log, clock, "1", fail_on=3)  # the cycle's own "on" fails; the retries bring it back
    with pytest.raises(PowerError, match="gave up after 1 tries"):
        cycle_host(HostPower("ws01", (alone,)), 5.0, on_deadline_s=60.0)
    assert alone.state is PowerState.ON and len(alone.on_tries) == 4
