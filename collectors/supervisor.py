"""The detached supervisor: owns one attempt from start to `exit.json`.

It runs the PoC in a session and process group of its own, turns the PoC's merged
output into `log`/`phase` lines, enforces the timeout (SIGTERM to the group, SIGKILL
`KILL_GRACE_S` later), honours kill requests, stops the attempt's docker container (by
name: killing the client does not stop it), and always ends the stream with one `exit`
line, even when something in the agent itself failed.

It is the only writer of the attempt's state folder's events.jsonl and exit.json, and it
signs every line with the attempt's key (attempt_mac.py), which it reads from its stdin and
keeps in memory; the PoC runs in a folder of its own (``work/``), its stdin is /dev/null and
its environment never held the key. A SIGTERM it did not ask for says why in the exit line's
``stopped_by``: ``controller`` (``kill`` wrote kill.request), ``host_shutdown`` (the host is
shutting down in an orderly way: host_shutdown.py), or ``signal`` (something else on the host).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

import attempt_mac
import attempt_state as state
import containers
import host_shutdown
from event_log import EventLog
from text_lines import LineSplitter
from watchers import Watchers

KILL_GRACE_S = 5.0  # SIGTERM -> SIGKILL
STUCK_AFTER_KILL_S = 10.0  # a process still there this long after SIGKILL is in D state
DRAIN_AFTER_EXIT_S = 2.0  # output still flowing from the PoC's children after it exited
POLL_S = 0.1


class Termination:
    """Why and when we started stopping the PoC; escalates SIGTERM -> SIGKILL once."""

    def __init__(self, grace_s: float = KILL_GRACE_S) -> None:
        self.reason: Optional[str] = None  # "timeout" | "kill" (kill.request) | "signal" (a SIGTERM to us)
        self.grace_s = grace_s
        self.term_at = 0.0
        self.kill_at = 0.0

    def begin(self, reason: str, pgid: int, now: float) -> None:
        if self.reason is None:
            self.reason, self.term_at = reason, now
            _signal_group(pgid, signal.SIGTERM)

    def escalate(self, pgid: int, now: float) -> None:
        if self.reason is not None and not self.kill_at and now - self.term_at >= self.grace_s:
            self.kill_at = now
            _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, signum: int) -> None:
    if pgid <= 1:  # never: killpg(0) is our own group, killpg(1) init's
        return
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    def __init__(self, directory: str, meta: Dict[str, Any], secrets: Optional[Dict[str, str]] = None,
                 key: Optional[bytes] = None) -> None:
        self.directory = directory
        self.meta = meta
        self.secrets = dict(secrets or {})  # env_secrets: in memory and in the PoC's environment, nowhere else
        self.log = EventLog(os.path.join(directory, state.EVENTS), attempt_mac.Signer(key))  # the key: in memory only
        self.output = open(os.path.join(directory, state.OUTPUT), "ab")
        self.splitter = LineSplitter()
        self.watchers = Watchers(self.log, meta)
        self.termination = Termination(float(meta.get("kill_grace_s", KILL_GRACE_S)))
        self.signalled = False
        self.stragglers_killed = False
        self.stuck = False
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.env_file: Optional[str] = None  # a docker PoC's secrets, until its container exists

    # -- the attempt ---------------------------------------------------------------
    def run(self) -> Dict[str, Any]:
        started = time.monotonic()
        self.watchers.start()
        try:
            proc = self.proc = self._start_poc()
        except OSError as exc:
            return self._finish(None, started, error="cannot start the PoC: %s" % exc)
        self.log.append(
            "start", pid=proc.pid, pgid=proc.pid, cmd=self.meta["cmd"],
            boot_id=self.meta.get("boot_id"), cwd=self.meta["cwd"],
        )
        self._follow(proc, started)
        return self._finish(proc, started)

    def _start_poc(self) -> "subprocess.Popen[bytes]":
        """The PoC, its secrets in its environment; a docker PoC's by a 0600 --env-file that is
        removed once the container exists (docker_secrets.py)."""
        import containers
        import docker_secrets

        cmd, in_env, self.env_file = docker_secrets.by_file(list(self.meta["cmd"]), self.secrets, self.directory)
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.meta.get("env") or {})
        env.update(in_env)
        env[state.ATTEMPT_ENV] = str(self.meta["id"])
        try:
            proc = subprocess.Popen(
                cmd, cwd=self.meta["cwd"], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError:
            docker_secrets.remove(self.env_file)
            raise
        name = self.meta.get("container")
        docker_secrets.remove_once_created(self.env_file, (lambda: containers.exists(name)) if name else (lambda: False))
        return proc

    def _follow(self, proc: "subprocess.Popen[bytes]", started: float) -> None:
        """Read output until EOF and exit, enforcing deadlines; bounded in time."""
        deadline = started + float(self.meta["timeout"])
        hard_stop = deadline + self.termination.grace_s + STUCK_AFTER_KILL_S + DRAIN_AFTER_EXIT_S + 5.0
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        eof, exited_at = False, 0.0
        while time.monotonic() < hard_stop:
            ready, _, _ = select.select([] if eof else [fd], [], [], POLL_S)
            now = time.monotonic()
            if ready:
                data = os.read(fd, 1 << 16)
                eof = not data
                self._take_output(data, time.time())
            self._emit_lines(self.splitter.flush_idle(time.time()))
            if proc.poll() is not None:
                exited_at = exited_at or now
                if eof:
                    return
                if now - exited_at >= DRAIN_AFTER_EXIT_S:
                    self._kill_stragglers(proc.pid)
                if now - exited_at >= DRAIN_AFTER_EXIT_S + 1.0:
                    return
                continue
            self._enforce(proc.pid, now, deadline)
            if self.termination.kill_at and now - self.termination.kill_at >= STUCK_AFTER_KILL_S:
                self.stuck = True
                return

    def _take_output(self, data: bytes, now: float) -> None:
        if data:
            self.output.write(data)
            self.output.flush()
            self._emit_lines(self.splitter.feed(data, now))

    def _emit_lines(self, lines: List[Any]) -> None:
        for text, partial in lines:
            extra = {"partial": True} if partial else {}
            self.log.append("log", line=text, **extra)  # no ``stream``: stderr is merged into stdout, it said "out" always
            self.watchers.on_log_line(text)

    def _enforce(self, pgid: int, now: float, deadline: float) -> None:
        if self._kill_requested():
            self.termination.begin("kill", pgid, now)
        elif self.signalled:
            self.termination.begin("signal", pgid, now)
        elif now >= deadline:
            self.termination.begin("timeout", pgid, now)
        self.termination.escalate(pgid, now)

    def _kill_requested(self) -> bool:
        return os.path.exists(os.path.join(self.directory, state.KILL_REQUEST))

    def stopped_by(self) -> Dict[str, Any]:
        """Who stopped the attempt, when something did (PROTOCOL.md, ``stopped_by``). A host
        that is shutting down as the attempt ends decides it whatever the PoC's own exit: the
        session's SIGTERM reaches the PoC too, and a PoC may exit 0 on it."""
        if self.termination.reason == "kill" or self._kill_requested():
            return {"stopped_by": "controller"}
        shutdown = host_shutdown.evidence()
        if shutdown:
            return {"stopped_by": "host_shutdown", "shutdown": shutdown}
        if self.signalled:
            return {"stopped_by": "signal"}
        return {}

    def _kill_stragglers(self, pgid: int) -> None:
        """The PoC exited but children of it still hold its output: the attempt is over."""
        if not self.stragglers_killed:
            self.stragglers_killed = True
            _signal_group(pgid, signal.SIGKILL)

    # -- the end -------------------------------------------------------------------
    def _finish(self, proc: Optional["subprocess.Popen[bytes]"], started: float,
                error: Optional[str] = None) -> Dict[str, Any]:
        self._emit_lines(self.splitter.flush())
        rc = proc.poll() if proc is not None else None
        stopped = self.stopped_by()
        fields: Dict[str, Any] = {
            "rc": rc if rc is not None and rc >= 0 else None,
            "signal": -rc if rc is not None and rc < 0 else None,
            "timed_out": self.termination.reason == "timeout",
            "killed": bool(stopped),  # kept for older controllers: stopped by something else than its own end
            "lost": False,
            "duration_s": round(time.monotonic() - started, 3),
            **stopped,
        }
        if self.stuck:
            fields["stuck"] = True  # did not die after SIGKILL (uninterruptible: GPU hang?)
        if self.stragglers_killed:
            fields["stragglers_killed"] = True
        if error:
            fields["error"] = error
        fields.update(self.stop_container())
        import docker_secrets

        docker_secrets.remove(self.env_file)  # whatever happened, the secrets' file does not outlive the attempt
        fields["telemetry"] = self.watchers.stop()
        return self._write_exit(fields)

    def stop_container(self) -> Dict[str, Any]:
        """Whatever ended the attempt, its container goes too: killing the docker client
        (timeout, kill) leaves the container running under containerd's shim, on the GPU."""
        name = self.meta.get("container")
        return containers.kill(str(name)) if name else {}

    def _write_exit(self, fields: Dict[str, Any]) -> Dict[str, Any]:
        line = self.log.append("exit", **fields)
        state.write_json_atomic(os.path.join(self.directory, state.EXIT), line)
        self.output.close()
        self.log.close()
        return line


