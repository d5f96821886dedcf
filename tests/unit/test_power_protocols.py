"""Pure pieces of each protocol: URLs, replies, OID tables, options, the registry."""

from __future__ import annotations

import http.server
import importlib
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.credentials import Secret
from reprofleet.errors import CredentialError, PowerError
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import DRIVERS, PowerConfigError, PowerLog, PowerState, TransientPowerError, driver_for
from reprofleet.power.drivers.command import parse_status_exit, parse_status_output, render
from reprofleet.power.drivers.http import base_url
from reprofleet.power.drivers.pdudaemon import control_query
from reprofleet.power.drivers.redfish import parse_power_state, reset_type_for
from reprofleet.power.drivers.shelly import flip_back_seconds, generation_of
from reprofleet.power.drivers.snmp import split_host_port
from reprofleet.power.drivers.snmp_oids import OUTLET_MODELS, is_oid
from reprofleet.power.drivers.tasmota import command_query, parse_power_reply
from tests.support import paths


def port(driver: str, address: str = "10.0.0.5", outlet: str | None = "1", **options: Any) -> PowerPort:
    creds = options.pop("credentials", None)
    return PowerPort(driver, address, outlet, credentials=creds, options=frozen_mapping(options))


def make(p: PowerPort, secret: str = "user:pw") -> Any:
    """The driver for ``p`` with credentials (a stand-in reference resolved to ``secret``)."""
    if p.credentials is None:
        p = PowerPort(p.driver, p.address, p.outlet, CredentialRef("env", "UNUSED"), p.options)
    return driver_for(p, "ws01", PowerLog(None), secrets=lambda ref: Secret(secret))


def test_every_driver_module_documents_the_yaml_that_selects_it() -> None:
    for name, cls in DRIVERS.items():
        module = importlib.import_module(cls.__module__)
        assert f"driver: {name}" in (module.__doc__ or ""), name


def test_an_unknown_driver_lists_the_known_ones() -> None:
    with pytest.raises(PowerConfigError, match="ws01: unknown pdu driver 'apc'; known drivers: command, fence, homeassistant, ipmi, kasa, "
                                               "pdudaemon, redfish, shelly, slurm, snmp, tasmota"):
        driver_for(port("apc"), "ws01", PowerLog(None))


def test_a_missing_credential_stops_before_anything_is_switched() -> None:
    p = port("tasmota", credentials=CredentialRef("env", "RF_TEST_NO_SUCH_VAR_71"))
    with pytest.raises(CredentialError, match="env:RF_TEST_NO_SUCH_VAR_71"):
        driver_for(p, "ws01", PowerLog(None))


def test_addresses_become_urls() -> None:
    assert base_url("10.0.0.5") == "http://10.0.0.5"
    assert base_url("bmc:8443", "https") == "https://bmc:8443"
    assert base_url("http://plug/ ") == "http://plug"


def test_tasmota_commands_and_replies() -> None:
    assert command_query("Power2 Off", None, None) == "cmnd=Power2%20Off"
    assert command_query("Power1", "admin", "a&b c") == "cmnd=Power1&user=admin&password=a%26b%20c"
    assert parse_power_reply({"POWER": "ON"}, "1") is PowerState.ON
    assert parse_power_reply({"POWER3": "OFF"}, "3") is PowerState.OFF
    with pytest.raises(PowerError, match="no relay 5"):
        parse_power_reply({"Command": "Unknown"}, "5")
    with pytest.raises(PowerError, match="refused the credentials"):
        parse_power_reply({"WARNING": "Need user=<username>&password=<password>"}, "1")
    with pytest.raises(PowerError, match="no state for relay 2"):
        parse_power_reply({"POWER": "ON"}, "2")


def test_tasmota_outlets_are_relay_numbers() -> None:
    with pytest.raises(PowerConfigError, match="relay number"):
        make(port("tasmota", outlet="a"))


