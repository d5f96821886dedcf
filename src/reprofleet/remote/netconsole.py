"""The controller's netconsole receiver: kernel messages that left a host before it froze.

A frozen host's last kernel lines are lost with its power if they were only on its disk;
netconsole sends each one over UDP as it is printed. One socket per port (one, usually)
takes every datagram, finds the host by its source address, puts the message together
(plain text may be split anywhere; the extended form ``level,seq,usec,flags;text`` carries
``ncfrag=offset/total`` when it is split) and files it with its arrival time: in the stream
of the attempt running on that host at that instant (``k: "netconsole"``), in
``netconsole/<host>.jsonl`` of the campaign, and in a bounded tail per host that a wedge's
record takes its last lines from.
"""

from __future__ import annotations

import json
import re
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from reprofleet.errors import ReprofleetError

TAIL = 400  # lines kept per host
RECORD_LINES = 50  # lines a wedge's record carries
MAX_DATAGRAM = 65535
PARTIAL_FLUSH_S = 1.0  # a plain-text fragment without its newline is filed as it is after this
EXTENDED = re.compile(r"^(\d+),(\d+),(\d+),([^;,]*)((?:,[^;]*)?);", re.S)
NCFRAG = re.compile(r"ncfrag=(\d+)/(\d+)")
MAX_PENDING = 64  # extended messages being reassembled per host


class NetconsoleError(ReprofleetError):
    """The receiver cannot listen (the port is taken: another receiver would get the lines)."""


@dataclass(frozen=True)
class KernelLine:
    """One kernel message as it arrived: ``t`` on the controller's clock; level and seq only
    in the extended form (the kernel's own sequence number: gaps are lost datagrams)."""

    t: float
    line: str
    level: int | None = None
    seq: int | None = None
    usec: int | None = None

    def for_record(self) -> dict[str, object]:
        out: dict[str, object] = {"t": round(self.t, 3), "line": self.line}
        if self.seq is not None:
            out.update(level=self.level, seq=self.seq)
        return out


@dataclass
class _Pending:
    """An extended message split over datagrams (ncfrag): its chunks by byte offset."""

    total: int
    header: tuple[int, int, int]
    chunks: dict[int, bytes] = field(default_factory=dict)
    t: float = 0.0

    def complete(self) -> bytes | None:
        data, at = b"", 0
        for offset in sorted(self.chunks):
            if offset > at:
                return None
            data += self.chunks[offset][at - offset:]
            at = len(data)
        return data if at >= self.total else None


class Reassembler:
    """Turns one source's datagrams into kernel lines, in arrival order."""

    def __init__(self) -> None:
        self._partial = b""  # plain form: text after the last newline
        self._partial_t = 0.0
        self._pending: dict[int, _Pending] = {}  # extended form: seq -> chunks

    def feed(self, data: bytes, t: float) -> list[KernelLine]:
        match = EXTENDED.match(data[:200].decode("utf-8", "replace"))
        if match is None:
            return self._plain(data, t)
        level, seq, usec = int(match.group(1)) & 7, int(match.group(2)), int(match.group(3))
        body = data[len(match.group(0).encode()):]
        frag = NCFRAG.search(match.group(5) or "")
        if frag is None:
            return [_extended_line(body, t, level, seq, usec)]
        return self._fragment(body, t, (level, seq, usec), int(frag.group(1)), int(frag.group(2)))

    def _plain(self, data: bytes, t: float) -> list[KernelLine]:
        """Lines end with a newline; a line's time is the arrival of its first piece."""
        if not self._partial:
            self._partial_t = t
        *done, rest = (self._partial + data).split(b"\n")
        lines = [KernelLine(self._partial_t if i == 0 else t, _text(raw))
                 for i, raw in enumerate(done) if raw.strip()]
        self._partial = rest
        if done:
            self._partial_t = t
        return lines

    def _fragment(self, body: bytes, t: float, header: tuple[int, int, int], offset: int,
                  total: int) -> list[KernelLine]:
        pending = self._pending.setdefault(header[1], _Pending(total, header, t=t))
        pending.chunks[offset] = body
        data = pending.complete()
        if data is None:
            while len(self._pending) > MAX_PENDING:  # a lost chunk must not keep memory forever
                self._pending.pop(min(self._pending))
            return []
        del self._pending[header[1]]
        return [_extended_line(data, pending.t, *header)]

    def flush(self, now: float, force: bool = False) -> list[KernelLine]:
        """A plain fragment left without its newline (the last words of a freeze) after a while."""
        if self._partial and (force or now - self._partial_t >= PARTIAL_FLUSH_S):
            line, self._partial = KernelLine(self._partial_t, _text(self._partial)), b""
            return [line]
        return []


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def _extended_line(body: bytes, t: float, level: int, seq: int, usec: int) -> KernelLine:
    """The message without its dictionary (continuation lines start with a space)."""
    text = body.decode("utf-8", "replace").split("\n")[0]
    return KernelLine(t, text, level, seq, usec)