def supervise(state_dir: str, attempt_id: str) -> int:
    """Entry point of the detached process (``agent.py _supervise --id ID``)."""
    directory = state.attempt_dir(state_dir, attempt_id)
    meta = state.read_json(os.path.join(directory, state.META))
    if meta is None:
        sys.stderr.write("supervisor: no meta.json in %s\n" % directory)
        return 2
    attempt_mac.protect_memory()  # before the key is read: no process of our uid may read our memory
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    key, secrets = take_stdin(meta)
    supervisor = Supervisor(directory, meta, secrets, key)

    def on_term(signum: int, frame: Any) -> None:  # not the controller's kill (a file): a shutdown, or someone
        supervisor.signalled = True

    signal.signal(signal.SIGTERM, on_term)
    try:
        supervisor.run()
    except Exception as exc:  # the agent failed, not the PoC: still end the stream
        traceback.print_exc()
        _exit_after_crash(supervisor, exc)
        return 1
    return 0


def take_stdin(meta: Dict[str, Any]) -> Tuple[Optional[bytes], Dict[str, str]]:
    """The attempt's key and the values of its secret variables, from stdin (a pipe the agent
    filled: ``{"key": hex, "secrets": {NAME: value}}``); then stdin becomes /dev/null. A name
    meta.json lists but stdin lacks is left unset; a key that does not parse leaves the lines
    unsigned (the controller then counts every one of them as forged: nothing is judged)."""
    names = meta.get("secret_env") or []
    if not names and not meta.get("authenticated"):
        return None, {}
    data = b""
    try:
        for _ in range(64):  # bounded: the agent wrote at most 32 KiB and closed the pipe
            chunk = os.read(0, 65536)
            if not chunk or len(data) > 65536:
                break
            data += chunk
        given = json.loads(data.decode("utf-8") or "{}")
    except (OSError, UnicodeDecodeError, ValueError):
        given = {}
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    given = given if isinstance(given, dict) else {}
    secrets = given.get("secrets") if isinstance(given.get("secrets"), dict) else {}
    try:
        key: Optional[bytes] = attempt_mac.parse_key(str(given.get("key") or ""))
    except ValueError:
        key = None
    return key, {name: secrets[name] for name in names if isinstance(secrets.get(name), str)}


def _container_after_crash(supervisor: Supervisor) -> Dict[str, Any]:
    try:
        return supervisor.stop_container()
    except Exception as exc:  # best effort: the exit line comes first
        return {"container_error": "%s: %s" % (type(exc).__name__, exc)}


def _exit_after_crash(supervisor: Supervisor, exc: Exception) -> None:
    if supervisor.proc is not None and supervisor.proc.poll() is None:
        _signal_group(supervisor.proc.pid, signal.SIGKILL)
    try:
        supervisor.watchers.stop()
        supervisor._write_exit({
            "rc": None, "signal": None, "timed_out": False, "killed": False, "lost": False,
            "duration_s": None, "error": "agent failure: %s: %s" % (type(exc).__name__, exc),
            **_container_after_crash(supervisor),
        })
    except Exception:
        traceback.print_exc()
