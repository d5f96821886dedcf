"""The agent's replies parse into typed values at one edge (remote/replies.py): the real
H200's output and the real agent's output parse, values that records keep come through
unchanged, and every malformed reply is an AgentError naming the host."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from reprofleet.errors import AgentError
from reprofleet.remote import replies

from tests.support import agent_harness as h
from tests.support import paths

REAL_GPU = paths.FIXTURES / "real-gpu"


def _real(name: str) -> dict[str, Any]:
    return json.loads((REAL_GPU / name).read_text().splitlines()[0])


# -- golden: what an NVIDIA H200 answered -----------------------------------------------

def test_the_h200s_facts_parse_and_keep_the_whole_reply_for_the_facts_file() -> None:
    line = _real("facts.jsonl")
    facts = replies.parse_facts("h200", line)
    assert facts.boot_id == "67a731ce-e467-4024-a1ad-82ed3f087827" and facts.uptime_s == 24.53
    assert [g["name"] for g in facts.gpus] == ["NVIDIA H200"]
    assert facts.gpus[0]["power_limit_w"]["min"] == 200.0
    assert dict(facts.as_json) == line
    assert json.dumps(dict(facts.as_json), sort_keys=True) == json.dumps(line, sort_keys=True)


def test_the_h200s_policy_read_back_is_the_records_policy_unchanged() -> None:
    line = _real("policy-read.jsonl")
    reply = replies.parse_policy("h200", line)
    assert reply.ok and reply.errors == () and reply.notes == ()
    assert dict(reply.readback) == line["readback"]
    assert reply.readback["graphics_clocks"] == [345, 1980]


def test_the_h200s_postboot_without_a_journal_says_why() -> None:
    reply = replies.parse_postboot("h200", _real("postboot.jsonl"))
    assert reply.boot_id == "67a731ce-e467-4024-a1ad-82ed3f087827"
    assert reply.journal_persistent is False and reply.pstore == ()
    assert reply.previous_boot.available is False and reply.previous_boot.findings == ()
    assert str(reply.previous_boot.reason).startswith("journalctl: [Errno 2]")


# -- golden: the real agent run here -------------------------------------------------------

def _agent(state_dir: Path, kind: str, *args: str, gpu_state: Path | None = None,
           token: str | None = None) -> dict[str, Any]:
    env = h.agent_env({"FAKE_PYNVML_STATE": str(gpu_state)}, fakes=True) if gpu_state else h.agent_env()
    if token is not None:
        _, lines, _ = h.with_token(state_dir, token, *args, env=env)
    else:
        _, lines, _ = h.run_agent(state_dir, *args, env=env)
    return next(line for line in lines if line.get("k") == kind)


def test_the_agents_facts_and_policy_read_parse(tmp_path: Path) -> None:
    gpu = h.fake_gpu_state(tmp_path / "gpu.json", gpus=2)
    facts = replies.parse_facts("local", _agent(tmp_path, "facts", "facts", gpu_state=gpu))
    assert facts.boot_id and facts.uptime_s > 0 and [g["index"] for g in facts.gpus] == [0, 1]
    policy = replies.parse_policy("local", _agent(tmp_path, "policy", "policy", "read", "--gpu", "0", gpu_state=gpu))
    assert policy.ok and "power_limit_w" in policy.readback


def test_the_agents_lease_answers_parse_refusal_and_break_included(tmp_path: Path) -> None:
    mine = ("--controller", "c1", "--campaign", "k1", "--pid", "1")
    taken = replies.parse_lease("local", _agent(tmp_path, "lease", "lease", "acquire", *mine, token="t1"))
    assert taken.ok and taken.error is None and taken.broken is None and taken.lease is not None
    other = ("--controller", "c2", "--campaign", "k2", "--pid", "2")
    refused = replies.parse_lease("local", _agent(tmp_path, "lease", "lease", "acquire", *other, token="t2"))
    assert not refused.ok and refused.error and "k1" in refused.error and refused.held["controller"] == "c1"
    broken = replies.parse_lease("local", _agent(tmp_path, "lease", "lease", "acquire", *other, "--break", token="t2"))
    assert broken.ok and broken.broken is not None and broken.broken["campaign"] == "k1"


def test_the_agents_attempt_listing_and_kill_parse(tmp_path: Path) -> None:
    h.run_agent(tmp_path, "run", "--id", "done", "--timeout", "10", "--sample-hz", "0", "--", "sh", "-c", "true")
    (listed,) = replies.parse_attempts("local", _agent(tmp_path, "attempts", "attempts"))
    assert listed.id == "done" and listed.status == "exited" and listed.age_s is not None
    killed = replies.parse_kill("local", _agent(tmp_path, "killed", "kill", "--id", "done"))
    assert killed.id == "done" and killed.was_running is False
    assert replies.parse_attempts("local", _agent(tmp_path, "attempts", "attempts", "--running")) == ()


def test_the_agents_health_of_a_host_without_a_gpu_parses(tmp_path: Path) -> None:
    rc, lines, _ = h.run_agent(tmp_path, "health", "--gpu", "0", "--smi-timeout", "5")
    reply = replies.parse_health("ctl", lines[0])
    assert [c.name for c in reply.checks] == list(replies.HEALTH_CHECKS)
    assert reply.checks[0].ok is None  # this controller has no NVML binding on its agent's path
    assert (rc == 1) == (not reply.ok) and all(isinstance(c.words, str) and c.short for c in reply.checks)


def test_the_agents_host_debug_read_parses(tmp_path: Path) -> None:
    proc_sys = tmp_path / "proc-sys" / "kernel"
    proc_sys.mkdir(parents=True)
    (proc_sys / "panic").write_text("0\n")
    _, lines, _ = h.run_agent(tmp_path / "state", "host-debug", "read",
                              env=h.agent_env({"REPROFLEET_PROC_SYS": str(tmp_path / "proc-sys")}))
    reply = replies.parse_host_debug("local", next(line for line in lines if line["k"] == "host_debug"))
    assert reply.values["panic"] == 0


# -- shapes the protocol does not allow ---------------------------------------------------

MALFORMED: list[tuple[Callable[[str, Any], Any], Any, str]] = [
    (replies.parse_facts, ["not", "an", "object"], "not a JSON object"),
    (replies.parse_facts, {"k": "facts", "boot_id": 7}, "'boot_id' is not a string"),
    (replies.parse_facts, {"k": "facts", "uptime_s": "24"}, "'uptime_s' is not a number"),
    (replies.parse_facts, {"k": "facts", "uptime_s": True}, "'uptime_s' is not a number"),
    (replies.parse_facts, {"k": "facts", "gpus": {"index": 0}}, "'gpus' is not a list"),
    (replies.parse_facts, {"k": "facts", "gpus": [0]}, "'gpus' is not a list of objects"),
    (replies.parse_policy, {"k": "policy", "ok": "yes"}, "'ok' is not true or false"),
    (replies.parse_policy, {"k": "policy", "ok": True, "readback": [700]}, "'readback' is not an object"),
    (replies.parse_policy, {"k": "policy", "ok": False, "errors": "boom"}, "'errors' is not a list"),
    (replies.parse_host_debug, {"k": "host_debug", "ok": True, "values": 1}, "'values' is not an object"),
    (replies.parse_netconsole, {"k": "netconsole", "ok": True, "config": "eth0"}, "'config' is not an object"),
    (replies.parse_netconsole, {"k": "netconsole", "ok": True, "printk": 8}, "'printk' is not a list"),
    (replies.parse_runtime, {"k": "runtime", "ok": 1}, "'ok' is not true or false"),
    (replies.parse_runtime, {"k": "runtime", "ok": True, "repo_digests": "x@sha256:1"}, "'repo_digests' is not a list"),
    (replies.parse_attempts, {"k": "attempts", "attempts": {"id": "a"}}, "'attempts' is not a list"),
    (replies.parse_attempts, {"k": "attempts", "attempts": ["a"]}, "attempts entry: the reply is not a JSON object"),
    (replies.parse_attempts, {"k": "attempts", "attempts": [{"status": "running"}]}, "'id' is not an attempt id"),
    (replies.parse_attempts, {"k": "attempts", "attempts": [{"id": "a", "age_s": "old"}]}, "'age_s' is not a number"),
    (replies.parse_kill, {"k": "killed", "was_running": "no"}, "'was_running' is not true or false"),
    (replies.parse_kill, {"k": "killed", "container": "c", "container_killed": "yes"},
     "'container_killed' is not true or false"),
    (replies.parse_attempts, {"k": "attempts", "attempts": [{"id": "a", "container": 7}]}, "'container' is not a string"),
    (replies.parse_attempts, {"k": "attempts", "attempts": [{"id": "a", "supervisor_alive": "no"}]},
     "'supervisor_alive' is not true or false"),
    (replies.parse_exit, {"k": "exit", "container_killed": 1}, "'container_killed' is not true or false"),
    (replies.parse_lease, {"k": "lease", "ok": None, "broken": "k1"}, "'broken' is not an object"),
    (replies.parse_lease, {"k": "lease", "ok": "true"}, "'ok' is not true or false"),
    (replies.parse_postboot, {"k": "postboot", "previous_boot": []}, "'previous_boot' is not an object"),
    (replies.parse_postboot, {"k": "postboot", "previous_boot": {"tail": "x"}}, "'tail' is not a list"),
    (replies.parse_postboot, {"k": "postboot", "journal_persistent": "no"}, "'journal_persistent' is not true"),
    (replies.parse_health, {"k": "health", "checks": {"nvml": True}}, "'checks' is not a list"),
    (replies.parse_health, {"k": "health", "checks": [{"ok": False, "words": "x"}]}, "'name' is not a named check"),
    (replies.parse_health, {"k": "health", "checks": [{"name": "pci", "ok": "no", "words": "x"}]},
     "'ok' is not true or false"),
    (replies.parse_health, {"k": "health", "ok": True, "checks": [{"name": "pci", "ok": False, "words": "rev ff"}]},
     "'ok' is not false when a check failed"),
]


@pytest.mark.parametrize(("parse", "line", "words"), MALFORMED)
def test_a_malformed_reply_is_an_agent_error_naming_the_host_and_the_field(
        parse: Callable[[str, Any], Any], line: Any, words: str) -> None:
    with pytest.raises(AgentError) as caught:
        parse("ws01", line)
    assert "ws01" in str(caught.value) and words in str(caught.value)


def test_container_fields_of_kill_exit_and_attempts_parse() -> None:
    kill = replies.parse_kill("h", {"k": "killed", "id": "a", "was_running": True, "container": "reprofleet-a",
                                    "container_killed": True})
    assert kill.container == "reprofleet-a" and kill.container_killed
    assert kill.container_fields() == {"container": "reprofleet-a", "container_killed": True}
    assert replies.parse_kill("h", {"k": "killed", "id": "b", "was_running": False}).container_fields() == {}
    end = replies.parse_exit("h", {"k": "exit", "rc": None, "signal": 9, "timed_out": True, "container": "reprofleet-a",
                                   "container_killed": True})
    assert end.container == "reprofleet-a" and end.container_killed and end.container_error is None
    (listed,) = replies.parse_attempts("h", {"k": "attempts", "attempts": [
        {"id": "a", "status": "running", "container": "reprofleet-a", "supervisor_alive": False}]})
    assert listed.container == "reprofleet-a" and listed.supervisor_alive is False


def test_missing_optional_fields_read_as_the_protocols_defaults() -> None:
    assert replies.parse_policy("h", {"k": "policy"}) == replies.PolicyReply(False, {}, (), ())
    assert replies.parse_lease("h", {"k": "lease"}) == replies.LeaseReply(False)
    assert replies.parse_attempts("h", {"k": "attempts"}) == ()
    netconsole = replies.parse_netconsole("h", {"k": "netconsole", "ok": True})
    assert netconsole.config is None and netconsole.printk is None
    facts = replies.parse_facts("h", {"k": "facts", "uptime_s": 12})
    assert facts.uptime_s == 12 and type(facts.uptime_s) is int  # written to events as the host sent it


# -- the exit line ----------------------------------------------------------------------

def test_the_h200s_exit_line_parses_and_a_malformed_exit_line_breaks_the_stream() -> None:
    from reprofleet.remote.agent import parse_event

    raw = (REAL_GPU / "sampler-stream.jsonl").read_text().splitlines()[-1]
    line = replies.parse_exit("h200", json.loads(raw))
    assert (line.rc, line.signal, line.timed_out, line.killed, line.lost, line.rebooted) == (0, None, False, False,
                                                                                            False, False)
    assert line.duration_s == 35.357 and line.telemetry is not None and line.telemetry["samples"] == 353
    assert parse_event("h200", raw).data == json.loads(raw)  # kept whole for the stream file and the record
    for bad, words in ((dict(json.loads(raw), rc="0"), "'rc' is not a whole number"),
                       (dict(json.loads(raw), timed_out="no"), "'timed_out' is not true or false"),
                       (dict(json.loads(raw), telemetry=[1]), "'telemetry' is not an object")):
        with pytest.raises(AgentError, match=words):
            parse_event("h200", json.dumps(bad))