def test_shelly_generation_and_flip_back_timer() -> None:
    assert generation_of({"type": "SHSW-1", "fw": "x"}) == 1
    assert generation_of({"gen": 2, "id": "shellyplus1"}) == 2
    assert generation_of({"gen": 3}) == 3
    assert flip_back_seconds(0.2) == 1
    assert flip_back_seconds(10.2) == 11
    with pytest.raises(PowerConfigError, match="gen must be one of 1, 2, 3, 4"):
        make(port("shelly", gen=5))


def test_snmp_oid_tables_fill_outlet_and_pdu() -> None:
    assert OUTLET_MODELS["apc_rpdu"].control("7") == "1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.7"
    assert OUTLET_MODELS["apc_rpdu"].status("7") == "1.3.6.1.4.1.318.1.1.12.3.5.1.1.4.7"
    assert OUTLET_MODELS["apc_spdu"].control("2") == OUTLET_MODELS["apc_spdu"].status("2")
    raritan = OUTLET_MODELS["raritan_px"]
    assert raritan.control("4", "2") == "1.3.6.1.4.1.13742.6.4.1.2.1.2.2.4"
    assert (raritan.set_on, raritan.set_off, raritan.state_on, raritan.state_off) == (1, 0, 7, 8)
    chained = OUTLET_MODELS["apc_rpdu2"]
    assert chained.control("7", "2", {"control": 31}) == "1.3.6.1.4.1.318.1.1.26.9.2.4.1.5.31"
    assert (chained.state_on, chained.state_off) == (2, 1)  # rPDU2OutletSwitchedStatusState: off(1) on(2)
    rows = {"control": 3, "status": 3, "config": 3, "metered": 3}
    for model in OUTLET_MODELS.values():
        assert is_oid(model.control("1", "1", rows)) and is_oid(model.status("1", "1", rows))
        if model.reboot is not None:
            assert is_oid(model.fill(model.reboot.oid, "1", "1", rows))


def test_apc_reboot_durations_are_chosen_at_least_as_long_as_the_dwell() -> None:
    rpdu, spdu = OUTLET_MODELS["apc_rpdu"].reboot, OUTLET_MODELS["apc_spdu"].reboot
    assert rpdu is not None and spdu is not None
    assert (rpdu.at_least(2), rpdu.at_least(10), rpdu.at_least(10.4), rpdu.at_least(61)) == (5, 10, 11, None)
    assert (spdu.at_least(2), spdu.at_least(11), spdu.at_least(46), spdu.at_least(61)) == (5, 15, 60, None)


def test_a_pdu_id_is_never_silently_ignored() -> None:
    chained = make(port("snmp", outlet="7", model="apc_rpdu", pdu_id=2))
    assert chained.oids.model == "apc_rpdu2" and chained.outlet_key.endswith("#2.7")
    assert make(port("snmp", outlet="7", model="apc_rpdu")).outlet_key == \
        make(port("snmp", outlet="7", model="apc_rpdu", pdu_id=1)).outlet_key
    with pytest.raises(PowerConfigError, match="pdu_id 2: model apc_spdu addresses one PDU") as caught:
        make(port("snmp", outlet="7", model="apc_spdu", pdu_id=2))
    assert caught.value.field == "pdu_id"
    with pytest.raises(PowerConfigError, match="a generic model needs {pdu} in its OIDs"):
        make(port("snmp", outlet="7", model="generic", control_oid="1.3.6.1.4.1.99.1.{outlet}", pdu_id=2))
    assert make(port("snmp", outlet="4", model="raritan_px", pdu_id=2)).oids.control("4", "2").endswith(".2.4")


def test_snmp_needs_a_model_a_numeric_outlet_and_a_community() -> None:
    with pytest.raises(PowerConfigError, match="model is required"):
        make(port("snmp"))
    with pytest.raises(PowerConfigError, match="model must be one of apc_rpdu"):
        make(port("snmp", model="cisco"))
    with pytest.raises(PowerConfigError, match="an SNMP outlet is a number"):
        make(port("snmp", outlet="A1", model="apc_rpdu"))
    with pytest.raises(PowerConfigError, match="needs credentials"):
        driver_for(port("snmp", model="apc_rpdu"), "ws01", PowerLog(None))


