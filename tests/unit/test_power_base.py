"""The logic every driver shares: read-back, bounded retries, backoff, locks, the power log.

A scripted in-memory device stands in for the protocol here (pure logic); the protocols
themselves are tested against their simulators in the other test_power_* modules.
"""

from __future__ import annotations

import json
from typing import Any
from dataclasses import replace
from pathlib import Path

import pytest

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, TransientPowerError
from reprofleet.clock import VirtualClock
from reprofleet.power.base import DeviceCycle, PowerActionError, PowerDriver, backoff_delays, lock_key, pdu_lock
from reprofleet.power.options import PowerConfigError

SECRET = "p4ss-3e1d"


class ScriptedDevice(PowerDriver):
    """A device whose behaviour a test sets: apply late, never apply, fail N times."""

    name = "scripted"

    def __init__(self, log: PowerLog, *, applies_after_reads: int = 0, applies: bool = True,
                 transient_failures: int = 0, device_cycles: bool = False, **options: object) -> None:
        options = {"settle_s": 0.2, "poll_s": 0.01, "stagger_window_s": 0, **options}
        port = PowerPort("scripted", "10.9.9.9", "3", options=frozen_mapping(options))
        super().__init__(port, "ws01", log, secret=Secret(SECRET))
        self.settings = replace(self.settings, backoff_s=0.001)
        self.state = PowerState.ON
        self.pending: PowerState | None = None
        self.reads_until_applied = 0
        self.applies_after_reads = applies_after_reads
        self.applies = applies
        self.transient_failures = transient_failures
        self.device_cycles = device_cycles
        self.requests: list[str] = []

    def _fail_maybe(self) -> None:
        if self.transient_failures:
            self.transient_failures -= 1
            raise TransientPowerError(f"no answer (password={SECRET})")

    def _set(self, state: PowerState) -> None:
        self.requests.append(f"set {state.value}")
        self._fail_maybe()
        if self.applies:
            self.pending, self.reads_until_applied = state, self.applies_after_reads

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        return DeviceCycle(off_s=dwell_s)

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        self.requests.append(f"set off flip-back {plan.off_s:g}")
        self.pending, self.reads_until_applied = PowerState.OFF, 0
        self.flip_to_on_after_reads = 2

    def _read(self) -> PowerState:
        self.requests.append("read")
        self._fail_maybe()
        if self.pending is not None:
            if self.reads_until_applied <= 0:
                self.state, self.pending = self.pending, None
            else:
                self.reads_until_applied -= 1
        elif getattr(self, "flip_to_on_after_reads", 0):
            self.flip_to_on_after_reads -= 1
            if not self.flip_to_on_after_reads:
                self.state = PowerState.ON
        return self.state


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog.for_campaign(tmp_path, "c1")


def test_backoff_doubles_and_is_capped() -> None:
    assert backoff_delays(1) == ()
    assert backoff_delays(4, base_s=0.5, factor=2.0, cap_s=1.5) == (0.5, 1.0, 1.5)
    assert backoff_delays(0) == ()


def test_one_lock_per_pdu_whatever_the_address_spelling() -> None:
    assert lock_key("HTTP://10.0.0.5/") == lock_key("10.0.0.5") == lock_key("10.0.0.5:80") == "10.0.0.5:80"
    assert lock_key("10.0.0.5", "udp", 161) == lock_key("10.0.0.5:161", "udp", 161) == "10.0.0.5:161"
    assert lock_key("https://bmc.lab") == lock_key("bmc.lab:443", "https") != lock_key("bmc.lab")
    assert pdu_lock("http://10.0.0.5") is pdu_lock("10.0.0.5:80/")
    assert pdu_lock("10.0.0.5") is not pdu_lock("10.0.0.6")


def test_a_set_is_read_back_until_the_device_applies_it(log: PowerLog) -> None:
    device = ScriptedDevice(log, applies_after_reads=3)
    assert device.off() is PowerState.OFF
    assert device.requests == ["set off", "read", "read", "read", "read"]


def test_a_set_the_device_never_applies_is_a_power_error(log: PowerLog) -> None:
    device = ScriptedDevice(log, applies=False)
    with pytest.raises(PowerActionError, match="off failed: asked off, the device still reports on after 0.2s"):
        device.off()
    assert log.read()[-1]["result"] == "failed"


