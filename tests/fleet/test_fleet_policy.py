"""Policies are restored when the controller is interrupted, and an observe-only host never
receives a setter. (Refused up front when no card can take them, before any host is
contacted: tests/unit/test_policy_refused_up_front.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reprofleet.records.store import read_records
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import write_playbook


@pytest.mark.fleet
def test_sigint_mid_campaign_puts_every_gpu_back_to_its_defaults(sim_fleet: Any, tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("int-a", script=("clean",) * 6, time_scale=0.3),
                       SimHostSpec("int-b", script=("clean",) * 6, time_scale=0.3)])
    book = write_playbook(tmp_path / "book", attempts=3, attempt_timeout=60,
                          cells="  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n    power_limit: 450\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(fleet.inventory_path),
                             "--playbook", str(book)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = [h.gpu_state() for h in fleet.hosts]
            if all(s["locked_graphics"] and s["load"] for s in states):
                break
            time.sleep(0.2)
        assert all(h.gpu_state()["locked_graphics"] for h in fleet.hosts), "the policy was never applied"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    for host in fleet.hosts:
        state = host.gpu_state()
        assert state["locked_graphics"] is None and state["power_limit_w"] == 600.0, host.name
    (campaign_dir,) = [p for p in (tmp_path / "reports").iterdir() if not p.name.startswith(".")]
    records = list(read_records(campaign_dir / "attempts.jsonl"))
    # the attempt each host was running at the SIGINT is interrupted; one that ended before it
    # (the two hosts' attempts need not be in step) is what it was
    for host in fleet.hosts:
        *before, last = [r for r in records if r["host"] == host.name]
        assert last["outcome"] == "infra" and "interrupted" in last["reason"], records
        assert [r["outcome"] for r in before] == ["clean"] * len(before), records
    events = [json.loads(line) for line in (campaign_dir / "events.jsonl").read_text().splitlines()]
    assert {e["host"] for e in events if e["event"] == "policy_restored"} == {"int-a", "int-b"}


OBSERVED_CELLS = ("  - name: default\n  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n"
                  "  - name: pl-450\n    power_limit: 450\n")


@pytest.mark.fleet
def test_an_observe_only_host_never_receives_a_setter_across_a_campaign(sim_fleet: Any, tmp_path: Path) -> None:
    """gpu_policy: observe on one host of two: its policy cells are refused (one line each),
    its default cells run with the card's read-back in every record, and its nvidia-smi is
    never asked to set anything, not even the default cell's resets or the end's restore;
    the managed host beside it runs every cell (so the count does see setters)."""
    import yaml

    fleet = sim_fleet([SimHostSpec("obs-a", script=("clean",) * 6, time_scale=0.02),
                       SimHostSpec("own-b", script=("clean",) * 6, time_scale=0.02)])
    data = yaml.safe_load(Path(fleet.inventory_path).read_text())
    data["all"]["children"]["sim"]["hosts"]["obs-a"]["gpu_policy"] = "observe"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump(data))
    book = write_playbook(tmp_path / "book", attempts=2, cells=OBSERVED_CELLS)
    env = dict(os.environ, COLUMNS="1000")  # rich wraps stderr at 80 columns otherwise
    result = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(inventory),
                             "--playbook", str(book)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    refused = sorted(line for line in result.stderr.splitlines() if " refused: " in line)
    assert len(refused) == 2, result.stderr
    assert refused[0].startswith("obs-a: cell 'lgc-2800' refused: the host is observe-only")
    assert refused[1].startswith("obs-a: cell 'pl-450' refused: the host is observe-only")
    (campaign_dir,) = [p for p in (tmp_path / "reports").iterdir() if not p.name.startswith(".")]
    records = list(read_records(campaign_dir / "attempts.jsonl"))
    observed = [r for r in records if r["host"] == "obs-a"]
    assert len(observed) == 2 and {r["cell"] for r in observed} == {"default"}
    assert all(r["outcome"] == "clean" and r["policy"].get("graphics_clocks") for r in observed)
    assert sorted(r["cell"] for r in records if r["host"] == "own-b") == sorted(["default", "lgc-2800", "pl-450"] * 2)
    assert fleet.host("obs-a").nvidia_smi_setter_calls() == []
    assert {c["setter"] for c in fleet.host("own-b").nvidia_smi_setter_calls()} >= {"lgc", "rgc", "pl"}
    events = [json.loads(line) for line in (campaign_dir / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["host"] == "obs-a" and e["event"].startswith("policy_") and
                e["event"] != "policy_changed"]
