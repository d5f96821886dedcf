"""One GPU, one attempt, one campaign: the agent refuses a second live attempt and guards a lease."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
import agent_harness as h  # noqa: E402
from test_agent_run import read_until, start_run, state_dir  # noqa: E402,F401 (state_dir is a fixture)


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
    proc = start_run(state_dir, "gone", "echo up; sleep 30")
    read_until(proc, "up")
    pid = int((state_dir / "attempts" / "gone" / "supervisor.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # a supervisor that died without an exit line
    proc.kill()
    proc.wait(10)
    _, lines, _ = h.run_agent(state_dir, "attempts")
    status = {a["id"]: a["status"] for a in lines[0]["attempts"]}
    assert status["done"] == "exited" and status["gone"] in ("lost", "running")


def test_a_lease_held_by_another_campaign_is_refused_unless_broken(state_dir: Path) -> None:
    take = ("lease", "acquire", "--controller", "laptop", "--campaign", "night-1", "--pid", "111")
    rc, lines, _ = h.run_agent(state_dir, *take)
    assert rc == 0 and lines[0]["ok"] and lines[0]["lease"]["controller"] == "laptop"
    rc, lines, _ = h.run_agent(state_dir, "lease", "acquire", "--controller", "pi", "--campaign", "other", "--pid", "2")
    assert rc == 1 and not lines[0]["ok"] and "leased to laptop (campaign night-1" in lines[0]["error"]
    rc, lines, _ = h.run_agent(state_dir, *take)  # the same campaign (a resume) renews it
    assert rc == 0 and lines[0]["ok"] and lines[0]["broken"] is None
    rc, lines, _ = h.run_agent(state_dir, "lease", "acquire", "--controller", "pi", "--campaign", "other",
                               "--pid", "2", "--break")
    assert rc == 0 and lines[0]["broken"]["campaign"] == "night-1"
    rc, lines, _ = h.run_agent(state_dir, "lease", "release", "--campaign", "night-1")
    assert rc == 1  # not night-1's any more
    rc, lines, _ = h.run_agent(state_dir, "lease", "release", "--campaign", "other")
    assert rc == 0 and lines[0]["released"]
    _, lines, _ = h.run_agent(state_dir, "lease", "show")
    assert lines[0]["lease"] is None
