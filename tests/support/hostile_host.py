"""A hostile host at the controller's seam: only the SSH transport is replaced.

``HostileSession`` stands where ``remote.transport.connect`` returns a Session: its exec
channels and streams are fakes of *paramiko's* channel (read through paramiko's own
``ChannelFile``, wrapped in the real ``ExecChannel`` and ``LineStream``), and what the fake
channel yields is whatever a test's host says: crafted manifests, endless lines, invalid
UTF-8, a gigabyte from a generator. Everything above the channel (AgentClient,
cache_sync.pull, cache_ops.pull_from, EventStream) is the real controller code.

``HostileCounts`` is what the suite prints at the end (hostile_counts.py): cases tried,
how many the controller refused with its own error, and tracebacks (anything else).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Iterator

import paramiko

from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.remote.transport import CommandResult, ExecChannel, LineStream

COUNTS: Counter[str] = Counter()  # read by hostile_counts.pytest_terminal_summary

# What a host puts in a reason, a kernel string or a PoC's line to reach the operator (issue 34):
# an escape nested in an escape (one pass leaves ESC[2J), an OSC-8 link, a terminal reset, a
# window title, a C1 CSI, and rich markup that closes a tag nobody opened.
TERMINAL_BYTES = ("\x1b\x1b[0m[2J\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1bc"
                  "\x1b]0;owned title\x07\x9b31m\x1bP1$q\x1b\\\x07\x00")
MARKUP = "[/] [link=https://evil.example/m]x[/link] [bold red]fake verdict[/]"
HOSTILE_TEXT = f"{TERMINAL_BYTES} {MARKUP}"


def terminal_controls(shown: str) -> list[str]:
    """The control characters a plain (not a terminal) rendering still holds: none but line feeds."""
    return [ch for ch in shown if (ord(ch) < 0x20 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f]


def endless(total: int, chunk: bytes = b"A" * 65536) -> Iterator[bytes]:
    """``total`` bytes with no newline, made as they are read (never held whole)."""
    sent = 0
    while sent < total:
        piece = chunk[: total - sent]
        sent += len(piece)
        yield piece


class FakeChannel:
    """The part of paramiko.Channel the controller uses, fed by an iterable of byte chunks.
    Counts what was read of it: a bounded reader stops long before a generator's end."""

    def __init__(self, source: Iterable[bytes], exit_status: int = 0, stderr: bytes = b"") -> None:
        self._source = iter(source)
        self._pending = b""
        self._stderr = stderr
        self.exit_status = exit_status
        self.read_bytes = 0
        self.closed = False
        self.written = bytearray()
        self._eof = False

    # -- reading, as paramiko's Channel.recv does --------------------------------------
    def recv(self, size: int) -> bytes:
        while not self._pending and not self._eof:
            try:
                self._pending = next(self._source)
            except StopIteration:
                self._eof = True
        out, self._pending = self._pending[:size], self._pending[size:]
        self.read_bytes += len(out)
        return out

    def recv_ready(self) -> bool:
        return bool(self._pending) or not self._eof

    def exit_status_ready(self) -> bool:
        return self._eof and not self._pending

    def recv_exit_status(self) -> int:
        return self.exit_status

    def recv_stderr_ready(self) -> bool:
        return False

    def recv_stderr(self, size: int) -> bytes:
        return b""

    def makefile(self, mode: str = "r", bufsize: int = -1) -> paramiko.ChannelFile:
        return paramiko.ChannelFile(self, mode, bufsize)  # type: ignore[arg-type]

    def makefile_stderr(self, mode: str = "r", bufsize: int = -1) -> "_Bytes":
        return _Bytes(self._stderr)

    def settimeout(self, timeout: float | None) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.written += data

    def shutdown_write(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, size: int = -1) -> bytes:
        out, self._data = (self._data, b"") if size < 0 else (self._data[:size], self._data[size:])
        return out


Script = Callable[[str], Iterable[bytes]]  # a command line -> what the host answers on stdout


class HostileSession:
    """Stands for transport.Session: the agent is "pushed" (test -f answers yes), and every
    other command, exec channel or stream answers what ``script`` says."""

    def __init__(self, host: Host, script: Script, run_stdout: str = "") -> None:
        self.host = host
        self.script = script
        self.run_stdout = run_stdout
        self.channels: list[FakeChannel] = []
        self.closed = False

    @property
    def alive(self) -> bool:
        return not self.closed

    def run(self, command: str, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        if command.startswith("test -f"):
            return CommandResult(command, 0, "", "")
        return CommandResult(command, 0, self.run_stdout, "")

    def put_bytes(self, content: bytes, remote_path: str, mode: int = 0o644) -> None:
        pass

    def _channel(self, command: str) -> FakeChannel:
        channel = FakeChannel(self.script(command))
        self.channels.append(channel)
        return channel

    def exec_channel(self, command: str) -> ExecChannel:
        return ExecChannel(self.host.name, self._channel(command))  # type: ignore[arg-type]

    def stream(self, command: str, stdin: bytes | None = None) -> LineStream:
        return LineStream(self, self._channel(command))  # type: ignore[arg-type]  # (what stdin carries: no hostile bytes)

    def close(self) -> None:
        self.closed = True


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` (links not followed) with its mode and size: two walks
    compared say what a run wrote."""
    found: dict[str, tuple[int, int]] = {}
    for current, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(current, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (info.st_mode, info.st_size)
    return found


def tried(outcome: Callable[[], object]) -> BaseException | None:
    """Run one hostile case; count it, and whether it left as our error or as anything else."""
    COUNTS["cases"] += 1
    try:
        outcome()
    except ReprofleetError as exc:
        COUNTS["refused"] += 1
        return exc
    except BaseException:
        COUNTS["tracebacks"] += 1
        raise
    COUNTS["accepted"] += 1
    return None


def planted_link(at: Path, victim: Path, text: str = "victim's own line\n") -> Path:
    """What another user of a shared controller plants: ``at`` a link to ``victim`` (a
    ``.bashrc``, a key) holding ``text``; the test then checks ``victim`` still holds exactly that."""
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text(text)
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(victim)
    return victim
