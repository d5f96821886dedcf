"""What one source address may send the netconsole receiver: datagrams and bytes per second.

Its own module because it is a policy with numbers, apart from the parsing and the sockets:
a host's kernel prints a burst at a lockup or a panic (a few thousand lines from a big box)
and little otherwise, while anything on the hosts' network that sends UDP from a host's
address could otherwise make the receiver parse and file without end. Each source gets two
token buckets for what it sends (datagrams and bytes) and two for what it makes us file
(lines and their bytes on disk: one datagram of newlines is thousands of lines), refilled at
a steady rate up to a burst. A datagram that finds a sending bucket empty is not parsed, a
line that finds a filing bucket empty is not filed; both are counted, and the receiver files
one line a second at most saying how many it dropped (``[... dropped N datagrams (B bytes)
from 10.0.0.5 over budget ...]``, ``[... N lines (B bytes) not filed from 10.0.0.5 over
budget ...]``), so a wedge's record shows that lines are missing and why.
Pure: the receiver passes in every time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """One source's allowance; the defaults hold a panic's burst and cut a flood to a trickle."""

    datagrams_per_s: float = 1000.0
    datagram_burst: float = 10000.0
    bytes_per_s: float = float(1 << 20)
    byte_burst: float = float(8 << 20)
    lines_per_s: float = 1000.0  # lines filed (a plain datagram of newlines is one line each)
    line_burst: float = 10000.0
    filed_bytes_per_s: float = float(256 << 10)  # ... and their bytes on the controller's disk
    filed_byte_burst: float = float(2 << 20)
    report_every_s: float = 1.0  # at most one drop note a second per source


@dataclass(frozen=True)
class Dropped:
    """Datagrams of one source not read since the last note."""

    source: str
    datagrams: int
    size: int
    lines: int = 0  # lines parsed but not filed (over the filing buckets)
    line_bytes: int = 0

    def words(self) -> str:
        parts = []
        if self.datagrams:
            many = "datagram" if self.datagrams == 1 else "datagrams"
            parts.append(f"dropped {self.datagrams} {many} ({self.size} bytes)")
        if self.lines:
            parts.append(f"{self.lines} {'line' if self.lines == 1 else 'lines'} ({self.line_bytes} bytes) not filed")
        return f"[... {' and '.join(parts)} from {self.source} over budget ...]"


class Allowance:
    """One source's two buckets and its drop counters."""

    def __init__(self, source: str, budget: Budget, now: float) -> None:
        self.source, self.budget = source, budget
        self._datagrams, self._bytes = budget.datagram_burst, budget.byte_burst
        self._lines, self._filed_bytes = budget.line_burst, budget.filed_byte_burst
        self._at = now
        self._unreported = (0, 0)
        self._unfiled = (0, 0)
        self._reported_at: float | None = None
        self.dropped = 0  # every datagram not read, since the receiver started
        self.unfiled = 0  # every line not filed, since the receiver started

    def _refill(self, now: float) -> None:
        budget, elapsed = self.budget, max(0.0, now - self._at)
        self._at = max(self._at, now)
        self._datagrams = min(budget.datagram_burst, self._datagrams + elapsed * budget.datagrams_per_s)
        self._bytes = min(budget.byte_burst, self._bytes + elapsed * budget.bytes_per_s)
        self._lines = min(budget.line_burst, self._lines + elapsed * budget.lines_per_s)
        self._filed_bytes = min(budget.filed_byte_burst, self._filed_bytes + elapsed * budget.filed_bytes_per_s)

    def file(self, size: int, now: float) -> bool:
        """Whether a line that takes ``size`` bytes on disk, parsed at ``now``, is filed."""
        self._refill(now)
        if self._lines >= 1.0 and self._filed_bytes >= size:
            self._lines -= 1.0
            self._filed_bytes -= size
            return True
        count, total = self._unfiled
        self._unfiled = (count + 1, total + size)
        self.unfiled += 1
        return False

    def room(self, now: float) -> int:
        """How many lines may be filed now (a datagram's parse stops there)."""
        self._refill(now)
        return int(self._lines)

    def skipped(self, lines: int, size: int) -> None:
        """Lines a datagram held past :meth:`room`, never parsed: counted as not filed."""
        count, total = self._unfiled
        self._unfiled = (count + lines, total + size)
        self.unfiled += lines

    def admit(self, size: int, now: float) -> bool:
        """Whether a datagram of ``size`` bytes arriving at ``now`` is read."""
        self._refill(now)
        if self._datagrams >= 1.0 and self._bytes >= size:
            self._datagrams -= 1.0
            self._bytes -= size
            return True
        count, total = self._unreported
        self._unreported = (count + 1, total + size)
        self.dropped += 1
        return False

    def due(self, now: float) -> Dropped | None:
        """The drops to note now: some since the last note, and that note a while ago."""
        (count, total), unfiled = self._unreported, self._unfiled
        if not (count or unfiled[0]) or (self._reported_at is not None
                                          and now - self._reported_at < self.budget.report_every_s):
            return None
        self._unreported, self._unfiled, self._reported_at = (0, 0), (0, 0), now
        return Dropped(self.source, count, total, *unfiled)
