"""The controller's half of issue 32's items 3 and 2a: an attempt's stream is taken only as
its supervisor signed it, a forged line is counted and said once, the key survives the
controller (``AttemptKeys``), and an exit's ``stopped_by`` decides before its exit status."""

from __future__ import annotations

import json
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

from reprofleet.clock import VirtualClock
from reprofleet.liveness.watchdog import Verdict
from reprofleet.model import Outcome, ReasonCode, Record, reason_code
from reprofleet.model.reasons import slot_runs_again
from reprofleet.records.store import StreamWriter
from reprofleet.remote.agent import AttemptKey, EventStream
from reprofleet.runner.attempt import AttemptFollower, AttemptKeys, classify_exit

from tests.support import agent_harness as h
from tests.support import paths

attempt_mac = h.collector("attempt_mac")
KEY = AttemptKey(bytes(range(1, 33)))


def signed(**line: Any) -> str:
    return json.dumps(attempt_mac.sign(KEY.secret, {"t": 1.0, **line}), separators=(",", ":"))


def forged(**line: Any) -> str:
    return json.dumps({"t": 1.0, **line, "mac": "f" * 64}, separators=(",", ":"))


class ScriptedLines:
    """The SSH channel of a stream: these lines, then the end (exit 0)."""

    def __init__(self, lines: List[str]) -> None:
        self._lines: Iterator[str] = iter(lines)
        self.finished = False
        self.exit_code: Optional[int] = None
        self.stderr_tail = b""

    def next_line(self, timeout: float) -> Optional[str]:
        line = next(self._lines, None)
        if line is None:
            self.finished, self.exit_code = True, 0
        return line

    def close(self) -> None:
        self.finished = True


class QuietWatchdog:
    """A host that always answers: the follower's watchdog never has a verdict to give."""

    class settings:  # noqa: N801 - the attribute the follower reads
        pause_cap_s = 1e9

    wedge_kind = None

    def check(self) -> Verdict:
        return Verdict.LIVE

    def heard(self) -> None:
        pass

    def close(self) -> None:
        pass

    def restart(self) -> None:
        pass

    def reattach_failed(self, why: str) -> None:
        pass


class ReattachingAgent:
    """What ``reconnect`` returns: an agent whose ``attach`` gets the attempt's key."""

    def __init__(self, lines: List[str]) -> None:
        self.lines = lines
        self.attached: List[Any] = []

    def attach(self, attempt_id: str, from_seq: int, key: Optional[AttemptKey] = None) -> EventStream:
        self.attached.append((attempt_id, from_seq, key))
        return EventStream("ws01", ScriptedLines(self.lines), key)  # type: ignore[arg-type]

    def kill(self, attempt_id: str) -> None:
        pass


def follow(first: List[str], tmp_path: Path, then: Optional[List[str]] = None) -> tuple[Any, AttemptFollower, Path]:
    agent = ReattachingAgent(then or [])
    stream = EventStream("ws01", ScriptedLines(first), KEY)  # type: ignore[arg-type]
    path = tmp_path / "stream.jsonl"
    follower = AttemptFollower(agent, "a1", stream, StreamWriter(path), QuietWatchdog(),  # type: ignore[arg-type]
                               timeout_s=60, reconnect=lambda: agent, clock=VirtualClock())  # type: ignore[arg-type, return-value]
    end = follower.follow()
    return end, follower, path


def test_forged_lines_never_reach_the_outcome_the_trace_or_the_stream_file_and_are_said_once(tmp_path: Path) -> None:
    lines = [signed(k="start", seq=0, pid=7, pgid=7), forged(k="phase", seq=1, phase="cuda_graph_capture"),
             forged(k="exit", seq=1, rc=0, killed=False, lost=False, timed_out=False),
             signed(k="log", seq=1, line="Traceback"), "not json at all",
             signed(k="exit", seq=2, rc=3, signal=None, killed=False, lost=False, timed_out=False)]
    end, follower, path = follow(lines, tmp_path)
    assert (end.outcome, end.reason) == (Outcome.ERROR, "exit 3")
    assert follower.trace.forged_lines == 3 and follower.trace.last_phase is None
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert [w["k"] for w in written] == ["start", "notice", "log", "exit"]
    notice = written[1]
    assert notice["what"] == "forged_lines" and notice["by"] == "controller" and '"k":"phase"' in notice["first"]


