"""invoke doctor's decisions, from the facts a host sends: each way a host can be broken is
named with its fix, and only a `missing` item makes the host not ready. The base facts are the
real H200's (tests/fixtures/real-gpu/facts.jsonl), with the readiness block the agent adds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.doctor import Evidence, Status, diagnose
from reprofleet.model import Cell, Host, PowerPort, Runtime, RuntimeKind
from tests.support import paths

REAL = json.loads((paths.FIXTURES / "real-gpu" / "facts.jsonl").read_text().splitlines()[0])
READY = {"time_unix": 1000.0, "user": "lab", "euid": 1000, "kernel_log": {"journal": True, "kmsg": False},
         "pstore": {"backend": "efi_pstore", "mounted": True, "readable": False},
         "netconsole": {"module": True, "loaded": False, "configfs": True},
         "disk": {"path": "/home/lab/.cache/reprofleet", "free_bytes": 200 * 1024 ** 3, "total_bytes": 10 ** 12}}
HOST = Host("ws01", "10.20.0.11", user="lab", pdu=PowerPort(driver="tasmota", address="10.20.0.101", outlet="1"))
DOCKER = Cell(name="default", index=0, factors={}, runtime=Runtime(kind=RuntimeKind.DOCKER,
                                              image="vllm/vllm-openai:v0.25.1"))


def healthy(**changes: Any) -> dict[str, Any]:
    facts = {**REAL, "journal_persistent": True, "privilege": "sudo", "docker": "27.3.1",
             "docker_runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
             "panic_sysctls": {"values": {"panic": 0}, "absent": []}, "readiness": dict(READY)}
    facts.update(changes)
    return facts


def evidence(**fields: Any) -> Evidence:
    base = dict(facts=healthy(), images={DOCKER.runtime.image: "sha256:" + "a" * 64},
                power="on", asked_at=(999.9, 1000.1))
    base.update(fields)
    return Evidence(**base)


def statuses(diagnosis: Any) -> dict[str, Status]:
    return {c.item: c.status for c in diagnosis.checks}


def check(diagnosis: Any, item: str) -> Any:
    return next(c for c in diagnosis.checks if c.item == item)


def test_a_host_with_everything_is_ready_and_every_item_is_ok() -> None:
    found = diagnose(HOST, [DOCKER], evidence())
    assert found.ready and set(statuses(found).values()) == {Status.OK}
    assert "NVIDIA H200" in check(found, "GPU and driver").found


@pytest.mark.parametrize("broken, item, words, fix", [
    (dict(facts=healthy(privilege="none")), "privilege", "lab may not run nvidia-smi's setters",
     "`lab ALL=(root) NOPASSWD: /usr/local/nvidia/bin/nvidia-smi ^-i [0-9]+ -(pm [01]|"),
    (dict(facts=healthy(docker_runtimes=["runc"])), "docker", "", "nvidia"),
    (dict(facts=healthy(docker=None)), "docker", "docker is not installed", "install and start docker"),
    (dict(facts=healthy(journal_persistent=False)), "journal", "volatile", "Storage=persistent"),
    (dict(facts=healthy(readiness={**READY, "kernel_log": {"journal": False, "kmsg": False}})), "kernel log",
     "lab cannot read the kernel's messages", "usermod -aG systemd-journal lab"),
    (dict(power=None, power_error="no answer within 5s"), "power", "does not answer: no answer within 5s",
     "invoke power HOST status"),
    (dict(facts=None, login_error="ws01: ssh: connection refused"), "login", "connection refused", "ssh-copy-id"),
])
def test_each_way_a_host_is_broken_is_missing_with_its_fix(broken: dict[str, Any], item: str, words: str,
                                                           fix: str) -> None:
    found = diagnose(HOST, [DOCKER], evidence(**broken))
    assert not found.ready
    failing = check(found, item)
    assert failing.status is Status.MISSING and words in failing.found and fix in failing.fix, failing
    assert [c.item for c in found.checks if c.status is Status.MISSING] == [item]  # only that one


@pytest.mark.parametrize("broken, item, words", [
    (dict(images={}), "image vllm/vllm-openai:v0.25.1", "not on the host"),
    (dict(facts=healthy(readiness={**READY, "pstore": {"backend": None, "mounted": False, "readable": None}})),
     "pstore", "no pstore backend"),
    (dict(facts=healthy(readiness={**READY, "time_unix": 1030.0})), "clock", "+30.0 s"),
    (dict(facts=healthy(readiness={**READY, "disk": {**READY["disk"], "free_bytes": 3 * 1024 ** 3}})), "disk",
     "3.0 GiB free"),
    (dict(facts=healthy(panic_sysctls={"values": {}, "absent": ["hardlockup_panic"]})), "lockup detectors",
     "lacks hardlockup_panic"),
    (dict(power="off"), "power", "reads off"),
])
def test_what_costs_evidence_but_not_the_run_is_a_warning_and_the_host_stays_ready(
        broken: dict[str, Any], item: str, words: str) -> None:
    found = diagnose(HOST, [DOCKER], evidence(**broken))
    assert found.ready
    assert check(found, item).status is Status.WARN and words in check(found, item).found


def test_root_only_features_on_a_sudo_login_are_said_and_a_host_without_a_pdu_waits_for_a_person() -> None:
    found = diagnose(Host("ws02", "10.20.0.12", user="lab"), [], evidence(),
                     root_features=["host_debug's lockup-to-panic sysctls"])
    assert check(found, "privilege").status is Status.WARN and "need a root login" in check(found, "privilege").found
    assert check(found, "power").status is Status.WARN and "a person" in check(found, "power").found
    assert not [c for c in found.checks if c.item.startswith("image") or c.item == "docker"]  # no docker cell


def test_the_task_says_per_host_in_json_and_exits_3_when_one_is_not_ready(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gone:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n")
    book = paths.REPO / "playbooks" / "sm120-hostwedge.yml"
    done = subprocess.run([sys.executable, "-m", "reprofleet", "doctor", "--hosts", str(inventory), "--playbook",
                           str(book), "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert done.returncode == 3, done.stderr
    (line,) = done.stdout.splitlines()
    answer = json.loads(line)
    assert answer["host"] == "gone" and answer["ready"] is False
    assert [c["item"] for c in answer["checks"]] == ["login"] and answer["checks"][0]["status"] == "missing"
