"""A device's own power cycle, as the base driver runs it: read back off, wait, read back on,
switch on itself when the device did not, and fall back to off, dwell, on when the device
cannot give the dwell. Played in virtual time against a device whose state is a function
of the clock (what a real PDU or BMC does once asked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState
from reprofleet.power.base import DeviceCycle, PowerActionError, PowerDriver
from reprofleet.power.device_cycle import choice_at_least, covers, seconds_at_least


class TimedDevice(PowerDriver):
    """An outlet whose own cycle is scheduled on the virtual clock.

    ``apply_after_s``: the device starts its off this long after being asked (a BMC applying
    late); ``returns``: whether it switches back on by itself; ``max_off_s``: the longest
    off it can hold; ``visible``: whether the driver promises the off can be read.
    """

    name = "timed"

    def __init__(self, log: PowerLog, clock: VirtualClock, *, max_off_s: float = 60.0,
                 apply_after_s: float = 0.0, returns: bool = True, visible: bool = True, watch_s: float = 0.0,
                 device_off_s: float | None = None, plan_fails: bool = False, **options: object) -> None:
        options = {"settle_s": 5.0, "poll_s": 0.5, "stagger_window_s": 0, **options}
        super().__init__(PowerPort("timed", "10.9.9.8", "2", options=frozen_mapping(options)), "ws01", log)
        self.clock = clock
        self.device_cycles = True
        self.off_s: float | None = None
        self.max_off_s, self.apply_after_s = max_off_s, apply_after_s
        self.returns, self.visible, self.watch_s, self.plan_fails = returns, visible, watch_s, plan_fails
        self.device_off_s = device_off_s  # how long the device really stays off (default: what the plan says)
        self.forced: PowerState | None = PowerState.ON  # the state set by explicit commands
        self.cycle_at: float | None = None
        self.requests: list[str] = []

    def state_now(self) -> PowerState:
        now = self.clock.monotonic()
        if self.cycle_at is None or now < self.cycle_at + self.apply_after_s:
            return self.forced or PowerState.ON
        held = self.device_off_s if self.device_off_s is not None else (self.off_s or 1.0)
        if now < self.cycle_at + self.apply_after_s + held or not self.returns:
            return PowerState.OFF
        return PowerState.ON

    def _set(self, state: PowerState) -> None:
        self.requests.append(f"set {state.value}")
        self.cycle_at, self.forced = None, state

    def _read(self) -> PowerState:
        self.requests.append("read")
        return self.state_now()

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        self.requests.append("plan")
        if self.plan_fails:
            raise PowerError("the PDU refused to set its reboot duration")
        if not self.visible:
            return DeviceCycle(off_s=None, visible=False, watch_s=self.watch_s, note="scripted BMC cycle")
        self.off_s = min(self.max_off_s, max(5.0, dwell_s))
        return DeviceCycle(off_s=self.off_s, note="scripted reboot")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        self.requests.append("start cycle")
        self.cycle_at = self.clock.monotonic()


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog.for_campaign(tmp_path, "c1")


def test_the_device_cycles_itself_read_back_off_then_on_and_no_on_is_sent(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock)
    heard: list[tuple[str, float]] = []
    started = clock.monotonic()
    assert device.cycle(10.0, on_state=lambda s: heard.append((s, clock.monotonic() - started))) is PowerState.ON
    assert "set on" not in device.requests and device.requests.count("start cycle") == 1
    assert [name for name, _ in heard] == ["off", "dwell", "on"]
    assert heard[-1][1] >= 10.0  # back on no sooner than the dwell
    lines = log.read()
    assert [(line["action"], line["result"]) for line in lines] == [("off", "ok"), ("cycle", "ok")]
    assert lines[0]["state"] == "off" and "switched back on by the device's own cycle" in lines[-1]["note"]


def test_a_device_that_does_not_switch_back_on_is_switched_on_explicitly_by_the_settle_time(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock, returns=False)
    started = clock.monotonic()
    assert device.cycle(10.0) is PowerState.ON
    assert device.requests[-2:] == ["set on", "read"]
    assert clock.monotonic() - started <= 10.0 + 5.0 + 1.0  # dwell + settle (+ one poll)
    assert "did not switch back on by itself" in log.read()[-1]["note"]


def test_a_cycle_the_device_never_starts_is_an_error_after_on_is_made_sure_of(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock)
    device._start_device_cycle = lambda plan: device.requests.append("start cycle (ignored)")  # type: ignore
    with pytest.raises(PowerActionError, match="asked off, the device still reports on") as caught:
        device.cycle(10.0)
    assert "switched back on" in str(caught.value)
    assert device.requests[-2:] == ["set on", "read"] and device.state_now() is PowerState.ON


def test_a_dwell_longer_than_the_device_can_hold_is_cycled_off_dwell_on(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock, max_off_s=60.0)
    assert device.cycle(120.0) is PowerState.ON
    assert "start cycle" not in device.requests and "set off" in device.requests and "set on" in device.requests
    assert "cannot give a 120 s dwell (it keeps the outlet off 60 s at most)" in log.read()[-1]["note"]


def test_a_device_cycle_that_cannot_be_prepared_falls_back_before_anything_is_switched(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock, plan_fails=True)
    assert device.cycle(10.0) is PowerState.ON
    assert device.requests[0] == "plan" and device.requests[1] == "set off"
    assert "could not be prepared (the PDU refused" in log.read()[-1]["note"]


def test_the_device_cycle_can_be_declined_per_call(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock)
    assert device.cycle(10.0, device=False) is PowerState.ON
    assert "plan" not in device.requests and "set off" in device.requests


def test_a_bmc_cycle_too_short_to_see_is_accepted_on_reading_on_after_the_watch(log: PowerLog) -> None:
    clock = VirtualClock()
    # off from 0.05 s to 0.15 s after it was asked, read every 0.25 s: never seen
    device = TimedDevice(log, clock, visible=False, apply_after_s=0.05, device_off_s=0.1, watch_s=3.0)
    assert device.cycle(10.0) is PowerState.ON
    assert "set on" not in device.requests
    assert "too short to see" in log.read()[-1]["note"]


def test_a_bmc_that_applies_its_cycle_late_is_not_taken_for_on_before_its_off(log: PowerLog) -> None:
    clock = VirtualClock()
    device = TimedDevice(log, clock, visible=False, apply_after_s=3.0, device_off_s=2.0, watch_s=8.0)
    started = clock.monotonic()
    assert device.cycle(10.0) is PowerState.ON
    assert clock.monotonic() - started >= 5.0  # it waited for the off (at 3 s) and the on after it (at 5 s)
    assert "switched back on by the device's own cycle" in log.read()[-1]["note"]


def test_ctrl_c_in_a_device_cycles_dwell_still_makes_sure_of_on(log: PowerLog) -> None:
    class Interrupted(VirtualClock):
        def sleep(self, seconds: float) -> None:
            if seconds >= 4.0:
                raise KeyboardInterrupt
            super().sleep(seconds)

    device = TimedDevice(log, Interrupted())
    with pytest.raises(KeyboardInterrupt):
        device.cycle(10.0)
    assert device.requests[-2:] == ["set on", "read"]


def test_the_pure_choices_of_a_device_interval() -> None:
    assert seconds_at_least(3.0, 5, 60) == 5 and seconds_at_least(10.2, 5, 60) == 11
    assert seconds_at_least(61, 5, 60) is None
    assert choice_at_least(12, (5, 10, 15, 20, 30, 45, 60)) == 15 and choice_at_least(61, (5, 60)) is None
    assert covers(DeviceCycle(off_s=None), 30.0) and covers(DeviceCycle(off_s=9.99), 10.0)
    assert not covers(DeviceCycle(off_s=5.0), 10.0)
