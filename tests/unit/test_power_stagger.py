"""The inrush gate: at most N outlets of one power device switched on within M seconds.

Four hosts on one PDU recovered at once (a correlated wedge), in threads, on a virtual
clock: no two "on"s within the window; hosts on another PDU are not held back by them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from reprofleet.clock import SystemClock, VirtualClock
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState
from reprofleet.power.base import DeviceCycle, PowerDriver
from reprofleet.power.ports import HostPower, cycle_host
from reprofleet.power.stagger import Stagger, admissible, earliest_slot, gate_for


class LockstepClock:
    """Virtual time for a group of threads that run at once: a sleep blocks until every thread
    of the group sleeps (or has finished), then time jumps to the earliest wake-up. Four hosts
    cycled together thus reach their "on" at the same virtual moment, in causal order (a shared
    VirtualClock would instead add their dwells up and spread the "on"s by itself)."""

    def __init__(self, threads: int, start: float = 1000.0) -> None:
        self._cond = threading.Condition()
        self._now = start
        self._active = threads
        self._wakes: dict[int, float] = {}

    def monotonic(self) -> float:
        with self._cond:
            return self._now

    def wall(self) -> float:
        return self.monotonic() + 1_779_999_000.0

    def _advance(self) -> None:
        if self._wakes and len(self._wakes) >= self._active:
            self._now = max(self._now, min(self._wakes.values()))
            self._cond.notify_all()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        me = threading.get_ident()
        with self._cond:
            wake = self._now + seconds
            self._wakes[me] = wake
            self._advance()
            for _ in range(10_000):
                if self._now >= wake:
                    break
                self._cond.wait(5.0)
            del self._wakes[me]

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if not event.is_set():
            self.sleep(timeout)
        return event.is_set()

    def done(self) -> None:
        """The calling thread leaves the group (its work ended)."""
        with self._cond:
            self._active -= 1
            self._advance()


class Outlet(PowerDriver):
    """An outlet that records the virtual time of every "on" it is sent, per device."""

    name = "gated"

    def __init__(self, log: PowerLog, clock: Any, pdu: str, outlet: str, ons: list[tuple[str, float]],
                 lock: threading.Lock, **options: object) -> None:
        options = {"settle_s": 1.0, "poll_s": 0.1, **options}
        super().__init__(PowerPort("gated", pdu, outlet, options=frozen_mapping(options)), f"ws-{pdu}-{outlet}", log)
        self.clock = clock
        self.state = PowerState.ON
        self.ons, self.journal_lock = ons, lock

    def _set(self, state: PowerState) -> None:
        if state is PowerState.ON:
            with self.journal_lock:
                self.ons.append((self.port.address, self.clock.monotonic()))
        self.state = state

    def _read(self) -> PowerState:
        return self.state


def cycle_together(outlets: list[Outlet], clock: LockstepClock) -> None:
    def cycle(outlet: Outlet) -> None:
        try:
            cycle_host(HostPower(outlet.host, (outlet,)), 10.0)
        finally:
            clock.done()

    threads = [threading.Thread(target=cycle, args=(o,)) for o in outlets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog(tmp_path / "power.jsonl")


def test_four_hosts_on_one_pdu_cycled_together_never_switch_on_within_the_window(log: PowerLog) -> None:
    clock, ons, lock = LockstepClock(4), [], threading.Lock()
    outlets = [Outlet(log, clock, "10.0.0.50", str(n), ons, lock) for n in range(1, 5)]
    cycle_together(outlets, clock)
    times = sorted(t for _, t in ons)
    assert len(times) == 4 and all(o.state is PowerState.ON for o in outlets)
    assert all(b - a >= 2.0 - 1e-9 for a, b in zip(times, times[1:])), times  # the default: 1 per 2 s


def test_hosts_on_another_pdu_are_not_delayed_by_them(log: PowerLog) -> None:
    clock, ons, lock = LockstepClock(4), [], threading.Lock()
    busy = [Outlet(log, clock, "10.0.0.50", str(n), ons, lock, stagger_window_s=5) for n in range(1, 4)]
    other = Outlet(log, clock, "10.0.0.51", "1", ons, lock, stagger_window_s=5)
    cycle_together([*busy, other], clock)
    busy_times = sorted(t for a, t in ons if a == "10.0.0.50")
    assert all(b - a >= 5.0 - 1e-9 for a, b in zip(busy_times, busy_times[1:]))
    assert busy_times[-1] - busy_times[0] >= 10.0 - 1e-9
    other_on = next(t for a, t in ons if a == "10.0.0.51")
    assert other_on == busy_times[0]  # at the dwell's end, as the first of the busy PDU's: it never queued
    waits = {(line["address"], line["outlet"]): line["note"] for line in log.read() if line["action"] == "on"}
    assert waits[("10.0.0.51", "1")] is None
    assert sum("inrush gate" in str(note) for key, note in waits.items() if key[0] == "10.0.0.50") == 2


def test_n_outlets_per_window_let_n_on_together(log: PowerLog) -> None:
    clock, ons, lock = LockstepClock(4), [], threading.Lock()
    outlets = [Outlet(log, clock, "10.0.0.52", str(n), ons, lock, stagger_on=2, stagger_window_s=4)
               for n in range(1, 5)]
    cycle_together(outlets, clock)
    times = sorted(t for _, t in ons)
    assert all(times[i + 2] - times[i] >= 4.0 - 1e-9 for i in range(len(times) - 2)), times
    assert times[0] == times[1]  # two may go together


def test_a_device_cycles_own_on_is_reserved_where_it_will_happen() -> None:
    clock = VirtualClock()
    gate = gate_for("pdu:reserve-test", clock, None)
    stagger = Stagger(1, 2.0)
    assert gate.wait_turn(stagger, lead_s=10.0) == 0.0  # a device cycle: its "on" lands in 10 s
    assert gate.wait_turn(stagger) == 0.0  # an "on" now is far from it
    assert gate.wait_turn(stagger, lead_s=9.0) == pytest.approx(3.0)  # 9 s out would be 1 s from both


def test_the_gate_between_processes_is_a_file_in_the_lock_folder(tmp_path: Path) -> None:
    folder = tmp_path / "locks"
    gate_a, gate_b = gate_for("pdu:file-test", SystemClock(), folder), None
    stagger = Stagger(1, 30.0, wait_cap_s=0.0)  # no waiting: an "on" in the window is refused at once
    assert gate_a.wait_turn(stagger) == 0.0
    assert list(folder.glob("stagger-*.json"))
    from reprofleet.power.stagger import InrushGate

    gate_b = InrushGate("pdu:file-test", SystemClock(), folder)  # another process's gate: the same file
    with pytest.raises(Exception, match="no inrush slot on pdu:file-test within 0 s"):
        gate_b.wait_turn(stagger)


def test_the_pure_slot_choice() -> None:
    assert admissible([], 5.0, 1, 2.0)
    assert not admissible([4.0], 5.0, 1, 2.0) and admissible([3.0], 5.0, 1, 2.0)
    assert earliest_slot([4.0, 6.0], 5.0, 1, 2.0) == 8.0
    assert earliest_slot([4.0], 5.0, 2, 2.0) == 5.0
    assert earliest_slot([10.0], 5.0, 1, 2.0) == 5.0  # a reservation ahead does not hold an "on" now


def test_every_on_a_driver_sends_waits_its_turn_and_a_device_cycle_reserves_its_own(log: PowerLog) -> None:
    class Cycling(Outlet):
        device_cycles = True

        def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
            return DeviceCycle(off_s=dwell_s, visible=False)

        def _start_device_cycle(self, plan: DeviceCycle) -> None:
            self.state = PowerState.ON  # (reads on at once: the test only looks at the gate)

    clock, ons, lock = VirtualClock(), [], threading.Lock()
    plain = Outlet(log, clock, "10.0.0.53", "1", ons, lock)
    cycling = Cycling(log, clock, "10.0.0.53", "2", ons, lock)
    started = clock.monotonic()
    plain.on()
    cycling.cycle(1.0)  # its device-side "on" at +1 s would be 1 s from the explicit one: it waits 1 s first
    assert clock.monotonic() - started >= 1.0
