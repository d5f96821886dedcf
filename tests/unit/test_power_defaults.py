"""Each driver's timings are where a user sees and changes them: invoke.yaml's ``power:``
section lists every driver's own defaults (so the two cannot drift apart), and what it sets
is layered between a driver class's defaults and a pdu: block's options."""

from __future__ import annotations

from typing import Iterator

import pytest
import yaml

from reprofleet.credentials import Secret
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import DRIVERS, PowerConfigError, PowerLog, driver_for
from reprofleet.power.defaults import configure, configured
from reprofleet.power.settings import SETTING_OPTIONS, DriverSettings
from tests.support import paths

INVOKE_YAML = paths.REPO / "invoke.yaml"


@pytest.fixture(autouse=True)
def _drivers_own_defaults() -> Iterator[None]:
    configure(None, DRIVERS)
    yield
    configure(None, DRIVERS)


def power_section() -> dict:
    return yaml.safe_load(INVOKE_YAML.read_text())["reprofleet"]["power"]


def redfish(**options: object) -> object:
    port = PowerPort("redfish", "https://bmc.lab", None, CredentialRef("env", "UNUSED"),
                     frozen_mapping({"system": "s1", **options}))
    return driver_for(port, "ws01", PowerLog(None), secrets=lambda ref: Secret("root:pw"))


def test_invoke_yaml_shows_every_drivers_own_defaults() -> None:
    section = power_section()
    assert set(DRIVERS) <= set(section)
    for name, cls in DRIVERS.items():
        for key, value in section[name].items():
            assert key in SETTING_OPTIONS
            assert getattr(cls.defaults, key) == value, (name, key)
    assert section["stagger_on"] == DriverSettings().stagger_on
    assert section["stagger_window_s"] == DriverSettings().stagger_window_s


def test_the_section_is_layered_between_a_drivers_defaults_and_a_pdu_blocks_options() -> None:
    assert redfish().settings.timeout_s == 60.0  # type: ignore[attr-defined]
    configure({"stagger_window_s": 5, "redfish": {"timeout_s": 90, "tries": 7}}, DRIVERS)
    assert configured()["redfish"] == {"timeout_s": 90, "tries": 7}
    settings = redfish(tries=2).settings  # type: ignore[attr-defined]
    assert (settings.timeout_s, settings.tries, settings.stagger_window_s, settings.connect_s) == (90.0, 2, 5.0, 30.0)


def test_a_misspelt_key_or_driver_in_the_section_is_refused_naming_it() -> None:
    with pytest.raises(PowerConfigError, match=r"invoke.yaml: power.redfish: unknown pdu option\(s\) timout_s"):
        configure({"redfish": {"timout_s": 90}}, DRIVERS)
    with pytest.raises(PowerConfigError, match="invoke.yaml: power.redfsh: no such driver; known drivers: command"):
        configure({"redfsh": {"timeout_s": 90}}, DRIVERS)
    with pytest.raises(PowerConfigError, match="tries must be an integer >= 1"):
        configure({"ipmi": {"tries": 0}}, DRIVERS)
    with pytest.raises(PowerConfigError, match="unknown key dwell"):
        configure({"dwell": 3}, DRIVERS)
