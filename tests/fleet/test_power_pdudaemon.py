"""The pdudaemon driver against a real pdudaemon. (The command driver against shell commands:
tests/unit/test_power_command.py.)"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from tests.support.conftest_power import Switches, SwitchRecorder
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import PdudaemonServer
from reprofleet.sim.power.daemons import free_port


def pdud(server: PdudaemonServer, outlet: str, log: PowerLog, **options: Any) -> PowerDriver:
    return driver_for(server.power_port(outlet, None, **{"timeout_s": 10.0, "stagger_window_s": 0, **options}),
                      f"ws0{outlet}", log)


@pytest.mark.fleet
def test_pdudaemon_switches_the_host_but_cannot_say_so(pdudaemon_server: PdudaemonServer, switches: Switches,
                                                       power_log: PowerLog) -> None:
    ws02 = pdud(pdudaemon_server, "2", power_log)
    assert ws02.off() is PowerState.UNKNOWN
    assert not switches.is_on("ws02") and switches.is_on("ws01")
    assert ws02.on() is PowerState.UNKNOWN and switches.is_on("ws02")
    assert ws02.status() is PowerState.UNKNOWN
    lines = power_log.read()
    assert {line["result"] for line in lines} == {"unverified"}
    assert lines[-1]["note"] == "this driver cannot read the outlet state"


@pytest.mark.fleet
def test_pdudaemon_cycle_goes_off_then_on(pdudaemon_server: PdudaemonServer, switches: Switches,
                                          power_log: PowerLog, record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(switches["ws03"])
    pdud(pdudaemon_server, "3", power_log).cycle(0.2)
    assert recorder.stop() == [True, False, True]
    cycle = power_log.read()[-1]
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]  # one reboot request, no "on" of ours
    assert "pdudaemon reboot with delay=1" in cycle["note"] and cycle["result"] == "unverified"


@pytest.mark.fleet
def test_pdudaemon_finishes_its_reboot_when_the_controller_is_killed_in_the_dwell(
        pdudaemon_server: PdudaemonServer, switches: Switches) -> None:
    from tests.support.conftest_power import kill_mid_dwell

    port = pdudaemon_server.power_port("2", None, timeout_s=10.0, stagger_window_s=0)
    assert kill_mid_dwell(port, switches["ws02"], 2.0, back_by_s=4.0) == [True, False, True]


@pytest.mark.fleet
def test_pdudaemon_refusing_an_unknown_pdu_is_a_clear_error(pdudaemon_server: PdudaemonServer,
                                                            power_log: PowerLog) -> None:
    with pytest.raises(PowerError, match="HTTP 500: pdudaemon says 'Invalid request'"):
        pdud(pdudaemon_server, "1", power_log, pdu="no-such-pdu").off()


@pytest.mark.fleet
def test_pdudaemon_not_listening_is_a_power_error_in_bounded_time(power_log: PowerLog) -> None:
    port = PowerPort("pdudaemon", f"127.0.0.1:{free_port()}", "1",
                     options=frozen_mapping({"pdu": "x", "timeout_s": 0.5, "tries": 2}))
    started = time.monotonic()
    with pytest.raises(PowerError, match="connection refused.*gave up after 2 tries"):
        driver_for(port, "ws01", power_log).off()
    assert time.monotonic() - started < 5.0
