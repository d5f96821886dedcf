"""The fence driver with Debian's real ClusterLabs agents against the power simulators we already run:
``fence_apc_snmp`` against the SNMP PDU, ``fence_ipmilan`` against ``ipmi_sim``, ``fence_redfish``
against sushy-tools behind a TLS front (the agent speaks only https). Each: status, and a verified
cycle (ours: off, read back off, dwell, on, read back on), the host's switch seen going off and on.
The decisions (exit codes, metadata, options) are tests/unit/test_power_fence.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.conftest_power import Switches, SwitchRecorder
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.sim.power import IpmiBmc, RedfishBmc, SnmpPdu
from reprofleet.sim.power.redfish_bmc import system_uuid

pytestmark = pytest.mark.fleet

FAST = {"settle_s": 10.0, "poll_s": 0.2, "tries": 2, "timeout_s": 20.0, "stagger_window_s": 0}
CREDENTIALS = "RF_TEST_FENCE_SECRET"


@pytest.fixture(autouse=True)
def _agents_installed() -> None:
    if shutil.which("fence_ipmilan", path="/usr/sbin:/sbin:/usr/bin") is None:
        pytest.skip("Debian's fence-agents is not installed (make system-deps)")


@pytest.fixture(scope="module")
def redfish_tls(switches: Switches, sim_workdir: Path) -> Iterator[RedfishBmc]:
    """sushy-tools behind an https front with a self-signed certificate, state applied after 1 s."""
    bmc = RedfishBmc(sim_workdir / "redfish-tls", switches.paths, password="fence-rf-pw-41c", tls=True,
                     apply_delay_s=(1, 1))
    bmc.start()
    try:
        yield bmc
    finally:
        bmc.stop()


def fence(monkeypatch: pytest.MonkeyPatch, log: PowerLog, host: str, address: str, outlet: str | None,
          secret: str, agent: str, **options: Any) -> PowerDriver:
    monkeypatch.setenv(CREDENTIALS, secret)
    ip, _, port = address.rpartition(":")
    agent_options = {"ipport": port, **options.pop("agent_options", {})}
    port_ = PowerPort("fence", ip, outlet, CredentialRef("env", CREDENTIALS),
                      frozen_mapping({"agent": agent, "agent_options": agent_options, **FAST, **options}))
    return driver_for(port_, host, log)


def check_status_and_cycle(driver: PowerDriver, switches: Switches, host: str, log: PowerLog,
                           record_switch: Callable[..., SwitchRecorder]) -> None:
    """status reads on; the cycle's off and on are each read back (the log's states), and the host's
    switch went off and came back on."""
    assert driver.status() is PowerState.ON
    recorder = record_switch(switches[host])
    assert driver.cycle(0.2) is PowerState.ON
    assert recorder.stop() == [True, False, True]
    assert [(e["action"], e["result"], e["state"]) for e in log.read()] == [
        ("status", "ok", "on"), ("off", "ok", "off"), ("on", "ok", "on"), ("cycle", "ok", "on")]


def test_fence_apc_snmp_switches_the_pdus_outlet(snmp_pdu: SnmpPdu, switches: Switches, power_log: PowerLog,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 record_switch: Callable[..., SwitchRecorder]) -> None:
    driver = fence(monkeypatch, power_log, "ws02", snmp_pdu.address, "2", snmp_pdu.secret, "fence_apc_snmp",
                   secret_option="community", agent_options={"snmp_version": "2c"})
    check_status_and_cycle(driver, switches, "ws02", power_log, record_switch)


def test_fence_ipmilan_switches_the_bmcs_chassis(ipmi_bmcs: IpmiBmc, switches: Switches, power_log: PowerLog,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 record_switch: Callable[..., SwitchRecorder]) -> None:
    driver = fence(monkeypatch, power_log, "ws01", ipmi_bmcs.address_of("ws01"), None, ipmi_bmcs.secret,
                   "fence_ipmilan", agent_options={"lanplus": True, "cipher": 3, "power_wait": 0})
    check_status_and_cycle(driver, switches, "ws01", power_log, record_switch)


def test_fence_redfish_switches_the_bmcs_system(redfish_tls: RedfishBmc, switches: Switches, power_log: PowerLog,
                                                monkeypatch: pytest.MonkeyPatch,
                                                record_switch: Callable[..., SwitchRecorder]) -> None:
    driver = fence(monkeypatch, power_log, "ws03", redfish_tls.address.removeprefix("https://"), None,
                   str(redfish_tls.secret), "fence_redfish",
                   agent_options={"ssl_insecure": True, "systems_uri": f"/redfish/v1/Systems/{system_uuid('ws03')}"})
    check_status_and_cycle(driver, switches, "ws03", power_log, record_switch)
