"""What one source address may send the netconsole receiver: datagrams and bytes per second.

Its own module because it is a policy with numbers, apart from the parsing and the sockets:
a host's kernel prints a burst at a lockup or a panic (a few thousand lines from a big box)
and little otherwise, while anything on the hosts' network that sends UDP from a host's
address could otherwise make the receiver parse and file without end. Each source gets two
token buckets (datagrams and bytes), refilled at a steady rate up to a burst; a datagram
that finds either empty is not parsed, only counted, and the receiver files one line a
second at most saying how many it dropped (``[... dropped N datagrams (B bytes) from
10.0.0.5 over budget ...]``), so a wedge's record shows that lines are missing and why.
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
    report_every_s: float = 1.0  # at most one drop note a second per source


@dataclass(frozen=True)
class Dropped:
    """Datagrams of one source not read since the last note."""

    source: str
    datagrams: int
    size: int

    def words(self) -> str:
        many = "datagram" if self.datagrams == 1 else "datagrams"
        return f"[... dropped {self.datagrams} {many} ({self.size} bytes) from {self.source} over budget ...]"


class Allowance:
    """One source's two buckets and its drop counters."""

    def __init__(self, source: str, budget: Budget, now: float) -> None:
        self.source, self.budget = source, budget
        self._datagrams, self._bytes = budget.datagram_burst, budget.byte_burst
        self._at = now
        self._unreported = (0, 0)
        self._reported_at: float | None = None
        self.dropped = 0  # every datagram not read, since the receiver started

    def admit(self, size: int, now: float) -> bool:
        """Whether a datagram of ``size`` bytes arriving at ``now`` is read."""
        budget, elapsed = self.budget, max(0.0, now - self._at)
        self._at = max(self._at, now)
        self._datagrams = min(budget.datagram_burst, self._datagrams + elapsed * budget.datagrams_per_s)
        self._bytes = min(budget.byte_burst, self._bytes + elapsed * budget.bytes_per_s)
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
        count, total = self._unreported
        if not count or (self._reported_at is not None and now - self._reported_at < self.budget.report_every_s):
            return None
        self._unreported, self._reported_at = (0, 0), now
        return Dropped(self.source, count, total)
