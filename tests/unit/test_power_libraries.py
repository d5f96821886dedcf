"""The protocol libraries are used the way they are meant to be: no pyghmi worker left running
when a request is retried, and a Redfish driver contacts nothing until asked. (Redfish through
sushy and one pysnmp engine per driver, against the simulators:
tests/fleet/test_power_fleet_libraries.py.)"""

from __future__ import annotations

import threading
import time

import pytest

from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, TransientPowerError, driver_for
from reprofleet.power.drivers.ipmi import call_with_deadline


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
