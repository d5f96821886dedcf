"""The protocol libraries against the power simulators: one pysnmp engine serves every request
of a driver, and Redfish goes through sushy, reading the service's allowed reset types. (The
pieces that need no simulator: tests/unit/test_power_libraries.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.sim.power import RedfishBmc, SnmpPdu


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
