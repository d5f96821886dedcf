"""Lockup-to-panic cells on the simulated fleet (issue 13, item 2): with the kernel's
lockup panics on, a freeze the watchdog sees comes back by itself as a ``reboot`` carrying
the panic text; a plain cell on the same host still wedges; the host's own sysctls are back
at the end.

One campaign on one host (sequential: plain, plain, panic, panic) with the script
``lockup, clean, lockup, clean``: both lockups are seen by the kernel, only the second
runs under ``softlockup_panic``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.runner import host_debug
from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.model import HostDebug
from reprofleet.playbook import load_playbook
from reprofleet.campaign.policy_restore import policy_everywhere
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.rfsim import kernel_panic
from reprofleet.sim.spec import SimHostSpec
from reprofleet.remote.transport import connect
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

CELLS = ("  - name: plain\n"
         "  - name: lockup-panic\n"
         "    host_debug: {softlockup_panic: true, panic: 1, softlockup_all_cpu_backtrace: true}\n")
PANIC_LINE = "Kernel panic - not syncing: softlockup: hung tasks"
BUG_LINE = "watchdog: BUG: soft lockup - CPU#5 stuck for 22s! [VLLM::EngineCor:"


def _lines(forensics: dict[str, Any]) -> list[str]:
    """Every kernel line the record's forensics carry (previous boot's journal and pstore)."""
    lines = [f["line"] for f in forensics.get("findings") or []] + list(forensics.get("tail") or [])
    for entry in forensics.get("pstore") or []:
        lines += [f["line"] for f in entry.get("findings") or []] + list(entry.get("tail") or [])
    return lines


def _sysctls(host: Any) -> dict[str, int]:
    return {name: kernel_panic.sysctl(host.paths.hw, name) for name in kernel_panic.SYSCTL_DEFAULTS}


def _by_hand_restore(fleet: Any, inventory: Path) -> dict[str, Any]:
    """A killed controller left the panics on: `invoke policy --restore` puts the host's own back."""
    host = fleet.hosts[0]
    settings = settings_for(fleet)
    session = connect(load_inventory(inventory).hosts[0], settings.transport)
    try:
        agent = AgentClient(session, load_bundle())
        agent.push()
        host_debug.apply(agent, HostDebug(hardlockup_panic=True, panic=5))
    finally:
        session.close()
    left_on = _sysctls(host)
    results = policy_everywhere(str(inventory), settings, "restore")
    return {"left_on": left_on, "by_hand": results[host.name], "after_by_hand": _sysctls(host)}


@pytest.fixture(scope="module")
def campaign(sim_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from reprofleet.sim import Fleet

    tmp = tmp_path_factory.mktemp("host-debug")
    fleet = Fleet.up((SimHostSpec("hd-a", script=("lockup", "clean", "lockup", "clean"), boot_delay_s=0.5,
                                  lockup_detect_s=0.5),))
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp / "pdu", "tasmota", {"1": host.paths.power}).start()  # no password
    try:
        inventory = fleet.write_inventory(tmp / "hosts.yml", pdu={host.name: plug.pdu_block("1", None)})
        book = write_playbook(tmp / "book", attempts=2, attempt_timeout=30, cells=CELLS, extra="order: sequential\n")
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        result = run_campaign(plan, settings_for(fleet, reboot_grace_s=5.0), tmp / "reports",
                              recovery_factory=recovery_factory)
        records = sorted(read_records(result.directory.attempts), key=lambda r: (r["cell"] != "plain",
                                                                                 r["attempt_index"]))
        outcome = {"records": records, "events": read_log_lines(result.directory.events), "host": host,
                   "sysctls": _sysctls(host),
                   "baseline_left": (host.paths.fs("root") / ".cache/reprofleet/host_debug/baseline.json").exists()}
        outcome.update(_by_hand_restore(fleet, inventory))
        yield outcome
    finally:
        plug.stop()
        fleet.down()


def test_a_lockup_the_kernel_sees_under_softlockup_panic_is_a_reboot_with_the_panic_text(
        campaign: dict[str, Any]) -> None:
    panicked = campaign["records"][2]
    assert (panicked["cell"], panicked["attempt_index"], panicked["outcome"]) == ("lockup-panic", 0, "reboot"), \
        panicked["reason"]
    lines = _lines(panicked["forensics"])
    assert any(PANIC_LINE in line for line in lines)
    assert any(BUG_LINE in line for line in lines)
    pstore = [entry for entry in panicked["forensics"]["pstore"] if entry["file"].endswith("dmesg-ramoops-0")]
    assert pstore and any("panic" in f["tags"] for f in pstore[0]["findings"])
    assert panicked["host_debug"]["requested"] == {"softlockup_panic": True, "panic": 1,
                                                   "softlockup_all_cpu_backtrace": True}
    assert panicked["host_debug"]["sysctls"]["softlockup_panic"] == 1
    assert panicked["host_debug"]["sysctls"]["panic"] == 1
    assert panicked["factors"]["host_debug"] == {"panic": 1, "softlockup_all_cpu_backtrace": True,
                                                 "softlockup_panic": True}


def test_a_plain_cell_on_the_same_host_still_wedges(campaign: dict[str, Any]) -> None:
    plain = campaign["records"][0]
    assert (plain["cell"], plain["outcome"]) == ("plain", "wedge"), plain["reason"]
    assert "host_debug" not in plain["factors"]
    assert plain["host_debug"]["sysctls"]["softlockup_panic"] == 0  # the host's own value
    lines = _lines(plain["forensics"])
    assert any(BUG_LINE in line for line in lines)  # the kernel saw it, and did not panic
    assert not any(PANIC_LINE in line for line in lines)
    assert campaign["records"][1]["outcome"] == "clean"


def test_the_hosts_own_sysctls_are_back_after_the_campaign(campaign: dict[str, Any]) -> None:
    assert campaign["sysctls"] == kernel_panic.SYSCTL_DEFAULTS
    assert not campaign["baseline_left"]
    restored = [e for e in campaign["events"] if e["event"] == "host_debug_restored"]
    assert len(restored) == 1 and restored[0]["sysctls"]["softlockup_panic"] == 0


def test_invoke_policy_restore_also_puts_back_lockup_panics_a_killed_controller_left(
        campaign: dict[str, Any]) -> None:
    assert campaign["left_on"]["hardlockup_panic"] == 1 and campaign["left_on"]["nmi_watchdog"] == 1
    assert campaign["after_by_hand"] == kernel_panic.SYSCTL_DEFAULTS
    assert campaign["by_hand"]["host_debug"]["hardlockup_panic"] == 0
