"""Power a lab already has, through whole wedges (issue 35, items 1 and 5), in one campaign:

- each ClusterLabs fence agent Debian ships for our simulators, ``fence_apc_snmp`` (the SNMP PDU
  simulator), ``fence_ipmilan`` (``ipmi_sim``) and ``fence_redfish`` (sushy-tools behind a TLS
  front), takes a wedged host through the whole course: declared wedged, off read back off, on,
  a new boot, the health gate, and its next attempt;
- the recovery ladder ``recovery: [nmi, cycle]`` through the Redfish driver (``ResetType: Nmi``)
  on two hosts behind the same BMC: one whose owner set ``kernel.unknown_nmi_panic`` and kdump
  panics on the NMI, writes a vmcore and reboots by itself (a ``reboot`` that names the NMI, the
  vmcore from its next boot's facts, never switched off); the other only logs the NMI and stays
  frozen, so the power cycle follows after the wait.

- and a BMC that refuses the NMI: the ``fence_ipmilan`` host is on the ladder too, and its agent's
  ``diag`` reaches ``ipmi_sim``, which answers Chassis Control "pulse diagnostic interrupt" with
  completion code CCh, invalid data field (OpenIPMI lanserv/bmc_chassis.c, ``case 4``), as a BMC
  without the feature does: the rung says the NMI was not sent and the power cycle follows at once.

(A BMC that takes an IPMI NMI is played at the seam: tests/seam/test_seam_nmi_ladder.py. The rung's
decisions, the fence agents' exit codes and metadata: tests/seam, tests/unit/test_power_fence.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import IpmiBmc, RedfishBmc, SnmpPdu
from reprofleet.sim.power.redfish_bmc import system_uuid
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

QUICK = {"settle_s": 10.0, "poll_s": 0.2, "tries": 2, "timeout_s": 20.0, "stagger_window_s": 0}
NMI_WAIT_S = 12  # the hosts' nmi_reboot_s: the kdump and reboot of the one that panics take ~2 s here
FENCED = ("fap", "fip", "frf")


def host(name: str, **knobs: Any) -> SimHostSpec:
    return SimHostSpec(name, script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.05, **knobs)


def with_host_vars(inventory: Path, extra: dict[str, dict[str, Any]]) -> Path:
    """The generated inventory with more host variables (the recovery ladder) on some hosts."""
    data = yaml.safe_load(inventory.read_text())
    for name, variables in extra.items():
        data["all"]["children"]["sim"]["hosts"][name].update(variables)
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    return inventory


@pytest.mark.timeout(600)
def test_each_fence_agent_brings_a_wedged_host_back_and_an_nmi_panics_one_host_and_not_the_other(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("fence_ipmilan", path="/usr/sbin:/sbin:/usr/bin") is None:
        pytest.fail("Debian's fence-agents is not installed (make system-deps installs it)")
    fleet = sim_fleet([host("fap"), host("fip"), host("frf"),
                       host("npa", sysctl_conf=(("unknown_nmi_panic", 1),), kdump_loaded=True), host("nst")])
    switch = {h.name: h.paths.power for h in fleet.hosts}
    pdu = SnmpPdu(tmp_path / "snmp", {"1": switch["fap"]}, community="fence-apc-comm-5e1")
    ipmi = IpmiBmc(tmp_path / "ipmi", {"fip": switch["fip"]}, password="fence-ipmi-pw-8c2")
    bmc = RedfishBmc(tmp_path / "redfish", {n: switch[n] for n in ("frf", "npa", "nst")}, password="rf-pw-0d93",
                     tls=True, apply_delay_s=(1, 1))
    sims = []
    try:
        for sim in (pdu, ipmi, bmc):
            sims.append(sim.start())
        for variable, secret in (("RF_FENCE_APC", pdu.secret), ("RF_FENCE_IPMI", ipmi.secret),
                                 ("RF_FENCE_REDFISH", bmc.secret)):
            monkeypatch.setenv(variable, str(secret))
        redfish_ip_port = bmc.address.removeprefix("https://")
        blocks: dict[str, dict[str, Any]] = {
            "fap": {"driver": "fence", "agent": "fence_apc_snmp", "address": pdu.address.rpartition(":")[0],
                    "outlet": "1", "credentials": "env:RF_FENCE_APC", "secret_option": "community",
                    "agent_options": {"ipport": pdu.address.rpartition(":")[2], "snmp_version": "2c"}, **QUICK},
            "fip": {"driver": "fence", "agent": "fence_ipmilan",
                    "address": ipmi.address_of("fip").rpartition(":")[0], "credentials": "env:RF_FENCE_IPMI",
                    "agent_options": {"ipport": ipmi.address_of("fip").rpartition(":")[2], "lanplus": True,
                                      "cipher": 3, "power_wait": 0}, **QUICK},
            "frf": {"driver": "fence", "agent": "fence_redfish", "address": redfish_ip_port.rpartition(":")[0],
                    "credentials": "env:RF_FENCE_REDFISH",
                    "agent_options": {"ipport": redfish_ip_port.rpartition(":")[2], "ssl_insecure": True,
                                      "systems_uri": f"/redfish/v1/Systems/{system_uuid('frf')}"}, **QUICK},
        }
        for name in ("npa", "nst"):
            blocks[name] = {**bmc.pdu_block(name, "env:RF_FENCE_REDFISH"), "tls_ca_file": str(bmc.ca_file), **QUICK}
        inventory = with_host_vars(sim_inventory(fleet, pdu=blocks),
                                   {n: {"recovery": ["nmi", "cycle"], "nmi_reboot_s": NMI_WAIT_S}
                                    for n in ("npa", "nst", "fip")})
        book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=60)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet), tmp_path / "reports", recovery_factory=recovery_factory)
    finally:
        for sim in sims:
            sim.stop()
    records: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(read_records(result.directory.attempts), key=lambda r: (r["host"], r["attempt_index"])):
        records.setdefault(record["host"], []).append(record)
    power = list(read_log_lines(result.directory.power))

    def actions(name: str) -> list[str]:
        return [p["action"] for p in power if p["host"] == name and p["action"] in ("nmi", "off", "on", "cycle")]

    assert not result.quarantined
    for name in FENCED:  # wedge -> off, on through the agent -> a new boot -> its next attempt
        wedge, after = records[name]
        assert (wedge["outcome"], after["outcome"]) == ("wedge", "clean"), name
        assert after["boot_id"] != wedge["boot_id"], name
        assert actions(name) == ["off", "on", "cycle"], name
        assert all(p["result"] == "ok" for p in power if p["host"] == name and p["action"] in ("off", "on"))
    refused = records["fip"][0]["forensics"]  # ipmi_sim refused the diag: straight on to the cycle
    assert refused["recovery_rung"] == "cycle" and refused["nmi"]["sent"] is False
    assert "diag" in refused["nmi"]["error"] and refused["nmi"]["waited_s"] == 0
    assert [p["result"] for p in power if p["host"] == "fip" and p["action"] == "diag"] == ["failed"]

    panicked, after = records["npa"]  # the NMI brought it back: a reboot that says so, no AC cut
    assert (panicked["outcome"], after["outcome"]) == ("reboot", "clean")
    assert "NMI" in panicked["reason"] and "no power cycle" in panicked["reason"]
    assert panicked["forensics"]["recovery_rung"] == "nmi"
    assert panicked["forensics"]["vmcore"]["present"] is True
    assert after["boot_id"] != panicked["boot_id"]
    assert actions("npa") == ["nmi"]

    stayed, after = records["nst"]  # it only logged the NMI: the cycle after the wait
    assert (stayed["outcome"], after["outcome"]) == ("wedge", "clean")
    assert stayed["forensics"]["recovery_rung"] == "cycle"
    assert stayed["forensics"]["nmi"]["sent"] is True and stayed["forensics"]["nmi"]["boot_id"] is None
    assert stayed["forensics"]["nmi"]["waited_s"] >= NMI_WAIT_S
    assert stayed["forensics"]["vmcore"]["present"] is False
    assert actions("nst")[:1] == ["nmi"] and "off" in actions("nst") and after["boot_id"] != stayed["boot_id"]
