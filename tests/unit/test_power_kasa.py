"""The Kasa/Tapo driver (python-kasa) against the in-process TP-Link simulators on loopback: the
legacy XOR protocol and KLAP (a Tapo's v2 and a Kasa's v1 handshake), plugs and power-strip sockets;
status, off, on and a verified cycle; a read-back that disagrees (an overload trip, an app switch);
the TP-Link account refused; an unreachable or silent device; python-kasa's exceptions read by class;
the password in no log line, error or record. Waits run on a virtual clock: no test sleeps."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from kasa import AuthenticationError, DeviceError, KasaException
from kasa import TimeoutError as KasaTimeoutError
from kasa.exceptions import SmartErrorCode

from reprofleet.clock import VirtualClock
from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerConfigError, PowerLog, PowerState, TransientPowerError, driver_for
from reprofleet.power.base import PowerActionError, PowerDriver, PowerUnansweredError
from reprofleet.power.drivers.kasa import pick_child
from reprofleet.power.drivers.kasa_link import translate
from reprofleet.sim.power.plug_faults import AfterSwitch
from reprofleet.sim.power.plug_kasa import KasaKlapPlug, KasaXorPlug
from reprofleet.sim.power.switch import read_switch, write_switch

USER = "owner@example.com"
PASSWORD = "Tap0-Cl0ud:pw"  # a ':' inside: only the first one splits user from password


@pytest.fixture
def outlets(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / f"ws0{i}" / "hw" / "power" for i in (1, 2, 3)]
    for path in paths:
        write_switch(path, True)
    return paths


@pytest.fixture
def xor_plug(outlets: list[Path]) -> Iterator[KasaXorPlug]:
    sim = KasaXorPlug(outlets[:1])
    yield sim
    sim.stop()


@pytest.fixture
def tapo(outlets: list[Path]) -> Iterator[KasaKlapPlug]:
    sim = KasaKlapPlug(outlets[:1], user=USER, password=PASSWORD)
    yield sim
    sim.stop()


def kasa(address: str, log: PowerLog, outlet: str | None = None, account: str | None = None,
         **options: Any) -> PowerDriver:
    port = PowerPort("kasa", address, outlet, CredentialRef("env", "RF_TPLINK") if account else None,
                     frozen_mapping({"settle_s": 2.0, "poll_s": 0.5, "tries": 2, "timeout_s": 2.0,
                                     "stagger_window_s": 0, **options}))
    return driver_for(port, "ws01", log, secrets=lambda ref: Secret(account or ""), clock=VirtualClock())


def xor(sim: KasaXorPlug, outlet: str | None = None, log: PowerLog | None = None, **options: Any) -> PowerDriver:
    return kasa(sim.address, log or PowerLog(None), outlet, transport="xor", **options)


def klap(sim: KasaKlapPlug, outlet: str | None = None, log: PowerLog | None = None,
         account: str = f"{USER}:{PASSWORD}", **options: Any) -> PowerDriver:
    return kasa(sim.address, log or PowerLog(None), outlet, account, transport="klap", **options)


def test_a_legacy_plug_reads_switches_and_reads_back(xor_plug: KasaXorPlug, outlets: list[Path]) -> None:
    plug = xor(xor_plug)
    assert plug.status() is PowerState.ON
    assert plug.off() is PowerState.OFF and not read_switch(outlets[0])
    assert plug.on() is PowerState.ON and read_switch(outlets[0])
    assert xor_plug.served() == ["get_sysinfo", "set_relay_state", "get_sysinfo", "set_relay_state", "get_sysinfo"]


def test_a_tapo_plug_over_klap_handshakes_once_for_many_requests(tapo: KasaKlapPlug, outlets: list[Path]) -> None:
    plug = klap(tapo)
    assert plug.status() is PowerState.ON
    assert plug.off() is PowerState.OFF and not read_switch(outlets[0])
    assert plug.on() is PowerState.ON and read_switch(outlets[0])
    assert tapo.served() == ["POST /app/handshake1", "POST /app/handshake2"] + ["POST /app/request"] * 5


def test_a_kasa_plug_with_klap_firmware_speaks_iot_over_the_v1_handshake(outlets: list[Path]) -> None:
    sim = KasaKlapPlug(outlets[:1], user=USER, password=PASSWORD, family="iot")
    try:
        plug = klap(sim, family="iot")
        assert plug.off() is PowerState.OFF and not read_switch(outlets[0])
        assert plug.on() is PowerState.ON
    finally:
        sim.stop()


@pytest.mark.parametrize("transport", ["xor", "klap"])
def test_a_cycle_is_off_verified_off_dwell_on_verified_on(transport: str, outlets: list[Path]) -> None:
    sim: Any = KasaXorPlug(outlets[:1]) if transport == "xor" else KasaKlapPlug(outlets[:1], user=USER,
                                                                                 password=PASSWORD)
    try:
        plug = xor(sim) if transport == "xor" else klap(sim)
        heard: list[tuple[str, bool]] = []
        assert plug.cycle(11.0, lambda step: heard.append((step, read_switch(outlets[0])))) is PowerState.ON
        assert heard == [("off", False), ("dwell", False), ("on", True)]
        assert plug.clock.monotonic() >= 1000.0 + 11.0  # the dwell was waited, on the virtual clock
    finally:
        sim.stop()


@pytest.mark.parametrize("outlet", ["2", "by-id"])
def test_a_strip_switches_only_the_named_socket(outlet: str, outlets: list[Path]) -> None:
    for sim in (KasaXorPlug(outlets, strip=True), KasaKlapPlug(outlets, user=USER, password=PASSWORD, strip=True)):
        try:
            name = outlet if outlet != "by-id" else sim.outlets.child_ids[1]
            plug = xor(sim, name) if isinstance(sim, KasaXorPlug) else klap(sim, name)
            assert plug.off() is PowerState.OFF
            assert [read_switch(path) for path in outlets] == [True, False, True]
            assert plug.on() is PowerState.ON and all(read_switch(path) for path in outlets)
        finally:
            sim.stop()


def test_a_socket_the_strip_does_not_have_is_named_with_the_ones_it_has(outlets: list[Path]) -> None:
    sim = KasaKlapPlug(outlets, user=USER, password=PASSWORD, strip=True)
    try:
        with pytest.raises(PowerActionError, match="the strip has no socket 4; its sockets: 1 .*, 2 .*, 3 "):
            klap(sim, "4").status()
    finally:
        sim.stop()
    assert pick_child([(1, "a0"), (2, "a1")], "a1") == "a1"


def test_an_overload_trip_after_on_fails_the_on(tapo: KasaKlapPlug, outlets: list[Path]) -> None:
    write_switch(outlets[0], False)
    tapo.after_switch = AfterSwitch.OVERLOAD_TRIP
    with pytest.raises(PowerActionError, match="asked on, the device still reports off"):
        klap(tapo).on()
    assert not read_switch(outlets[0])


def test_an_app_switch_before_the_read_back_fails_the_off(xor_plug: KasaXorPlug, outlets: list[Path]) -> None:
    xor_plug.after_switch = AfterSwitch.APP_SWITCH
    with pytest.raises(PowerActionError, match="asked off, the device still reports on"):
        xor(xor_plug).off()


def test_a_refused_tplink_account_is_definite_and_not_retried(tapo: KasaKlapPlug, outlets: list[Path]) -> None:
    log = PowerLog(None)
    with pytest.raises(PowerActionError, match="the device refused the TP-Link account") as caught:
        klap(tapo, log=log, account=f"{USER}:not-the-password", tries=3).off()
    assert not isinstance(caught.value, PowerUnansweredError)
    assert tapo.served() == ["POST /app/handshake1"]  # one handshake, no retry, nothing switched
    assert read_switch(outlets[0]) and log.events[-1].result == "failed"


def test_an_unreachable_device_is_unanswered_after_its_tries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    for driver in (kasa(closed, PowerLog(None), transport="xor"),
                   kasa(closed, PowerLog(None), account=f"{USER}:{PASSWORD}", transport="klap")):
        # refused; or silent, where another process took the freed port meanwhile: no answer either way
        with pytest.raises(PowerUnansweredError, match="gave up after 2 tries"):
            driver.status()


def test_a_device_that_accepts_and_never_answers_times_out_as_unanswered() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.05)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        plug = kasa(f"127.0.0.1:{silent.getsockname()[1]}", PowerLog(None), transport="xor", timeout_s=0.1, tries=1)
        with pytest.raises(PowerUnansweredError, match="no answer within 0.1s"):
            plug.status()
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        silent.close()


def test_python_kasas_exceptions_are_read_by_class_not_wording() -> None:
    refused = KasaException("words that may change")
    refused.__cause__ = ConnectionRefusedError(111, "refused")
    assert isinstance(translate(refused, "get_sysinfo", 5), TransientPowerError)
    assert isinstance(translate(KasaTimeoutError("anything"), "get_sysinfo", 5), TransientPowerError)
    assert isinstance(translate(asyncio.TimeoutError(), "get_sysinfo", 5), TransientPowerError)
    auth = translate(AuthenticationError("timeout connection refused"), "handshake", 5)  # words that lie
    assert not isinstance(auth, TransientPowerError) and "refused the TP-Link account" in str(auth)
    coded = translate(DeviceError("x", error_code=SmartErrorCode.PARAMS_ERROR), "set_device_info", 5)
    assert not isinstance(coded, TransientPowerError) and "PARAMS_ERROR" in str(coded)
    assert not isinstance(translate(KasaException("timed out"), "get_sysinfo", 5), TransientPowerError)


def test_the_password_is_in_no_log_line_error_or_record(tapo: KasaKlapPlug, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # python-kasa's own debug logging included
    log = PowerLog(tmp_path / "power.jsonl")
    plug = klap(tapo, log=log)
    plug.cycle(0.0)
    tapo.after_switch = AfterSwitch.OVERLOAD_TRIP
    with pytest.raises(PowerError) as failed:
        plug.cycle(0.0)
    with pytest.raises(PowerActionError) as refused:
        klap(tapo, log=log, account=f"{USER}:{PASSWORD}x").status()
    written = (tmp_path / "power.jsonl").read_text()
    assert '"driver": "kasa"' in written and caplog.text
    for text in (written, caplog.text, repr(plug), str(failed.value), str(refused.value)):
        assert PASSWORD not in text and "Tap0-Cl0ud" not in text


def test_options_say_what_is_missing_or_wrong(xor_plug: KasaXorPlug) -> None:
    with pytest.raises(PowerConfigError, match="pdu option transport is required: klap .* or xor"):
        kasa(xor_plug.address, PowerLog(None))
    with pytest.raises(PowerConfigError, match="KLAP needs the TP-Link account"):
        kasa(xor_plug.address, PowerLog(None), transport="klap")
    with pytest.raises(PowerConfigError, match="the xor transport takes no credentials"):
        kasa(xor_plug.address, PowerLog(None), account="a:b", transport="xor")
    with pytest.raises(PowerConfigError, match="xor transport speaks Kasa's iot family only"):
        kasa(xor_plug.address, PowerLog(None), transport="xor", family="smart")


def test_an_inventorys_kasa_and_home_assistant_blocks_make_drivers_with_one_lock_per_device(
        tmp_path: Path) -> None:
    from reprofleet.inventory import load_inventory

    inventory = tmp_path / "plugs.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        "    ws01:\n      ansible_host: 10.0.0.11\n      pdu: {driver: kasa, address: 192.0.2.43, transport: klap, "
        "outlet: 2, credentials: env:RF_TPLINK}\n"
        "    ws02:\n      ansible_host: 10.0.0.12\n"
        "      pdu: {driver: kasa, address: '192.0.2.44:9999', transport: xor}\n"
        "    ws03:\n      ansible_host: 10.0.0.13\n"
        "      pdu: {driver: homeassistant, address: 'http://192.0.2.8:8123', outlet: switch.ws03_plug,\n"
        "            credentials: file:/nonexistent/ha-token}\n")
    hosts = {host.name: host for host in load_inventory(inventory).hosts}
    made = {name: driver_for(host.pdu, name, PowerLog(None), secrets=lambda ref: Secret("a@b.c:pw"))
            for name, host in hosts.items() if host.pdu is not None}
    assert [type(driver).__name__ for driver in made.values()] == ["KasaDriver", "KasaDriver", "HomeAssistantDriver"]
    assert made["ws01"].device_key == "kasa:192.0.2.43:80" and made["ws02"].device_key == "kasa:192.0.2.44:9999"


# -- the plug's own behaviour (issue 35 item 3) ---------------------------------------------------


def test_a_new_tapo_plug_reports_last_state_no_timer_and_no_limit_so_nothing_refuses(tapo: KasaKlapPlug) -> None:
    from reprofleet.power.plug_behaviour import PowerOnState, judge

    read = klap(tapo).plug_settings()
    assert read is not None
    assert (read.power_on, read.auto_off_s, read.power_limit_w, read.child_lock) == (PowerOnState.LAST, 0.0, 0.0, None)
    report = judge("ws01 kasa", read, campaign_s=8 * 3600, gpu_limit_w=600)
    assert report.refusal is None
    assert [s.verdict.value for s in report.settings] == ["ok", "ok", "ok", "unknown"]  # P110: no button lock to read


def test_a_tapo_plug_set_to_stay_off_with_a_30_minute_auto_off_and_a_500_w_limit_refuses_the_host(
        tapo: KasaKlapPlug) -> None:
    from reprofleet.power.plug_behaviour import PowerOnState, judge

    tapo.outlets.default_states = {"type": "custom", "state": {"on": False}}
    tapo.outlets.auto_off = {"enable": True, "delay_min": 30}
    tapo.outlets.protection = {"enabled": True, "protection_power": 500}
    read = klap(tapo).plug_settings()
    assert read is not None
    assert (read.power_on, read.auto_off_s, read.power_limit_w) == (PowerOnState.OFF, 1800.0, 500.0)
    report = judge("ws01 kasa", read, campaign_s=8 * 3600, gpu_limit_w=600)
    assert [s.refuses for s in report.settings] == [True, True, True, False]
    assert "default_states type custom, on false" in (report.refusal or "")


def test_a_legacy_kasa_plug_reports_only_an_armed_countdown(xor_plug: KasaXorPlug) -> None:
    from reprofleet.power.plug_behaviour import judge

    plug = xor(xor_plug)
    clean = plug.plug_settings()
    assert clean is not None and (clean.power_on, clean.auto_off_s, clean.power_limit_w) == (None, 0.0, None)
    xor_plug.outlets.countdown_rules = [{"id": "7C90311A", "name": "off in 20 min", "enable": 1, "delay": 1200,
                                         "act": 0, "remain": 1200}]
    armed = plug.plug_settings()
    assert armed is not None and armed.auto_off_s == 1200.0
    report = judge("ws01 kasa", armed, campaign_s=3600, gpu_limit_w=None)
    assert report.settings[1].refuses and "count_down" in report.settings[1].found
    assert [s.verdict.value for s in report.settings] == ["unknown", "risk", "unknown", "unknown"]


def test_a_strip_socket_reports_its_own_power_on_state_and_the_rest_is_unknown(outlets: list[Path]) -> None:
    from reprofleet.power.plug_behaviour import PowerOnState

    sim = KasaKlapPlug(outlets, user=USER, password=PASSWORD, strip=True)
    try:
        read = klap(sim, outlet="2").plug_settings()
    finally:
        sim.stop()
    assert read is not None and read.power_on is PowerOnState.LAST
    assert (read.auto_off_s, read.power_limit_w, read.child_lock) == (None, None, None)


def test_settings_answers_that_say_nothing_are_not_reported() -> None:
    from reprofleet.power.drivers.kasa_settings import iot_countdown_s, smart_auto_off_s, smart_power_limit_w, smart_power_on

    assert smart_power_on({"default_states": {"type": "custom", "state": {"brightness": 5}}})[0] is None
    assert smart_power_on(None) == (None, "")
    assert smart_auto_off_s({"enable": "yes", "delay_min": 3}) is None and smart_auto_off_s({"enable": True}) is None
    assert smart_power_limit_w({"protection_power": 300}) is None
    assert smart_power_limit_w({"enabled": True, "protection_power": True}) is None
    assert iot_countdown_s({"count_down": {"err_code": -1, "err_msg": "module not support"}}) is None
    assert iot_countdown_s({"count_down": {"get_rules": {"rule_list": [{"enable": 1, "delay": 60, "act": 1}],
                                                         "err_code": 0}}}) == 0.0  # a countdown that switches ON
