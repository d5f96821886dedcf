"""``invoke power HOST verify`` proves the inventory's wiring: with the host's outlet off,
this host and no other stops answering; then it is switched back on and boots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.power_ops import verify_wiring
from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.cli_process import reprofleet

pytestmark = pytest.mark.fleet


def test_verify_confirms_the_right_outlet_and_names_a_neighbour_on_the_wrong_one(
        sim_fleet: Any, sim_inventory: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("vfa", boot_delay_s=0.5), SimHostSpec("vfb", boot_delay_s=0.5)])
    a, b = fleet.hosts
    plug = HttpPlugServer(tmp_path / "plug", "tasmota", {"1": a.paths.power, "2": b.paths.power}).start()
    try:
        right = sim_inventory(fleet, pdu={a.name: plug.pdu_block("1"), b.name: plug.pdu_block("2")})
        result = reprofleet("power", a.name, "verify", "--yes", "--hosts", str(right), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "wiring confirmed" in result.stdout and "no other host of the inventory stopped answering" \
            in result.stdout
        a.wait_ssh(timeout_s=20.0)

        swapped = sim_inventory(fleet, pdu={a.name: plug.pdu_block("2"), b.name: plug.pdu_block("1")})
        report = verify_wiring(str(swapped), a.name, tmp_path / "reports", off_window_s=6.0, boot_s=15.0)
    finally:
        plug.stop()
    assert not report.ok
    assert report.silent_after_s is None and report.others_silent == (b.name,)
    assert "the inventory's outlet does not feed it" in report.lines()[0]
    deadline = time.monotonic() + 20.0  # the neighbour's outlet was switched back on: it boots again
    while b.ssh_banner(timeout_s=1.0) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b.ssh_banner(timeout_s=1.0) is not None
