"""Every host's power is built when the inventory is loaded: a problem is one line, before anything runs.

Building contacts nothing (the addresses here do not exist); it resolves credentials,
checks models and options, refuses two hosts on one outlet unless both say ``shared``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reprofleet.errors import InventoryError
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.power import PowerLog, PowerState
from reprofleet.power.ports import PowerPreflightError, ask_power_states, build_host_power
from reprofleet.campaign.preflight import check_playbook_against_hosts
from tests.support.fleet_campaign import write_playbook


def inventory(tmp_path: Path, hosts: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n" + textwrap.indent(textwrap.dedent(hosts), "    "))
    return path


def playbook(tmp_path: Path) -> Path:
    return write_playbook(tmp_path / "book", attempts=1)


SNMP = "{driver: snmp, address: 192.0.2.50, model: apc_rpdu, credentials: env:RF_PF_COMMUNITY"


def test_an_unset_credential_variable_is_one_line_naming_host_and_inventory_line(tmp_path: Path) -> None:
    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 1}}
        ws02:
          pdu: {SNMP}, outlet: 2}}
        """)
    hosts = load_inventory(path).hosts  # loading alone reads no secret
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(hosts)
    assert caught.value.problems == (
        f"{path}:4:pdu.credentials: ws01: credential env:RF_PF_COMMUNITY: environment variable RF_PF_COMMUNITY is not set",
        f"{path}:6:pdu.credentials: ws02: credential env:RF_PF_COMMUNITY: environment variable RF_PF_COMMUNITY is not set",
    )


def test_a_mistyped_model_is_found_by_the_dry_run_preflight_not_at_the_first_wedge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: snmp, address: 192.0.2.50, model: apc_rdpu, outlet: 1, credentials: env:RF_PF_COMMUNITY}
        """)
    with pytest.raises(PowerPreflightError, match=r"hosts.yml:4:pdu: ws01: .*model must be one of apc_rpdu"):
        # the check the campaign runs before --dry-run prints its plan
        check_playbook_against_hosts(load_playbook(playbook(tmp_path)), load_inventory(path).hosts, tmp_path)


def test_two_hosts_on_one_outlet_are_refused_whatever_the_address_spelling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 3}}
        ws02:
          pdu: {{driver: snmp, address: "192.0.2.50:161", model: apc_rpdu, credentials: env:RF_PF_COMMUNITY, outlet: 3}}
        ws03:
          pdu: {SNMP}, outlet: 4}}
        """)
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(load_inventory(path).hosts)
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:4:pdu: ws01: outlet snmp:192.0.2.50:161#1.3 also feeds ws02")


def test_an_outlet_marked_shared_by_every_host_on_it_is_accepted(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 3, shared: true}}
        ws02:
          pdu: {SNMP}, outlet: 3, shared: true}}
        """)
    assert set(build_host_power(load_inventory(path).hosts)) == {"ws01", "ws02"}


def test_one_bmc_system_per_host_and_pdus_behind_one_pdudaemon_are_told_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_BMC", "root:pw")
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: redfish, address: "http://192.0.2.9:8000", system: ws01, credentials: env:RF_PF_BMC}
        ws02:
          pdu: {driver: redfish, address: "http://192.0.2.9:8000", system: ws02, credentials: env:RF_PF_BMC}
        ws03:
          pdu: {driver: pdudaemon, address: "192.0.2.8:16421", pdu: rack1, outlet: 1}
        ws04:
          pdu: {driver: pdudaemon, address: "192.0.2.8:16421", pdu: rack2, outlet: 1}
        """)
    powers = build_host_power(load_inventory(path).hosts)
    assert powers["ws03"].drivers[0].device_key != powers["ws04"].drivers[0].device_key


