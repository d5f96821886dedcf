"""A plug's own behaviour (power-on state after mains loss, auto-off, power limit, child lock),
read by the real drivers from the simulated Tasmota and Shelly (Gen1, Gen2) plugs, configured
through each device's own API, and judged: the three settings that ruin a night refuse the host
with one line naming the fix; a device that cannot say is ``unknown`` with the check to do."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests

from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, driver_for
from reprofleet.power.plug_behaviour import PlugSettings, PowerOnState, Verdict, judge
from reprofleet.sim.power import plug_tasmota
from reprofleet.sim.power.plug_device import PlugDevice
from reprofleet.sim.power.plug_server import build_request_handler, make_handler
from reprofleet.sim.power.switch import write_switch

HOURS_12 = 12 * 3600.0


class Plug:
    """An in-process simulated plug of one personality (tasmota, shelly1, shelly2)."""

    def __init__(self, tmp_path: Path, personality: str) -> None:
        switch = tmp_path / f"{personality}-power"
        write_switch(switch, True)
        outlet = "1" if personality == "tasmota" else "0"
        self.outlet = outlet
        self.personality = personality
        device = PlugDevice({outlet: switch}, "admin", None, tmp_path / "faults.json", f"{personality}-1")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), build_request_handler(device, make_handler(personality,
                                                                                                    device)))
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"

    def tasmota(self, command: str) -> Any:
        return requests.get(f"{self.address}/cm", params={"cmnd": command}, timeout=5).json()

    def shelly1(self, **settings: Any) -> Any:
        return requests.get(f"{self.address}/settings/relay/0", params=settings, timeout=5).json()

    def shelly2(self, **config: Any) -> Any:
        body = {"id": 1, "method": "Switch.SetConfig", "params": {"id": 0, "config": config}}
        return requests.post(f"{self.address}/rpc", json=body, timeout=5).json()

    def driver(self, log: PowerLog) -> Any:
        driver = self.personality if self.personality == "tasmota" else "shelly"
        options = {"tries": 1} if driver == "tasmota" else {"tries": 1, "gen": self.personality[-1]}
        return driver_for(PowerPort(driver, self.address, self.outlet, options=frozen_mapping(options)), "ws01", log)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def plug(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Plug]:
    made = Plug(tmp_path, request.param)
    yield made
    made.close()


@pytest.fixture
def log(tmp_path: Path) -> PowerLog:
    return PowerLog(tmp_path / "power.jsonl")


def _verdicts(plug: Plug, log: PowerLog, *, campaign_s: float = HOURS_12, gpu_w: float | None = 600.0) -> dict[str, Any]:
    driver = plug.driver(log)
    report = judge(driver.where, driver.plug_settings(), campaign_s=campaign_s, gpu_limit_w=gpu_w)
    return {"report": report, **{s.name: s for s in report.settings}}


@pytest.mark.parametrize("plug", ["tasmota"], indirect=True)
def test_a_tasmota_plug_as_shipped_is_ok_and_reports_all_four_settings(plug: Plug, log: PowerLog) -> None:
    found = _verdicts(plug, log)
    assert found["power-on state"].verdict is Verdict.OK and "PowerOnState 3" in found["power-on state"].found
    assert found["auto-off"].verdict is Verdict.OK and found["power limit"].verdict is Verdict.OK
    assert found["child lock"].verdict is Verdict.RISK and "SetOption73 1" in found["child lock"].advice
    assert found["report"].refusal is None  # an unlocked button is a warning, not a refusal


@pytest.mark.parametrize("plug", ["tasmota"], indirect=True)
def test_a_tasmota_plug_off_after_mains_loss_with_a_pulse_and_a_low_limit_refuses_the_host(plug: Plug,
                                                                                          log: PowerLog) -> None:
    plug.tasmota("PowerOnState 0")
    plug.tasmota("PulseTime1 3700")  # 3600 s: an hour after each "on"
    plug.tasmota("MaxPower 450")
    found = _verdicts(plug, log)
    assert found["power-on state"].refuses and "PowerOnState 1" in found["power-on state"].advice
    assert found["auto-off"].refuses and "3600 s" in found["auto-off"].found and "PulseTime1 0" in found["auto-off"].advice
    assert found["power limit"].refuses and "below the GPU's power limit of 600 W" in found["power limit"].found
    refusal = found["report"].refusal
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith("ws01: pdu tasmota") and "power-on state" in refusal and "fix: " in refusal


@pytest.mark.parametrize("plug", ["shelly1"], indirect=True)
def test_a_shelly_gen1_plug_is_read_from_its_relay_settings(plug: Plug, log: PowerLog) -> None:
    assert _verdicts(plug, log)["report"].refusal is None  # default_state last, auto_off 0, max_power 2500
    plug.shelly1(default_state="off", auto_off="1800")
    found = _verdicts(plug, log)
    assert found["power-on state"].refuses and "default_state off" in found["power-on state"].found
    assert "default_state=on" in found["power-on state"].advice
    assert found["auto-off"].refuses and "auto_off=0" in found["auto-off"].advice
    assert found["child lock"].verdict is Verdict.UNKNOWN and "button" in found["child lock"].advice


@pytest.mark.parametrize("plug", ["shelly2"], indirect=True)
def test_a_shelly_gen2_switch_is_read_from_switch_getconfig(plug: Plug, log: PowerLog) -> None:
    assert _verdicts(plug, log)["report"].refusal is None  # restore_last, auto_off false, power_limit 3680
    assert "result" in plug.shelly2(initial_state="off", auto_off=True, auto_off_delay=7200.0, power_limit=400)
    found = _verdicts(plug, log)
    assert found["power-on state"].refuses and "initial_state off" in found["power-on state"].found
    assert found["auto-off"].refuses and "7200 s" in found["auto-off"].found
    assert found["power limit"].refuses and '"power_limit"' in found["power limit"].advice
    # an auto-off longer than the whole campaign is a warning only
    assert not _verdicts(plug, log, campaign_s=3600.0)["auto-off"].refuses


@pytest.mark.parametrize("plug", ["shelly2"], indirect=True)
def test_a_power_limit_is_judged_only_against_a_known_gpu_limit(plug: Plug, log: PowerLog) -> None:
    plug.shelly2(power_limit=400)
    found = _verdicts(plug, log, gpu_w=None)
    assert found["power limit"].verdict is Verdict.UNKNOWN and not found["power limit"].refuses


def test_a_device_that_reports_nothing_is_unknown_with_the_check_to_do_by_hand() -> None:
    report = judge("ws01: pdu snmp 10.0.0.5 outlet 3", None, campaign_s=HOURS_12, gpu_limit_w=600.0)
    assert [s.verdict for s in report.settings] == [Verdict.UNKNOWN] * 4 and report.refusal is None
    assert "pull the plug from the wall" in report.settings[0].advice


@pytest.mark.parametrize("state, refuses", [(PowerOnState.ON, False), (PowerOnState.LAST, False),
                                            (PowerOnState.OFF, True), (PowerOnState.TOGGLE, True),
                                            (PowerOnState.ON_LOCKED, True)])
def test_each_power_on_state_after_mains_loss(state: PowerOnState, refuses: bool) -> None:
    report = judge("d", PlugSettings(power_on=state), campaign_s=HOURS_12, gpu_limit_w=None)
    assert report.settings[0].refuses is refuses and (report.refusal is not None) is refuses
