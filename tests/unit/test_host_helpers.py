"""The per-host helpers are small objects with their own state: host_debug's sysctls,
netconsole and runtimes get a HostLog, the agent per call and nothing of the runner; what
they decide and the events they write are what the runner's helpers always wrote."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.errors import AgentError
from reprofleet.model import HostDebug, NetconsoleSetting, Outcome
from reprofleet.remote.netconsole import NetconsoleReceiver
from reprofleet.runner.host_debug import HostDebugSysctls
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.netconsole import HostNetconsole
from reprofleet.runner.runtimes import HostRuntimes, RuntimeFacts
from reprofleet.runner.stops import HostStops
from tests.support import paths
from tests.support.scripted_runner import book, cell
from tests.support.seam_host import FakeAgent

RUNNER = paths.REPO / "src" / "reprofleet" / "runner"
PANICS = HostDebug(hardlockup_panic=True, panic=5)


class Recorder:
    """A HostLog's sinks: every event and progress line, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.live: list[dict[str, Any]] = []

    def log(self, host: str = "ws01") -> HostLog:
        return HostLog(host, lambda h, what, **f: self.events.append((h, what.value, f)),
                       lambda h, **f: self.live.append(f))

    def names(self) -> list[str]:
        return [name for _, name, _ in self.events]


# -- host_debug ---------------------------------------------------------------------------

def test_host_debug_sysctls_are_applied_once_per_boot_and_again_after_forget(tmp_path: Path) -> None:
    recorder, agent = Recorder(), FakeAgent()
    playbook = book(tmp_path, cell("ref", 0), cell("panics", 1))
    playbook = type(playbook)(**{**playbook.__dict__, "cells": (playbook.cells[0], _with_debug(playbook.cells[1]))})
    sysctls = HostDebugSysctls(recorder.log(), playbook)
    first = sysctls.ensure(agent, PANICS)  # type: ignore[arg-type]
    assert sysctls.ensure(agent, PANICS) == first and len(agent.calls) == 1
    assert first == {"requested": PANICS.as_dict(), "sysctls": {"hardlockup_panic": 1, "panic": 5, "nmi_watchdog": 1}}
    sysctls.forget()  # a new boot
    sysctls.ensure(agent, PANICS)  # type: ignore[arg-type]
    assert len(agent.calls) == 2 and recorder.names() == ["host_debug_applied"] * 2
    assert recorder.events[0] == ("ws01", "host_debug_applied", {"requested": PANICS.as_dict(),
                                                                 "sysctls": dict(first["sysctls"])})


def _with_debug(c: Any) -> Any:
    return type(c)(**{**c.__dict__, "host_debug": PANICS})


def test_a_campaign_without_host_debug_cells_never_touches_the_sysctls(tmp_path: Path) -> None:
    recorder, agent = Recorder(), FakeAgent()
    sysctls = HostDebugSysctls(recorder.log(), book(tmp_path, cell("ref", 0)))
    assert sysctls.ensure(agent, HostDebug()) is None  # type: ignore[arg-type]
    sysctls.restore_at_end(lambda: agent, skip=False, prepared=True)  # type: ignore[arg-type, return-value]
    assert agent.calls == [] and recorder.events == []


def test_host_debug_is_restored_at_the_end_unless_quarantined_and_a_failure_is_an_event(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), _with_debug(cell("panics", 1)))
    recorder, agent = Recorder(), FakeAgent()
    sysctls = HostDebugSysctls(recorder.log(), playbook)
    sysctls.restore_at_end(lambda: agent, skip=True, prepared=True)  # type: ignore[arg-type, return-value]
    assert agent.calls == []
    sysctls.restore_at_end(lambda: agent, skip=False, prepared=True)  # type: ignore[arg-type, return-value]
    assert recorder.events[-1] == ("ws01", "host_debug_restored", {"sysctls": {"panic": 0}})
    refused = FakeAgent(ok=False)
    sysctls.restore_at_end(lambda: refused, skip=False, prepared=True)  # type: ignore[arg-type, return-value]
    assert recorder.names()[-1] == "host_debug_restore_failed" and "write refused" in recorder.events[-1][2]["error"]


# -- netconsole ---------------------------------------------------------------------------

@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[NetconsoleReceiver]:
    """A receiver on a free loopback port, never started (nothing arrives)."""
    made = NetconsoleReceiver([0], {"10.0.0.1": "ws01"}, tmp_path, bind="127.0.0.1")
    yield made
    made.close()


def test_netconsole_is_applied_once_per_boot_and_its_source_address_learnt(receiver: NetconsoleReceiver) -> None:
    recorder, agent = Recorder(), FakeAgent()
    netconsole = HostNetconsole(recorder.log(), NetconsoleSetting(port=6666), receiver)
    netconsole.ensure(agent, "boot-1")  # type: ignore[arg-type]
    netconsole.ensure(agent, "boot-1")  # type: ignore[arg-type]
    assert len(agent.calls) == 1 and receiver.sources["10.0.0.7"] == "ws01"
    assert recorder.events == [("ws01", "netconsole_applied", {
        "config": {"local_ip": "10.0.0.7", "remote_port": "6666"}, "printk": (8, 4, 1, 7), "notes": ["broadcast MAC"]})]
    netconsole.ensure(agent, "boot-2")  # type: ignore[arg-type]
    assert len(agent.calls) == 2