def test_a_host_with_two_power_supplies_has_two_outlets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlets: [7, {{address: 192.0.2.51, outlet: 2}}]}}
        """)
    (host,) = load_inventory(path).hosts
    assert [(p.address, p.outlet) for p in host.power_ports] == [("192.0.2.50", "7"), ("192.0.2.51", "2")]
    assert [d.outlet_key for d in build_host_power([host])["ws01"].drivers] == [
        "snmp:192.0.2.50:161#1.7", "snmp:192.0.2.51:161#1.2"]


def test_an_address_with_credentials_in_it_is_refused_at_load_without_repeating_them(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: tasmota, address: "http://admin:pl4in-pw@192.0.2.41"}
        """)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert str(caught.value.location) == f"{path}:4:pdu.address"
    assert "pl4in-pw" not in str(caught.value) and "credentials" in str(caught.value)


def test_a_device_that_does_not_answer_at_campaign_start_is_named(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: tasmota, address: "127.0.0.1:9", timeout_s: 0.2, tries: 1}
        """)
    powers = build_host_power(load_inventory(path).hosts, PowerLog(None))
    with pytest.raises(PowerPreflightError, match=r"hosts.yml:4:pdu: ws01: the power device does not answer"):
        ask_power_states(powers)


def test_a_device_that_cannot_read_state_is_asked_and_reports_unknown(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: command, address: local, on_command: "true", off_command: "true"}
        """)
    assert ask_power_states(build_host_power(load_inventory(path).hosts)) == {"ws01": (PowerState.UNKNOWN,)}


def test_campaign_dry_run_stops_on_an_unset_credential_with_one_line_per_host(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 1}}
        """)
    env = {k: v for k, v in os.environ.items() if k != "RF_PF_COMMUNITY"}
    result = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(path), "--playbook",
                             str(playbook(tmp_path)), "--dry-run"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert f"{path}:4:pdu.credentials: ws01: credential env:RF_PF_COMMUNITY: environment variable RF_PF_COMMUNITY is not set" \
        in result.stderr
    assert "attempts" not in result.stdout  # no plan printed: nothing runs on a broken power port


def test_a_daisy_chained_pdus_outlet_is_not_the_first_pdus_and_pdu_id_1_is_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 7}}
        ws02:
          pdu: {SNMP}, outlet: 7, pdu_id: 2}}
        """)
    powers = build_host_power(load_inventory(path).hosts)  # two outlets 7 on two PDUs: no duplicate
    assert powers["ws01"].drivers[0].outlet_key != powers["ws02"].drivers[0].outlet_key
    same = inventory(tmp_path, f"""\
        ws01:
          pdu: {SNMP}, outlet: 7}}
        ws02:
          pdu: {SNMP}, outlet: 7, pdu_id: 1}}
        """)
    with pytest.raises(PowerPreflightError, match=r"outlet snmp:192.0.2.50:161#1.7 also feeds ws02"):
        build_host_power(load_inventory(same).hosts)


def test_a_pdu_id_on_a_pdu_that_cannot_be_chained_is_refused_naming_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_PF_COMMUNITY", "c-1")
    path = inventory(tmp_path, """\
        ws01:
          pdu: {driver: snmp, address: 192.0.2.50, model: apc_spdu, outlet: 3, pdu_id: 2, credentials: env:RF_PF_COMMUNITY}
        """)
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(load_inventory(path).hosts)
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:4:pdu.pdu_id: ws01: pdu snmp 192.0.2.50 pdu 2 outlet 3: pdu option pdu_id 2: "
                           "model apc_spdu addresses one PDU")


def test_a_fallback_device_that_does_not_answer_at_campaign_start_is_named_with_its_own_line(tmp_path: Path) -> None:
    path = inventory(tmp_path, """\
        ws01:
          pdu:
            driver: command
            address: local
            on_command: "true"
            off_command: "true"
            fallback:
              - {driver: tasmota, address: "127.0.0.1:9", timeout_s: 0.2, tries: 1}
        """)
    powers = build_host_power(load_inventory(path).hosts, PowerLog(None))
    with pytest.raises(PowerPreflightError, match=r"hosts.yml:10:\S*: ws01: fallback device 1 does not answer"):
        ask_power_states(powers)