def test_transient_failures_are_retried_a_bounded_number_of_times(log: PowerLog) -> None:
    device = ScriptedDevice(log, transient_failures=2, tries=3)
    assert device.on() is PowerState.ON
    device = ScriptedDevice(log, transient_failures=5, tries=3)
    with pytest.raises(PowerActionError, match=r"gave up after 3 tries") as caught:
        device.off()
    assert device.requests == ["set off"] * 3
    assert SECRET not in str(caught.value)
    assert "***" in str(caught.value)


def test_a_cycle_reads_back_off_then_on_and_logs_each_step(log: PowerLog) -> None:
    device = ScriptedDevice(log, applies_after_reads=1)
    assert device.cycle(0.01) is PowerState.ON
    lines = log.read()
    assert [(line["action"], line["state"], line["result"]) for line in lines] == [
        ("off", "off", "ok"), ("on", "on", "ok"), ("cycle", "on", "ok")]
    assert all(line["host"] == "ws01" and line["outlet"] == "3" and line["driver"] == "scripted" for line in lines)


def test_a_flip_back_cycle_waits_for_the_device_timer(log: PowerLog) -> None:
    device = ScriptedDevice(log, device_cycles=True)
    assert device.cycle(0.01) is PowerState.ON
    assert "set on" not in device.requests
    assert "switched back on by the device's own cycle" in log.read()[-1]["note"]


def test_a_flip_back_timer_that_does_not_fire_is_backed_up_by_an_explicit_on(log: PowerLog) -> None:
    device = ScriptedDevice(log, device_cycles=True)
    device._start_device_cycle = lambda plan: setattr(device, "state", PowerState.OFF)  # type: ignore[method-assign]
    assert device.cycle(0.01) is PowerState.ON
    assert device.requests[-2:] == ["set on", "read"]


def test_power_log_lines_carry_what_happened_and_no_secret(log: PowerLog) -> None:
    device = ScriptedDevice(log, transient_failures=9, tries=2)
    with pytest.raises(PowerError):
        device.status()
    raw = Path(str(log.path)).read_text()
    assert SECRET not in raw
    line = json.loads(raw.splitlines()[-1])
    assert {"time", "host", "driver", "address", "outlet", "action", "result", "state", "duration_s", "error",
            "tries"} <= set(line)
    assert (line["action"], line["result"], line["tries"]) == ("status", "failed", 2)
    assert log.events[-1].error == line["error"]


def test_a_misspelt_option_is_refused_listing_the_known_ones(log: PowerLog) -> None:
    with pytest.raises(PowerConfigError, match="unknown pdu option.*setle_s.*knows: timeout_s, connect_timeout_s, settle_s"):
        ScriptedDevice(log, setle_s=3)
    with pytest.raises(PowerConfigError, match="tries must be an integer >= 1"):
        ScriptedDevice(log, tries=0)


def test_a_driver_repr_names_the_outlet_not_the_secret(log: PowerLog) -> None:
    device = ScriptedDevice(log)
    assert repr(device) == "<ScriptedDevice ws01: pdu scripted 10.9.9.9 outlet 3>"
    assert SECRET not in repr(device.__dict__)


class OffReadBackLost(ScriptedDevice):
    """Off takes effect, but every read after it is lost until "on" is sent (a BMC that stops answering)."""

    def _read(self) -> PowerState:
        if self.pending is not PowerState.ON and PowerState.OFF in (self.state, self.pending):
            self.requests.append("read")
            self.state, self.pending = PowerState.OFF, None
            raise TransientPowerError("no answer")
        return super()._read()


def test_once_off_was_sent_on_is_sent_even_when_off_never_read_back(log: PowerLog) -> None:
    device = OffReadBackLost(log, tries=2)
    heard: list[str] = []
    with pytest.raises(PowerActionError) as caught:
        device.cycle(0.01, on_state=heard.append)
    assert device.requests[0] == "set off" and "set on" in device.requests
    assert device.state is PowerState.ON  # the host is not left off while it is quarantined
    assert "gave up after 2 tries" in str(caught.value) and "switched back on" in str(caught.value)
    assert heard == []  # "off" never read back, so the callback never heard it


class _CtrlCInTheDwell(VirtualClock):
    """A person presses Ctrl-C while the cycle dwells (any wait of 30 s)."""

    def sleep(self, seconds: float) -> None:
        if seconds >= 30.0:
            raise KeyboardInterrupt
        super().sleep(seconds)


def test_ctrl_c_during_the_dwell_still_switches_on(log: PowerLog) -> None:
    device = ScriptedDevice(log)
    device.clock = _CtrlCInTheDwell()
    with pytest.raises(KeyboardInterrupt):
        device.cycle(30.0)
    assert device.requests[-2:] == ["set on", "read"] and device.state is PowerState.ON


