"""invoke doctor on the simulated fleet, one host broken in each way the simulator can play:
its journal volatile, no NVIDIA container runtime in docker, the image not pulled, its PDU not
answering, a non-root login with no sudo rights; a healthy host beside them is ready, and so is
a non-root login whose sudoers lets it run nvidia-smi (the simulated sudo: rfsim/sudo.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.sim.power import HttpPlugServer
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import write_playbook

pytestmark = pytest.mark.fleet

# every host's dockerd has the images the playbooks name (sim/image_store.py); no host has 0.99.0
DOCKER_CELLS = ("  - name: default\n    runtime: {kind: docker, image: 'vllm/vllm-openai:v0.25.1'}\n"
                "  - name: unreleased\n    runtime: {kind: docker, image: 'vllm/vllm-openai:v0.99.0'}\n")


def _dead_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_doctor_names_each_broken_host_with_its_problem_and_fix(sim_fleet: Any, sim_inventory: Any,
                                                                tmp_path: Path) -> None:
    fleet = sim_fleet([SimHostSpec("dr-ok"), SimHostSpec("dr-journal", journal_persistent=False),
                       SimHostSpec("dr-runtime", nvidia_container_toolkit=False), SimHostSpec("dr-pdu"),
                       SimHostSpec("dr-sudo", login_user="lab", sudo="none"),
                       SimHostSpec("dr-sudo-smi", login_user="lab", sudo="nvidia-smi")])
    by_name = {h.name: h for h in fleet.hosts}
    book = write_playbook(tmp_path / "book", attempts=1, cells=DOCKER_CELLS)
    with HttpPlugServer(tmp_path / "plug", "tasmota", {str(i + 1): h.paths.power for i, h in enumerate(fleet.hosts)}) \
            as plug:
        blocks = {h.name: plug.pdu_block(str(i + 1)) for i, h in enumerate(fleet.hosts)}
        blocks["dr-pdu"] = {**blocks["dr-pdu"], "address": f"127.0.0.1:{_dead_udp_port()}", "timeout_s": 1,
                            "tries": 1}
        inventory = sim_inventory(fleet, pdu=blocks)
        env = {**os.environ, "INVOKE_REPROFLEET_KNOWN_HOSTS": str(fleet.known_hosts_path),
               "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports")}
        done = subprocess.run([sys.executable, "-m", "reprofleet", "doctor", "--hosts", str(inventory), "--playbook",
                               str(book), "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stdout + done.stderr
    found = {d["host"]: d for d in map(json.loads, done.stdout.splitlines())}
    assert set(found) == set(by_name)

    def items(host: str, status: str) -> dict[str, dict[str, str]]:
        return {c["item"]: c for c in found[host]["checks"] if c["status"] == status}

    assert found["dr-ok"]["ready"] and not items("dr-ok", "missing")
    assert set(items("dr-journal", "missing")) == {"journal"}
    assert "Storage=persistent" in items("dr-journal", "missing")["journal"]["fix"]
    assert set(items("dr-runtime", "missing")) == {"docker"}
    assert "nvidia-ctk runtime configure" in items("dr-runtime", "missing")["docker"]["fix"]
    assert set(items("dr-pdu", "missing")) == {"power"}
    assert "does not answer" in items("dr-pdu", "missing")["power"]["found"]
    assert set(items("dr-sudo", "missing")) == {"privilege"}
    no_sudo = items("dr-sudo", "missing")["privilege"]
    assert no_sudo["found"].startswith("no passwordless sudo for nvidia-smi: lab may not run"), no_sudo
    assert "`lab ALL=(root) NOPASSWD: /usr/local/bin/nvidia-smi ^-i [0-9]+ -(pm" in no_sudo["fix"], no_sudo
    assert found["dr-sudo-smi"]["ready"], found["dr-sudo-smi"]
    assert items("dr-sudo-smi", "ok")["privilege"]["found"] == "sudo -n /usr/local/bin/nvidia-smi without a password"
    assert items("dr-sudo-smi", "ok")["login"]["found"].startswith("lab@")
    for host in by_name:  # the image a host has is ok; one it lacks is a warning with its command
        assert "image vllm/vllm-openai:v0.25.1" in items(host, "ok"), found[host]
        assert "docker pull vllm/vllm-openai:v0.99.0" in items(host, "warn")["image vllm/vllm-openai:v0.99.0"]["fix"]
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*/attempts.jsonl"))
