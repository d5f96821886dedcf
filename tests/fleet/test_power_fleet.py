"""A real power cycle of a simulated host: SNMP client -> simulated PDU -> switch -> hardware."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.sim.power import SnmpPdu

pytestmark = pytest.mark.fleet


def test_a_wedged_host_comes_back_with_a_new_boot_after_a_pdu_power_cycle(
        sim_fleet: Any, tmp_path: Path, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.sim import SimHostSpec

    fleet = sim_fleet([SimHostSpec("pw1", boot_delay_s=0.3)])
    host = fleet.hosts[0]
    first_boot = host.boot_id
    host.freeze()
    assert host.ssh_banner(timeout_s=1.0) is None
    with SnmpPdu(tmp_path / "pdu", {"4": host.paths.power}, community="fleet-comm-3a") as pdu:
        monkeypatch.setenv("RF_TEST_COMMUNITY", pdu.secret)
        driver = driver_for(pdu.power_port("4", "env:RF_TEST_COMMUNITY", poll_s=0.05), host.name, power_log)
        assert driver.off() is PowerState.OFF
        deadline = time.monotonic() + 10.0
        while host.power != "off" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host.power == "off" and not host.is_frozen
        assert driver.on() is PowerState.ON
    host.wait_ssh(timeout_s=20.0)
    assert host.boot_id != first_boot
    assert [(e["action"], e["result"]) for e in power_log.read()] == [("off", "ok"), ("on", "ok")]
