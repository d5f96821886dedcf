"""`invoke status` on a campaign that is still running on the simulated fleet: read from
another process while the controller holds the folder, it says running, counts what the
records hold, carries the anytime-valid caveat, and leaves the folder as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.records.store import read_records
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import write_playbook

pytestmark = pytest.mark.fleet


def _status(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", "status", str(folder), *extra], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_status_reads_a_running_campaign_from_another_process_without_disturbing_it(
        sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("st-a", script=("clean",) * 6), SimHostSpec("st-b", script=("clean",) * 6)])
    book = write_playbook(tmp_path / "book", attempts=6, attempt_timeout=30)  # long enough for two reads
    env = {**os.environ, "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports"),
           "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path), "INVOKE_REPROFLEET_SAMPLE_HZ": "5"}
    output = open(tmp_path / "campaign.out", "w")  # a file, not a pipe nobody drains while it runs
    controller = subprocess.Popen([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(fleet.inventory_path),
                                   "--playbook", str(book)], cwd=tmp_path, env=env, stdout=output,
                                  stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        folder = None
        while time.monotonic() < deadline:  # the first record of a running campaign
            found = list((tmp_path / "reports").glob("*/attempts.jsonl")) if (tmp_path / "reports").exists() else []
            if found and found[0].read_text().strip() and controller.poll() is None:
                folder = found[0].parent
                break
            time.sleep(0.2)
        assert folder is not None, "no attempt was recorded within 120 s"
        lock_before = (folder / ".controller.lock").read_text()
        seen = _status(folder, "--json")
        text = _status(folder)  # both read while it runs, before anything is judged
        assert seen.returncode == 0, seen.stderr
        state = json.loads(seen.stdout)
        assert controller.poll() is None, "the campaign ended before status read it: make its attempts longer"
        assert state["running"] is True and state["controller"].startswith("running")
        assert state["planned"] == 12 and {h["name"] for h in state["hosts"]} == {"st-a", "st-b"}
        assert 1 <= state["done"] < 12
        assert state["anytime"] is True and all(v["anytime"] for v in state["verdicts"])
        assert all("the campaign is still running" in v["look"] for v in state["verdicts"])
        assert (folder / ".controller.lock").read_text() == lock_before  # its holder's pid, untouched
        assert text.returncode == 0 and "running (its controller last wrote" in text.stdout
        assert controller.wait(timeout=300) == 0, (tmp_path / "campaign.out").read_text()[-3000:]
    finally:
        if controller.poll() is None:
            controller.terminate()  # our own child, by its handle
            controller.wait(timeout=60)
        output.close()
    done = json.loads(_status(folder, "--json").stdout)
    assert done["running"] is False and done["done"] == 12 and done["eta_s"] is not None
    assert sum(h["outcomes"].get("clean", 0) for h in done["hosts"]) == len(list(read_records(folder / "attempts.jsonl")))
    assert "reprofleet_campaign_running{campaign=" in (folder / "metrics.prom").read_text()
