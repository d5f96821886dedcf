"""Outcomes the PoC cannot write (issue 32, item 3).

The PoC runs as the agent's own user, so it can open the attempt's files by path. These run
collectors/agent.py as a subprocess (as tests/agent/test_agent_run.py does) with a key on stdin, and
read its stream the way the controller does (remote/agent.py ``EventStream``): a line the
PoC wrote is ignored and counted, whatever it claims; the key is nowhere the PoC can look.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from reprofleet.model import Outcome
from reprofleet.remote.agent import AttemptKey, EventStream, StreamEvent
from reprofleet.runner.attempt import classify_exit

from tests.support import agent_harness as h
from tests.support import paths

attempt_mac = h.collector("attempt_mac")

KEY = AttemptKey(bytes(range(32)))

# A PoC that appends a forged clean exit (compact, as the agent writes its lines) to every
# file it finds under the state root (its working folder is <root>/attempts/<id>/work),
# replaces every exit.json, then exits 3.
FORGER = r"""
import json, os, sys, time
root = os.path.abspath(os.path.join(os.getcwd(), "..", "..", ".."))
dumps = lambda value: json.dumps(value, separators=(",", ":"))
lie = {"t": time.time(), "k": "exit", "seq": 3, "rc": 0, "signal": None, "timed_out": False, "killed": False,
       "lost": False, "duration_s": 1.0, "telemetry": None, "mac": "0" * 64}
touched = []
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.join(folder, name)
        if name == "exit.json":
            open(path, "w").write(dumps(lie))
        elif name.endswith((".jsonl", ".json", ".log")):
            with open(path, "a") as out:
                out.write(dumps(lie) + "\n")
        touched.append(path)
