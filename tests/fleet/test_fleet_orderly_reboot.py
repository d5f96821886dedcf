"""An orderly reboot is not a reproduction (issue 32, item 2), on the simulated fleet.

A simulated host rebooted in an orderly way looks like a real one (sim/hardware.py
``orderly_reboot``): the system is "stopping", every process gets SIGTERM, systemd's shutdown
lines end the boot's journal, a new boot starts. A campaign whose attempt is caught by
unattended-upgrades' automatic reboot records it as ``infra`` with the reason, never as a
``reboot`` or ``wedge``, and the slot runs again.

Recovery reads the shutdown evidence of the boot the attempt ran in (postboot --boot) and
model.shutdown.as_host_shutdown makes the record infra; the host runner runs the slot again in the next boot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.run import completed_counts, make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.model import ReasonCode, reason_code
from reprofleet.model.reasons import slot_runs_again
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.procs import wait_until
from reprofleet.sim.spec import SimHostSpec
from tests.support import agent_harness
from tests.support.fleet_campaign import settings_for, write_playbook

pytestmark = pytest.mark.fleet

shutdown_evidence = agent_harness.collector("shutdown_evidence")

BARE = "  - name: bare\n    runtime: {kind: python, image: null, docker_args: null}\n"  # the PoC as a process of the host


def test_a_simulated_orderly_reboot_sigterms_every_process_and_ends_the_journal_like_systemd(sim_fleet: Any) -> None:
    fleet = sim_fleet([SimHostSpec("or", boot_delay_s=0.3)])
    host = fleet.hosts[0]
    detached = ("rm -f /root/got-term /root/trap-set; setsid nohup sh -c 'trap \"cat /etc/reprofleet-sim/hw/system_state "
                "> /root/got-term; exit 0\" TERM; touch /root/trap-set; while :; do sleep 0.1; done' "
                ">/dev/null 2>&1 < /dev/null &")
    assert host.ssh(detached).returncode == 0
    wait_until(lambda: host.ssh("test -f /root/trap-set").returncode == 0, 10.0, "the process to set its trap")
    first = host.boot_id
    host.orderly_reboot(by="person")
    assert host.boot_id != first
    assert host.ssh("cat /root/got-term").stdout.strip() == "stopping"  # its SIGTERM came while systemd was stopping
    journal = host.ssh("journalctl -b -1 -o short-iso --no-pager -n 3000").stdout.splitlines()
    found = shutdown_evidence.evidence(journal)
    assert found["orderly"] is True and found["by"].startswith("systemctl (PID 4242, unit session-3.scope)")
    assert any(line.endswith("systemd[1]: Reached target reboot.target - System Reboot.") for line in journal)
    assert host.ssh("cat /etc/reprofleet-sim/hw/system_state").stdout.strip() == "running"
    (event,) = [e for e in fleet.events() if e.get("event") == "orderly_reboot"]
    assert event["by"] == "person" and event["sigterm"] >= 2


def test_an_attempt_caught_by_an_automatic_upgrades_reboot_is_infra_and_its_slot_runs_again(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("ou", script=("orderly_reboot", "clean", "clean"), boot_delay_s=0.5)])
    host = fleet.hosts[0]
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}).start()
    try:
        inventory = load_inventory(sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")})).hosts
        book = load_playbook(write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=BARE))
        settings = settings_for(fleet)
        result = run_campaign(make_plan(book, inventory), settings, tmp_path / "reports",
                              recovery_factory=recovery_factory)
        records = list(read_records(result.directory.attempts))
        brief = [(r["outcome"], r["attempt_index"], r["attempt_in_boot"], r["boot_id"], r["reason"]) for r in records]
        shut = [r for r in records if r["outcome"] == "infra" and reason_code(r["reason"]) is ReasonCode.HOST_SHUTDOWN]
        assert len(shut) == 1 and shut[0]["attempt_index"] == 0, brief
        assert all(r["boot_id"] != shut[0]["boot_id"] for r in records if r is not shut[0]), brief  # the next boot's
        assert shut[0]["reason"].startswith("the host was shut down in an orderly way during the attempt")
        assert slot_runs_again("infra", shut[0]["reason"])
        assert not [r for r in records if r["outcome"] in ("reboot", "wedge")], records  # never a reproduction
        assert completed_counts(result.directory).get((host.name, "bare"), 0) == 2  # ran again in this run
    finally:
        plug.stop()
    judged = [r["outcome"] for r in records if not slot_runs_again(r["outcome"], r.get("reason"))]
    assert judged == ["clean", "clean"], records  # both planned slots, each judged once
    assert any(e.get("event") == "orderly_reboot" and e["by"] == "unattended-upgrades" for e in fleet.events())
