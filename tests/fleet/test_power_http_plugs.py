"""Tasmota and Shelly (Gen1, Gen2) drivers against the simulated plugs' real HTTP APIs."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest

from tests.support.conftest_power import Switches, SwitchRecorder, kill_mid_dwell
from reprofleet.errors import PowerError
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import HttpPlugServer, stop_simulator

pytestmark = pytest.mark.fleet

PLUGS = ("tasmota_plug", "shelly1_plug", "shelly2_plug")
FAST = {"timeout_s": 0.5, "tries": 2, "settle_s": 1.0, "poll_s": 0.05, "stagger_window_s": 0}


@pytest.fixture(params=PLUGS)
def plug(request: pytest.FixtureRequest) -> Iterator[HttpPlugServer]:
    server = request.getfixturevalue(request.param)
    server.set_fault("ok")
    yield server
    server.set_fault("ok")


def outlet_of(plug: HttpPlugServer, host: str) -> str:
    return next(outlet for outlet, path in plug.outlets.items() if path.parent.parent.name == host)


def driver(plug: HttpPlugServer, host: str, log: PowerLog, monkeypatch: pytest.MonkeyPatch,
           secret: str | None = None, outlet: str | None = None, **options: Any) -> PowerDriver:
    monkeypatch.setenv("RF_TEST_PLUG", secret or str(plug.secret))
    port = plug.power_port(outlet or outlet_of(plug, host), "env:RF_TEST_PLUG", **{**FAST, **options})
    return driver_for(port, host, log)


def test_off_and_on_flip_only_that_hosts_switch(plug: HttpPlugServer, switches: Switches, power_log: PowerLog,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ws02 = driver(plug, "ws02", power_log, monkeypatch)
    assert ws02.status() is PowerState.ON
    assert ws02.off() is PowerState.OFF
    assert not switches.is_on("ws02") and switches.is_on("ws01") and switches.is_on("ws03")
    assert ws02.status() is PowerState.OFF
    assert ws02.on() is PowerState.ON
    assert switches.is_on("ws02")
    assert [(e["action"], e["result"], e["state"]) for e in power_log.read()] == [
        ("status", "ok", "on"), ("off", "ok", "off"), ("status", "ok", "off"), ("on", "ok", "on")]


def test_a_cycle_switches_the_host_off_then_on(plug: HttpPlugServer, switches: Switches, power_log: PowerLog,
                                               monkeypatch: pytest.MonkeyPatch,
                                               record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(switches["ws03"])
    assert driver(plug, "ws03", power_log, monkeypatch).cycle(0.3) is PowerState.ON
    assert recorder.stop() == [True, False, True]
    cycle = power_log.read()[-1]
    assert (cycle["action"], cycle["result"], cycle["state"]) == ("cycle", "ok", "on")


def test_a_relay_the_plug_does_not_have_is_a_clear_error(plug: HttpPlugServer, power_log: PowerLog,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PowerError, match=r"has no (relay|switch) 7"):
        driver(plug, "ws01", power_log, monkeypatch, outlet="7").off()


def test_wrong_credentials_are_refused_and_never_echoed(plug: HttpPlugServer, switches: Switches,
                                                        power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "admin:not-the-pw-1f9a"
    with pytest.raises(PowerError, match="credentials") as caught:
        driver(plug, "ws01", power_log, monkeypatch, secret=wrong).off()
    assert switches.is_on("ws01")
    assert "not-the-pw-1f9a" not in str(caught.value)
    assert "not-the-pw-1f9a" not in str(power_log.path and power_log.path.read_text())
    assert str(plug.password) not in power_log.path.read_text()  # type: ignore[union-attr]


@pytest.mark.parametrize("fault", ["error", "hang"])
def test_a_plug_that_fails_or_hangs_is_a_power_error_in_bounded_time(
        plug: HttpPlugServer, fault: str, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    ws01 = driver(plug, "ws01", power_log, monkeypatch, timeout_s=0.3, tries=2)
    plug.set_fault(fault)
    started = time.monotonic()
    with pytest.raises(PowerError, match="gave up after 2 tries"):
        ws01.off()
    assert time.monotonic() - started < 5.0
    assert power_log.read()[-1]["tries"] == 2


def test_a_plug_that_acknowledges_but_never_switches_is_caught_by_the_read_back(
        plug: HttpPlugServer, switches: Switches, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    plug.set_fault("ignore_sets")
    with pytest.raises(PowerError, match="asked off, the device still reports on after 0.3s"):
        driver(plug, "ws01", power_log, monkeypatch, settle_s=0.3).off()
    assert switches.is_on("ws01")


def test_a_plug_nobody_listens_on_is_a_power_error_in_bounded_time(
        tmp_path: Any, switches: Switches, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = HttpPlugServer(tmp_path / "gone", "tasmota", {"1": switches["ws01"]}).start()
    stop_simulator(tmp_path / "gone")  # as sim.down does, from another process: by recorded PID
    started = time.monotonic()
    with pytest.raises(PowerError, match="connection refused.*gave up after 2 tries"):
        driver(gone, "ws01", power_log, monkeypatch, secret="x:y").off()
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("plug_fixture", ["shelly1_plug", "shelly2_plug"])
def test_shelly_generation_is_detected_and_its_own_timer_ends_a_cycle(
        plug_fixture: str, request: pytest.FixtureRequest, switches: Switches, power_log: PowerLog,
        monkeypatch: pytest.MonkeyPatch, record_switch: Callable[..., SwitchRecorder]) -> None:
    plug: HttpPlugServer = request.getfixturevalue(plug_fixture)
    monkeypatch.setenv("RF_TEST_PLUG", str(plug.secret))
    port = plug.power_port(outlet_of(plug, "ws02"), "env:RF_TEST_PLUG", **FAST)
    port = type(port)(port.driver, port.address, port.outlet, port.credentials,
                      {k: v for k, v in port.options.items() if k != "gen"})
    ws02 = driver_for(port, "ws02", power_log)
    recorder = record_switch(switches["ws02"])
    assert ws02.cycle(0.2) is PowerState.ON
    assert ws02.gen == (1 if plug_fixture == "shelly1_plug" else 2)  # type: ignore[attr-defined]
    assert recorder.stop() == [True, False, True]
    assert "switched back on by the device's own cycle" in power_log.read()[-1]["note"]
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]  # no "on" sent: the plug's timer did it


def test_a_pdu_block_written_into_an_inventory_drives_the_plug(tasmota_plug: HttpPlugServer, switches: Switches,
                                                               tmp_path: Any, power_log: PowerLog,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from reprofleet.inventory import load_inventory

    monkeypatch.setenv("RF_TEST_PLUG", str(tasmota_plug.secret))
    block = tasmota_plug.pdu_block("3", credentials="env:RF_TEST_PLUG")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"ws03": {"ansible_host": "10.213.0.12", "pdu": block}}}}))
    host = load_inventory(inventory).host("ws03")
    assert host.pdu is not None
    assert driver_for(host.pdu, host.name, power_log).off() is PowerState.OFF
    assert not switches.is_on("ws03")


def test_tasmota_cycles_by_its_own_backlog_and_a_killed_controller_leaves_the_host_on(
        tasmota_plug: HttpPlugServer, switches: Switches, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch,
        record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(switches["ws01"])
    assert driver(tasmota_plug, "ws01", power_log, monkeypatch).cycle(0.5) is PowerState.ON
    assert recorder.stop() == [True, False, True]
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]  # no "on" sent: the Backlog did it
    assert "Backlog with Delay 5" in power_log.read()[-1]["note"]
    port = tasmota_plug.power_port("2", "env:RF_TEST_PLUG", **FAST)
    states = kill_mid_dwell(port, switches["ws02"], 2.0, back_by_s=3.0, env={"RF_TEST_PLUG": str(tasmota_plug.secret)})
    assert states == [True, False, True]  # the plug ran the rest of the Backlog by itself
