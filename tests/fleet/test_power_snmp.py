"""The SNMP driver (APC rPDU, APC sPDU, Raritan PX) against a simulated PDU whose OIDs and
error replies were copied from the MIBs and from what real agents send, not from the driver:
daisy-chained APC PDUs addressed exactly, and the PDU's own reboot that brings a host back
even when the controller is killed in the dwell."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.conftest_power import Switches, SwitchRecorder, kill_mid_dwell
from reprofleet.errors import PowerError
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import SnmpPdu
from reprofleet.sim.power.switch import write_switch

pytestmark = pytest.mark.fleet

MODELS = ("apc_rpdu", "apc_spdu", "raritan_px")
FAST = {"timeout_s": 0.5, "tries": 2, "settle_s": 2.0, "poll_s": 0.05, "stagger_window_s": 0}


def driver(pdu: SnmpPdu, outlet: str, log: PowerLog, monkeypatch: pytest.MonkeyPatch, model: str = "apc_rpdu",
           community: str | None = None, **options: Any) -> PowerDriver:
    monkeypatch.setenv("RF_TEST_COMMUNITY", community or pdu.secret)
    host = f"ws0{outlet}" if outlet in "123" else "ws01"
    return driver_for(pdu.power_port(outlet, "env:RF_TEST_COMMUNITY", **{**FAST, "model": model, **options}),
                      host, log)


@pytest.mark.parametrize("model", MODELS)
def test_each_pdu_family_switches_its_outlet(model: str, snmp_pdu: SnmpPdu, switches: Switches,
                                             power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    ws02 = driver(snmp_pdu, "2", power_log, monkeypatch, model=model)
    assert ws02.status() is PowerState.ON
    assert ws02.off() is PowerState.OFF
    assert not switches.is_on("ws02") and switches.is_on("ws01") and switches.is_on("ws03")
    assert ws02.on() is PowerState.ON
    assert switches.is_on("ws02")


def test_a_cycle_switches_the_host_off_then_on(snmp_pdu: SnmpPdu, switches: Switches, power_log: PowerLog,
                                               monkeypatch: pytest.MonkeyPatch,
                                               record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(switches["ws03"])
    assert driver(snmp_pdu, "3", power_log, monkeypatch, model="raritan_px").cycle(0.2) is PowerState.ON
    assert recorder.stop() == [True, False, True]
    assert [(e["action"], e["state"]) for e in power_log.read()] == [("off", "off"), ("on", "on"), ("cycle", "on")]


def test_a_switch_flipped_elsewhere_is_what_the_pdu_reports(snmp_pdu: SnmpPdu, switches: Switches,
                                                            power_log: PowerLog,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_switch(switches["ws01"], False)  # e.g. SimHost.power_off() in a fleet test
    ws01 = driver(snmp_pdu, "1", power_log, monkeypatch, model="apc_spdu")
    deadline = time.monotonic() + 3.0
    while ws01.status() is not PowerState.OFF and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ws01.status() is PowerState.OFF
    assert ws01.on() is PowerState.ON and switches.is_on("ws01")


def test_an_outlet_the_pdu_does_not_have_is_a_clear_error(snmp_pdu: SnmpPdu, power_log: PowerLog,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PowerError, match="answered noCreation: outlet 9 does not exist on this PDU"):
        driver(snmp_pdu, "9", power_log, monkeypatch).off()
    with pytest.raises(PowerError, match="no such OID on this PDU: outlet 9"):
        driver(snmp_pdu, "9", power_log, monkeypatch).status()


def test_a_wrong_control_oid_fails_against_the_simulated_pdu(snmp_pdu: SnmpPdu, power_log: PowerLog,
                                                             switches: Switches,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    typo = driver(snmp_pdu, "1", power_log, monkeypatch, model="generic",  # ...1.1.5 instead of ...1.1.4
                  control_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.5.{outlet}",
                  status_oid="1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.{outlet}")
    with pytest.raises(PowerError, match="answered notWritable"):
        typo.off()
    status_as_control = driver(snmp_pdu, "1", power_log, monkeypatch, model="generic",
                               control_oid="1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.{outlet}")
    with pytest.raises(PowerError, match="answered notWritable"):
        status_as_control.off()  # rPDUOutletStatusOutletState is read-only, as on a real PDU
    assert switches.is_on("ws01")


def test_a_wrong_community_is_a_bounded_error_that_does_not_show_it(snmp_pdu: SnmpPdu, switches: Switches,
                                                                     power_log: PowerLog,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    with pytest.raises(PowerError, match="no SNMP answer.*wrong community") as caught:
        driver(snmp_pdu, "1", power_log, monkeypatch, community="not-it-4c2b", timeout_s=0.3).off()
    assert time.monotonic() - started < 5.0
    assert switches.is_on("ws01")
    assert "not-it-4c2b" not in str(caught.value)
    raw = power_log.path.read_text()  # type: ignore[union-attr]
    assert "not-it-4c2b" not in raw and snmp_pdu.secret not in raw


def test_an_out_of_range_command_is_refused_by_the_agent(snmp_pdu: SnmpPdu, power_log: PowerLog,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    generic = driver(snmp_pdu, "1", power_log, monkeypatch, model="generic",
                     control_oid="1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.{outlet}",
                     status_oid="1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.{outlet}", on_value=1, off_value=9)
    with pytest.raises(PowerError, match="wrongValue"):
        generic.off()


def test_a_dead_pdu_is_a_power_error_in_bounded_time(tmp_path: Any, switches: Switches, power_log: PowerLog,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    gone = SnmpPdu(tmp_path / "gone", {"1": switches["ws01"]}).start()
    gone.stop()
    started = time.monotonic()
    with pytest.raises(PowerError, match="gave up after 2 tries"):
        driver(gone, "1", power_log, monkeypatch, timeout_s=0.3).status()
    assert time.monotonic() - started < 5.0


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SnmpPdu, dict[str, Path]]]:
    """Two daisy-chained APC PDUs: the first has outlets 1, 2 and 7, the second 1 and 7."""
    root = tmp_path_factory.mktemp("chain")
    switches = {name: root / name / "power" for name in ("a1", "a2", "a7", "b1", "b7")}
    for path in switches.values():
        write_switch(path, True)
    pdu = SnmpPdu(root / "pdu", {"1": switches["a1"], "2": switches["a2"], "7": switches["a7"]},
                  chained={2: {"1": switches["b1"], "7": switches["b7"]}}, community="chain-comm-5d")
    pdu.start()
    try:
        yield pdu, switches
    finally:
        pdu.stop()


def on_states(switches: dict[str, Path]) -> dict[str, bool]:
    from reprofleet.sim.power.switch import read_switch

    return {name: read_switch(path) for name, path in switches.items()}


def test_outlet_7_of_the_second_chained_pdu_is_not_outlet_7_of_the_first(
        chain: tuple[SnmpPdu, dict[str, Path]], power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    pdu, switches = chain
    second = driver(pdu, "7", power_log, monkeypatch, pdu_id=2)
    first = driver(pdu, "7", power_log, monkeypatch)
    assert second.off() is PowerState.OFF
    assert on_states(switches) == {"a1": True, "a2": True, "a7": True, "b1": True, "b7": False}
    assert first.status() is PowerState.ON  # the first PDU's outlet 7 was never touched
    assert second.on() is PowerState.ON and all(on_states(switches).values())
    assert first.outlet_key != second.outlet_key and second.outlet_key.endswith("#2.7")
    assert "pdu 2 outlet 7" in second.where and "pdu 2" not in first.where
    logged = [(e["action"], e["pdu"]) for e in power_log.read()]
    assert logged == [("off", "2"), ("status", None), ("on", "2")]


def test_an_outlet_the_chained_pdu_does_not_have_is_named_with_the_pdus_the_chain_lists(
        chain: tuple[SnmpPdu, dict[str, Path]], power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    pdu, switches = chain
    with pytest.raises(PowerError, match="the chain has no outlet 2 on PDU 2 .*PDU ids 1, 2"):
        driver(pdu, "2", power_log, monkeypatch, pdu_id=2).off()
    with pytest.raises(PowerError, match="no outlet 1 on PDU 3"):
        driver(pdu, "1", power_log, monkeypatch, pdu_id=3).status()
    assert all(on_states(switches).values())


def test_a_controller_killed_in_the_dwell_leaves_the_host_on_the_pdu_reboots_it_by_itself(
        chain: tuple[SnmpPdu, dict[str, Path]]) -> None:
    pdu, switches = chain
    port = pdu.power_port("2", "env:RF_TEST_COMMUNITY", **FAST)
    states = kill_mid_dwell(port, switches["a2"], 5.0, back_by_s=7.0, env={"RF_TEST_COMMUNITY": pdu.secret})
    assert states == [True, False, True]


def test_without_the_devices_own_cycle_a_controller_killed_in_the_dwell_strands_the_host(
        chain: tuple[SnmpPdu, dict[str, Path]]) -> None:
    """The same kill with device_cycle off: what the device's own cycle prevents."""
    pdu, switches = chain
    port = pdu.power_port("1", "env:RF_TEST_COMMUNITY", **FAST, device_cycle=False)
    try:
        states = kill_mid_dwell(port, switches["a1"], 5.0, back_by_s=7.0, env={"RF_TEST_COMMUNITY": pdu.secret})
        assert states == [True, False]
    finally:
        write_switch(switches["a1"], True)


@pytest.mark.parametrize("model, dwell, duration", [("apc_rpdu", 6.0, 6), ("apc_spdu", 4.5, 5)])
def test_the_pdus_reboot_duration_is_set_to_the_dwell_and_read_back(
        model: str, dwell: float, duration: int, chain: tuple[SnmpPdu, dict[str, Path]], power_log: PowerLog,
        monkeypatch: pytest.MonkeyPatch, record_switch: Callable[..., SwitchRecorder]) -> None:
    pdu, switches = chain
    recorder = record_switch(switches["a7"])
    started = time.monotonic()
    assert driver(pdu, "7", power_log, monkeypatch, model=model, settle_s=3.0).cycle(dwell) is PowerState.ON
    assert time.monotonic() - started >= duration
    assert recorder.stop() == [True, False, True]
    cycle = power_log.read()[-1]
    assert f"reboot duration {duration} s" in cycle["note"] and "switched back on by the device's own" in cycle["note"]
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]  # no "on" was sent: the PDU did it
