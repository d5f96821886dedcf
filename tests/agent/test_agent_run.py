"""The host agent's `run`/`attach`/`kill`, run locally as subprocesses (no SSH needed).

These pin the protocol the controller relies on: every PoC line in order, seq without
gaps, a stream that survives its reader dying, and an `exit` line in every case.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.support import agent_harness as h
from tests.support.agent_runs import read_until, start_run

TWENTY_LINES = "for i in $(seq 1 20); do echo n$i; sleep 0.1; done"


def test_a_clean_poc_streams_start_every_line_in_order_and_its_exit(state_dir: Path) -> None:
    script = "for i in 1 2 3 4 5; do echo line-$i; sleep 0.05; done; echo to-stderr >&2"
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "a1", "--timeout", "20", "--", "sh", "-c", script)
    assert rc == 0
    events = h.without_hb(lines)
    start = next(e for e in events if e["k"] == "start")
    assert {e["k"] for e in events[:events.index(start)]} <= {"notice", "nvml", "kmsg"}  # telemetry first
    assert start["pgid"] == start["pid"] and start["cmd"] == ["sh", "-c", script]
    assert start["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert [e["line"] for e in events if e["k"] == "log"] == [f"line-{i}" for i in range(1, 6)] + ["to-stderr"]
    assert events[-1]["k"] == "exit"
    assert (events[-1]["rc"], events[-1]["timed_out"], events[-1]["killed"], events[-1]["lost"]) == (0, False, False, False)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events == h.stored_events(state_dir, "a1")
    assert json.loads((state_dir / "attempts/a1/exit.json").read_text()) == events[-1]
    assert (state_dir / "attempts/a1/output.log").read_text().startswith("line-1\nline-2\n")


def test_a_failing_poc_is_reported_with_its_exit_code(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "f1", "--timeout", "20", "--",
                               "sh", "-c", "echo Traceback >&2; exit 1")
    assert rc == 0  # the agent did its job; the PoC failed
    assert lines[-1]["k"] == "exit" and lines[-1]["rc"] == 1 and lines[-1]["signal"] is None


def test_a_poc_past_its_timeout_gets_sigterm_then_sigkill(state_dir: Path) -> None:
    script = "trap '' TERM; echo stubborn; sleep 30"  # ignores SIGTERM (and so does sleep)
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "t1", "--timeout", "0.5", "--kill-grace", "0.3",
                               "--", "sh", "-c", script)
    exit_line = lines[-1]
    assert rc == 0 and exit_line["k"] == "exit"
    assert exit_line["timed_out"] is True and exit_line["killed"] is False
    assert exit_line["rc"] is None and exit_line["signal"] == signal.SIGKILL


def test_a_timeout_that_sigterm_ends_reports_sigterm(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "t2", "--timeout", "0.3", "--", "sleep", "30")
    assert lines[-1]["timed_out"] is True and lines[-1]["signal"] == signal.SIGTERM


def test_heartbeats_come_at_least_every_hb_seconds(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "hb1", "--timeout", "20", "--hb", "0.4",
                               "--", "sh", "-c", "echo a; sleep 1.2; echo b")
    beats = [line["t"] for line in lines if line["k"] == "hb"]
    assert len(beats) >= 3
    assert max(b - a for a, b in zip(beats, beats[1:])) <= 0.4
    assert all(line["seq"] >= 0 for line in lines if line["k"] == "hb")


def test_killing_the_reader_leaves_the_poc_running_and_attach_resumes_without_gap(state_dir: Path) -> None:
    proc = start_run(state_dir, "r1", TWENTY_LINES, "--hb", "0.2")
    seen = read_until(proc, "n3")
    proc.kill()  # what a dropped SSH connection does to the SSH-side process
    proc.wait(timeout=10)
    rest = _read_to_eof(proc, deadline_s=10)
    # EOF came while the attempt still ran: nothing detached holds the session's pipe.
    assert not (state_dir / "attempts/r1/exit.json").exists()
    received = h.without_hb(seen + rest)
    resume_at = received[-1]["seq"] + 1
    rc, attached, _ = h.run_agent(state_dir, "attach", "--id", "r1", "--from", str(resume_at), "--hb", "0.2")
    assert rc == 0
    combined = received + h.without_hb(attached)
    assert combined == h.stored_events(state_dir, "r1")
    assert [e["line"] for e in combined if e["k"] == "log"] == [f"n{i}" for i in range(1, 21)]
    assert combined[-1]["k"] == "exit" and combined[-1]["rc"] == 0


def _read_to_eof(proc: subprocess.Popen[bytes], deadline_s: float) -> List[Dict[str, Any]]:
    assert proc.stdout is not None
    fd, data, deadline = proc.stdout.fileno(), b"", time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return h.parse_lines(data.decode())
            data += chunk
    raise AssertionError("the run stream's stdout stayed open after its process died")


def test_attach_from_n_replays_exactly_the_lines_from_n(state_dir: Path) -> None:
    h.run_agent(state_dir, "run", "--id", "p1", "--timeout", "20", "--", "sh", "-c", "echo x; echo y; echo z")
    rc, lines, _ = h.run_agent(state_dir, "attach", "--id", "p1", "--from", "2")
    assert rc == 0 and h.without_hb(lines) == h.stored_events(state_dir, "p1")[2:]


def test_kill_stops_a_running_attempt_and_the_stream_says_killed(state_dir: Path) -> None:
    proc = start_run(state_dir, "k1", "echo ready; sleep 30")
    read_until(proc, "ready")
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "k1")
    assert rc == 0 and lines == [{"k": "killed", "id": "k1", "was_running": True}]
    out, _ = proc.communicate(timeout=15)
    exit_line = h.parse_lines(out.decode())[-1]
    assert exit_line["k"] == "exit" and exit_line["killed"] is True and exit_line["signal"] == signal.SIGTERM
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "k1")
    assert lines == [{"k": "killed", "id": "k1", "was_running": False}]


def test_a_dead_supervisor_without_exit_line_gives_a_lost_exit(state_dir: Path) -> None:
    proc = start_run(state_dir, "l1", "echo up; sleep 30")
    read_until(proc, "up")
    proc.kill()
    proc.wait(timeout=10)
    supervisor_pid = int((state_dir / "attempts/l1/supervisor.pid").read_text())
    os.kill(supervisor_pid, signal.SIGKILL)
    _wait_gone(supervisor_pid)
    rc, lines, _ = h.run_agent(state_dir, "attach", "--id", "l1", "--from", "1")
    exit_line = lines[-1]
    assert rc == 0 and exit_line["k"] == "exit" and exit_line["lost"] is True
    assert exit_line["reason"] == "supervisor died without an exit line"
    assert exit_line["seq"] == len(h.stored_events(state_dir, "l1"))  # synthesized, not stored
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "l1")  # the orphaned PoC still ran
    assert lines == [{"k": "killed", "id": "l1", "was_running": True}]


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        status = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
        if ") Z" in status:
            return
        time.sleep(0.02)


def test_an_attempt_from_a_previous_boot_is_lost_because_the_host_rebooted(state_dir: Path) -> None:
    attempt = state_dir / "attempts" / "old1"
    attempt.mkdir(parents=True)
    meta = {"id": "old1", "cmd": ["poc"], "cwd": "/", "timeout": 60, "created": time.time() - 100,
            "boot_id": "00000000-0000-0000-0000-000000000000"}
    (attempt / "meta.json").write_text(json.dumps(meta))
    (attempt / "supervisor.pid").write_text(f"{os.getpid()}\n")  # a live pid of another process
    (attempt / "events.jsonl").write_text('{"t":1.0,"k":"start","seq":0,"pid":999999999,"pgid":999999999}\n'
                                         '{"t":2.0,"k":"log","seq":1,"line":"Capturing CUDA graphs"}\n')
    rc, lines, _ = h.run_agent(state_dir, "attach", "--id", "old1")
    assert [line["seq"] for line in h.without_hb(lines)] == [0, 1, 2]
    assert lines[-1]["lost"] is True and lines[-1]["reason"] == "host rebooted (boot_id changed)"


def test_a_poc_that_cannot_start_still_ends_with_an_exit_line(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "n1", "--timeout", "5", "--", "/nonexistent/poc")
    assert rc == 0 and lines[-1]["k"] == "exit" and lines[-1]["rc"] is None
    assert "cannot start the PoC" in lines[-1]["error"]


def test_children_left_holding_the_output_are_killed_after_the_poc_exits(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "s1", "--timeout", "20", "--",
                               "sh", "-c", "(sleep 30; echo never) & echo parent-done")
    assert lines[-1]["rc"] == 0 and lines[-1]["stragglers_killed"] is True


@pytest.mark.parametrize("args", [
    ("attach", "--id", "nope"),
    ("kill", "--id", "nope"),
    ("attach", "--id", "../escape"),
    ("run", "--id", "x1", "--timeout", "5"),  # no command after --
    ("run", "--id", "x2", "--timeout", "0", "--", "true"),
    ("run", "--id", "x3", "--timeout", "5", "--env", "NOEQUALS", "--", "true"),
    ("frobnicate",),
])
def test_usage_errors_exit_2_with_an_error_line(state_dir: Path, args: tuple) -> None:
    rc, lines, _ = h.run_agent(state_dir, *args)
    assert rc == 2 and len(lines) == 1 and lines[0]["k"] == "error" and lines[0]["error"]


def test_run_refuses_an_id_that_exists(state_dir: Path) -> None:
    assert h.run_agent(state_dir, "run", "--id", "d1", "--timeout", "5", "--", "true")[0] == 0
    h.wait_exited(state_dir, "d1")  # else the refusal is "another attempt is alive", not this one
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "d1", "--timeout", "5", "--", "true")
    assert rc == 2 and "already exists" in lines[0]["error"]


def test_run_passes_env_and_cwd_to_the_poc(state_dir: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "e1", "--timeout", "5", "--cwd", str(workdir),
                               "--env", "POC_FLAG=a=b", "--", "sh", "-c", 'echo "$POC_FLAG $(pwd)"')
    assert [e["line"] for e in lines if e["k"] == "log"] == [f"a=b {workdir}"]


def test_a_replayed_vllm_log_yields_phase_lines_right_after_the_lines_that_mark_them(state_dir: Path) -> None:
    log = h.VLLM_LOGS / "v0.25.1-dflash-v1runner.log"
    golden = json.loads(log.with_suffix(".phases.json").read_text())
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "ph1", "--timeout", "20", "--", "cat", str(log))
    events = h.without_hb(lines)
    log_lines = log.read_text().splitlines()
    phases = [(i, e) for i, e in enumerate(events) if e["k"] == "phase"]
    assert [(e["phase"], e["line"]) for _, e in phases] == [(p, log_lines[n - 1]) for n, p in golden]
    for index, phase_line in phases:
        assert events[index - 1]["k"] == "log" and events[index - 1]["line"] == phase_line["line"]
