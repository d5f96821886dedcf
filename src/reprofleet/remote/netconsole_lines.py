"""Kernel lines from one source's netconsole datagrams, with every size a sender controls capped.

Its own module because it is the pure part of the receiver (bytes in, lines out, no socket,
no clock of its own) and the part a hostile or broken sender aims at: anything that can send
UDP from a host's address chooses these bytes, so none of them may buy unbounded memory or
CPU. The receiver (remote/netconsole.py) owns the sockets, the sources and the filing.

The two forms, as the kernel's Documentation/networking/netconsole.rst gives them:

- plain: the console's text, split anywhere (the kernel sends 1000-byte chunks); a line ends
  with a newline. The text after the last newline is kept (at most ``line_bytes`` of it) and
  only each new datagram is searched for the next newline: the cost is linear in what arrives.
- extended: ``<level>,<seq>,<usec>,<flags>[,ncfrag=<offset>/<total>];<text>[\\n<dictionary>]``
  (newer kernels may put ``<release>,`` first). A message longer than a chunk comes in
  fragments carrying ``ncfrag``; they are put together by offset, within caps on a message's
  size, its chunks and what all unfinished messages may hold. ``seq`` is the kernel's own
  number: a jump forward is shown in the filed text as ``[... N lines lost ...]``.

A line longer than ``line_bytes`` is cut there, ending ``[... N bytes cut ...]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum, unique

HEADER = re.compile(rb"^(?:(\d+\.[^,;\s]{0,64}),)?(\d{1,4}),(\d{1,20}),(\d{1,20}),([^;,]{0,16})((?:,[^;]{0,256})?);")
NCFRAG = re.compile(rb"(?:^|,)ncfrag=(\d{1,9})/(\d{1,9})(?:,|$)")
HEADER_SCAN = 400  # bytes of a datagram searched for the extended header
PARTIAL_FLUSH_S = 1.0  # a plain fragment without its newline is filed as it is after this


@unique
class Note(Enum):
    """A filed line that is the receiver's, not the kernel's, or a kernel line it changed."""

    GAP = "gap"  # the kernel's sequence jumped: messages that never arrived
    DROPPED = "dropped"  # datagrams of a source over its budget, not read
    CUT = "cut"  # a kernel line longer than the cap, cut
    NOT_FILED = "not_filed"  # the host's file (or the campaign folder) reached its cap: lines counted from here


@dataclass(frozen=True)
class KernelLine:
    """One kernel message as it arrived: ``t`` on the controller's clock; level and seq only
    in the extended form (the kernel's own sequence number: gaps are lost datagrams)."""

    t: float
    line: str
    level: int | None = None
    seq: int | None = None
    usec: int | None = None
    note: Note | None = None

    def for_record(self) -> dict[str, object]:
        out: dict[str, object] = {"t": round(self.t, 3), "line": self.line}
        if self.seq is not None:
            out.update(level=self.level, seq=self.seq)
        if self.note is not None:
            out["note"] = self.note.value
        return out


@dataclass(frozen=True)
class WireCaps:
    """What one source may make the receiver hold. The kernel's own lines are under 1 KiB and an
    extended message under 8 KiB plus its userdata, sent in 1000-byte chunks."""

    line_bytes: int = 4096  # one filed line (and the plain form's unfinished line)
    message_bytes: int = 16384  # an ncfrag message's declared total
    chunks_per_message: int = 32  # distinct fragments of one message (17 make 16 KiB)
    pending_messages: int = 64  # messages being put together at once
    pending_bytes: int = 256 << 10  # bytes all of them hold together
    lines_per_datagram: int = 500  # plain lines parsed from one datagram (a kernel's chunk is 1000 bytes: 500 at most)


@dataclass
class _Pending:
    """An extended message split over datagrams (ncfrag): its chunks by byte offset."""

    total: int
    header: tuple[int, int, int]
    t: float
    chunks: dict[int, bytes] = field(default_factory=dict)
    held: int = 0

    def complete(self) -> bytes | None:
        if self.held < self.total:  # not enough bytes yet, whatever their offsets
            return None
        parts, at = [], 0
        for offset in sorted(self.chunks):
            if offset > at:
                return None
            chunk = self.chunks[offset]
            parts.append(chunk[at - offset:])
            at = max(at, offset + len(chunk))
        return b"".join(parts)[:self.total] if at >= self.total else None


class Reassembler:
    """Turns one source's datagrams into kernel lines, in arrival order."""

    def __init__(self, caps: WireCaps = WireCaps()) -> None:
        self.caps = caps
        self._partial = bytearray()  # plain form: text after the last newline, at most line_bytes
        self._partial_t = 0.0
        self._partial_cut = 0  # bytes of that line past the cap, not kept
        self._pending: dict[int, _Pending] = {}  # extended form: seq -> chunks, oldest first
        self._pending_held = 0
        self._last_seq: int | None = None
        self.refused = 0  # fragments refused: over a cap, or not matching their message's others
        self.skipped = (0, 0)  # plain lines (and their bytes) past a feed's ``room``: counted, never parsed

    def held_bytes(self) -> int:
        """What this source makes the receiver hold between datagrams."""
        return len(self._partial) + self._pending_held

    def restart(self) -> None:
        """A new boot: its kernel numbers its messages anew (no gap across boots)."""
        self._last_seq = None

    def feed(self, data: bytes, t: float, room: int | None = None) -> list[KernelLine]:
        """The lines ``data`` completes; ``room``: at most this many plain lines are made, the
        rest of the datagram's lines only counted (``skipped``), so a datagram of newlines costs
        what the receiver may file, not what the sender chose."""
        match = HEADER.match(data[:HEADER_SCAN])
        if match is None:
            return self._plain(data, t, room)
        level, seq, usec = int(match.group(2)) & 7, int(match.group(3)), int(match.group(4))
        body = data[match.end():]
        frag = NCFRAG.search(match.group(6))
        if frag is None:
            return self._in_order(self._extended_line(body, t, (level, seq, usec)), seq)
        return self._fragment(body, t, (level, seq, usec), int(frag.group(1)), int(frag.group(2)))

    # -- the plain form --------------------------------------------------------------------
    def _plain(self, data: bytes, t: float, room: int | None = None) -> list[KernelLine]:
        """Lines end with a newline; a line's time is the arrival of its first piece."""
        lines: list[KernelLine] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if room is not None and len(lines) >= room:
                last = data.rfind(b"\n") + 1
                count, size = self.skipped
                self.skipped = (count + data.count(b"\n", start, last), size + last - start + len(self._partial))
                self._partial, self._partial_cut = bytearray(), 0  # its line is one of those skipped
                start = last
                break
            self._keep(data, start, end, t)
            line = self._take_partial()
            if line is not None:
                lines.append(line)
            start = end + 1
        if start < len(data):
            self._keep(data, start, len(data), t)
        return lines

    def _keep(self, data: bytes, start: int, end: int, t: float) -> None:
        if not self._partial and not self._partial_cut:
            self._partial_t = t
        take = max(0, min(self.caps.line_bytes - len(self._partial), end - start))
        self._partial += data[start:start + take]
        self._partial_cut += end - start - take

    def _take_partial(self) -> KernelLine | None:
        raw, cut = bytes(self._partial), self._partial_cut
        self._partial, self._partial_cut = bytearray(), 0
        if not raw.strip() and not cut:
            return None
        return KernelLine(self._partial_t, _text(raw, cut), note=Note.CUT if cut else None)

    def flush(self, now: float, force: bool = False) -> list[KernelLine]:
        """A plain fragment left without its newline (the last words of a freeze) after a while."""
        if (self._partial or self._partial_cut) and (force or now - self._partial_t >= PARTIAL_FLUSH_S):
            line = self._take_partial()
            return [] if line is None else [line]
        return []

    # -- the extended form -----------------------------------------------------------------
    def _extended_line(self, body: bytes, t: float, header: tuple[int, int, int]) -> KernelLine:
        """The message without its dictionary (continuation lines start with a space), capped."""
        end = body.find(b"\n")
        text = body if end < 0 else body[:end]
        cut = max(0, len(text) - self.caps.line_bytes)
        return KernelLine(t, _text(text[:self.caps.line_bytes], cut), *header, note=Note.CUT if cut else None)

    def _fragment(self, body: bytes, t: float, header: tuple[int, int, int], offset: int,
                  total: int) -> list[KernelLine]:
        caps, seq = self.caps, header[1]
        pending = self._pending.get(seq)
        if (total > caps.message_bytes or offset >= total or offset + len(body) > total
                or (pending is not None and (pending.total, pending.header) != (total, header))
                or (pending is not None and offset not in pending.chunks
                    and len(pending.chunks) >= caps.chunks_per_message)):
            self.refused += 1
            return []
        if pending is None:
            pending = self._pending[seq] = _Pending(total, header, t)
        if offset in pending.chunks:  # a repeat adds nothing
            return []
        self._make_room(len(body), keep=seq)
        pending.chunks[offset] = body
        pending.held += len(body)
        self._pending_held += len(body)
        data = pending.complete()
        if data is None:
            return []
        self._forget(seq)
        return self._in_order(self._extended_line(data, pending.t, header), seq)

    def _make_room(self, size: int, keep: int) -> None:
        """The oldest unfinished messages go (a lost chunk must not keep memory forever)."""
        for seq in list(self._pending):
            if (self._pending_held + size <= self.caps.pending_bytes
                    and len(self._pending) <= self.caps.pending_messages):
                return
            if seq != keep:
                self._forget(seq)

    def _forget(self, seq: int) -> None:
        self._pending_held -= self._pending.pop(seq).held

    def _in_order(self, line: KernelLine, seq: int) -> list[KernelLine]:
        """The line, after a note of the messages its sequence number says never arrived (those
        still being put together excepted). An older number is filed as it is (late, or a new
        boot's kernel that was not announced: it counts again from there once past the last)."""
        last = self._last_seq
        if last is not None and seq <= last:
            return [line]
        self._last_seq = seq
        if last is None or seq == last + 1:
            return [line]
        lost = seq - last - 1 - sum(1 for waiting in self._pending if last < waiting < seq)
        if lost <= 0:
            return [line]
        words = "1 line lost" if lost == 1 else f"{lost} lines lost"
        return [KernelLine(line.t, f"[... {words} ...]", note=Note.GAP), line]


def _text(raw: bytes, cut: int = 0) -> str:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    return f"{text} [... {cut} bytes cut ...]" if cut else text
