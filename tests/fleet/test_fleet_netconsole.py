"""netconsole on the simulated fleet (issue 13, items 1 and 5): a wedge whose last kernel lines
reached the controller only over the network (the host's disk kept nothing of the frozen
boot) carries them in its record, in order, and nothing the host printed after it froze;
the host's netconsole configuration and console loglevel are undone after the campaign.

One campaign on two hosts whose journals lose the frozen boot: ``nc-a`` (script ``wedge,
clean``, Xid on the wedge) and ``nc-b`` (script ``lockup, clean``: the kernel's watchdog sees
the lock and, still running, reports it, which netpoll sends from the frozen host). A helper thread plays the kernel: three info-level lines once netconsole
is enabled (they only get through because the console loglevel was raised), and one line
after the freeze.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.rfsim import boots, hwio, netconsole_tx
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

BEFORE = [f"rfsim-test: kernel line {n} before the freeze" for n in (1, 2, 3)]
AFTER = "rfsim-test: printed after the freeze"
XID = "NVRM: Xid (PCI:0000:01:00): 79"


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


def _kernel_says(host: Any, message: str, level: int) -> None:
    boot = boots.current(host.paths.boots)
    assert boot is not None
    boots.append_kmsg(host.paths.boots / boot.kmsg_name, message, level=level, started=boot.started)


def _play_kernel(host: Any, done: threading.Event, said: dict[str, float]) -> None:
    """Info lines once our target is enabled, one line after the freeze (bounded: 60 s each)."""
    enabled = netconsole_tx.configfs(host.paths.hw) / "netconsole" / "reprofleet" / "enabled"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not done.is_set():
        if enabled.exists() and enabled.read_text().strip() == "1":
            for line in BEFORE:
                _kernel_says(host, line, boots.KERN_INFO)
                time.sleep(0.05)
            said["before"] = time.time()
            break
        time.sleep(0.02)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not done.is_set():
        if (hwio.read_json(host.paths.state, {}) or {}).get("frozen"):
            time.sleep(0.3)  # well after the freeze, before recovery cuts the power
            _kernel_says(host, AFTER, boots.KERN_ERR)
            said["after"] = time.time()
            return
        time.sleep(0.02)


@pytest.fixture(scope="module")
def campaign(sim_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from reprofleet.sim import Fleet

    tmp = tmp_path_factory.mktemp("netconsole")
    fleet = Fleet.up((SimHostSpec("nc-a", script=("wedge", "clean"), xid_on_wedge=True, boot_delay_s=0.5,
                                  journal_keeps_frozen_boot=False),
                      SimHostSpec("nc-b", script=("lockup", "clean"), boot_delay_s=0.5, lockup_detect_s=0.5,
                                  journal_keeps_frozen_boot=False)))
    host, seen = fleet.hosts
    plug = HttpPlugServer(tmp / "pdu", "tasmota", {"1": host.paths.power, "2": seen.paths.power}).start()
    done, said = threading.Event(), {}
    kernel = threading.Thread(target=_play_kernel, args=(host, done, said), daemon=True)
    try:
        inventory = fleet.write_inventory(tmp / "hosts.yml", pdu={host.name: plug.pdu_block("1", None),
                                                                       seen.name: plug.pdu_block("2", None)})
        data = yaml.safe_load(inventory.read_text())
        data["all"]["children"]["sim"]["vars"] = {"netconsole": {"port": _free_udp_port()}}  # a group var
        inventory.write_text(yaml.safe_dump(data))
        book = write_playbook(tmp / "book", attempts=2, attempt_timeout=30)
        plan = make_plan(load_playbook(book), load_inventory(inventory).hosts)
        kernel.start()
        result = run_campaign(plan, settings_for(fleet, reboot_grace_s=5.0), tmp / "reports",
                              recovery_factory=recovery_factory)
        done.set()
        kernel.join(5)
        records = sorted((r for r in read_records(result.directory.attempts) if r["host"] == "nc-a"),
                         key=lambda r: r["attempt_index"])
        lockup = [r for r in read_records(result.directory.attempts) if r["host"] == "nc-b"]
        folder = netconsole_tx.configfs(host.paths.hw) / "netconsole"
        yield {"records": records, "lockup": lockup, "events": read_log_lines(result.directory.events), "said": said,
               "dir": result.directory.root, "hardware": read_log_lines(fleet.paths.hardware_events),
               "module_loaded": folder.exists(), "target_left": (folder / "reprofleet").exists(),
               "printk": (host.paths.hw / "proc-sys" / "kernel" / "printk").read_text().split()}
    finally:
        done.set()
        plug.stop()
        fleet.down()


def test_a_wedge_carries_the_kernel_lines_that_reached_the_controller_only_over_the_network(
        campaign: dict[str, Any]) -> None:
    wedge = campaign["records"][0]
    assert wedge["outcome"] == "wedge", wedge["reason"]
    assert "before" in campaign["said"], "the simulated kernel never saw netconsole enabled"
    lines = [entry["line"] for entry in wedge["kernel_net"]]
    assert lines == [*BEFORE, lines[-1]], lines  # in the order printed, info level included (loglevel raised),
    # and nothing the kernel printed before netconsole was enabled (its boot messages)
    assert XID in lines[-1]  # the last message before the freeze
    seqs = [entry["seq"] for entry in wedge["kernel_net"]]
    assert seqs == sorted(seqs)  # the extended header: the kernel's own sequence numbers
    previous = json.dumps(wedge["forensics"])
    assert XID not in previous and BEFORE[0] not in previous  # the host's disk kept none of it
    assert wedge["forensics"].get("previous_boot_available") is not False or "warning" in wedge["forensics"]


def test_nothing_the_host_printed_after_it_froze_arrives(campaign: dict[str, Any]) -> None:
    wedge = campaign["records"][0]
    assert "after" in campaign["said"], "the helper never saw the host frozen"
    assert not any(AFTER in entry["line"] for entry in wedge["kernel_net"])
    host_file = (campaign["dir"] / "netconsole" / "nc-a.jsonl").read_text()
    assert AFTER not in host_file and XID in host_file
    frozen_at = next(e["t"] for e in campaign["hardware"] if e.get("event") == "wedge")
    assert all(entry["t"] <= frozen_at + 0.5 for entry in wedge["kernel_net"])


def test_the_attempts_stream_files_each_kernel_line_with_its_arrival_time(campaign: dict[str, Any]) -> None:
    wedge = campaign["records"][0]
    stream = [json.loads(line) for line in (campaign["dir"] / wedge["stream"]).read_text().splitlines()]
    netlines = [line for line in stream if line.get("k") == "netconsole"]
    assert [line["line"] for line in netlines][-4:] == [*BEFORE, netlines[-1]["line"]]  # also those before
    assert XID in netlines[-1]["line"]  # the stream existed (filed at the attempt's start, before its stream)
    assert all(isinstance(line["t"], float) for line in netlines)
    clean = campaign["records"][1]
    assert clean["outcome"] == "clean" and clean["kernel_net"] is None  # only a freeze's record carries them


def test_netconsole_is_configured_in_every_boot_and_undone_after_the_campaign(campaign: dict[str, Any]) -> None:
    applied = [e for e in campaign["events"] if e["event"] == "netconsole_applied" and e["host"] == "nc-a"]
    assert len(applied) == 2  # the power cycle forgot the first boot's configuration
    assert applied[0]["config"]["enabled"] == "1" and applied[0]["config"]["extended"] == "1"
    assert applied[0]["printk"][0] == 8
    restored = [e for e in campaign["events"] if e["event"] == "netconsole_restored"]
    assert len(restored) == 2  # one per host and restored[0]["config"] is None
    assert not campaign["target_left"] and not campaign["module_loaded"]  # modprobe -r: we had loaded it
    assert campaign["printk"] == netconsole_tx.DEFAULT_PRINTK.split()


def test_a_lock_the_kernel_sees_still_reports_over_the_network_from_the_frozen_host(
        campaign: dict[str, Any]) -> None:
    wedge = next(r for r in campaign["lockup"] if r["attempt_index"] == 0)
    assert wedge["outcome"] == "wedge", wedge["reason"]
    lines = [entry["line"] for entry in wedge["kernel_net"]]
    assert any("watchdog: BUG: soft lockup - CPU#5 stuck for" in line for line in lines), lines
    assert "soft lockup" not in json.dumps(wedge["forensics"])  # the disk kept nothing; the network did
