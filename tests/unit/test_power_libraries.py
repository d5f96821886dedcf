"""The protocol libraries are used the way they are meant to be: Redfish through sushy, one
pysnmp engine per driver, and no pyghmi worker left running when a request is retried."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, TransientPowerError, driver_for
from reprofleet.power.drivers.ipmi import call_with_deadline
from reprofleet.sim.power import RedfishBmc, SnmpPdu


def test_a_timed_out_ipmi_call_has_ended_before_the_timeout_is_reported() -> None:
    finished = threading.Event()

    def slow_set_power() -> str:
        time.sleep(0.4)
        finished.set()  # a late "off" would land here
        return "off"

    with pytest.raises(TransientPowerError, match="no answer within 0.1s"):
        call_with_deadline(slow_set_power, 0.1, "set power off")
    assert finished.is_set()  # so a retry cannot overlap it, nor be overtaken by it


def test_an_ipmi_call_that_will_not_end_is_not_retried() -> None:
    release = threading.Event()
    try:
        with pytest.raises(PowerError, match="still running 0.2s later: not retried") as caught:
            call_with_deadline(lambda: release.wait(5), 0.1, "set power off", late_join_s=0.2)
        assert not isinstance(caught.value, TransientPowerError)
    finally:
        release.set()


def test_redfish_builds_contact_nothing_until_asked() -> None:
    port = PowerPort("redfish", "https://192.0.2.1", None, None, frozen_mapping({"system": "s1"}))
    started = time.monotonic()
    driver = driver_for(port, "ws01", PowerLog(None))
    assert time.monotonic() - started < 0.5 and driver.__dict__["_root"] is None


@pytest.mark.fleet
def test_one_snmp_engine_serves_every_request_of_a_driver(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    switch = tmp_path / "power"
    switch.write_text("on\n")
    with SnmpPdu(tmp_path / "pdu", {"1": switch}, community="eng-comm-1") as pdu:
        monkeypatch.setenv("RF_LIB_COMMUNITY", pdu.secret)
        driver = driver_for(pdu.power_port("1", "env:RF_LIB_COMMUNITY", poll_s=0.05, settle_s=5.0),
                            "ws01", PowerLog(None))
        assert driver.cycle(0.1) is PowerState.ON
    assert driver.engines_built == 1  # type: ignore[attr-defined]


@pytest.mark.fleet
def test_redfish_through_sushy_reads_the_allowed_reset_types_of_the_service(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sushy

    switch = tmp_path / "power"
    switch.write_text("on\n")
    with RedfishBmc(tmp_path / "bmc", {"ws01": switch}, password="lib-bmc-pw") as bmc:
        monkeypatch.setenv("RF_LIB_BMC", str(bmc.secret))
        driver = driver_for(bmc.power_port("ws01", "env:RF_LIB_BMC", poll_s=0.2, settle_s=15.0), "ws01",
                            PowerLog(None))
        assert driver.status() is PowerState.ON
        allowed = driver.__dict__["_allowed"]
        assert sushy.ResetType.FORCE_OFF in allowed and sushy.ResetType.ON in allowed
        assert driver.off() is PowerState.OFF
        assert driver.on() is PowerState.ON