Sink = Callable[[str], None]


@dataclass
class _HostLog:
    name: str
    reassembler: Reassembler = field(default_factory=Reassembler)
    tail: deque[KernelLine] = field(default_factory=lambda: deque(maxlen=TAIL))
    attempt: str | None = None
    sink: Sink | None = None
    received: int = 0


class NetconsoleReceiver:
    """One thread, one socket per port; files every datagram by host and attempt."""

    def __init__(self, ports: Iterable[int], sources: Mapping[str, str], folder: Path,
                 bind: str = "0.0.0.0") -> None:
        """``sources``: source address -> host name (the inventory's addresses, resolved)."""
        self.sources = dict(sources)
        self.folder = folder
        self.hosts = {name: _HostLog(name) for name in set(self.sources.values())}
        self.strays = 0  # datagrams from addresses of no host
        self.ports = sorted(set(ports))
        self._lock = threading.Lock()
        self._recv_lock = threading.Lock()
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, name="netconsole", daemon=True)
        self.configured: dict[str, str | None] = {}  # host -> boot_id its kernel was configured in
        self.attempt_started: dict[str, float] = {}  # host -> arrival time from which its attempt's lines count
        self._sockets: list[socket.socket] = []
        for port in self.ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.bind((bind, port))
            except OSError as exc:
                sock.close()
                self.close()
                raise NetconsoleError(f"cannot receive netconsole on UDP {bind}:{port}: {exc}") from None
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)
            self._sockets.append(sock)
        self.folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> "NetconsoleReceiver":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        self._selector.close()

    def add_source(self, address: str, host: str) -> None:
        """Another address of ``host`` (the source address its kernel was told to use)."""
        with self._lock:
            self.sources[address] = host
            self.hosts.setdefault(host, _HostLog(host))

    # -- the campaign's side -------------------------------------------------------------
    def follow(self, host: str, attempt: str, sink: Sink, since: float | None = None) -> None:
        """From now on ``host``'s lines also go to ``attempt``'s stream through ``sink``; the
        lines that arrived since ``since`` (the attempt's start, before its stream existed) first."""
        with self._lock:
            log = self.hosts.setdefault(host, _HostLog(host))
            log.attempt, log.sink = attempt, sink
            for line in log.tail:
                if since is not None and line.t >= since:
                    sink(json.dumps({"k": "netconsole", **line.for_record(), "t": line.t}, sort_keys=True))

    def unfollow(self, host: str) -> None:
        with self._lock:
            log = self.hosts.get(host)
            if log is not None:
                log.attempt, log.sink = None, None

    def lines(self, host: str, since: float = 0.0, until: float | None = None,
              last: int = RECORD_LINES) -> list[KernelLine]:
        """The last ``last`` lines that arrived from ``host`` in [since, until]."""
        self.poll_once(0.0)  # what is already in the socket's queue counts
        with self._lock:
            log = self.hosts.get(host)
            chosen = [line for line in (log.tail if log else ())
                      if line.t >= since and (until is None or line.t <= until)]
        return chosen[-last:]

    # -- the receiving thread ------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once(0.2)

    def poll_once(self, timeout: float) -> None:
        """Wait up to ``timeout`` for datagrams, then file all that are queued (one reader at a
        time, so lines keep their arrival order)."""
        try:
            if self._sockets:
                self._selector.select(timeout)
        except (OSError, ValueError):  # closed under us
            return
        with self._recv_lock:
            for sock in list(self._sockets):
                self._drain(sock)
            now = time.time()
            with self._lock:
                for log in self.hosts.values():
                    self._file(log, log.reassembler.flush(now))

    def _drain(self, sock: socket.socket) -> None:
        for _ in range(1000):  # bounded per wake-up
            try:
                data, (address, _port) = sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            now = time.time()
            with self._lock:
                host = self.sources.get(address)
                if host is None:
                    self.strays += 1
                    continue
                log = self.hosts[host]
                log.received += 1
                self._file(log, log.reassembler.feed(data, now))

    def _file(self, log: _HostLog, lines: list[KernelLine]) -> None:
        """Into the tail, the host's file and the running attempt's stream (lock held)."""
        if not lines:
            return
        log.tail.extend(lines)
        with open(self.folder / f"{log.name}.jsonl", "a", encoding="utf-8") as out:
            for line in lines:
                entry = {"k": "netconsole", **line.for_record(), "t": line.t, "attempt": log.attempt}
                out.write(json.dumps(entry, sort_keys=True) + "\n")
                if log.sink is not None:
                    entry.pop("attempt")
                    log.sink(json.dumps(entry, sort_keys=True))
