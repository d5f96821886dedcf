"""Who stopped an attempt (issue 32, item 2a): the controller's ``kill``, an orderly shutdown of
the host, or a SIGTERM from something else. The agent runs as a subprocess (as in
tests/agent/test_agent_run.py); ``$REPROFLEET_SYSTEM_STATE`` stands for ``systemctl is-system-running``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from reprofleet.model import Outcome, ReasonCode, reason_code
from reprofleet.runner.attempt import classify_exit

from tests.support import agent_harness as h
from tests.support import paths

host_shutdown = h.collector("host_shutdown")

READY = "echo ready; sleep 30"
GRACEFUL = "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"  # exits 0 on SIGTERM


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    for attempt in (tmp_path / "state" / "attempts").glob("*"):
        pid_file = attempt / "supervisor.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline")
            if cmdline.exists() and b"_supervise" in cmdline.read_bytes() and attempt.name.encode() in cmdline.read_bytes():
                os.kill(pid, signal.SIGKILL)
        attempt_state = h.collector("attempt_state")
        for line in h.parse_lines((attempt / "events.jsonl").read_text()):
            if line.get("k") == "start":
                for pid in attempt_state.attempt_processes(line["pgid"], attempt.name):
                    os.kill(pid, signal.SIGKILL)


def system_state(tmp_path: Path, state: str) -> Dict[str, str]:
    path = tmp_path / "system_state"
    path.write_text(state + "\n")
    return h.agent_env({"REPROFLEET_SYSTEM_STATE": str(path)})


def start(state_dir: Path, attempt_id: str, script: str, env: Dict[str, str]) -> "subprocess.Popen[bytes]":
    argv = h.agent_argv(state_dir, "run", "--id", attempt_id, "--timeout", "30", "--kill-grace", "0.5",
                        "--sample-hz", "0", "--kmsg", "", "--", "sh", "-c", script)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def until_ready(proc: "subprocess.Popen[bytes]") -> Dict[str, Any]:
    """The start line, once the PoC said ``ready``."""
    assert proc.stdout is not None
    started: Dict[str, Any] = {}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = json.loads(proc.stdout.readline())
        started = line if line["k"] == "start" else started
        if line["k"] == "log" and line["line"] == "ready":
            return started
    raise AssertionError("the PoC never said ready")


def exit_of(proc: "subprocess.Popen[bytes]") -> Dict[str, Any]:
    assert proc.stdout is not None
    lines: List[Dict[str, Any]] = [json.loads(raw) for raw in proc.stdout.read().splitlines() if raw.strip()]
    proc.wait(timeout=30)
    assert lines[-1]["k"] == "exit"
    return lines[-1]


def supervisor_pid(state_dir: Path, attempt_id: str) -> int:
    return int((state_dir / "attempts" / attempt_id / "supervisor.pid").read_text())


def test_a_sigterm_while_the_host_shuts_down_is_host_shutdown_and_its_slot_runs_again(
        state_dir: Path, tmp_path: Path) -> None:
    env = system_state(tmp_path, "running")
    proc = start(state_dir, "sd1", READY, env)
    until_ready(proc)
    Path(env["REPROFLEET_SYSTEM_STATE"]).write_text("stopping\n")  # someone typed reboot
    os.kill(supervisor_pid(state_dir, "sd1"), signal.SIGTERM)
    line = exit_of(proc)
    assert (line["stopped_by"], line["killed"], line["timed_out"]) == ("host_shutdown", True, False)
    assert "stopping" in line["shutdown"]
    outcome, reason = classify_exit(line, boot_changed=False)
    assert outcome is Outcome.INFRA and reason_code(reason) is ReasonCode.HOST_SHUTDOWN
    assert ReasonCode.HOST_SHUTDOWN.runs_again_on_resume


def test_a_sigterm_from_something_else_on_the_host_is_signal_not_a_controller_kill(
        state_dir: Path, tmp_path: Path) -> None:
    proc = start(state_dir, "sg1", READY, system_state(tmp_path, "running"))
    until_ready(proc)
    os.kill(supervisor_pid(state_dir, "sg1"), signal.SIGTERM)
    line = exit_of(proc)
    assert line["stopped_by"] == "signal" and line["killed"] is True and "shutdown" not in line
    assert classify_exit(line, boot_changed=False)[0] is Outcome.INFRA
    assert reason_code(classify_exit(line, boot_changed=False)[1]) is ReasonCode.OTHER


def test_the_controllers_kill_is_controller(state_dir: Path, tmp_path: Path) -> None:
    env = system_state(tmp_path, "running")
    proc = start(state_dir, "ct1", READY, env)
    until_ready(proc)
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "ct1", "--ignore-lease", env=env)
    assert rc == 0 and lines[0]["was_running"] is True
    line = exit_of(proc)
    assert line["stopped_by"] == "controller" and line["killed"] is True


def test_a_poc_that_exits_0_on_the_sessions_sigterm_during_a_shutdown_is_never_clean(
        state_dir: Path, tmp_path: Path) -> None:
    """systemd stops the login session's scope: SIGTERM to every process in it, PoC and
    supervisor alike, in no promised order; a PoC may end cleanly on it."""
    env = system_state(tmp_path, "running")
    proc = start(state_dir, "sc1", GRACEFUL, env)
    started = until_ready(proc)
    Path(env["REPROFLEET_SYSTEM_STATE"]).write_text("stopping\n")
    os.killpg(started["pgid"], signal.SIGTERM)
    os.kill(supervisor_pid(state_dir, "sc1"), signal.SIGTERM)
    line = exit_of(proc)
    assert line["stopped_by"] == "host_shutdown"
    assert classify_exit(line, boot_changed=False)[0] is Outcome.INFRA


def test_a_clean_exit_on_a_running_host_says_nothing_of_who_stopped_it(state_dir: Path, tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "ok1", "--timeout", "20", "--sample-hz", "0", "--kmsg", "",
                               "--", "sh", "-c", "exit 0", env=system_state(tmp_path, "degraded"))
    assert lines[-1]["rc"] == 0 and "stopped_by" not in lines[-1] and lines[-1]["killed"] is False


def test_loginds_schedule_file_counts_only_when_its_shutdown_is_due() -> None:
    now = 1_750_000_000.0
    text = f"USEC={int((now + 30) * 1e6)}\nWARN_WALL=1\nMODE=reboot\nUID=0\n"
    assert "reboot" in host_shutdown.scheduled_due(text, now)
    assert host_shutdown.scheduled_due(f"USEC={int((now + 3600) * 1e6)}\nMODE=reboot\n", now) is None
    assert host_shutdown.scheduled_due("garbage", now) is None and host_shutdown.scheduled_due(None, now) is None
