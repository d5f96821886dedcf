"""Fallback devices (``pdu: {fallback: [...]}``, Pacemaker's fencing levels): the next device is used
only when the one before cannot verify its cycle, the power log names which one switched, and
``outlets:`` (every supply switched) cannot be mistaken for it. In virtual time, against scripted
devices; the inventory's syntax against real files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.errors import InventoryError, PowerError
from reprofleet.inventory import load_inventory
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, TransientPowerError
from reprofleet.power.base import PowerDriver
from reprofleet.power.ports import HostPower, PowerPreflightError, build_host_power, cycle_host, switch_on_until


class Device(PowerDriver):
    """One scripted device: ``stuck`` accepts every switch and changes nothing (its read-back never
    agrees), ``dead`` never answers."""

    name = "device"

    def __init__(self, log: PowerLog, clock: VirtualClock, address: str, *, stuck: bool = False,
                 dead: bool = False, level: int | None = None) -> None:
        options = {"settle_s": 1.0, "poll_s": 0.25, "tries": 2, "backoff_s": 0.5, "stagger_window_s": 0}
        super().__init__(PowerPort("device", address, "1", options=frozen_mapping(options)), "ws01", log)
        self.fallback = level
        self.clock = clock
        self.state = PowerState.ON
        self.stuck, self.dead = stuck, dead
        self.switched: list[str] = []

    def _set(self, state: PowerState) -> None:
        if self.dead:
            raise TransientPowerError("no answer")
        self.switched.append(state.value)
        if not self.stuck:
            self.state = state

    def _read(self) -> PowerState:
        if self.dead:
            raise TransientPowerError("no answer")
        return self.state


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog.for_campaign(tmp_path, "c1")


def host(log: PowerLog, *levels: Device) -> HostPower:
    return HostPower("ws01", (levels[0],), tuple((device,) for device in levels[1:]))


def test_a_device_that_cannot_verify_its_cycle_hands_over_to_the_fallback_which_the_log_names(log: PowerLog) -> None:
    clock = VirtualClock()
    bmc = Device(log, clock, "10.0.0.7", stuck=True)  # says yes to "off", still reads on
    pdu = Device(log, clock, "10.0.0.50", level=1)
    told: list[str] = []
    assert cycle_host(host(log, bmc, pdu), 5.0, told.append) is PowerState.ON
    assert pdu.switched == ["off", "on"] and pdu.state is PowerState.ON
    assert told == ["off", "dwell", "on"]  # the fallback's cycle; the failed one never read back off
    lines = [(e["address"], e["fallback"], e["action"], e["result"]) for e in log.read()]
    assert lines[0] == ("10.0.0.7", None, "off", "failed")
    assert ("10.0.0.50", 1, "off", "ok") in lines and ("10.0.0.50", 1, "cycle", "ok") in lines
    assert lines.index(("10.0.0.50", 1, "cycle", "ok")) < lines.index(("10.0.0.7", None, "status", "ok"))


def test_a_device_that_verifies_its_cycle_never_touches_the_fallback(log: PowerLog) -> None:
    clock = VirtualClock()
    bmc, pdu = Device(log, clock, "10.0.0.7"), Device(log, clock, "10.0.0.50", level=1)
    assert cycle_host(host(log, bmc, pdu), 5.0) is PowerState.ON
    assert bmc.switched == ["off", "on"] and pdu.switched == []
    assert {e["fallback"] for e in log.read()} == {None}


def test_the_fallback_is_reached_without_waiting_out_the_first_devices_on_deadline(log: PowerLog) -> None:
    clock = VirtualClock()
    started = clock.monotonic()
    dead = Device(log, clock, "10.0.0.7", dead=True)
    assert cycle_host(host(log, dead, Device(log, clock, "10.0.0.50", level=1)), 5.0,
                      on_deadline_s=120.0) is PowerState.ON
    assert clock.monotonic() - started < 30.0  # not the 120 s of retried "on"s the last device would get


def test_when_no_device_can_verify_its_cycle_the_error_names_each_level(log: PowerLog) -> None:
    clock = VirtualClock()
    dead = Device(log, clock, "10.0.0.7", dead=True)
    stuck = Device(log, clock, "10.0.0.50", stuck=True, level=1)
    with pytest.raises(PowerError, match=r"^ws01: no power device could verify its cycle: its pdu block: switch off: "
                                         r"no answer .*; fallback 1: asked off, the device still reports on"):
        cycle_host(host(log, dead, stuck), 5.0)
    assert stuck.switched == ["off", "on"]  # the last level's "on" was sent too


def test_switching_on_also_switches_on_a_fallback_left_off_and_answers_for_the_hosts_own_device(
        log: PowerLog) -> None:
    clock = VirtualClock()
    bmc, pdu = Device(log, clock, "10.0.0.7"), Device(log, clock, "10.0.0.50", level=1)
    bmc.state = pdu.state = PowerState.OFF  # a controller died in the fallback's cycle
    assert switch_on_until(host(log, bmc, pdu), 10.0, clock) is PowerState.ON
    assert pdu.switched == ["on"] and bmc.switched == ["on"]
    bmc.state, bmc.stuck = PowerState.OFF, True
    with pytest.raises(PowerError, match="still off"):
        switch_on_until(host(log, bmc, pdu), 2.0, clock)  # the fallback reads on: that proves nothing of the BMC


# -- the inventory's syntax ---------------------------------------------------------------------------

def inventory(tmp_path: Path, pdu: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n    ws01:\n      pdu:\n" + textwrap.indent(textwrap.dedent(pdu), " " * 8))
    return path


def test_outlets_are_all_switched_and_fallback_devices_are_tried_in_order(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        driver: tasmota
        address: 10.0.0.60
        outlets: [1, 2]
        fallback:
          - driver: shelly
            address: 10.0.0.61
          - driver: pdudaemon
            address: http://lava:16421
            pdu: rack3
            outlets: [7, 8]
        """)
    (ws01,) = load_inventory(path).hosts
    assert [p.outlet for p in ws01.power_ports] == ["1", "2"]  # both supplies, always switched
    assert [[(p.driver, p.outlet) for p in level] for level in ws01.power_fallbacks] == [
        [("shelly", None)], [("pdudaemon", "7"), ("pdudaemon", "8")]]
    assert "fallback" not in ws01.power_ports[0].options
    power = build_host_power([ws01])["ws01"]
    assert [[d.fallback for d in level] for level in power.levels] == [[None, None], [1], [2, 2]]
    assert power.fallbacks[1][0].where == "ws01: pdu pdudaemon http://lava:16421 outlet 7 (fallback 2)"


