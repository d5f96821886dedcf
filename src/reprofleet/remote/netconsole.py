"""The controller's netconsole receiver: kernel messages that left a host before it froze.

A frozen host's last kernel lines are lost with its power if they were only on its disk;
netconsole sends each one over UDP as it is printed. One socket per address and port (one
of each, usually) takes every datagram, finds the host by its source address, puts the
message together (remote/netconsole_lines.py) and files it with its arrival time: in the
stream of the attempt running on that host at that instant (``k: "netconsole"``), in
``netconsole/<host>.jsonl`` of the campaign, and in a bounded tail per host that a wedge's
record takes its last lines from.

Everything a host sends is untrusted (issue 20): the socket is bound to the controller's
address on the hosts' network, never to every interface; a source address belongs to one
host only (a second claim is refused, an address two hosts share at the start is filed to
neither); each source has a budget (remote/netconsole_budget.py) on what it sends and on what
it makes us file, whose drops are filed as a line; the caps on what a source may make us hold
are the reassembler's. Each host's file has a cap in lines and bytes, and all of them share
the campaign's (records/disk_caps.py): past either, lines are counted, not filed, and one
line in the file says so. Every check is made before anything is written, under the lock;
the writing itself (the file, the attempt's stream) happens after the lock is released, so
the lock is held for work bounded by the budgets, never for the disk.
"""

from __future__ import annotations

import ipaddress
import os
import json
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from reprofleet.errors import ReprofleetError
from reprofleet.records.disk_caps import CampaignDiskBudget, DiskCaps
from reprofleet.model import file_name
from reprofleet.records.private_files import append_fd, make_folder
from reprofleet.remote.netconsole_budget import Allowance, Budget
from reprofleet.remote.netconsole_lines import KernelLine, Note, Reassembler, WireCaps

__all__ = ["KernelLine", "NetconsoleError", "NetconsoleReceiver", "Reassembler", "SourceConflict",
           "hosts_facing_address"]

TAIL = 400  # lines kept per host
RECORD_LINES = 50  # lines a wedge's record carries
MAX_DATAGRAM = 65535
DRAIN_PER_WAKE = 1000  # datagrams read per socket before the flush (a flood does not starve it)
ENVELOPE = 96  # bytes a filed line takes on disk beyond its text (its JSON keys, time, seq): the filing budget's estimate


class NetconsoleError(ReprofleetError):
    """The receiver cannot listen (the port is taken: another receiver would get the lines)."""


class SourceConflict(NetconsoleError):
    """A host's kernel would send from an address that is another host's."""


