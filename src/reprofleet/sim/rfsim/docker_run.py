"""``docker run``'s client side: ask the daemon for a container, then stay attached to it.

The container is the daemon's (rfsim.docker_state records it, rfsim.docker_shim runs it in
a session of its own), so this client is only a window on it, as the real client is:

* foreground (attached, non-TTY): it prints the container's stdout and stderr from the
  container's log, proxies SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the
  container's PID 1 (``--sig-proxy``, on by default), and exits with the container's exit
  code. SIGKILL of the client leaves the container running: find it with ``docker ps`` and
  stop it with ``docker kill``.
* ``-d``: prints the new container's id and returns.

A name already in use is refused with docker's Conflict message and exit 125.

Host-side module: standard library only.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
from typing import Any, Dict, List, Optional

from . import docker_state
from .docker_state import Container, DaemonError

RC_DAEMON = 125
START_DEADLINE_S = 20.0
POLL_S = 0.03
CHECK_EVERY_S = 0.25
PROXIED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
HEADER = struct.Struct(">BxxxI")
SHIM_ENV = ("PATH", "PYTHONPATH", "LANG")  # the daemon's environment is its own, never the client's


def shim_environment(environ: Dict[str, str]) -> Dict[str, str]:
    return {k: v for k, v in environ.items() if k in SHIM_ENV or k.startswith("RFSIM_")}


def spawn_shim(container: Container, environ: Dict[str, str]) -> None:
    """Double fork + setsid: the shim is nobody's child here, in no group we share."""
    sys.stdout.flush()
    sys.stderr.flush()
    first = os.fork()
    if first == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                _become_shim(container, shim_environment(environ))
        finally:
            os._exit(0)
    os.waitpid(first, 0)


def _become_shim(container: Container, env: Dict[str, str]) -> None:
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(container.directory / docker_state.SHIM_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 1 << 16)
        os.chdir("/")
        os.execve(sys.executable, [sys.executable, "-m", "rfsim.docker_shim", str(container.directory)], env)
    finally:
        os._exit(127)


def wait_started(container: Container, deadline_s: float = START_DEADLINE_S) -> Container:
    """Until the shim says the container runs (or already ended); a record that stays
    'created' past the deadline is the daemon failing to start it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        current = docker_state.locate(container.id)
        if current is None:
            raise DaemonError(f"No such container: {container.id}")
        if current.status != "created":
            return current
        time.sleep(POLL_S)
    raise DaemonError(f"failed to start container {container.id[:12]}: its shim did not start in {deadline_s:g}s")


class Pending:
    """Signals the client got, held until they can go to the container's PID 1 (one that
    arrives while the container is still being created waits for it)."""

    def __init__(self) -> None:
        self.signals: List[int] = []

    def catch(self) -> None:
        for signum in PROXIED:
            signal.signal(signum, self.on_signal)

    def on_signal(self, signum: int, _frame: Any) -> None:
        self.signals.append(signum)


class Attachment:
    """The client's end of an attached container: its output and its signals."""

    def __init__(self, container: Container, pending: Pending) -> None:
        self.container = container
        self.log = os.open(container.directory / docker_state.LOG, os.O_RDONLY)
        self.buffer = b""
        self.pending = pending.signals
        self.broken: Dict[int, bool] = {1: False, 2: False}

    def pump(self) -> bool:
        """Copy what the container printed since the last call; True if there was any."""
        data = os.read(self.log, 1 << 16)
        if not data:
            return False
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            stream, size = HEADER.unpack_from(self.buffer)
            if len(self.buffer) < HEADER.size + size:
                break
            self._write(1 if stream == 1 else 2, self.buffer[HEADER.size:HEADER.size + size])
            self.buffer = self.buffer[HEADER.size + size:]
        return True

    def _write(self, fd: int, payload: bytes) -> None:
        if self.broken[fd]:
            return
        try:
            while payload:
                payload = payload[os.write(fd, payload):]
        except OSError:
            self.broken[fd] = True  # our reader left; the container goes on, as it does under docker

    def proxy(self) -> None:
        while self.pending:
            signum = self.pending.pop(0)
            current = docker_state.locate(self.container.id)
            if current is not None and current.running:
                try:
                    os.kill(int(current.state["pid"]), signum)
                except ProcessLookupError:
                    pass

    def follow(self) -> int:
        """Until the container has ended and its log is drained: its exit code."""
        next_check = 0.0
        while True:
            self.proxy()
            if self.pump():
                continue
            now = time.monotonic()
            if now >= next_check:
                next_check = now + CHECK_EVERY_S
                code = self._ended()
                if code is not None:
                    while self.pump():
                        pass
                    return code
            time.sleep(POLL_S)

    def _ended(self) -> Optional[int]:
        current = docker_state.locate(self.container.id)
        if current is None:
            return docker_state.LOST_EXIT
        if current.status == "exited":
            return int(current.state.get("exit_code", docker_state.LOST_EXIT))
        if not current.shim_alive and not current.running:
            with docker_state.daemon_lock():
                docker_state.housekeeping()
            return None  # housekeeping wrote its end; read on the next check
        return None


def run(config: Dict[str, Any], detach: bool, environ: Dict[str, str], sig_proxy: bool = True) -> int:
    """Create, start, and follow (or print the id with ``-d``); daemon errors are exit 125.
    Without ``sig_proxy`` (``--sig-proxy=false``) a signal ends this client alone."""
    pending = Pending()
    if sig_proxy and not detach:
        pending.catch()
    try:
        container = docker_state.create(config)
        spawn_shim(container, environ)
        container = wait_started(container)
    except DaemonError as exc:
        sys.stderr.write(f"docker: Error response from daemon: {exc}\nSee 'docker run --help'.\n")
        return RC_DAEMON
    if detach:
        print(container.id, flush=True)
        return 0
    return Attachment(container, pending).follow()
