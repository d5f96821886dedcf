"""A campaign whose hosts are switched by an SNMP PDU prints no library warning: before the
SNMP loop (power/drivers/snmp_loop.py) one 4-minute campaign printed pysnmp's "Task was
destroyed but it is pending!" 20 times. Two hosts on one simulated APC PDU, one of them wedged
once and power-cycled through it, the PDU's state read at start and after the cycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.sim.power import SnmpPdu
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import write_playbook

pytestmark = pytest.mark.fleet

LEAKS = ("Task was destroyed", "ResourceWarning", "Exception ignored", "unclosed transport", "Traceback")


def test_a_campaign_switched_over_snmp_prints_no_library_warning(sim_fleet: Any, sim_inventory: Any,
                                                                  tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("sq-a", script=("wedge", "clean", "clean"), time_scale=0.02, boot_delay_s=0.5),
                       SimHostSpec("sq-b", script=("clean",) * 3, time_scale=0.02)])
    with SnmpPdu(tmp_path / "pdu", {str(i + 1): h.paths.power for i, h in enumerate(fleet.hosts)},
                 community="quiet-comm-5", reboot_s=0.3) as pdu:
        blocks = {h.name: pdu.pdu_block(str(i + 1), "env:RF_QUIET_COMMUNITY") for i, h in enumerate(fleet.hosts)}
        inventory = sim_inventory(fleet, pdu=blocks)
        book = write_playbook(tmp_path / "book", attempts=2)
        env = {**os.environ, "RF_QUIET_COMMUNITY": pdu.secret, "COLUMNS": "1000",
               "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path),
               "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports")}
        done = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "-i", str(inventory), "-p", str(book)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400,
                              stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    (campaign,) = [p for p in (tmp_path / "reports").iterdir() if not p.name.startswith(".")]
    actions = [json.loads(line)["action"] for line in (campaign / "power.jsonl").read_text().splitlines()]
    assert "cycle" in actions or "off" in actions, (actions, output)  # the wedge was cycled through the PDU
    assert [leak for leak in LEAKS if leak in output] == [], output