def test_a_cycle_reports_off_dwell_and_on_as_each_happens(log: PowerLog) -> None:
    device = ScriptedDevice(log)
    heard: list[tuple[str, list[str]]] = []
    device.cycle(0.01, on_state=lambda state: heard.append((state, list(device.requests))))
    assert [state for state, _ in heard] == ["off", "dwell", "on"]
    assert "set on" not in heard[1][1] and heard[2][1][-2:] == ["set on", "read"]


def test_a_flip_back_cycle_whose_off_is_lost_is_switched_on_explicitly(log: PowerLog) -> None:
    device = OffReadBackLost(log, device_cycles=True, tries=1)
    with pytest.raises(PowerActionError):
        device.cycle(0.01)
    assert device.requests[0].startswith("set off flip-back") and "set on" in device.requests
    assert device.state is PowerState.ON


def test_a_manual_action_waits_for_a_cycle_of_the_same_outlet_in_another_process(
        log: PowerLog, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from reprofleet.power.locks import file_lock

    device = ScriptedDevice(log)
    device.lock_dir = tmp_path / "locks"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from reprofleet.power.locks import file_lock\n"
        f"with file_lock(Path({str(device.lock_dir)!r}), {('outlet-' + device.outlet_key)!r}, 5, 'test'):\n"
        "    print('held', flush=True); time.sleep(0.8)\n")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    device.off()
    assert time.monotonic() - started > 0.4  # waited for the other process's cycle to end
    holder.wait(5)
    with file_lock(device.lock_dir, f"outlet-{device.outlet_key}", 0.2, "test"):
        with pytest.raises(PowerError, match="another process held"):
            device.settings = replace(device.settings, lock_wait_s=0.1, settle_s=0.05)
            device.on()


def test_pdus_behind_one_pdudaemon_switch_in_parallel_and_one_pdus_requests_never_overlap() -> None:
    import threading
    import time

    from reprofleet.power.drivers.pdudaemon import PdudaemonDriver

    busy: dict[str, int] = {}
    overlaps: list[str] = []

    def slow_set(self: PdudaemonDriver, state: PowerState) -> None:
        key = self.device_key
        busy[key] = busy.get(key, 0) + 1
        if busy[key] > 1:
            overlaps.append(key)
        time.sleep(0.3)
        busy[key] -= 1

    def driver(pdu: str, outlet: str) -> PdudaemonDriver:
        port = PowerPort("pdudaemon", "http://lava:16421", outlet, options=frozen_mapping({"pdu": pdu}))
        made = PdudaemonDriver(port, f"ws-{pdu}-{outlet}", PowerLog(None))
        made._set = slow_set.__get__(made)  # type: ignore[method-assign]
        return made

    def run_all(drivers: list[PdudaemonDriver]) -> float:
        started = time.monotonic()
        threads = [threading.Thread(target=d.off) for d in drivers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        return time.monotonic() - started

    assert run_all([driver("rack1", "1"), driver("rack2", "1"), driver("rack3", "1")]) < 0.75
    assert run_all([driver("rack4", "1"), driver("rack4", "2"), driver("rack4", "3")]) >= 0.85
    assert overlaps == []


def test_a_host_with_two_supplies_has_both_off_before_either_is_on(log: PowerLog) -> None:
    from reprofleet.power.ports import HostPower, cycle_host

    order: list[str] = []
    first, second = ScriptedDevice(log), ScriptedDevice(log)
    second.port = replace(second.port, outlet="4")
    for name, device in (("psu1", first), ("psu2", second)):
        original = device._set

        def traced(state: PowerState, name: str = name, original: Any = original) -> None:
            order.append(f"{name} {state.value}")
            original(state)
        device._set = traced  # type: ignore[method-assign]
    heard: list[str] = []
    assert cycle_host(HostPower("ws01", (first, second)), 0.01, heard.append) is PowerState.ON
    assert order == ["psu1 off", "psu2 off", "psu1 on", "psu2 on"] and heard == ["off", "dwell", "on"]


def test_when_the_second_supply_fails_to_switch_off_the_first_is_switched_back_on(log: PowerLog) -> None:
    from reprofleet.power.ports import HostPower, cycle_host

    first, stuck = ScriptedDevice(log), ScriptedDevice(log, applies=False)
    stuck.port = replace(stuck.port, outlet="4")
    with pytest.raises(PowerError, match="asked off, the device still reports on"):
        cycle_host(HostPower("ws01", (first, stuck)), 0.01)
    assert first.state is PowerState.ON and first.requests[-2:] == ["set on", "read"]