def test_snmp_generic_model_takes_the_users_oids() -> None:
    driver = make(port("snmp", outlet="5", model="generic", control_oid="1.3.6.1.4.1.99.1.{outlet}",
                       status_oid="1.3.6.1.4.1.99.2.{outlet}", on_value=1, off_value=0))
    assert driver.oids.control("5") == "1.3.6.1.4.1.99.1.5"
    assert (driver.oids.state_on, driver.oids.state_off) == (1, 0)
    with pytest.raises(PowerConfigError, match="not a numeric OID"):
        make(port("snmp", model="generic", control_oid="sPDUOutletCtl.{outlet}"))


def test_host_port_splitting() -> None:
    assert split_host_port("10.0.0.5", 161) == ("10.0.0.5", 161)
    assert split_host_port("10.0.0.5:1161", 161) == ("10.0.0.5", 1161)
    assert split_host_port("[fe80::1]:623", 161) == ("fe80::1", 623)
    assert split_host_port("fe80::1", 623) == ("fe80::1", 623)


def test_redfish_power_states_and_reset_types() -> None:
    import sushy

    assert parse_power_state(sushy.PowerState.ON) is PowerState.ON
    assert parse_power_state(sushy.PowerState.POWERING_OFF) is PowerState.UNKNOWN
    reset = sushy.ResetType
    assert reset_type_for(PowerState.OFF, {reset.ON, reset.FORCE_OFF, reset.GRACEFUL_SHUTDOWN}) is reset.FORCE_OFF
    assert reset_type_for(PowerState.ON, {reset.FORCE_ON}) is reset.FORCE_ON
    assert reset_type_for(PowerState.OFF, None) is reset.FORCE_OFF
    with pytest.raises(PowerError, match="allows no reset to off"):
        reset_type_for(PowerState.OFF, {reset.ON, reset.NMI})


def test_pdudaemon_requests_and_its_blindness() -> None:
    assert control_query("pdu-3", "4", None) == "hostname=pdu-3&port=4"
    assert control_query(None, None, "ws04") == "alias=ws04"
    assert make(port("pdudaemon", pdu="pdu-3")).reads_state is False
    with pytest.raises(PowerConfigError, match="needs pdu"):
        make(port("pdudaemon"))


def test_command_templates_quote_their_values() -> None:
    assert render("tool --outlet {outlet} {address}", "ws01", "pdu 7", "3") == "tool --outlet 3 'pdu 7'"
    with pytest.raises(PowerConfigError, match="bad placeholder"):
        render("tool {port}", "ws01", "pdu", "3")


def test_command_status_parsing() -> None:
    assert parse_status_output("ON\n") is PowerState.ON
    assert parse_status_output("off (since 12:00)") is PowerState.OFF
    assert parse_status_output("Outlet 3: on") is PowerState.UNKNOWN
    assert parse_status_output("Status: OFF\n") is PowerState.OFF  # a fence agent's -o status


def test_a_status_commands_exit_is_a_fence_agents_and_1_is_an_error_never_off() -> None:
    assert parse_status_exit(0) is PowerState.ON
    assert parse_status_exit(2) is PowerState.OFF
    for code in (1, 3, 127):  # 1: the agent could not tell (the device unreachable); the rest: not the API
        with pytest.raises(TransientPowerError, match=f"exited {code}: it could not tell"):
            parse_status_exit(code)


def test_command_driver_needs_on_and_off_and_reads_state_only_with_a_status_command() -> None:
    with pytest.raises(PowerConfigError, match="on_command is required"):
        make(port("command"))
    blind = make(port("command", on_command="true", off_command="true"))
    assert blind.reads_state is False
    seeing = make(port("command", on_command="true", off_command="true", status_command="echo on"))
    assert seeing.reads_state is True


def test_redfish_and_ipmi_need_credentials_shaped_right() -> None:
    with pytest.raises(PowerConfigError, match="ipmi needs credentials"):
        driver_for(port("ipmi", outlet=None), "ws01", PowerLog(None))
    redfish = make(port("redfish", address="bmc.lab", outlet=None, verify_tls=False))
    assert redfish.url == "https://bmc.lab/redfish/v1/"  # https assumed; nothing contacted yet
    assert redfish.verify is False