def test_a_re_attach_carries_the_key_of_the_stream_it_replaces(tmp_path: Path) -> None:
    first = [signed(k="start", seq=0, pid=7, pgid=7)]  # the channel drops here
    then = [signed(k="start", seq=0, pid=7, pgid=7), forged(k="exit", seq=1, rc=0),
            signed(k="exit", seq=1, rc=0, signal=None, killed=False, lost=False, timed_out=False)]
    agent = ReattachingAgent(then)
    stream = EventStream("ws01", ScriptedLines(first), KEY)  # type: ignore[arg-type]
    follower = AttemptFollower(agent, "a1", stream, StreamWriter(tmp_path / "s.jsonl"),  # type: ignore[arg-type]
                               QuietWatchdog(), timeout_s=60, reconnect=lambda: agent,  # type: ignore[arg-type, return-value]
                               clock=VirtualClock())
    done = threading.Event()
    result: List[Any] = []
    threading.Thread(target=lambda: (result.append(follower.follow()), done.set()), daemon=True).start()
    assert done.wait(20), "the follower never ended"
    assert agent.attached and agent.attached[0] == ("a1", 1, KEY)
    assert result[0].outcome is Outcome.CLEAN and follower.trace.forged_lines == 1


def test_a_stream_without_a_key_takes_every_line_as_before() -> None:
    stream = EventStream("ws01", ScriptedLines([]))  # type: ignore[arg-type]
    event = stream.accept(json.dumps({"t": 1.0, "k": "exit", "seq": 0, "rc": 0}))
    assert event is not None and event.data["rc"] == 0 and stream.forged == 0


def test_a_heartbeat_needs_no_mac_but_an_unsigned_error_line_is_a_forgery() -> None:
    stream = EventStream("ws01", ScriptedLines([]), KEY)  # type: ignore[arg-type]
    assert stream.accept(json.dumps({"t": 1.0, "k": "hb", "seq": 3})) is not None
    assert stream.accept(json.dumps({"t": 1.0, "k": "error", "code": "fenced", "error": "a lie"})) is None
    assert stream.accept(json.dumps({"t": 1.0, "k": "hb", "seq": "not a number"})) is None  # malformed: counted
    assert stream.forged == 2 and stream.take_forged() == 2 and stream.take_forged() == 0


def test_a_campaigns_attempt_keys_survive_the_controller_and_only_its_user_reads_them(tmp_path: Path) -> None:
    keys = AttemptKeys(tmp_path)
    first, second = keys.new("a1"), keys.new("a2")
    assert stat.S_IMODE((tmp_path / AttemptKeys.NAME).stat().st_mode) == 0o600
    with open(tmp_path / AttemptKeys.NAME, "a") as torn:
        torn.write('{"attempt": "a3", "ke')  # a controller killed while writing
    again = AttemptKeys(tmp_path)  # the next controller
    assert again.get("a1") == first and again.get("a2") == second and first != second
    assert again.get("a3") is None and again.get("never") is None
    assert AttemptKeys(tmp_path / "nowhere").get("a1") is None


@pytest.mark.parametrize(("exit_line", "outcome", "again"), [
    ({"rc": 0, "killed": True, "stopped_by": "host_shutdown", "shutdown": "systemctl is-system-running: stopping"},
     Outcome.INFRA, True),
    ({"rc": None, "signal": 9, "timed_out": True, "killed": True, "stopped_by": "host_shutdown"}, Outcome.INFRA, True),
    ({"rc": None, "signal": 15, "killed": True, "stopped_by": "signal"}, Outcome.INFRA, False),
    ({"rc": None, "signal": 15, "killed": True, "stopped_by": "controller"}, Outcome.INFRA, False),
    ({"rc": None, "signal": 15, "killed": True}, Outcome.INFRA, False),  # an agent before stopped_by
    ({"rc": 0, "killed": False}, Outcome.CLEAN, False),
])
def test_stopped_by_decides_before_the_pocs_own_exit(exit_line: dict, outcome: Outcome, again: bool) -> None:
    got, reason = classify_exit(exit_line, boot_changed=False)
    assert got is outcome and slot_runs_again(got.value, reason) is again
    if exit_line.get("stopped_by") == "host_shutdown":
        assert reason_code(reason) is ReasonCode.HOST_SHUTDOWN
        assert reason.startswith("the host was shut down in an orderly way during the attempt")


def test_a_record_counts_forged_lines_and_an_older_record_reads_as_none() -> None:
    record = Record(campaign="c", attempt="a", controller="x", host="h", cell="ref", factors={}, policy=None,
                    runtime={}, cache=None, attempt_index=0, attempt_in_boot=0, cold_boot=False, boot_id=None,
                    started="s", ended="e", outcome=Outcome.ERROR)
    assert record.to_json()["forged_lines"] == 0 and record.to_json()["schema"] == 1
