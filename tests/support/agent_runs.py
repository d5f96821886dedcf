"""Agent runs started by a test: ``start_run`` (the agent's ``run`` of a shell script, streaming),
``read_until`` (its lines up to a log line), and the ``state_dir`` fixture, an agent state dir
whose leftover supervisors and PoCs are killed afterwards, by pid and verified to be its own.

Registered once in tests/conftest.py; a module with a ``state_dir`` of its own keeps it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tests.support import agent_harness as h


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state dir whose leftover supervisors and PoCs are killed (by pid) afterwards."""
    yield tmp_path
    for attempt in (tmp_path / "attempts").glob("*"):
        _kill_leftovers(attempt)


def _kill_leftovers(attempt: Path) -> None:
    """Kill what a test left running, verified to be this attempt's (never a bare pgid)."""
    attempt_state = h.collector("attempt_state")
    pid_file = attempt / "supervisor.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists() and b"_supervise" in cmdline.read_bytes() and attempt.name.encode() in cmdline.read_bytes():
            os.kill(pid, signal.SIGKILL)
    for line in h.parse_lines((attempt / "events.jsonl").read_text()):
        if line["k"] == "start":
            for pid in attempt_state.attempt_processes(line["pgid"], attempt.name):
                os.kill(pid, signal.SIGKILL)


def start_run(state_dir: Path, attempt_id: str, script: str, *extra: str) -> subprocess.Popen[bytes]:
    argv = h.agent_argv(state_dir, "run", "--id", attempt_id, "--timeout", "30", *extra,
                        "--", "sh", "-c", script)
    return subprocess.Popen(argv, env=h.agent_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_until(proc: subprocess.Popen[bytes], wanted: str, deadline_s: float = 15.0) -> List[Dict[str, Any]]:
    """Stream lines until a log line equal to `wanted` (bounded by a deadline)."""
    lines: List[Dict[str, Any]] = []
    deadline = time.monotonic() + deadline_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        raw = proc.stdout.readline()
        assert raw, "stream ended before %r" % wanted
        lines.append(json.loads(raw))
        if lines[-1]["k"] == "log" and lines[-1]["line"] == wanted:
            return lines
    raise AssertionError("no %r within %ss" % (wanted, deadline_s))
