"""One attempt's stream file on the controller: written as lines arrive, bounded, read back a line
at a time.

A host chooses how much it prints, so the file has a cap (``DiskCaps.stream_bytes``). What it
keeps is what a report needs: the head (the PoC's start, its settings, its first phases) and,
above all, the tail, since a wedge's report is drawn from the seconds before the host froze
and an attempt that never ends must still have them on disk at every instant. So once the
head is full, lines are appended until the file reaches the cap; then it is rewritten (beside
itself, fsync'd, renamed over) as the head, one marker line, and the latest lines up to
``stream_tail_bytes``. The marker is a controller notice that readers understand::

    {"k": "notice", "by": "controller", "what": "stream_cut", "lines": N, "bytes": B, "t": ...}

(N lines of B bytes cut from the middle, all cuts of the attempt together). A line the
campaign's own cap refuses (records/disk_caps.py) is counted, and the count is written as one
``"what": "not_filed"`` notice when the stream closes.

Readers take the file through :func:`stream_lines`: one line at a time, each bounded, so a
report over a campaign of big streams needs memory for a line, not for a file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from reprofleet.records.private_files import append_fd, create_new_fd, fsync_folder
from reprofleet.records.disk_caps import CampaignDiskBudget, DiskCaps

CUT = "stream_cut"  # the marker's ``what``: lines cut from the middle to keep the file under its cap
NOT_FILED = "not_filed"  # ... lines the campaign's cap kept off the disk altogether
READ_LINE_BYTES = 1 << 20  # a reader skips a longer line (no writer of ours makes one)
_CHUNK = 1 << 20


def marker(what: str, lines: int, size: int, wall: float) -> dict[str, Any]:
    """The notice a stream carries where lines were cut (``CUT``) or not filed (``NOT_FILED``)."""
    why = ("cut from the middle of this stream to keep it under its cap (stream_cap_mb): its head and "
           "its last lines are kept" if what == CUT else
           "not filed: the campaign folder reached its cap for streams and netconsole (campaign_cap_mb)")
    return {"t": round(wall, 3), "k": "notice", "by": "controller", "what": what, "lines": lines, "bytes": size,
            "detail": f"{lines} lines ({size} bytes) {why}"}


def gap_of(line: dict[str, Any]) -> tuple[str, int, int] | None:
    """``(what, lines, bytes)`` when ``line`` is one of the markers above, else None."""
    if line.get("k") != "notice" or line.get("by") != "controller" or line.get("what") not in (CUT, NOT_FILED):
        return None
    lines, size = line.get("lines"), line.get("bytes")
    if not isinstance(lines, int) or not isinstance(size, int):
        return None
    return str(line["what"]), lines, size


def stream_lines(path: Path, max_line: int = READ_LINE_BYTES) -> Iterator[dict[str, Any]]:
    """Every JSON object line of a stream file, in order, one at a time; a torn line (the
    freeze itself), a line that is not an object and one over ``max_line`` bytes are skipped."""
    with open(path, "rb") as handle:
        while True:
            raw = handle.readline(max_line + 1)
            if not raw:
                return
            if len(raw) > max_line and not raw.endswith(b"\n"):
                _skip_rest_of_line(handle)
                continue
            try:
                entry = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def _skip_rest_of_line(handle: Any) -> None:
    while True:
        piece = handle.readline(_CHUNK)
        if not piece or piece.endswith(b"\n"):
            return


class StreamWriter:
    """One attempt's stream file: every line as received, flushed at once, fsync'd each second,
    kept under ``caps.stream_bytes`` (head, marker, tail) and within the campaign's ``budget``."""

    def __init__(self, path: Path, fresh: bool = False, caps: DiskCaps = DiskCaps(),
                 budget: CampaignDiskBudget | None = None, wall: Callable[[], float] = time.time) -> None:
        """``fresh``: start the file again (an attempt re-read from its first line on resume)."""
        self.path = Path(path)
        self.caps, self._budget, self._wall = caps, budget, wall
        self._temp = self.path.with_name(f".{self.path.name}.cut")
        self._temp.unlink(missing_ok=True)  # a rewrite a killed controller left half done
        if fresh and budget is not None and self.path.exists():
            budget.give_back(self.path.stat().st_size)
        fd = append_fd(self.path)  # never through a link planted in its place (private_files)
        if fresh:  # emptied once it is known to be ours (never O_TRUNC: that cuts before the checks)
            os.ftruncate(fd, 0)
        self._handle: Any = os.fdopen(fd, "ab")
        self._size = self._handle.tell()
        self._head_end: int | None = self._size if self._size >= caps.stream_head_bytes else None
        self._tail_start = self._size  # where the lines after the head (and its marker) begin
        self._tail_lines = 0
        self._last_start = self._size  # where the latest line begins
        self.cut = (0, 0)  # lines and bytes cut from the middle so far
        self.not_filed = (0, 0)  # lines and bytes the campaign's cap refused
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()  # the attempt's stream, its wall-power sampler and netconsole all write

    def write(self, raw_line: str) -> None:
        data = (raw_line.rstrip("\n") + "\n").encode("utf-8", "replace")
        with self._lock:
            if self._handle.closed:
                return  # a sampler's last tick after the attempt ended
            if self._budget is not None and not self._budget.take(len(data)):
                self.not_filed = (self.not_filed[0] + 1, self.not_filed[1] + len(data))
                return
            if self._head_end is None and self._size + len(data) > self.caps.stream_head_bytes:
                self._head_end = self._tail_start = self._size
            self._handle.write(data)
            self._handle.flush()
            self._last_start, self._size = self._size, self._size + len(data)
            if self._head_end is not None:
                self._tail_lines += 1
                if self._size > self.caps.stream_bytes:
                    self._cut_middle()
            if time.monotonic() - self._last_sync >= 1.0:
                os.fsync(self._handle.fileno())
                self._last_sync = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._handle.closed:
                return
            if self.not_filed[0]:  # one bounded line past the campaign's cap: the count of what it refused
                self._handle.write((json.dumps(marker(NOT_FILED, *self.not_filed, self._wall()), sort_keys=True)
                                    + "\n").encode())
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    # -- keeping the file under its cap ----------------------------------------------------
    def _cut_middle(self) -> None:
        """Rewrite the file as head + marker + its latest lines (lock held; bounded memory)."""
        head_end = self._head_end or 0
        keep_from = self._line_start(max(self._tail_start, self._size - self.caps.stream_tail_bytes))
        with open(self.path, "rb") as source, os.fdopen(create_new_fd(self._temp), "wb") as out:
            _copy(source, out, 0, head_end)
            kept_lines = _count_lines_after(source, keep_from)
            cut_lines, cut_bytes = self._tail_lines - kept_lines, keep_from - self._tail_start
            self.cut = (self.cut[0] + cut_lines, self.cut[1] + cut_bytes)
            line = (json.dumps(marker(CUT, *self.cut, self._wall()), sort_keys=True) + "\n").encode()
            out.write(line)
            _copy(source, out, keep_from, self._size)
            out.flush()
            os.fsync(out.fileno())
        os.replace(self._temp, self.path)
        fsync_folder(self.path.parent)
        self._handle.close()
        self._handle = os.fdopen(append_fd(self.path), "ab")
        size = head_end + len(line) + (self._size - keep_from)
        if self._budget is not None:
            self._budget.give_back(self._size - size)
        self._last_start += size - self._size
        self._size, self._tail_start, self._tail_lines = size, head_end + len(line), kept_lines

    def _line_start(self, offset: int) -> int:
        """The first line that starts at or after ``offset`` (the latest line when none does)."""
        if offset <= self._tail_start:
            return self._tail_start
        with open(self.path, "rb") as source:
            source.seek(offset - 1)
            at = offset - 1
            while at < self._last_start:
                chunk = source.read(min(_CHUNK, self._last_start - at))
                found = chunk.find(b"\n")
                if found >= 0:
                    return at + found + 1
                at += len(chunk)
        return self._last_start


def _copy(source: Any, out: Any, start: int, end: int) -> None:
    source.seek(start)
    left = end - start
    while left > 0:
        chunk = source.read(min(_CHUNK, left))
        if not chunk:
            return
        out.write(chunk)
        left -= len(chunk)


def _count_lines_after(source: Any, start: int) -> int:
    source.seek(start)
    return sum(chunk.count(b"\n") for chunk in iter(lambda: source.read(_CHUNK), b""))