def test_every_pdu_block_of_the_example_inventory_makes_a_driver() -> None:
    
    from reprofleet.inventory import load_inventory

    example = paths.REPO / "inventory" / "blackwell.yml"
    hosts = [host for host in load_inventory(example).hosts if host.pdu is not None]
    assert hosts
    for host in hosts:
        assert host.pdu is not None
        driver = driver_for(host.pdu, host.name, PowerLog(None), secrets=lambda ref: Secret("user:pw"))
        assert driver.port is host.pdu


def test_the_drivers_oid_table_agrees_with_the_simulators_copy_of_the_mibs() -> None:
    """Two tables written independently (the simulator's from the MIB text): they must agree."""
    from reprofleet.sim.power.pdu_mibs import FAMILIES, Column

    rows = {"control": 7, "status": 7, "config": 7, "metered": 7}  # a chain's row 7 where the model has rows
    for model, oids in OUTLET_MODELS.items():
        columns = {c.column: c for c in FAMILIES[model]}
        control = columns[Column.CONTROL]
        prefix = ".".join(map(str, control.prefix))
        assert oids.control("7", "1", rows) == (f"{prefix}.1.7" if control.by_pdu else f"{prefix}.7")
        assert (oids.set_on, oids.set_off, oids.set_cycle) == (control.on, control.off, control.reboot)
        state = columns.get(Column.STATE, control)
        prefix = ".".join(map(str, state.prefix))
        assert oids.status("7", "1", rows) == (f"{prefix}.1.7" if state.by_pdu else f"{prefix}.7")
        assert (oids.state_on, oids.state_off) == (state.on, state.off)
        if oids.reboot is not None:
            reboot = columns[Column.REBOOT_TIME]
            assert oids.fill(oids.reboot.oid, "7", "1", rows) == ".".join(map(str, reboot.prefix)) + ".7"
            assert (oids.reboot.low, oids.reboot.high, oids.reboot.choices) == \
                ((reboot.low, reboot.high, ()) if not reboot.choices else (5, 60, reboot.choices))
        for name, table in oids.tables.items():  # the chain's rows are found by the columns the MIB names
            assert table.column(table.module_column) in {".".join(map(str, c.prefix)) for c in FAMILIES[model]
                                                         if c.column is Column.MODULE}


def test_redfish_wall_power_from_either_chassis_schema() -> None:
    from reprofleet.power.drivers.redfish import watts_from_environment, watts_from_power

    assert watts_from_power({"PowerControl": [{"PowerConsumedWatts": 412}]}) == 412.0
    assert watts_from_power({"PowerControl": []}) is None and watts_from_power({"Voltages": []}) is None
    assert watts_from_environment({"PowerWatts": {"Reading": 61.5}}) == 61.5
    assert watts_from_environment({"TemperatureCelsius": {"Reading": 40}}) is None


def _bmc_error(status: int, message_id: str | None = None) -> Any:
    import json as json_module

    import requests
    from sushy import exceptions as sushy_errors

    response = requests.Response()
    response.status_code = status
    info = [{"MessageId": message_id, "Message": "busy"}] if message_id else []
    response._content = json_module.dumps({"error": {"code": "Base.1.0.GeneralError",
                                                     "@Message.ExtendedInfo": info}}).encode()
    kind = {400: sushy_errors.BadRequestError, 404: sushy_errors.ResourceNotFoundError}.get(
        status, sushy_errors.ServerSideError if status >= 500 else sushy_errors.HTTPError)
    return kind("POST", "https://bmc/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", response)