def hosts_facing_address(address: str) -> str:
    """The controller's own address on its route to ``address`` (no datagram is sent: a UDP
    socket's connect only asks the kernel for the route and its source address)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9))
            return str(probe.getsockname()[0])
    except OSError as exc:
        raise NetconsoleError(f"no route to {address} to listen on ({exc}): set netconsole.listen "
                              "to the controller's address on the hosts' network") from None


Sink = Callable[[str], None]


@dataclass
class _HostLog:
    name: str
    tail: deque[KernelLine] = field(default_factory=lambda: deque(maxlen=TAIL))
    attempt: str | None = None
    sink: Sink | None = None
    received: int = 0
    filed: tuple[int, int] = (0, 0)  # lines and bytes in its file
    not_filed: tuple[int, int] = (0, 0)  # lines and bytes its file's cap or the campaign's refused
    full_noted: bool = False  # the file says that lines are counted from here


@dataclass(frozen=True)
class _Out:
    """One line to write once the lock is released: into a host's file, or an attempt's stream."""

    text: str
    host: str | None = None
    sink: Sink | None = None


@dataclass
class _Feed:
    """One source address: whose it is, its parser and its budget."""

    host: str
    reassembler: Reassembler
    allowance: Allowance


class NetconsoleReceiver:
    """One thread, one socket per address and port; files every datagram by host and attempt."""

    def __init__(self, ports: Iterable[int], sources: Mapping[str, str], folder: Path,
                 bind: str | Sequence[str], budget: Budget = Budget(), caps: WireCaps = WireCaps(),
                 clock: Callable[[], float] = time.time, files: DiskCaps = DiskCaps(),
                 disk: CampaignDiskBudget | None = None) -> None:
        """``sources``: source address -> host name (the inventory's addresses, resolved);
        ``bind``: the controller's address(es) on the hosts' network; ``files``: each host
        file's caps; ``disk``: the campaign's cap, shared with the attempts' streams."""
        self.folder = folder
        self.budget, self.caps, self._clock = budget, caps, clock
        self.files, self.disk = files, disk
        self.sources: dict[str, str] = {}
        self.hosts: dict[str, _HostLog] = {}
        self._feeds: dict[str, _Feed] = {}
        self.contested: dict[str, tuple[str, ...]] = {}  # address -> the hosts that all claimed it
        self.refusals: dict[str, list[str]] = {}  # host -> why an address of it is not filed (for its events)
        self.strays = 0  # datagrams from addresses of no host
        self.unattributed = 0  # datagrams from an address two hosts share
        self.ports = sorted(set(ports))
        self.binds = sorted({bind} if isinstance(bind, str) else set(bind))
        self._lock = threading.Lock()
        self._recv_lock = threading.Lock()
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, name="netconsole", daemon=True)
        self.configured: dict[str, str | None] = {}  # host -> boot_id its kernel was configured in
        self.attempt_started: dict[str, float] = {}  # host -> arrival time from which its attempt's lines count
        self._sockets: list[socket.socket] = []
        for address, host in sources.items():
            self.add_source(address, host)
        for address in self.binds:
            for port in self.ports:
                self._listen(address, port)
        make_folder(self.folder)

    def _listen(self, address: str, port: int) -> None:
        try:
            unspecified = ipaddress.ip_address(address).is_unspecified
        except ValueError:
            unspecified = False
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            if unspecified:
                raise OSError("every interface: listen on the controller's address on the hosts' network")
            sock.bind((address, port))
        except OSError as exc:
            sock.close()
            self.close()
            raise NetconsoleError(f"cannot receive netconsole on UDP {address}:{port}: {exc}") from None
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ)
        self._sockets.append(sock)

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

    # -- whose address is whose ------------------------------------------------------------
    def add_source(self, address: str, host: str) -> None:
        """Another address of ``host`` (the source address its kernel was told to use). An
        address that is another host's stays that host's: :class:`SourceConflict`."""
        with self._lock:
            owner = self.sources.get(address)
            if address in self.contested or (owner is not None and owner != host):
                whose = " and ".join(self.contested.get(address, ())) or str(owner)
                raise SourceConflict(f"{host}: its kernel's source address {address} is {whose}'s: refused "
                                     f"(lines from {address} are not filed to {host})")
            self._host_log(host)
            if owner is None:
                self.sources[address] = host
                self._feeds[address] = _Feed(host, Reassembler(self.caps), Allowance(address, self.budget, self._clock()))

    def _host_log(self, host: str) -> _HostLog:
        """``host``'s log, made on first use with what its file holds already (a resume)."""
        log = self.hosts.get(host)
        if log is None:
            try:  # what its file holds already; a name that cannot be a file name files nothing (_append says why)
                filed = _lines_and_bytes(self.folder / file_name(host, ".jsonl", what="host name"))
            except ReprofleetError:
                filed = (0, 0)
            log = self.hosts[host] = _HostLog(host, filed=filed)
        return log

    def contest(self, address: str, hosts: Sequence[str]) -> None:
        """An address several hosts claim (the inventory gives it to each): no line from it can
        be told apart, so none is filed, and each host's events say why."""
        with self._lock:
            self.sources.pop(address, None)
            self._feeds.pop(address, None)
            self.contested[address] = tuple(sorted(set(hosts)))
            for host in self.contested[address]:
                self._host_log(host)
                others = ", ".join(h for h in self.contested[address] if h != host)
                self.refusals.setdefault(host, []).append(
                    f"source address {address} is also {others}'s: its datagrams are filed to neither")

    def restart(self, host: str) -> None:
        """``host`` is in a new boot: its kernel's sequence numbers start again."""
        with self._lock:
            for feed in self._feeds.values():
                if feed.host == host:
                    feed.reassembler.restart()

    def dropped(self, host: str) -> int:
        """Datagrams from ``host``'s addresses not read because they were over its budget."""
        with self._lock:
            return sum(feed.allowance.dropped for feed in self._feeds.values() if feed.host == host)

    def not_filed(self, host: str) -> tuple[int, int]:
        """Lines (and their bytes) of ``host`` its file's cap or the campaign's kept off the disk."""
        with self._lock:
            log = self.hosts.get(host)
            return log.not_filed if log is not None else (0, 0)

    def unfiled(self, host: str) -> int:
        """Lines of ``host`` parsed but not filed because they were over its filing budget."""
        with self._lock:
            return sum(feed.allowance.unfiled for feed in self._feeds.values() if feed.host == host)

    def held_bytes(self, host: str) -> int:
        """What ``host``'s addresses make the receiver hold between datagrams."""
        with self._lock:
            return sum(feed.reassembler.held_bytes() for feed in self._feeds.values() if feed.host == host)

    # -- the campaign's side -------------------------------------------------------------
    def follow(self, host: str, attempt: str, sink: Sink, since: float | None = None) -> None:
        """From now on ``host``'s lines also go to ``attempt``'s stream through ``sink``; the
        lines that arrived since ``since`` (the attempt's start, before its stream existed) first."""
        with self._lock:
            log = self._host_log(host)
            log.attempt, log.sink = attempt, sink
            earlier = [line for line in log.tail if since is not None and line.t >= since]
        for line in earlier:  # the stream's own writer may take its time: not under the lock
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
        time, so lines keep their arrival order), the plain lines left without their newline
        for a while, and the drop notes that are due."""
        try:
            if self._sockets:
                self._selector.select(timeout)
        except (OSError, ValueError):  # closed under us
            return
        with self._recv_lock:
            outbox: list[_Out] = []
            for sock in list(self._sockets):
                self._drain(sock, outbox)
            now = self._clock()
            with self._lock:
                for feed in self._feeds.values():
                    log = self.hosts[feed.host]
                    self._file(log, feed.reassembler.flush(now), outbox, feed, now)
                    drop = feed.allowance.due(now)
                    if drop is not None:
                        self._file(log, [KernelLine(now, drop.words(), note=Note.DROPPED)], outbox)
            self._deliver(outbox)

    def _drain(self, sock: socket.socket, outbox: list[_Out]) -> None:
        for _ in range(DRAIN_PER_WAKE):
            try:
                data, (address, _port) = sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            now = self._clock()
            with self._lock:
                feed = self._feeds.get(address)
                if feed is None:
                    if address in self.contested:
                        self.unattributed += 1
                    else:
                        self.strays += 1
                    continue
                if not feed.allowance.admit(len(data), now):
                    continue
                log = self.hosts[feed.host]
                log.received += 1
                before = feed.reassembler.skipped
                room = min(feed.allowance.room(now), self.caps.lines_per_datagram)  # the lock's work per datagram
                lines = feed.reassembler.feed(data, now, room=room)
                after = feed.reassembler.skipped
                if after != before:
                    skipped = after[0] - before[0]
                    feed.allowance.skipped(skipped, after[1] - before[1] + skipped * ENVELOPE)
                self._file(log, lines, outbox, feed, now)

    def _file(self, log: _HostLog, lines: list[KernelLine], outbox: list[_Out], feed: _Feed | None = None,
              now: float = 0.0) -> None:
        """Into the tail, and (in ``outbox``, written after the lock) the host's file and the
        running attempt's stream (lock held). A line over its source's filing budget goes
        nowhere (``feed``: None for the receiver's own notes, which the budget's note limits)."""
        for line in lines:
            if feed is not None and not feed.allowance.file(len(line.line) + ENVELOPE, now):
                continue
            log.tail.append(line)
            entry = {"k": "netconsole", **line.for_record(), "t": line.t, "attempt": log.attempt}
            text = json.dumps(entry, sort_keys=True) + "\n"
            if self._may_file(log, len(text.encode("utf-8")), line.t, outbox):
                outbox.append(_Out(text, host=log.name))
            if log.sink is not None:
                entry.pop("attempt")
                outbox.append(_Out(json.dumps(entry, sort_keys=True), sink=log.sink))

    def _may_file(self, log: _HostLog, size: int, t: float, outbox: list[_Out]) -> bool:
        """Whether a line of ``size`` bytes fits the host's file and the campaign's cap (counted
        as filed when it does); the first refusal puts one line in the file saying so."""
        lines, filed = log.filed
        full = lines + 1 > self.files.netconsole_lines or filed + size > self.files.netconsole_bytes
        if not full and (self.disk is None or self.disk.take(size)):
            log.filed = (lines + 1, filed + size)
            return True
        log.not_filed = (log.not_filed[0] + 1, log.not_filed[1] + size)
        if not log.full_noted:
            log.full_noted = True
            why = (f"{log.name}'s netconsole file reached its cap ({self.files.netconsole_lines} lines, "
                   f"{self.files.netconsole_bytes} bytes: netconsole_cap_lines, netconsole_cap_mb)" if full else
                   "the campaign folder reached its cap for streams and netconsole (campaign_cap_mb)")
            note = KernelLine(t, f"[... {why}: further lines are counted, not filed ...]", note=Note.NOT_FILED)
            outbox.append(_Out(json.dumps({"k": "netconsole", **note.for_record(), "t": t, "attempt": log.attempt},
                                          sort_keys=True) + "\n", host=log.name))
        return False

    def _deliver(self, outbox: list[_Out]) -> None:
        """Write what the lock decided (the receiving thread only, so lines keep their order)."""
        by_host: dict[str, list[str]] = {}
        for out in outbox:
            if out.host is not None:
                by_host.setdefault(out.host, []).append(out.text)
            elif out.sink is not None:
                out.sink(out.text)
        for host, texts in by_host.items():
            self._append(host, "".join(texts))

    def _append(self, host: str, text: str) -> None:
        """``netconsole/<host>.jsonl``, never through a link planted in its place: a refusal is
        kept for the host's events (the tail and the attempt's stream still get the lines)."""
        try:
            fd = append_fd(self.folder / file_name(host, ".jsonl", what="host name"))
        except (ReprofleetError, OSError) as exc:
            reasons = self.refusals.setdefault(host, [])
            if len(reasons) < 8 and f"not filed: {exc}" not in reasons:
                reasons.append(f"not filed: {exc}")
            return
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(text)


def _lines_and_bytes(path: Path) -> tuple[int, int]:
    """Lines and bytes a host's file holds already (a resumed campaign's), read in chunks."""
    try:
        with open(path, "rb") as handle:
            lines = size = 0
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                lines, size = lines + chunk.count(b"\n"), size + len(chunk)
            return lines, size
    except OSError:
        return 0, 0
