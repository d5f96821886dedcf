"""The agent stops an attempt's docker container at every end, and finds the ones whose
supervisor is gone (run locally, against a fake docker CLI that answers as docker does;
tests/fleet/test_fleet_docker.py does the same against the simulated docker over SSH)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tests.support import agent_harness as h
from tests.support import paths

FAKE_DOCKER = paths.FIXTURES / "agent" / "fake_docker"
ID = "ab" * 32
LABEL = "reprofleet.attempt"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state dir whose leftover supervisors and PoCs are killed (by pid) afterwards."""
    folder = tmp_path / "state"
    yield folder
    attempt_state = h.collector("attempt_state")
    for attempt in (folder / "attempts").glob("*"):
        pid = attempt_state.read_pid(str(attempt / "supervisor.pid"))
        if pid and attempt_state.supervisor_alive(str(attempt), attempt.name, {}):
            os.kill(pid, signal.SIGKILL)
        for line in h.parse_lines((attempt / "events.jsonl").read_text()):
            if line["k"] == "start":
                for member in attempt_state.attempt_processes(line["pgid"], attempt.name):
                    os.kill(member, signal.SIGKILL)


class FakeDocker:
    def __init__(self, folder: Path) -> None:
        self.state, self.log = folder / "docker.json", folder / "docker.log"
        self.write({})

    def write(self, running: Dict[str, Dict[str, Any]], stopped: Dict[str, str] | None = None) -> None:
        self.state.write_text(json.dumps({"running": running, "stopped": stopped or {}}))

    def running(self) -> Dict[str, Any]:
        return json.loads(self.state.read_text())["running"]

    def calls(self) -> List[List[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def env(self, with_docker: bool = True) -> Dict[str, str]:
        path = os.environ.get("PATH", "/usr/bin:/bin")
        return h.agent_env({"FAKE_DOCKER_STATE": str(self.state), "FAKE_DOCKER_LOG": str(self.log),
                            "PATH": f"{FAKE_DOCKER}:{path}" if with_docker else "/nonexistent"})


@pytest.fixture
def docker(tmp_path: Path) -> FakeDocker:
    return FakeDocker(tmp_path)


def container(attempt_id: str) -> Dict[str, Any]:
    return {"id": ID, "labels": {LABEL: attempt_id}}


def exit_line(lines: List[Dict[str, Any]]) -> Dict[str, Any]:
    assert lines and lines[-1]["k"] == "exit", lines[-3:]
    return lines[-1]


def test_a_timed_out_attempt_has_its_container_killed_and_the_exit_line_says_so(state_dir: Path, docker) -> None:
    docker.write({"reprofleet-t1": container("t1")})  # the container that outlives its client
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "t1", "--timeout", "1", "--kill-grace", "0.3",
                               "--sample-hz", "0", "--kmsg", "", "--container", "reprofleet-t1",
                               "--", "sh", "-c", "trap '' TERM; echo up; sleep 30", env=docker.env())
    end = exit_line(lines)
    assert rc == 0 and end["timed_out"] is True and end["signal"] == signal.SIGKILL
    assert end["container"] == "reprofleet-t1" and end["container_killed"] is True and "container_error" not in end
    assert docker.calls() == [["kill", "reprofleet-t1"]] and docker.running() == {}
    assert json.loads((state_dir / "attempts" / "t1" / "meta.json").read_text())["container"] == "reprofleet-t1"


def test_a_poc_that_ended_by_itself_finds_its_container_gone_which_is_no_error(state_dir: Path, docker) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "c1", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                               "--container", "reprofleet-c1", "--", "sh", "-c", "echo done", env=docker.env())
    end = exit_line(lines)
    assert end["rc"] == 0 and end["container"] == "reprofleet-c1" and end["container_killed"] is False
    assert "container_error" not in end and docker.calls() == [["kill", "reprofleet-c1"]]


def test_an_attempt_without_a_container_never_asks_docker(state_dir: Path, docker) -> None:
    _, lines, _ = h.run_agent(state_dir, "run", "--id", "p1", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                              "--", "sh", "-c", "true", env=docker.env())
    assert "container" not in exit_line(lines) and docker.calls() == []


def test_a_host_without_docker_says_why_the_container_was_not_killed(state_dir: Path, docker) -> None:
    _, lines, _ = h.run_agent(state_dir, "run", "--id", "n1", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                              "--container", "reprofleet-n1", "--", "/bin/true", env=docker.env(with_docker=False))
    end = exit_line(lines)
    assert end["container_killed"] is False and end["container_error"] == "docker is not installed on this host"


