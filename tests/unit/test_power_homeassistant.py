"""The Home Assistant driver against the in-process Home Assistant simulator (its REST API on
loopback): status, off, on and a verified cycle; a read-back that disagrees (an overload trip, an
app switch); a refused token; ``unavailable``/``unknown`` as errors, never "off"; the token in no
log line, error or record. Waits run on a virtual clock: no test sleeps."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerConfigError, PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerActionError, PowerDriver, PowerUnansweredError
from reprofleet.power.drivers.homeassistant import parse_entity_state
from reprofleet.sim.power.plug_faults import AfterSwitch
from reprofleet.sim.power.plug_homeassistant import HomeAssistantSim
from reprofleet.sim.power.switch import read_switch, write_switch

TOKEN = "eyJhbGciOiJIUzI1NiJ9.ha-llat-5ecr3t.sig"
ENTITY = "switch.ws01_plug"


@pytest.fixture
def switch(tmp_path: Path) -> Path:
    path = tmp_path / "ws01" / "hw" / "power"
    write_switch(path, True)
    return path


@pytest.fixture
def ha(switch: Path) -> Iterator[HomeAssistantSim]:
    sim = HomeAssistantSim({ENTITY: switch}, token=TOKEN)
    yield sim
    sim.stop()


def driver(ha: HomeAssistantSim, log: PowerLog, token: str = TOKEN, entity: str = ENTITY,
           **options: Any) -> PowerDriver:
    port = PowerPort("homeassistant", ha.address, entity, CredentialRef("env", "RF_HA_TOKEN"),
                     frozen_mapping({"settle_s": 2.0, "poll_s": 0.5, "tries": 2, "stagger_window_s": 0, **options}))
    return driver_for(port, "ws01", log, secrets=lambda ref: Secret(token), clock=VirtualClock())


def test_status_off_on_read_the_entity_and_switch_the_plug(ha: HomeAssistantSim, switch: Path) -> None:
    plug = driver(ha, PowerLog(None))
    assert plug.status() is PowerState.ON
    assert plug.off() is PowerState.OFF and not read_switch(switch)
    assert plug.on() is PowerState.ON and read_switch(switch)
    assert ha.served() == ["GET /api/states/switch.ws01_plug", "POST /api/services/switch/turn_off",
                           "GET /api/states/switch.ws01_plug", "POST /api/services/switch/turn_on",
                           "GET /api/states/switch.ws01_plug"]


def test_a_cycle_is_off_verified_off_dwell_on_verified_on(ha: HomeAssistantSim, switch: Path) -> None:
    plug = driver(ha, PowerLog(None))
    heard: list[tuple[str, bool]] = []
    assert plug.cycle(11.0, lambda step: heard.append((step, read_switch(switch)))) is PowerState.ON
    assert heard == [("off", False), ("dwell", False), ("on", True)]
    assert ha.served() == ["POST /api/services/switch/turn_off", "GET /api/states/switch.ws01_plug",
                           "POST /api/services/switch/turn_on", "GET /api/states/switch.ws01_plug"]
    assert plug.clock.monotonic() >= 1000.0 + 11.0  # the dwell was waited, on the virtual clock


def test_an_overload_trip_after_on_is_a_failed_on_not_a_success(ha: HomeAssistantSim, switch: Path) -> None:
    write_switch(switch, False)
    ha.after_switch = AfterSwitch.OVERLOAD_TRIP
    with pytest.raises(PowerActionError, match="asked on, the device still reports off"):
        driver(ha, PowerLog(None)).on()
    assert not read_switch(switch)


def test_an_app_switch_between_off_and_its_read_back_fails_the_off(ha: HomeAssistantSim, switch: Path) -> None:
    ha.after_switch = AfterSwitch.APP_SWITCH
    with pytest.raises(PowerActionError, match="asked off, the device still reports on"):
        driver(ha, PowerLog(None)).off()


@pytest.mark.parametrize("state", ["unavailable", "unknown"])
def test_unavailable_and_unknown_are_errors_never_off(ha: HomeAssistantSim, state: str) -> None:
    ha.set_entity_state(ENTITY, state)
    log = PowerLog(None)
    with pytest.raises(PowerActionError, match=f"switch.ws01_plug is {state} in Home Assistant") as caught:
        driver(ha, log).status()
    # the plug did not answer Home Assistant: retried, then no answer (never "off")
    assert isinstance(caught.value, PowerUnansweredError) and log.events[-1].tries == 2
    assert log.events[-1].state is None and log.events[-1].result == "failed"


def test_an_off_on_an_unavailable_entity_is_not_verified_off(ha: HomeAssistantSim, switch: Path) -> None:
    ha.set_entity_state(ENTITY, "unavailable")
    with pytest.raises(PowerActionError, match="unavailable"):
        driver(ha, PowerLog(None)).off()
    assert read_switch(switch)  # Home Assistant skipped the call: the host still has power


def test_a_refused_token_is_a_definite_error_naming_no_token(ha: HomeAssistantSim) -> None:
    log = PowerLog(None)
    with pytest.raises(PowerActionError, match="HTTP 401: the device refused the credentials") as caught:
        driver(ha, log, token="wrong-token-9").status()
    assert not isinstance(caught.value, PowerUnansweredError)
    assert "wrong-token-9" not in str(caught.value)


def test_an_unknown_entity_is_named(ha: HomeAssistantSim) -> None:
    with pytest.raises(PowerActionError, match="Home Assistant has no entity switch.ws02_plug"):
        driver(ha, PowerLog(None), entity="switch.ws02_plug").status()


def test_the_token_is_in_no_log_line_error_or_record(ha: HomeAssistantSim, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = PowerLog(tmp_path / "power.jsonl")
    plug = driver(ha, log)
    plug.cycle(0.0)
    ha.after_switch = AfterSwitch.OVERLOAD_TRIP
    errors = []
    with pytest.raises(PowerActionError) as failed_on:
        plug.on()
    errors.append(str(failed_on.value))
    with pytest.raises(PowerError) as failed_cycle:
        plug.cycle(0.0)
    errors.append(str(failed_cycle.value))
    written = (tmp_path / "power.jsonl").read_text()
    assert json.loads(written.splitlines()[0])["driver"] == "homeassistant"
    for text in (written, caplog.text, repr(plug), *errors):
        assert TOKEN not in text and "ha-llat" not in text


def test_an_entity_must_be_a_switch_and_a_token_is_required(ha: HomeAssistantSim) -> None:
    with pytest.raises(PowerConfigError, match="a Home Assistant outlet is a switch entity id"):
        driver(ha, PowerLog(None), entity="light.desk")
    port = PowerPort("homeassistant", ha.address, ENTITY, None, frozen_mapping({}))
    with pytest.raises(PowerConfigError, match="needs credentials: a long-lived access token"):
        driver_for(port, "ws01", PowerLog(None))


def test_entity_states_parse_strictly() -> None:
    assert parse_entity_state({"entity_id": ENTITY, "state": "off"}, ENTITY) is PowerState.OFF
    for reply in ({"entity_id": ENTITY, "state": "idle"}, {"entity_id": "switch.other", "state": "on"}, [], {}):
        with pytest.raises(PowerError):
            parse_entity_state(reply, ENTITY)
