"""Processes the simulated fleet starts, referred to by PID *and* start time.

A bare PID is not enough to kill something safely later (from another process, after a
crash): PIDs are reused. A :class:`ProcessRef` also records the kernel's start time of the
process, so "is it still ours?" has a reliable answer before any signal is sent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from reprofleet.errors import ReprofleetError


class SimError(ReprofleetError):
    """The simulated fleet could not be built, driven or torn down."""


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].startswith("Z")


@dataclass(frozen=True)
class ProcessRef:
    """A process we started: its PID and the start time that makes the PID unambiguous."""

    pid: int
    ticks: int

    @classmethod
    def of(cls, pid: int) -> "ProcessRef":
        ticks = start_ticks(pid)
        if ticks is None:
            raise SimError(f"process {pid} vanished before it could be recorded")
        return cls(pid, ticks)

    def alive(self) -> bool:
        return start_ticks(self.pid) == self.ticks and not is_zombie(self.pid)

    def signal(self, signum: int) -> bool:
        """Send ``signum`` if the process is still the one we started; False if it is gone."""
        if not self.alive():
            return False
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; returns once the process is gone."""
        if not self.signal(signal.SIGTERM):
            return
        if wait_until(lambda: not self.alive(), grace_s, f"pid {self.pid} to exit", fail=False):
            return
        self.signal(signal.SIGKILL)
        wait_until(lambda: not self.alive(), 5.0, f"pid {self.pid} to die after SIGKILL")

    def as_json(self) -> dict[str, int]:
        return {"pid": self.pid, "ticks": self.ticks}

    @classmethod
    def from_json(cls, data: Mapping[str, int]) -> "ProcessRef":
        return cls(int(data["pid"]), int(data["ticks"]))


def wait_until(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.02,
    fail: bool = True,
) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passes (then raise, or return False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            if fail:
                raise SimError(f"timed out after {timeout_s:g}s waiting for {what}")
            return False
        time.sleep(interval_s)


def run(argv: Sequence[str], *, timeout_s: float = 10.0, check: bool = True, stdin: str | None = None) -> str:
    """Run a short system command (ip, iptables, ssh-keygen) with a deadline; return stdout."""
    try:
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise SimError(f"{' '.join(argv)}: no answer within {timeout_s:g}s") from exc
    except FileNotFoundError as exc:
        raise SimError(f"{argv[0]}: not installed") from exc
    if check and done.returncode != 0:
        raise SimError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def spawn_detached(argv: Sequence[str], *, log_path: Path, env: Mapping[str, str]) -> ProcessRef:
    """Start a daemon that outlives us: double fork so that init, not we, is its parent.

    Init reaps it when it dies, so "alive" never means "a zombie nobody waited for".
    """
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # first child: new session, fork the daemon, report its pid, exit
        try:
            os.close(read_fd)
            os.setsid()
            log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            null_fd = os.open(os.devnull, os.O_RDONLY)
            grandchild = os.fork()
            if grandchild == 0:
                os.dup2(null_fd, 0)
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.closerange(3, 65536)
                os.execvpe(argv[0], list(argv), dict(env))
            os.write(write_fd, str(grandchild).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        text = pipe.read()
    os.waitpid(child, 0)
    if not text:
        raise SimError(f"could not start {argv[0]}")
    return ProcessRef.of(int(text))
