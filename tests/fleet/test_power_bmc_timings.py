"""Real BMC timings against simulated BMCs as unkind as real ones: a 409 to a power-on right
after a power-off and a refusal during POST are retried until they go through, an untrusted
self-signed certificate is named as such (and not retried), a BMC's own PowerCycle is used
where it is offered, and a slow BMC (seconds per call) stays within the drivers' timeouts."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.conftest_power import SwitchRecorder
from reprofleet.errors import PowerError
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import IpmiBmc, RedfishBmc
from reprofleet.sim.power.switch import write_switch

pytestmark = pytest.mark.fleet

SYSTEMS = ("busy", "post", "cycler", "tls")


@pytest.fixture(scope="module")
def bmc_switches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bmc-switches")
    switches = {name: root / name / "power" for name in (*SYSTEMS, "slow")}
    for name, path in switches.items():
        write_switch(path, name != "post")  # as the BMC starts: its systems start so (post: off)
    return switches


@pytest.fixture(scope="module")
def unkind_bmc(bmc_switches: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedfishBmc]:
    """iDRAC's 409 for 3 s after a power-off, iLO's POST refusals for 2 s after a power-on, its own
    PowerCycle (1 s off), a self-signed certificate; resets applied within a second."""
    bmc = RedfishBmc(tmp_path_factory.mktemp("unkind"), {n: bmc_switches[n] for n in SYSTEMS}, password="bmc-pw-77",
                     apply_delay_s=(0, 1), conflict_after_off_s=3.0, post_s=2.0, power_cycle_off_s=1.0, tls=True)
    bmc.start()
    try:
        yield bmc
    finally:
        bmc.stop()


def redfish(bmc: RedfishBmc, system: str, log: PowerLog, monkeypatch: pytest.MonkeyPatch,
            **options: Any) -> PowerDriver:
    monkeypatch.setenv("RF_TEST_BMC", str(bmc.secret))
    options = {"timeout_s": 5.0, "tries": 8, "backoff_s": 0.5, "backoff_cap_s": 1.0, "settle_s": 8.0, "poll_s": 0.2,
               "stagger_window_s": 0, "verify_tls": str(bmc.ca_file), **options}
    return driver_for(bmc.power_port(system, "env:RF_TEST_BMC", **options), system, log)


def test_a_409_to_power_on_right_after_a_power_off_is_retried_until_it_goes_through(
        unkind_bmc: RedfishBmc, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    busy = redfish(unkind_bmc, "busy", power_log, monkeypatch, device_cycle=False)
    assert busy.off() is PowerState.OFF
    started = time.monotonic()
    assert busy.on() is PowerState.ON
    on = power_log.read()[-1]
    assert on["action"] == "on" and on["result"] == "ok" and on["tries"] >= 2  # refused with 409 first
    assert time.monotonic() - started < 3.0 + 8.0 + 2.0  # the window, the settle, a retry's backoff


def test_a_reset_refused_while_the_host_is_in_post_is_retried(
        unkind_bmc: RedfishBmc, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    host = redfish(unkind_bmc, "post", power_log, monkeypatch, device_cycle=False)
    assert host.on() is PowerState.ON  # off since the BMC started: no 409 window
    assert host.off() is PowerState.OFF  # asked within 2 s of power coming back: refused, then retried
    off = power_log.read()[-1]
    assert off["action"] == "off" and off["result"] == "ok" and off["tries"] >= 2


def test_the_bmcs_own_power_cycle_is_used_where_it_is_listed(
        unkind_bmc: RedfishBmc, bmc_switches: dict[str, Path], power_log: PowerLog,
        monkeypatch: pytest.MonkeyPatch, record_switch: Callable[..., SwitchRecorder]) -> None:
    recorder = record_switch(bmc_switches["cycler"])
    assert redfish(unkind_bmc, "cycler", power_log, monkeypatch).cycle(1.0) is PowerState.ON
    deadline = time.monotonic() + 2.0  # the watcher wires the BMC's state to the switch every 0.2 s
    while recorder.states[-1] is not True and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recorder.stop() == [True, False, True]
    assert [e["action"] for e in power_log.read()] == ["off", "cycle"]  # PowerCycle, and no "On" of ours
    assert "PowerCycle" in power_log.read()[-1]["note"]


def test_an_untrusted_self_signed_certificate_is_named_and_not_retried(
        unkind_bmc: RedfishBmc, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    strict = redfish(unkind_bmc, "tls", power_log, monkeypatch, verify_tls=True)
    with pytest.raises(PowerError, match="TLS certificate not trusted: pin it with the pdu option tls_fingerprint"):
        strict.status()
    assert power_log.read()[-1]["tries"] == 1
    assert redfish(unkind_bmc, "tls", power_log, monkeypatch).status() is PowerState.ON  # its CA bundle
    assert redfish(unkind_bmc, "tls", power_log, monkeypatch, verify_tls=False).status() is PowerState.ON


def test_a_slow_redfish_bmc_answers_within_the_drivers_default_timeouts(
        bmc_switches: dict[str, Path], tmp_path: Path, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    with RedfishBmc(tmp_path / "slow", {"slow": bmc_switches["slow"]}, password="slow-pw", latency_s=1.0,
                    apply_delay_s=(0, 1)) as slow:
        monkeypatch.setenv("RF_TEST_BMC", str(slow.secret))
        impatient = driver_for(slow.power_port("slow", "env:RF_TEST_BMC", timeout_s=0.4, tries=1), "slow", power_log)
        with pytest.raises(PowerError, match="no answer in time"):
            impatient.status()
        started = time.monotonic()
        assert driver_for(slow.power_port("slow", "env:RF_TEST_BMC"), "slow", power_log).status() is PowerState.ON
        assert time.monotonic() - started >= 1.0  # it was slow, and the defaults (60 s a call) waited for it


def test_a_slow_ipmi_bmc_answers_within_the_drivers_default_timeouts(
        bmc_switches: dict[str, Path], tmp_path: Path, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("ipmi_sim") is None:
        pytest.skip("ipmi_sim is not installed (apt-get install openipmi)")
    with IpmiBmc(tmp_path / "ipmi", {"slow": bmc_switches["slow"]}, password="slow-ipmi", latency_s=0.4) as bmcs:
        monkeypatch.setenv("RF_TEST_BMC", bmcs.secret)
        started = time.monotonic()
        assert driver_for(bmcs.power_port("slow", "env:RF_TEST_BMC"), "slow", power_log).status() is PowerState.ON
        assert time.monotonic() - started >= 0.8  # a login and a request, each held 0.4 s