def test_kill_stops_the_container_of_an_attempt_whose_supervisor_is_dead(state_dir: Path, docker) -> None:
    proc = subprocess.Popen(h.agent_argv(state_dir, "run", "--id", "o1", "--timeout", "60", "--sample-hz", "0",
                                         "--kmsg", "", "--container", "reprofleet-o1", "--",
                                         "sh", "-c", "echo up; exec sleep 60"),
                            env=docker.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    while json.loads(proc.stdout.readline()).get("line") != "up":
        pass
    docker.write({"reprofleet-o1": container("o1")})
    supervisor = int((state_dir / "attempts" / "o1" / "supervisor.pid").read_text())
    os.kill(supervisor, signal.SIGKILL)
    proc.wait(timeout=15)  # attach saw its supervisor die: a lost exit
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "o1", env=docker.env())
    assert rc == 0 and lines == [{"k": "killed", "id": "o1", "was_running": True, "container": "reprofleet-o1",
                                  "container_killed": True}]
    assert ["kill", "reprofleet-o1"] in docker.calls() and docker.running() == {}


def test_kill_of_an_exited_attempt_whose_container_still_runs_kills_it(state_dir: Path, docker) -> None:
    h.run_agent(state_dir, "run", "--id", "e1", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                "--container", "reprofleet-e1", "--", "true", env=docker.env())
    docker.write({"reprofleet-e1": container("e1")}, stopped={})  # docker kill failed at the end, say
    _, lines, _ = h.run_agent(state_dir, "kill", "--id", "e1", env=docker.env())
    assert lines == [{"k": "killed", "id": "e1", "was_running": True, "container": "reprofleet-e1",
                      "container_killed": True}]
    _, lines, _ = h.run_agent(state_dir, "kill", "--id", "e1", env=docker.env())
    assert lines[0]["was_running"] is False and lines[0]["container_killed"] is False


def test_kill_while_an_ended_supervisor_is_still_exiting_kills_the_container_that_came_back(
        state_dir: Path, docker) -> None:
    """The race CI once hit: exit.json written (its docker kill found nothing), the process
    not yet gone, and a container running; the kill must not trust the exit line alone."""
    attempt_state = h.collector("attempt_state")
    h.run_agent(state_dir, "run", "--id", "e2", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                "--container", "reprofleet-e2", "--", "true", env=docker.env())
    exiting = subprocess.Popen(["python3", "-c", "import time; time.sleep(0.5)", attempt_state.SUPERVISOR_ARG, "e2"])
    try:
        (state_dir / "attempts" / "e2" / attempt_state.SUPERVISOR_PID).write_text("%d\n" % exiting.pid)
        docker.write({"reprofleet-e2": container("e2")})
        _, lines, _ = h.run_agent(state_dir, "kill", "--id", "e2", env=docker.env())
    finally:
        exiting.kill()
        exiting.wait()
    assert lines[0]["container_killed"] is True and docker.running() == {}


def test_kill_of_an_unknown_id_kills_a_container_labelled_with_it(state_dir: Path, docker) -> None:
    docker.write({"reprofleet-lost": container("lost1")})
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "lost1", env=docker.env())
    assert rc == 0 and lines[0]["container"] == "reprofleet-lost" and lines[0]["container_killed"] is True
    rc, lines, _ = h.run_agent(state_dir, "kill", "--id", "nobody", env=docker.env())
    assert rc == 2 and "unknown attempt id" in lines[0]["error"]


def test_attempts_running_lists_containers_whose_supervisor_is_gone(state_dir: Path, docker) -> None:
    h.run_agent(state_dir, "run", "--id", "x1", "--timeout", "10", "--sample-hz", "0", "--kmsg", "",
                "--container", "reprofleet-x1", "--", "true", env=docker.env())
    h.wait_exited(state_dir, "x1", env=docker.env())  # its supervisor is gone, its container (below) is not
    docker.write({"reprofleet-x1": container("x1"), "reprofleet-y1": container("y1"),
                  "not-ours": {"id": "cd" * 32, "labels": {"team": "gpu"}}})
    rc, lines, _ = h.run_agent(state_dir, "attempts", "--running", env=docker.env())
    listed = {a["id"]: a for a in lines[0]["attempts"]}
    assert rc == 0 and sorted(listed) == ["x1", "y1"]
    assert listed["x1"]["status"] == "running" and listed["x1"]["container"] == "reprofleet-x1"
    assert listed["x1"]["supervisor_alive"] is False and listed["x1"]["age_s"] is not None
    assert listed["y1"]["container"] == "reprofleet-y1" and listed["y1"]["created"] is None  # no folder: docker's word
    docker.write({})
    _, lines, _ = h.run_agent(state_dir, "attempts", "--running", env=docker.env())
    assert lines[0]["attempts"] == []
    _, lines, _ = h.run_agent(state_dir, "attempts", env=docker.env())
    assert [(a["id"], a["status"]) for a in lines[0]["attempts"]] == [("x1", "exited")]


def test_a_bad_container_name_is_a_usage_error(state_dir: Path, docker) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "b1", "--timeout", "5", "--container", "bad/name", "--", "true",
                               env=docker.env())
    assert rc == 2 and "invalid container name" in lines[0]["error"]
    assert not (state_dir / "attempts" / "b1").exists()
