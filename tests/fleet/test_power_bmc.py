"""The IPMI driver against OpenIPMI's ipmi_sim, the Redfish driver against sushy-tools."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from tests.support.conftest_power import Switches, SwitchRecorder
from reprofleet.errors import PowerError
from reprofleet.power.drivers.ipmi import LATE_JOIN_S
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import IpmiBmc, RedfishBmc
from reprofleet.sim.power.daemons import free_port

pytestmark = pytest.mark.fleet


def ipmi(bmcs: IpmiBmc, host: str, log: PowerLog, monkeypatch: pytest.MonkeyPatch, secret: str | None = None,
         **options: Any) -> PowerDriver:
    monkeypatch.setenv("RF_TEST_BMC", secret or bmcs.secret)
    options = {"timeout_s": 2.0, "tries": 2, "settle_s": 3.0, "poll_s": 0.05, "stagger_window_s": 0, **options}
    return driver_for(bmcs.power_port(host, "env:RF_TEST_BMC", **options), host, log)


def redfish(bmc: RedfishBmc, host: str, log: PowerLog, monkeypatch: pytest.MonkeyPatch, secret: str | None = None,
            **options: Any) -> PowerDriver:
    monkeypatch.setenv("RF_TEST_BMC", secret or str(bmc.secret))
    options = {"timeout_s": 2.0, "tries": 2, "settle_s": 15.0, "poll_s": 0.2, "stagger_window_s": 0, **options}
    return driver_for(bmc.power_port(host, "env:RF_TEST_BMC", **options), host, log)


def test_ipmi_chassis_power_switches_the_host(ipmi_bmcs: IpmiBmc, switches: Switches, power_log: PowerLog,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ws01 = ipmi(ipmi_bmcs, "ws01", power_log, monkeypatch)
    assert ws01.status() is PowerState.ON
    assert ws01.off() is PowerState.OFF
    assert not switches.is_on("ws01") and switches.is_on("ws02")
    assert ws01.status() is PowerState.OFF
    assert ws01.on() is PowerState.ON and switches.is_on("ws01")


def test_ipmi_cycle_goes_off_then_on(ipmi_bmcs: IpmiBmc, switches: Switches, power_log: PowerLog,
                                    monkeypatch: pytest.MonkeyPatch,
                                    record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(switches["ws02"])
    assert ipmi(ipmi_bmcs, "ws02", power_log, monkeypatch).cycle(0.2) is PowerState.ON
    assert recorder.stop() == [True, False, True]
    # ipmi_sim refuses the optional Set Power Cycle Interval (C1h): the BMC's own >= 1 s interval, no "on" of ours
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]
    assert "chassis power cycle with the BMC's own interval" in power_log.read()[-1]["note"]


def test_ipmi_wrong_password_is_refused_without_echoing_it(ipmi_bmcs: IpmiBmc, switches: Switches,
                                                           power_log: PowerLog,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PowerError, match="refused the login") as caught:
        ipmi(ipmi_bmcs, "ws03", power_log, monkeypatch, secret="admin:wrong-pw-8e1").off()
    assert switches.is_on("ws03")
    assert "wrong-pw-8e1" not in str(caught.value)
    raw = power_log.path.read_text()  # type: ignore[union-attr]
    assert "wrong-pw-8e1" not in raw and ipmi_bmcs.password not in raw


def test_ipmi_dead_bmc_is_a_power_error_in_bounded_time(ipmi_bmcs: IpmiBmc, power_log: PowerLog,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ipmi_bmcs.ports["nobody"] = free_port()
    try:
        started = time.monotonic()
        with pytest.raises(PowerError, match="gave up after 2 tries"):
            ipmi(ipmi_bmcs, "nobody", power_log, monkeypatch, timeout_s=0.5).status()
        # each try waits for pyghmi's own timeout to end its worker before the next: no overlap
        assert time.monotonic() - started < 2 * (0.5 + LATE_JOIN_S)
    finally:
        del ipmi_bmcs.ports["nobody"]


def test_redfish_reset_cycles_the_host_despite_the_bmcs_delay(redfish_bmc: RedfishBmc, switches: Switches,
                                                              power_log: PowerLog, monkeypatch: pytest.MonkeyPatch,
                                                              record_switch: Callable[..., SwitchRecorder]) -> None:
    ws02 = redfish(redfish_bmc, "ws02", power_log, monkeypatch)
    assert ws02.status() is PowerState.ON
    recorder = record_switch(switches["ws02"])
    assert ws02.cycle(0.2) is PowerState.ON  # the emulator applies each reset 1-11 s late
    deadline = time.monotonic() + 2.0  # the watcher wires the BMC's state to the switch every 0.2 s
    while not switches.is_on("ws02") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recorder.stop() == [True, False, True]
    assert switches.is_on("ws01") and switches.is_on("ws03")
    assert [(e["action"], e["state"]) for e in power_log.read()][-3:] == [("off", "off"), ("on", "on"),
                                                                         ("cycle", "on")]


def test_redfish_wrong_password_and_unknown_system_are_clear_errors(redfish_bmc: RedfishBmc,
                                                                    power_log: PowerLog,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PowerError, match="HTTP 401: the device refused the credentials") as caught:
        redfish(redfish_bmc, "ws01", power_log, monkeypatch, secret="root:wrong-pw-77d").off()
    assert "wrong-pw-77d" not in str(caught.value)
    with pytest.raises(PowerError, match="HTTP 404: no such resource"):
        redfish(redfish_bmc, "ws09", power_log, monkeypatch).status()
    raw = power_log.path.read_text()  # type: ignore[union-attr]
    assert "wrong-pw-77d" not in raw and str(redfish_bmc.password) not in raw


def test_redfish_without_a_system_on_a_multi_system_bmc_names_them(redfish_bmc: RedfishBmc,
                                                                   power_log: PowerLog,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_BMC", str(redfish_bmc.secret))
    port = redfish_bmc.power_port("ws01", "env:RF_TEST_BMC")
    port = type(port)(port.driver, port.address, None, port.credentials, {})
    with pytest.raises(PowerError, match="lists 3 systems .*name the one to switch with the pdu option system"):
        driver_for(port, "ws01", power_log).status()


def test_redfish_dead_bmc_is_a_power_error_in_bounded_time(power_log: PowerLog,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_BMC", "root:x")
    from reprofleet.credentials import parse_credential_ref
    from reprofleet.model import PowerPort, frozen_mapping

    port = PowerPort("redfish", f"http://127.0.0.1:{free_port()}", None, parse_credential_ref("env:RF_TEST_BMC"),
                     frozen_mapping({"system": "ws01", "timeout_s": 0.5, "tries": 2}))
    started = time.monotonic()
    with pytest.raises(PowerError, match="connection refused.*gave up after 2 tries"):
        driver_for(port, "ws01", power_log).off()
    assert time.monotonic() - started < 5.0
