"""The fence driver's decisions: the Fence Agent API's exit codes and metadata read as the agent means
them, options checked against the metadata when the inventory is loaded, secrets on stdin only.

The pure parts are tested with plain values and the real agents' metadata (captured from Debian's
fence-agents 4.12.1); what needs a program (stdin, the scrubbed environment, a timeout, one
metadata read per agent) runs a fake agent (tests/fixtures/fence/fake_agent.py). The real
agents against the simulators, each through a whole wedge and power cycle in one campaign: tests/fleet/test_fleet_fence_nmi.py.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.credentials import name_credential_variables
from reprofleet.errors import PowerError
from reprofleet.inventory import load_inventory
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerActionError, PowerUnansweredError, TransientPowerError
from reprofleet.power.drivers.fence import FenceDriver, status_from_exit, switch_from_exit
from reprofleet.power.drivers.fence_agent import find_agent, option_lines, parse_metadata
from reprofleet.power.options import PowerConfigError
from reprofleet.power.ports import PowerPreflightError, build_host_power
from tests.support.fake_fence import AGENT, FakeFence, fake_fence  # noqa: F401 (the fixture)
from tests.support.paths import FIXTURES

FAST = {"poll_s": 0.02, "settle_s": 0.5, "backoff_s": 0.0, "stagger_window_s": 0}


def fence_port(credentials: str | None = "RF_TEST_FENCE", outlet: str | None = "2", **options: Any) -> PowerPort:
    return PowerPort("fence", "192.0.2.7", outlet,
                     credentials=CredentialRef("env", credentials) if credentials else None,
                     options=frozen_mapping({"agent": AGENT, **FAST, **options}))


def fence(power_log: PowerLog, **options: Any) -> FenceDriver:
    driver = driver_for(fence_port(**options), "ws01", power_log)
    assert isinstance(driver, FenceDriver)
    return driver


# -- the API's exit codes and metadata, as plain values ---------------------------------------------

def test_status_exit_codes_are_on_off_or_could_not_tell_never_off() -> None:
    assert status_from_exit(0, "fence_x") is PowerState.ON
    assert status_from_exit(2, "fence_x") is PowerState.OFF
    with pytest.raises(TransientPowerError, match="could not tell"):
        status_from_exit(1, "fence_x")  # unreachable, login refused: retried, and never read as off
    with pytest.raises(PowerError, match="does not define") as caught:
        status_from_exit(5, "fence_x")
    assert not isinstance(caught.value, TransientPowerError)


def test_switch_exit_codes_zero_done_one_retried_others_definite() -> None:
    switch_from_exit(0, "fence_x", "off", "")
    with pytest.raises(TransientPowerError, match="off exited 1: Failed: Timed out"):
        switch_from_exit(1, "fence_x", "off", "Failed: Timed out waiting to power OFF")
    with pytest.raises(PowerError, match="exited 3, which the Fence Agent API does not define") as caught:
        switch_from_exit(3, "fence_x", "on", "")
    assert not isinstance(caught.value, TransientPowerError)


def test_the_real_agents_metadata_lists_their_options_actions_and_what_they_require() -> None:
    ipmilan = parse_metadata("fence_ipmilan", (FIXTURES / "fence" / "fence_ipmilan.metadata.xml").read_text())
    assert {"ip", "ipport", "username", "password", "lanplus", "cipher", "plug"} <= ipmilan.parameters
    assert "diag" in ipmilan.actions and {"on", "off", "status"} <= ipmilan.actions
    apc = parse_metadata("fence_apc_snmp", (FIXTURES / "fence" / "fence_apc_snmp.metadata.xml").read_text())
    assert "diag" not in apc.actions and "community" in apc.parameters
    assert apc.required == {"action", "ip", "plug"}  # the deprecated aliases (ipaddr, port) are not required too
    assert apc.takes("snmp-version") and apc.takes("snmp_version")


def test_metadata_that_is_not_the_apis_xml_is_refused_naming_the_agent() -> None:
    with pytest.raises(PowerError, match="fence_x: its metadata is not XML"):
        parse_metadata("fence_x", "Usage: fence_x [options]")
    with pytest.raises(PowerError, match="fence_x: its metadata is <html>"):
        parse_metadata("fence_x", "<html></html>")


def test_an_option_with_a_line_break_never_reaches_the_agents_stdin() -> None:
    assert option_lines({"action": "status", "ip": "10.0.0.5"}) == "action=status\nip=10.0.0.5\n"
    with pytest.raises(PowerError, match="line break"):
        option_lines({"plug": "1\naction=off"})


@pytest.mark.parametrize("name", ["/usr/sbin/fence_ipmilan", "fence_x;rm", "-h", "fence-ipmilan", "ipmitool"])
def test_the_agent_is_a_fence_agents_name_never_a_path_or_an_option(name: str) -> None:
    with pytest.raises(PowerError, match="is not a fence agent's name"):
        find_agent(name)


# -- the driver with a fake agent ---------------------------------------------------------------------

def test_the_secret_travels_on_stdin_and_the_agents_environment_holds_no_named_credential(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "admin:fence-pw-9d1")
    monkeypatch.setenv("RF_TEST_FENCE_OTHER", "other-secret")
    name_credential_variables(["RF_TEST_FENCE", "RF_TEST_FENCE_OTHER"])
    fake_fence.behave(watch_env=["RF_TEST_FENCE", "RF_TEST_FENCE_OTHER"])
    driver = fence(power_log, agent_options={"lanplus": True, "cipher": 3})
    assert driver.status() is PowerState.ON
    calls = fake_fence.calls()
    status = calls[-1]
    assert status["argv"] == [] and status["password"] == "fence-pw-9d1" and status["username"] == "admin"
    assert status["options"] == ["action", "cipher", "ip", "lanplus", "password", "plug", "username"]
    assert all(call["leaked_env"] == [] for call in calls)
    assert "fence-pw-9d1" not in power_log.path.read_text()  # type: ignore[union-attr]


def test_off_on_and_the_cycle_are_ours_verified_by_status_never_the_agents_reboot(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    driver = fence(power_log)
    assert driver.off() is PowerState.OFF and fake_fence.state == "off"
    assert driver.cycle(0.05) is PowerState.ON and fake_fence.state == "on"
    actions = [a for a in fake_fence.actions() if a != "metadata"]
    assert actions == ["off", "status", "off", "status", "on", "status"]
    assert [(e["action"], e["result"], e["state"]) for e in power_log.read()] == [
        ("off", "ok", "off"), ("off", "ok", "off"), ("on", "ok", "on"), ("cycle", "ok", "on")]


def test_the_agents_metadata_is_read_once_per_agent(fake_fence: FakeFence, power_log: PowerLog,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    for outlet in ("1", "2", "3"):
        fence(power_log, outlet=outlet).status()
    assert fake_fence.actions().count("metadata") == 1


def test_a_status_the_agent_could_not_tell_is_retried_and_is_no_answer_never_off(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    fake_fence.behave(exit={"status": 1})
    with pytest.raises(PowerUnansweredError, match="gave up after 3 tries"):
        fence(power_log, tries=3).status()
    assert fake_fence.actions().count("status") == 3


def test_an_exit_code_the_api_does_not_define_is_a_definite_error_not_retried(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    fake_fence.behave(exit={"off": 7})
    with pytest.raises(PowerActionError, match="off exited 7") as caught:
        fence(power_log, tries=3).off()
    assert not isinstance(caught.value, PowerUnansweredError)
    assert fake_fence.actions().count("off") == 1


def test_an_agent_that_hangs_is_killed_at_its_timeout_and_counts_as_no_answer(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    fake_fence.behave(sleep={"status": 30})
    started = time.monotonic()
    with pytest.raises(PowerUnansweredError, match="did not finish within 0.3 s"):
        fence(power_log, timeout_s=0.3, tries=2).status()
    assert time.monotonic() - started < 5.0


def test_diag_sends_one_nmi_where_the_metadata_lists_it_and_is_never_retried(
        fake_fence: FakeFence, power_log: PowerLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    driver = fence(power_log, tries=3)
    assert driver.has_diag
    driver.diag()
    assert fake_fence.nmis == 1 and power_log.read()[-1]["action"] == "diag"
    fake_fence.behave(exit={"diag": 1})
    with pytest.raises(PowerActionError, match="diag exited 1"):
        driver.diag()
    assert fake_fence.actions().count("diag") == 2  # the failed one was sent once


def test_an_agent_without_diag_offers_no_nmi(tmp_path: Path, fake_fence: FakeFence, power_log: PowerLog,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    fake_fence.behave(diag=False)
    driver = fence(power_log)
    assert not driver.has_diag
    with pytest.raises(PowerError, match="has no diag action"):
        driver.diag()
    assert "diag" not in fake_fence.actions()


@pytest.mark.parametrize(("options", "field", "words"), [
    ({"agent_options": {"ciphr": 3}}, "agent_options.ciphr", "fence_fake has no option 'ciphr'"),
    ({"agent_options": {"password": "x"}}, "agent_options.password", "a secret: give it by 'credentials"),
    ({"agent_options": {"ip": "10.0.0.1"}}, "agent_options.ip", "give it as the pdu block's address"),
    ({"agent_options": {"cipher": [3]}}, "agent_options.cipher", "must be a string, number or true/false"),
    ({"secret_option": "token"}, "secret_option", "fence_fake has no option 'token'"),
    ({"agent": "fence_nonesuch_agent"}, "agent", "fence agent fence_nonesuch_agent is not installed"),
])
def test_a_wrong_option_is_refused_naming_its_field(fake_fence: FakeFence, power_log: PowerLog,
                                                     monkeypatch: pytest.MonkeyPatch, options: dict[str, Any],
                                                     field: str, words: str) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    with pytest.raises(PowerConfigError, match=words) as caught:
        fence(power_log, **options)
    assert caught.value.field == field
    assert fake_fence.actions() in ([], ["metadata"])  # nothing was switched or read


def test_a_misspelt_agent_option_in_an_inventory_is_one_line_with_file_line_and_field(
        tmp_path: Path, fake_fence: FakeFence, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_TEST_FENCE", "pw")
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(f"""\
        all:
          hosts:
            ws01:
              pdu:
                driver: fence
                agent: {AGENT}
                address: 192.0.2.7
                credentials: env:RF_TEST_FENCE
                agent_options: {{lanplus: true, ciphr: 3}}
        """))
    with pytest.raises(PowerPreflightError) as caught:
        build_host_power(load_inventory(path).hosts)
    (line,) = caught.value.problems
    assert line.startswith(f"{path}:5:pdu.agent_options.ciphr: ws01: pdu fence 192.0.2.7: ")
    assert "fence_fake has no option 'ciphr'" in line