def test_a_host_without_netconsole_has_no_receiver_and_no_lines(receiver: NetconsoleReceiver) -> None:
    recorder, agent = Recorder(), FakeAgent()
    netconsole = HostNetconsole(recorder.log(), None, receiver)
    netconsole.ensure(agent, "boot-1")  # type: ignore[arg-type]
    assert netconsole.receiver is None and netconsole.record_lines(Outcome.WEDGE) is None and agent.calls == []


def test_a_netconsole_that_cannot_be_configured_is_an_event_and_the_attempt_goes_on(receiver: NetconsoleReceiver) -> None:
    recorder = Recorder()
    netconsole = HostNetconsole(recorder.log(), NetconsoleSetting(port=6666), receiver)
    netconsole.ensure(FakeAgent(fail=True), "boot-1")  # type: ignore[arg-type]
    assert recorder.events == [("ws01", "netconsole_failed", {"error": str(AgentError("ws01", "netconsole: no route"))})]
    netconsole.ensure(FakeAgent(ok=False), "boot-2")  # type: ignore[arg-type]
    assert recorder.events[-1] == ("ws01", "netconsole_failed", {"error": "modprobe failed", "notes": ["broadcast MAC"]})
    assert netconsole.record_lines(Outcome.CLEAN) is None and netconsole.record_lines(Outcome.WEDGE) == ()


def test_netconsole_is_restored_at_the_end_only_where_it_was_configured(receiver: NetconsoleReceiver) -> None:
    recorder, agent = Recorder(), FakeAgent()
    netconsole = HostNetconsole(recorder.log(), NetconsoleSetting(port=6666), receiver)
    netconsole.restore_at_end(lambda: agent, skip=False)  # type: ignore[arg-type, return-value]
    assert agent.calls == []
    netconsole.ensure(agent, "boot-1")  # type: ignore[arg-type]
    netconsole.restore_at_end(lambda: agent, skip=False)  # type: ignore[arg-type, return-value]
    assert agent.calls[-1] == ["netconsole", "restore"] and recorder.names()[-1] == "netconsole_restored"


# -- runtimes -------------------------------------------------------------------------------

@dataclass
class Result:
    stdout: str
    ok: bool = True


class DockerSession:
    """``docker image inspect`` of a tag that now names another image."""

    def run(self, command: str, timeout: float) -> Result:
        return Result('["vllm/vllm-openai@sha256:b"]' if "RepoDigests" in command else "sha256:2")


class DockerAgent:
    host = "ws01"
    session = DockerSession()


def test_a_moved_tag_stops_the_cell_through_host_stops_with_one_event_and_a_progress_line(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    recorder, stops = Recorder(), HostStops(playbook, [{"cell": "fix", "outcome": "clean"}])
    runtimes = HostRuntimes(recorder.log())
    label = playbook.cells[1].runtime.label
    runtimes.facts[label] = RuntimeFacts(label, image_id="sha256:1", image_digest="vllm/vllm-openai@sha256:a")
    agent = DockerAgent()
    assert runtimes.moved(lambda: agent, stops, playbook.cells[1], 3, quarantined=False)  # type: ignore[arg-type, return-value]
    assert stops.is_stopped("fix")
    (host, name, fields), = recorder.events
    assert (host, name) == ("ws01", "stopped")
    assert fields == {"slot": 3, "cell": "fix", "rule": "runtime_moved", "why": fields["why"], "verdict": None,
                      "attempts": 1, "reproductions": 0, "judged": 1, "error": True,
                      "tag": "vllm/vllm-openai:v0.25.1", "old_digest": "vllm/vllm-openai@sha256:a",
                      "new_digest": "vllm/vllm-openai@sha256:b", "old_id": "sha256:1", "new_id": "sha256:2"}
    assert recorder.live[-1]["status"].startswith("stopped fix: the tag vllm/vllm-openai:v0.25.1 moved")
    assert not runtimes.moved(lambda: agent, stops, playbook.cells[1], 4, quarantined=False)  # type: ignore[arg-type, return-value]
    assert len(recorder.events) == 1, "a stopped cell is skipped without a second event"


def test_a_quarantined_host_never_checks_its_tags(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0))

    def no_agent() -> Any:
        raise AssertionError("asked for the agent")
    assert not HostRuntimes(Recorder().log()).moved(no_agent, HostStops(playbook), playbook.cells[0], 0,
                                                    quarantined=True)


def test_no_helper_imports_the_host_runner() -> None:
    for name in ("host_debug.py", "netconsole.py", "runtimes.py", "host_log.py"):
        tree = ast.parse((RUNNER / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "reprofleet.runner.host" not in imported, name
        assert not any(isinstance(n, ast.Name) and n.id == "HostRunner" for n in ast.walk(tree)), name
