"""One GPU, one attempt, one campaign: the agent refuses a second live attempt and guards a lease."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.support import agent_harness as h
from tests.support.agent_runs import read_until, start_run


def test_a_second_attempt_is_refused_while_an_orphan_still_runs_on_the_gpu(state_dir: Path) -> None:
    orphan = start_run(state_dir, "orphan", "echo up; sleep 30")
    read_until(orphan, "up")
    orphan.kill()  # the controller that started it is gone; the attempt goes on
    orphan.wait(10)
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "second", "--timeout", "10", "--", "sh", "-c", "echo no")
    assert rc == 1 and "attempt orphan is still running" in lines[-1]["error"]
    assert not (state_dir / "attempts" / "second").exists()
    rc, lines, _ = h.run_agent(state_dir, "attempts", "--running")
    assert [a["id"] for a in lines[0]["attempts"]] == ["orphan"] and lines[0]["attempts"][0]["status"] == "running"
    h.run_agent(state_dir, "kill", "--id", "orphan")
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "third", "--timeout", "10", "--", "sh", "-c", "echo yes")
    assert rc == 0 and lines[-1]["k"] == "exit" and lines[-1]["rc"] == 0


def test_the_attempt_listing_tells_running_exited_and_lost_apart(state_dir: Path) -> None:
    h.run_agent(state_dir, "run", "--id", "done", "--timeout", "10", "--", "sh", "-c", "true")
    h.wait_exited(state_dir, "done")  # one attempt at a time: the next starts once this one is recorded
    proc = start_run(state_dir, "gone", "echo up; sleep 30")
    read_until(proc, "up")
    pid = int((state_dir / "attempts" / "gone" / "supervisor.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # a supervisor that died without an exit line
    proc.kill()
    proc.wait(10)
    _, lines, _ = h.run_agent(state_dir, "attempts")
    status = {a["id"]: a["status"] for a in lines[0]["attempts"]}
    assert status["done"] == "exited" and status["gone"] in ("lost", "running")


def _acquire(state_dir: Path, token: str, campaign: str = "night-1", *extra: str) -> tuple[int, dict]:
    rc, lines, _ = h.with_token(state_dir, token, "lease", "acquire", "--controller", "laptop", "--campaign", campaign,
                                "--pid", "111", *extra)
    return rc, lines[0]


def test_a_live_lease_under_another_token_is_refused_whatever_its_campaign_unless_broken(state_dir: Path) -> None:
    rc, line = _acquire(state_dir, "tok-first")
    assert rc == 0 and line["ok"] and line["lease"]["controller"] == "laptop" and "token" not in line["lease"]
    rc, line = _acquire(state_dir, "tok-first")  # the same controller run renews it
    assert rc == 0 and line["broken"] is None
    rc, line = _acquire(state_dir, "tok-second")  # a second controller of the SAME campaign
    assert rc == 1 and not line["ok"] and "leased to laptop (campaign night-1" in line["error"]
    assert "expires in" in line["error"] and "token" not in line["held"]
    rc, line = _acquire(state_dir, "tok-second", "night-1", "--break")
    assert rc == 0 and line["broken"]["campaign"] == "night-1" and line["broken"]["expired"] is False
    rc, lines, _ = h.with_token(state_dir, "tok-first", "lease", "release")
    assert rc == 1  # not the first's any more
    rc, lines, _ = h.with_token(state_dir, "tok-second", "lease", "release")
    assert rc == 0 and lines[0]["released"]
    _, lines, _ = h.run_agent(state_dir, "lease", "show")
    assert lines[0]["lease"] is None


def test_an_expired_lease_is_taken_without_break(state_dir: Path) -> None:
    _acquire(state_dir, "tok-gone", "night-1", "--ttl", "0.2")
    import time

    time.sleep(0.5)  # the TTL is the subject: the holder stopped renewing
    rc, line = _acquire(state_dir, "tok-new")
    assert rc == 0 and line["broken"]["expired"] is True


def test_a_fenced_controller_can_neither_run_kill_nor_change_the_gpu(state_dir: Path) -> None:
    _acquire(state_dir, "tok-first")
    _acquire(state_dir, "tok-second", "night-1", "--break")  # a person resumed elsewhere with --break-lease
    rc, lines, _ = h.with_token(state_dir, "tok-first", "run", "--id", "late", "--timeout", "10",
                                "--", "sh", "-c", "echo no")
    assert rc == 1 and lines[-1]["code"] == "fenced" and not (state_dir / "attempts" / "late").exists()
    rc, lines, _ = h.with_token(state_dir, "tok-first", "kill", "--id", "x")
    assert lines[-1]["code"] == "fenced"
    for action in ("apply", "restore"):
        rc, lines, _ = h.with_token(state_dir, "tok-first", "policy", action, "--gpu", "0")
        assert rc == 1 and lines[-1]["code"] == "fenced"
    rc, lines, _ = h.with_token(state_dir, "tok-second", "run", "--id", "ours", "--timeout", "10",
                                "--", "sh", "-c", "echo yes")
    assert rc == 0 and lines[-1]["k"] == "exit" and lines[-1]["rc"] == 0  # the holder runs, and renews
    h.with_token(state_dir, "tok-second", "lease", "release")
    rc, lines, _ = h.with_token(state_dir, "tok-first", "run", "--id", "later", "--timeout", "10",
                                "--", "sh", "-c", "echo no")
    assert lines[-1]["code"] == "fenced"  # given back by the other: still never the first's again


# Every subcommand that changes the host, as the controller sends it (issue 34 item 6): with a
# stale token each is refused before it touches anything.
HOST_CHANGES = [
    ("host-debug", "apply", "--json", '{"softlockup_panic": 1}'),
    ("host-debug", "restore"),
    ("netconsole", "apply", "--json", '{"port": 6666, "target": "10.0.0.1"}'),
    ("netconsole", "restore"),
    ("cache", "have", "--snapshot", "a" * 64),
    ("cache", "receive", "--snapshot", "a" * 64),
    ("cache", "materialize", "--snapshot", "a" * 64, "--dest", "cache-here"),
    ("runtime", "image", "--json", '{"image": "vllm/vllm-openai:v1", "pull": true}'),
    ("runtime", "venv", "--json", '{"vllm": "0.1", "name": "v"}'),
]


def test_every_subcommand_that_changes_the_host_refuses_a_stale_token(state_dir: Path, tmp_path_factory: Any) -> None:
    _acquire(state_dir, "tok-first")
    _acquire(state_dir, "tok-second", "night-1", "--break")
    before = sorted(p.name for p in state_dir.iterdir())
    kernel = tmp_path_factory.mktemp("kernel")  # were the fence broken, this machine's own sysctls stay untouched
    env = h.agent_env({"REPROFLEET_PROC_SYS": str(kernel / "proc-sys"), "REPROFLEET_CONFIGFS": str(kernel / "cfg"),
                       "PATH": str(kernel)})
    for args in HOST_CHANGES:
        rc, lines, _ = h.with_token(state_dir, "tok-first", *args, env=env)
        assert rc == 1 and lines[-1]["k"] == "error" and lines[-1]["code"] == "fenced", (args, lines)
    assert sorted(p.name for p in state_dir.iterdir()) == before  # no baseline, no store, no venv written
    assert not any(kernel.iterdir())
    rc, lines, _ = h.run_agent(state_dir, "host-debug", "restore", env=env)  # by hand, no token: a campaign's host
    assert lines[-1]["code"] == "leased"


def test_the_lease_token_is_never_on_a_command_line(state_dir: Path) -> None:
    """The supervised ``run`` lives for hours: ``ps`` on the host shows every process's argv."""
    import subprocess

    _acquire(state_dir, "tok-secret-0123")
    proc = subprocess.Popen(h.agent_argv(state_dir, "run", "--id", "long", "--timeout", "30", "--lease-stdin", "--",
                                         "sh", "-c", "echo up; sleep 30"),
                            env=h.agent_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"tok-secret-0123\n")
        proc.stdin.close()
        read_until(proc, "up")
        supervisor = int((state_dir / "attempts" / "long" / "supervisor.pid").read_text())
        argvs = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in (proc.pid, supervisor)}
    finally:
        h.run_agent(state_dir, "kill", "--id", "long", "--ignore-lease")
        proc.kill()
        proc.wait(10)
    assert b"--lease-stdin" in argvs[proc.pid] and b"_supervise" in argvs[supervisor]
    assert all(b"tok-secret" not in argv for argv in argvs.values()), argvs


def test_the_lease_file_is_the_owners_alone(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o755, exist_ok=True)
    state_dir.chmod(0o755)  # as ~/.cache/reprofleet was made before
    _acquire(state_dir, "tok-first")
    assert (state_dir / "lease.json").stat().st_mode & 0o777 == 0o600
    assert state_dir.stat().st_mode & 0o777 == 0o700
    _acquire(state_dir, "tok-first")  # renewed: still private
    assert (state_dir / "lease.json").stat().st_mode & 0o777 == 0o600


def test_a_by_hand_change_on_a_leased_host_is_refused_unless_told(state_dir: Path) -> None:
    _acquire(state_dir, "tok-campaign")
    rc, lines, _ = h.run_agent(state_dir, "policy", "restore", "--gpu", "0")
    assert rc == 1 and lines[-1]["code"] == "leased" and "--ignore-lease" in lines[-1]["error"]
    rc, lines, _ = h.run_agent(state_dir, "policy", "read", "--gpu", "0")
    assert lines[-1]["k"] == "policy"  # reading is never refused
    rc, lines, _ = h.run_agent(state_dir, "policy", "restore", "--gpu", "0", "--ignore-lease")
    assert lines[-1]["k"] == "policy"  # acted (it fails here only for want of a GPU)
