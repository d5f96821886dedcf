"""The lease token fences a controller's calls, so it is a secret of that controller run: it
goes to the agent on stdin, never on a command line (``ps`` on the host shows every argv, and
a ``run`` keeps its argv for hours), and never in a reason that lands in records or reports
(a command-timeout text quoted the whole command). A fenced refusal is remembered: nothing
that changes the host is sent again (issue 34 items 6, 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reprofleet.errors import AgentFenced, CommandTimedOut
from reprofleet.model import Host
from reprofleet.remote.agent import AgentBundle, AgentClient, fenced_agent_command
from reprofleet.remote.transport import CommandResult

TOKEN = "f00dfeedc0ffee0123456789abcdef01"


class RecordingSession:
    """What AgentClient hands the transport: each command line and what goes to its stdin.
    ``answer``: the one JSON line every short command prints; ``timeout``: raise as the real
    Session does when a command outlives its limit (the command quoted in the text)."""

    def __init__(self, answer: dict[str, Any], timeout: bool = False) -> None:
        self.host = Host("ws01", "10.0.0.1")
        self.answer, self.timeout = answer, timeout
        self.calls: list[tuple[str, str | bytes | None]] = []

    def run(self, command: str, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        self.calls.append((command, stdin))
        if self.timeout:
            raise CommandTimedOut(self.host.name, command, timeout or 0.0)
        return CommandResult(command, 0, json.dumps(self.answer) + "\n", "")

    def stream(self, command: str, stdin: bytes | None = None) -> Any:
        self.calls.append((command, stdin))
        return None


def client(answer: dict[str, Any], timeout: bool = False) -> tuple[AgentClient, RecordingSession]:
    session = RecordingSession(answer, timeout)
    agent = AgentClient(session, AgentBundle((), "0" * 12))  # type: ignore[arg-type]
    agent.lease_token = TOKEN
    return agent, session


POLICY = {"k": "policy", "ok": True, "readback": {}}


@pytest.mark.parametrize("call", [
    lambda a: a.policy("restore", 0),
    lambda a: a.policy("apply", 0, {"power_limit_w": 300}),
    lambda a: a.host_debug(["restore"]),
    lambda a: a.netconsole(["apply", "--json", "{}"]),
    lambda a: a.one(["cache", "materialize", "--snapshot", "a" * 64, "--dest", "d"], "policy", fenced=True),
    lambda a: a.lease("acquire", controller="c", campaign="k", pid=1),
    lambda a: a.run("a1", ["python3", "poc.py"], timeout=60),
])
def test_every_call_that_carries_the_token_sends_it_on_stdin_and_never_on_the_command_line(call: Any) -> None:
    agent, session = client({**POLICY, "k": "policy"})
    try:
        call(agent)
    except Exception:
        pass  # a reply of another kind than asked: only what was sent matters here
    ((command, stdin),) = session.calls
    assert TOKEN not in command and "--lease-stdin" in command.split()
    given = stdin.decode() if isinstance(stdin, bytes) else stdin
    assert given is not None and given.splitlines()[0] == TOKEN


def test_a_run_sends_the_token_first_then_the_key_then_its_secrets() -> None:
    from reprofleet.credentials import Secret
    from reprofleet.remote.agent import AttemptKey

    agent, session = client({})
    key = AttemptKey.new()
    agent.run("a1", ["sh"], timeout=5, key=key, secrets={"HF_TOKEN": Secret("hf-secret")})
    ((command, stdin),) = session.calls
    assert isinstance(stdin, bytes)
    lines = stdin.decode().splitlines()
    assert lines[0] == TOKEN and lines[1] == key.hex and json.loads(lines[2]) == {"HF_TOKEN": "hf-secret"}
    assert TOKEN not in command and "hf-secret" not in command


def test_a_cache_receive_writes_the_token_before_its_first_frame() -> None:
    agent, _ = client({})
    command, prefix = fenced_agent_command(agent, ["cache", "receive", "--snapshot", "a" * 64])
    assert TOKEN not in command and command.endswith("--lease-stdin") and prefix == (TOKEN + "\n").encode()


def test_a_command_that_times_out_carries_no_token_in_its_reason() -> None:
    agent, _ = client(POLICY, timeout=True)
    with pytest.raises(CommandTimedOut) as raised:
        agent.policy("restore", 0)
    assert "timed out" in str(raised.value) and TOKEN not in str(raised.value)
    assert TOKEN not in raised.value.command


def test_a_fenced_refusal_is_remembered_and_nothing_that_changes_the_host_is_sent_again() -> None:
    agent, session = client({"k": "error", "code": "fenced", "error": "this controller's lease was taken over"})
    with pytest.raises(AgentFenced):
        agent.policy("restore", 0)
    for later in (lambda: agent.host_debug(["restore"]), lambda: agent.netconsole(["restore"]),
                  lambda: agent.kill("a1"), lambda: agent.run("a2", ["sh"], timeout=5)):
        with pytest.raises(AgentFenced, match="not sent"):
            later()
    assert len(session.calls) == 1  # the one refused call; the restores after it never left the controller
    session.answer = {"k": "host_debug", "ok": True, "values": {}}
    assert agent.host_debug(["read"]).ok  # reading still works: it changes nothing