open(os.path.join(root, "attempts", os.environ["REPROFLEET_ATTEMPT"], "exit.json"), "w").write(dumps(lie))
print("forged %d files" % len(touched), flush=True)
time.sleep(0.3)
print("after the lie", flush=True)
sys.exit(3)
"""

# A PoC that looks for the key everywhere it can: its environment, argv, stdin, and every
# process's cmdline and environ it may read (its parent, the supervisor, first).
SEEKER = r"""
import json, os, sys
found = {"env": dict(os.environ), "argv": sys.argv, "stdin": sys.stdin.read(), "proc": {}}
for pid in [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ("cmdline", "environ"):
        try:
            found["proc"][pid + "/" + what] = open("/proc/%s/%s" % (pid, what), "rb").read().decode("latin-1")
        except OSError as exc:
            found["proc"][pid + "/" + what] = "denied: %s" % exc.errno
json.dump(found, open("found.json", "w"))
"""

# As an unprivileged user: read the memory of the supervisor (its parent) and of every other
# process of its uid running the agent, through /proc/<pid>/maps and mem, looking for the key.
MEMORY_SEEKER = r"""
import json, os, sys
needles = [bytes.fromhex(sys.argv[1]), sys.argv[1].encode()]
report = {}
pids = [os.getppid()] + [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
for pid in pids:
    try:
        if b"agent.py" not in open("/proc/%d/cmdline" % pid, "rb").read():
            continue
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        mem = open("/proc/%d/mem" % pid, "rb", 0)
    except OSError as exc:
        report[pid] = "denied: %s" % exc.errno
        continue
    hit = False
    for line in maps:
        span, perms = line.split()[:2]
        if not perms.startswith("r"):
            continue
        start, end = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(start)
            data = mem.read(min(end - start, 64 << 20))
        except (OSError, OverflowError, ValueError):
            continue
        hit = hit or any(n in data for n in needles)
    report[pid] = "key found" if hit else "read, no key"
json.dump(report, open("found.json", "w"))
"""


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for attempt in (tmp_path / "attempts").glob("*"):
        _kill_leftovers(attempt)


def _kill_leftovers(attempt: Path) -> None:
    """What a test left running, verified to be this attempt's (never a bare pgid)."""
    attempt_state = h.collector("attempt_state")
    pid_file = attempt / "supervisor.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists() and b"_supervise" in cmdline.read_bytes() and attempt.name.encode() in cmdline.read_bytes():
            os.kill(pid, signal.SIGKILL)
    for line in h.parse_lines((attempt / "events.jsonl").read_text(errors="replace")):
        if line.get("k") == "start" and isinstance(line.get("pgid"), int):
            for pid in attempt_state.attempt_processes(line["pgid"], attempt.name):
                os.kill(pid, signal.SIGKILL)


class NoLines:
    """EventStream's channel, unused: these tests feed it lines with ``accept``."""

    finished = True
    exit_code = 0
    stderr_tail = b""

    def next_line(self, timeout: float) -> Optional[str]:
        return None

    def close(self) -> None:
        pass


def run_with_key(state_dir: Path, attempt_id: str, argv: List[str], *extra: str, key: AttemptKey = KEY,
                 env: Optional[Dict[str, str]] = None, python: str = sys.executable,
                 user: Optional[int] = None) -> Tuple[int, List[str]]:
    """``run --key-stdin`` to its end: (exit status, raw stdout lines)."""
    command = [python, str(h.AGENT), "--state-dir", str(state_dir), "run", "--id", attempt_id, "--timeout", "20",
               "--key-stdin", *extra, "--", *argv]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    done = subprocess.run(command, input=(key.hex + "\n").encode(), env=env or h.agent_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return done.returncode, [line for line in done.stdout.decode().splitlines() if line.strip()]


def accepted(lines: List[str], key: AttemptKey = KEY) -> Tuple[List[StreamEvent], EventStream]:
    """The stream as the controller takes it: what passes the MAC, and the count of what did not."""
    stream = EventStream("local", NoLines(), key)  # type: ignore[arg-type]
    events = [event for event in (stream.accept(line) for line in lines) if event is not None]
    return events, stream


def test_a_changed_byte_fails_the_mac_and_both_sides_agree_on_an_untouched_line() -> None:
    signed = attempt_mac.sign(KEY.secret, {"t": 1.5, "k": "log", "seq": 4, "line": "CUDA graphs: caf\u00e9 \u2713"})
    raw = json.dumps(signed, ensure_ascii=False)
    assert KEY.signed(json.loads(raw)) and attempt_mac.verify(KEY.secret, json.loads(raw))
    tampered = raw.replace('"seq": 4', '"seq": 5')
    assert tampered != raw and not KEY.signed(json.loads(tampered))
    for at in range(len(raw)):  # every one-character change either breaks the JSON or fails the MAC
        changed = raw[:at] + ("x" if raw[at] != "x" else "y") + raw[at + 1:]
        try:
            line = json.loads(changed)
        except ValueError:
            continue
        assert not (isinstance(line, dict) and KEY.signed(line)), changed
    assert not AttemptKey(bytes(32)).signed(signed)  # another attempt's key
    assert not KEY.signed({k: v for k, v in signed.items() if k != "mac"})
    assert "0001020304" not in repr(KEY)


def test_a_poc_that_forges_a_clean_exit_in_every_file_is_judged_by_its_real_exit(state_dir: Path) -> None:
    rc, lines = run_with_key(state_dir, "forged1", [sys.executable, "-c", FORGER])
    assert rc == 0
    events, stream = accepted(lines)
    exits = [e for e in events if e.kind.value == "exit"]
    assert len(exits) == 1 and events[-1] is exits[0]
    assert exits[0].data["rc"] == 3 and exits[0].data["killed"] is False
    assert classify_exit(exits[0].data, boot_changed=False) == (Outcome.ERROR, "exit 3")
    assert "after the lie" in [e.data.get("line") for e in events]  # the forged exit did not end the stream
    assert stream.forged >= 1 and all('"rc":0' in line for line in _forged(lines))
    stored = state_dir / "attempts" / "forged1"
    assert KEY.signed(json.loads((stored / "exit.json").read_text()))  # the supervisor's, written last
    assert Path(json.loads(next(line for line in lines if '"k":"start"' in line))["cwd"]) == stored / "work"


def _forged(lines: List[str]) -> List[str]:
    return [line for line in lines if json.loads(line).get("k") != "hb" and not KEY.signed(json.loads(line))]


def test_a_forged_exit_json_does_not_stop_kill_from_stopping_the_poc(state_dir: Path) -> None:
    liar = ("import json, os, time\n"
            "d = os.path.join(os.getcwd(), '..')\n"
            "open(os.path.join(d, 'exit.json'), 'w').write(json.dumps({'k': 'exit', 'rc': 0}))\n"
            "open(os.path.join(d, 'events.jsonl'), 'a').write(json.dumps({'k': 'exit', 'seq': 2, 'rc': 0}) + '\\n')\n"
            "print('lied', flush=True)\n"
            "time.sleep(30)\n")
    command = h.agent_argv(state_dir, "run", "--id", "k1", "--timeout", "30", "--kill-grace", "0.5", "--key-stdin",
                           "--", sys.executable, "-c", liar)
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=h.agent_env())
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((KEY.hex + "\n").encode())
    proc.stdin.close()
    lines: List[str] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any('"lied"' in line for line in lines):
        lines.append(proc.stdout.readline().decode())
    rc, killed, _ = h.run_agent(state_dir, "kill", "--id", "k1", "--ignore-lease")
    assert rc == 0 and killed[0]["was_running"] is True
    lines += proc.stdout.read().decode().splitlines()
    proc.wait(timeout=30)
    events, stream = accepted([line for line in lines if line.strip()])
    assert stream.forged == 1 and events[-1].data["stopped_by"] == "controller"
    assert classify_exit(events[-1].data, boot_changed=False)[0] is Outcome.INFRA


def test_a_poc_finds_the_key_in_none_of_its_env_argv_stdin_or_any_process_cmdline_and_environ(state_dir: Path) -> None:
    rc, lines = run_with_key(state_dir, "seek1", [sys.executable, "-c", SEEKER])
    assert rc == 0
    found = (state_dir / "attempts" / "seek1" / "work" / "found.json").read_text()
    supervisor = (state_dir / "attempts" / "seek1" / "supervisor.pid").read_text().strip()
    assert f'"{supervisor}/cmdline"' in found and f'"{supervisor}/environ"' in found  # it looked there
    assert KEY.hex not in found and KEY.hex.upper() not in found
    assert json.loads(found)["stdin"] == ""
    events, stream = accepted(lines)
    assert events[-1].data["rc"] == 0 and stream.forged == 0


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root, to run the agent as an unprivileged user (root may read any memory)")
def test_a_poc_of_the_same_unprivileged_user_cannot_read_the_supervisors_or_runs_memory() -> None:
    state = Path(tempfile.mkdtemp(prefix="rf-forgery-"))
    os.chown(state, 65534, 65534)
    try:
        script = state / "seek_memory.py"
        script.write_text(MEMORY_SEEKER)
        script.chmod(0o644)
        rc, lines = run_with_key(state, "mem1", ["/usr/bin/python3", str(script), KEY.hex], "--sample-hz", "0",
                                 "--kmsg", "",
                                 python="/usr/bin/python3", user=65534,
                                 env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(state)})
        assert rc == 0, lines
        report = json.loads((state / "attempts" / "mem1" / "work" / "found.json").read_text())
        supervisor = (state / "attempts" / "mem1" / "supervisor.pid").read_text().strip()
        assert report[supervisor].startswith("denied"), report
        assert "key found" not in report.values(), report
        assert len(report) >= 2  # the supervisor and the run process that streams
    finally:
        for attempt in (state / "attempts").glob("*"):
            _kill_leftovers(attempt)
        shutil.rmtree(state, ignore_errors=True)


def test_an_attempt_without_a_key_keeps_the_old_protocol(state_dir: Path) -> None:
    rc, lines, _ = h.run_agent(state_dir, "run", "--id", "plain", "--timeout", "20", "--", "sh", "-c", "exit 0")
    assert rc == 0 and lines[-1]["k"] == "exit" and "mac" not in lines[-1]
    meta = json.loads((state_dir / "attempts" / "plain" / "meta.json").read_text())
    assert meta["authenticated"] is False and meta["cwd"].endswith("/work")


def test_a_key_that_is_not_64_hex_digits_is_refused_before_anything_runs(state_dir: Path) -> None:
    done = subprocess.run(h.agent_argv(state_dir, "run", "--id", "bad", "--timeout", "5", "--key-stdin", "--",
                                       "true"), input=b"not-a-key\n", env=h.agent_env(), capture_output=True,
                          timeout=30)
    assert done.returncode == 2 and b"64 hex digits" in done.stdout
    assert not (state_dir / "attempts" / "bad").exists()


def test_the_agents_own_refusal_is_signed_so_a_keyed_stream_still_reads_it_as_busy(state_dir: Path) -> None:
    """``run`` signs the lines it makes up (an error, a lost exit) with the key it was given: a
    refusal still reaches the controller as the typed error it is, and a PoC's forged one does not."""
    from reprofleet.errors import AgentRefused

    command = h.agent_argv(state_dir, "run", "--id", "busy1", "--timeout", "30", "--key-stdin", "--", "sleep", "30")
    first = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=h.agent_env())
    assert first.stdin is not None and first.stdout is not None
    first.stdin.write((KEY.hex + "\n").encode())
    first.stdin.close()
    assert first.stdout.readline()  # the supervisor is up
    other = AttemptKey(bytes(range(32, 64)))
    rc, lines = run_with_key(state_dir, "busy2", ["true"], key=other)
    assert rc == 1 and len(lines) == 1
    stream = EventStream("local", NoLines(), other)  # type: ignore[arg-type]
    with pytest.raises(AgentRefused, match="busy1 is still running"):
        stream.accept(lines[0])
    assert EventStream("local", NoLines(), KEY).accept(lines[0]) is None  # under another key: a forgery  # type: ignore[arg-type]
    h.run_agent(state_dir, "kill", "--id", "busy1", "--ignore-lease")
    first.stdout.read()
    first.wait(timeout=30)


def test_a_lost_exit_that_attach_makes_up_is_signed_and_judged(state_dir: Path) -> None:
    command = h.agent_argv(state_dir, "run", "--id", "lost1", "--timeout", "30", "--key-stdin", "--",
                           "sh", "-c", "echo ready; sleep 30")
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=h.agent_env())
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((KEY.hex + "\n").encode())
    proc.stdin.close()
    lines: List[str] = []
    while not any('"ready"' in line for line in lines):
        lines.append(proc.stdout.readline().decode())
    os.kill(int((state_dir / "attempts" / "lost1" / "supervisor.pid").read_text()), signal.SIGKILL)
    lines += proc.stdout.read().decode().splitlines()
    proc.wait(timeout=30)
    events, stream = accepted([line for line in lines if line.strip()])
    assert stream.forged == 0 and events[-1].data["lost"] is True
    assert classify_exit(events[-1].data, boot_changed=False) == (
        Outcome.INFRA, "the agent's supervisor vanished without recording an exit")