def test_a_busy_bmcs_refusals_are_transient_and_other_errors_are_not() -> None:
    from reprofleet.power.drivers.redfish_errors import translate

    busy = [_bmc_error(409, "Base.1.12.ResourceInUse"), _bmc_error(409, "IDRAC.2.8.PSU501"),
            _bmc_error(400, "iLO.2.15.InvalidOperationForSystemState"), _bmc_error(400, "IDRAC.2.8.SYS518"),
            _bmc_error(503)]
    for error in busy:
        assert isinstance(translate(error, "Reset"), TransientPowerError), error
    assert "busy with an earlier power change or still in POST (InvalidOperationForSystemState" in \
        str(translate(busy[2], "Reset"))
    for error in (_bmc_error(400, "Base.1.8.ActionParameterUnknown"), _bmc_error(404)):
        assert not isinstance(translate(error, "Reset"), TransientPowerError), error


@pytest.fixture
def self_signed_https(tmp_path: Path) -> Iterator[str]:
    """A local HTTPS server whose certificate nobody trusts (a BMC as shipped)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # the refused handshake, expected
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/redfish/v1/"
    finally:
        server.shutdown()


def test_an_untrusted_certificate_is_named_with_what_to_set_and_not_retried(self_signed_https: str) -> None:
    """Decided on the type ssl raises (wrapped by urllib3, requests and sushy), never on its words."""
    import requests
    from sushy import exceptions as sushy_errors

    from reprofleet.power.drivers.redfish_errors import translate

    with pytest.raises(requests.exceptions.SSLError) as direct:
        requests.get(self_signed_https, timeout=10)
    with pytest.raises(sushy_errors.ConnectionError) as wrapped:
        try:
            requests.get(self_signed_https, timeout=10)
        except requests.RequestException as exc:  # what sushy's connector does
            raise sushy_errors.ConnectionError(url=self_signed_https, error=exc)
    for error in (direct.value, wrapped.value):
        translated = translate(error, "read PowerState")
        assert not isinstance(translated, TransientPowerError)
        assert "TLS certificate not trusted: pin it with the pdu option tls_fingerprint" in str(translated)
    worded = requests.exceptions.SSLError("[SSL: WRONG_VERSION_NUMBER] the reply doesn't match TLS: self-signed?")
    assert isinstance(translate(worded, "read PowerState"), TransientPowerError)  # no certificate was judged


def test_a_redfish_timeout_is_read_by_its_type_through_sushys_wrapper() -> None:
    import requests
    from sushy import exceptions as sushy_errors

    from reprofleet.power.drivers.redfish_errors import translate

    with pytest.raises(sushy_errors.ConnectionError) as wrapped:
        try:
            raise requests.ReadTimeout("read: the BMC said nothing for 10 s")
        except requests.RequestException as exc:
            raise sushy_errors.ConnectionError(url="https://bmc/redfish/v1/", error=exc)
    assert str(translate(wrapped.value, "read PowerState")) == "read PowerState: no answer in time"
    refused = sushy_errors.ConnectionError(url="https://bmc/", error="the BMC refused: timed out waiting for POST")
    assert str(translate(refused, "read PowerState")) == "read PowerState: connection failed"


def test_every_driver_has_defaults_fitting_its_devices() -> None:
    """BMCs: long calls, more tries, a long settle; SNMP and HTTP plugs: short."""
    bmc = [DRIVERS["redfish"].defaults, DRIVERS["ipmi"].defaults]
    quick = [DRIVERS[name].defaults for name in ("snmp", "tasmota", "shelly")]
    assert all(d.timeout_s >= 30 and d.tries >= 4 and d.settle_s >= 60 for d in bmc)
    assert DRIVERS["redfish"].defaults.connect_s == 30.0  # an unreachable BMC fails on the connect, not the read
    assert all(d.timeout_s <= 5 and d.settle_s <= 10 for d in quick)


def test_an_snmp_error_indication_is_read_by_its_type_never_its_words() -> None:
    from pysnmp.proto import errind

    from reprofleet.power.drivers.snmp import indication_error

    silent = indication_error("GET 1.3", errind.RequestTimedOut("the agent said nothing"), 2.0)
    assert isinstance(silent, TransientPowerError) and "no SNMP answer within 2s" in str(silent)
    worded = indication_error("GET 1.3", errind.ErrorIndication("engine discovery: timeout value rejected"), 2.0)
    assert type(worded) is PowerError  # the agent answered, whatever its words say