def test_a_bad_fallback_block_is_one_line_naming_its_place(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        driver: tasmota
        address: 10.0.0.60
        fallback:
          - driver: snmp
            model: apc_rpdu
            address: 10.0.0.50
            outlet: 7
            setle_s: 3
        """)
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(load_inventory(path).hosts)
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:8:pdu.fallback[0]: ws01: pdu snmp 10.0.0.50 outlet 7: "
                           "unknown pdu option(s) setle_s")


@pytest.mark.parametrize(("fallback", "field", "words"), [
    ("fallback: {driver: snmp, address: 10.0.0.50}", "pdu.fallback", "must be a list of pdu blocks"),
    ("fallback: []", "pdu.fallback", "must be a list of pdu blocks"),
    ("fallback:\n  - {driver: snmp, address: 10.0.0.50, fallback: [{driver: shelly, address: 10.0.0.61}]}",
     "pdu.fallback[0]", "has no fallback of its own"),
    ("fallback:\n  - {address: 10.0.0.50}", "pdu.fallback[0]", "pdu needs 'driver'"),
])
def test_a_fallback_that_is_not_a_list_of_devices_is_refused(tmp_path: Path, fallback: str, field: str,
                                                             words: str) -> None:
    path = inventory(tmp_path, "driver: tasmota\naddress: 10.0.0.60\n" + fallback + "\n")
    with pytest.raises(InventoryError, match=words) as caught:
        load_inventory(path)
    assert str(caught.value.location).endswith(f":{field}")
