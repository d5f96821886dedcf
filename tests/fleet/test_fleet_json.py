"""--json against the simulated fleet: the shapes a real campaign, real facts, a real doctor and
a real PDU give validate against docs/schema, stdout carries only JSON, and the exit status
is the one the task gives without --json (tests/unit/test_cli_json.py does the same on fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support import paths

pytestmark = pytest.mark.fleet

SCHEMAS = paths.REPO / "docs" / "schema"


def _valid(task: str, out: str, lines: bool = False) -> list[dict[str, Any]]:
    documents = [json.loads(line) for line in out.splitlines()] if lines else [json.loads(out)]
    validator = Draft202012Validator(json.loads((SCHEMAS / f"{task}.schema.json").read_text()))
    for document in documents:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{task}: {errors[:5]}"
    return documents


def test_json_from_a_real_fleet_validates_and_exits_as_without_json(sim_fleet: Any, sim_inventory: Any,
                                                                   tmp_path: Path) -> None:
    from tests.support.fleet_campaign import write_playbook

    # no power port here: a wedge would wait for a person, so the hosts never wedge or hang
    fleet = sim_fleet([SimHostSpec("js-nosmi"), SimHostSpec("js-ok", boot_delay_s=0.3, susceptible=False, p_hang=0.0)])
    (fleet.hosts[0].paths.fs("bin") / "nvidia-smi").unlink()  # one host that cannot run its plan
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30)
    env = {**os.environ, "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports"),
           "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path), "INVOKE_REPROFLEET_SAMPLE_HZ": "5"}

    def reprofleet(*args: str, inventory: str = str(fleet.inventory_path)) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "reprofleet", *args, "-i", inventory, "--json"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)

    facts = reprofleet("facts")
    assert facts.returncode == 0, facts.stderr
    assert sorted(line["host"] for line in _valid("facts", facts.stdout, lines=True)) == ["js-nosmi", "js-ok"]
    doctor = reprofleet("doctor", "-p", str(book))
    ready = {line["host"]: line["ready"] for line in _valid("doctor", doctor.stdout, lines=True)}
    assert doctor.returncode == 3 and ready == {"js-nosmi": False, "js-ok": True}, doctor.stderr
    policy = reprofleet("policy", "-l", "js-ok")  # the other host has no nvidia-smi to read with
    assert policy.returncode == 0 and all(line["ok"] for line in _valid("policy", policy.stdout, lines=True))

    checked = reprofleet("campaign", "-p", str(book), "-n", "--check-hosts")
    (plan,) = _valid("campaign", checked.stdout)
    assert checked.returncode == 3 == plan["exit_status"] and plan["readiness"]["ready"] is False
    done = reprofleet("campaign", "-p", str(book))
    (ended,) = _valid("campaign", done.stdout)  # the live view and the tables went to stderr
    assert done.returncode == 3 == ended["exit_status"], done.stderr
    assert list(ended["result"]["quarantined"]) == ["js-nosmi"] and ended["judgement"]["verdicts"]
    status = subprocess.run([sys.executable, "-m", "reprofleet", "status", ended["result"]["folder"], "--json"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    (state,) = _valid("status", status.stdout)
    assert status.returncode == 0 and state["running"] is False

    host = fleet.hosts[1]
    with HttpPlugServer(tmp_path / "plug", "tasmota", {"1": host.paths.power}) as plug:
        inventory = str(sim_inventory(fleet, pdu={host.name: plug.pdu_block("1")}))
        power = reprofleet("power", host.name, "status", inventory=inventory)
        (answer,) = _valid("power", power.stdout)
        assert power.returncode == 0 and answer["state"] == "on", power.stderr
