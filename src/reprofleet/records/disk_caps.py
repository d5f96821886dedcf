"""How much of the controller's disk what hosts send may take: each attempt's stream file, each
host's netconsole file, and all of them together in one campaign folder.

Its own module because it is a policy with numbers that three writers share (the stream
writer, the netconsole receiver, the campaign that builds both). A host chooses how much it
prints: a PoC printing ``yes x`` made a 72 MB stream from 2 MB of output, and anything that
can send UDP from a host's address could fill the folder with netconsole lines. Records,
amendments, events and the power log are never counted here and never refused: they are
the campaign's own, bounded by ``records.store.bounded``, and a campaign without them has
nothing to report.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

MIB = 1 << 20


@dataclass(frozen=True)
class DiskCaps:
    """The caps, in bytes and lines; the defaults keep a long campaign of a few dozen hosts
    within a few GiB and every freeze's last minutes of telemetry (10 Hz NVML samples are
    ~300 bytes a line: 12 MiB of tail hold more than ten minutes of them)."""

    stream_bytes: int = 32 * MIB  # one attempt's stream file: its head, a cut marker, its tail
    netconsole_bytes: int = 16 * MIB  # one host's netconsole/<host>.jsonl
    netconsole_lines: int = 100_000  # ... and its lines (a panic of a big box is a few thousand)
    campaign_bytes: int = 4096 * MIB  # every stream and netconsole file of one campaign folder

    @property
    def stream_head_bytes(self) -> int:
        """What a stream keeps from its start (the PoC's start, its settings, its first phases)."""
        return self.stream_bytes // 4

    @property
    def stream_tail_bytes(self) -> int:
        """What a stream always keeps of its latest lines, however long the attempt runs: the
        seconds before a freeze are what a wedge's report is drawn from."""
        return (self.stream_bytes - self.stream_head_bytes) // 2

    def check(self) -> "DiskCaps":
        """These caps, or ValueError naming the one that cannot work."""
        if self.stream_bytes < 64 * 1024:
            raise ValueError(f"stream_cap_mb: {self.stream_bytes} bytes is too small for a stream's head and tail "
                             "(at least 64 KiB)")
        for name, value in (("netconsole_cap_mb", self.netconsole_bytes), ("netconsole_cap_lines", self.netconsole_lines),
                            ("campaign_cap_mb", self.campaign_bytes)):
            if value <= 0:
                raise ValueError(f"{name}: {value} is not a positive cap")
        return self


@dataclass(frozen=True)
class Refused:
    """Lines the campaign's cap kept off the disk (counted, never filed)."""

    lines: int
    size: int


class CampaignDiskBudget:
    """Bytes the campaign's streams and netconsole files hold, against ``campaign_bytes``;
    thread-safe (every host's stream writer and the netconsole receiver share one).

    A writer asks before it files a line (:meth:`take`) and gives bytes back when it cuts a
    file shorter (:meth:`give_back`). Once the cap is reached, lines are counted, not filed.
    """

    def __init__(self, cap_bytes: int, used_bytes: int = 0) -> None:
        self.cap_bytes = cap_bytes
        self._used = used_bytes
        self._refused = (0, 0)
        self._lock = threading.Lock()

    @classmethod
    def of_folders(cls, cap_bytes: int, folders: Iterable[Path]) -> "CampaignDiskBudget":
        """A budget that starts from what ``folders`` hold already (a resumed campaign)."""
        return cls(cap_bytes, sum(_size_of(folder) for folder in folders))

    def take(self, size: int) -> bool:
        """Whether a line of ``size`` bytes may be filed (and, if so, counted as filed)."""
        with self._lock:
            if self._used + size > self.cap_bytes:
                lines, total = self._refused
                self._refused = (lines + 1, total + size)
                return False
            self._used += size
            return True

    def give_back(self, size: int) -> None:
        """Bytes a writer removed from its file (a stream cut to its head and tail)."""
        with self._lock:
            self._used = max(0, self._used - size)

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return self._used

    @property
    def refused(self) -> Refused:
        with self._lock:
            return Refused(*self._refused)


def _size_of(folder: Path) -> int:
    """Bytes of the plain files directly in ``folder`` (0 when it does not exist)."""
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total
