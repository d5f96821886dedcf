"""events.jsonl: appended by the supervisor, followed by `run`/`attach`.

A line's ``seq`` is its index in the file, so "resume from N" is "skip N lines" and a gap
or a repeat is impossible by construction, provided the writer assigns seq and writes
under one lock and the reader only ever consumes complete lines.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable, Dict, List, Optional

from agent_protocol import dumps, event


Signer = Callable[[Dict[str, Any]], Dict[str, Any]]


class EventLog:
    """The supervisor's writer: assigns seq, appends one line per event, flushed at once;
    ``sign`` adds the attempt's MAC to each line (attempt_mac.Signer)."""

    def __init__(self, path: str, sign: Optional[Signer] = None) -> None:
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._next_seq = _count_lines(path)
        self._sign = sign

    def append(self, kind: str, **fields: Any) -> Dict[str, Any]:
        """Stamp, number, sign and store one event; returns what was stored."""
        with self._lock:
            line = event(kind, seq=self._next_seq, **fields)
            if self._sign is not None:
                line = self._sign(line)
            data = (dumps(line) + "\n").encode("utf-8")
            _write_all(self._fd, data)
            self._next_seq += 1
            return line

    @property
    def next_seq(self) -> int:
        with self._lock:
            return self._next_seq

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _count_lines(path: str) -> int:
    count = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            count += chunk.count(b"\n")
    return count


class EventTail:
    """Reads complete lines of a growing events.jsonl, each exactly once.

    A partial last line (the writer is mid-write) stays buffered until its newline
    arrives. `position` is the seq of the next line this reader will return.
    """

    def __init__(self, path: str, start_seq: int = 0) -> None:
        self._path = path
        self._offset = 0
        self._pending = b""
        self._skip = start_seq  # lines before --from are read and dropped
        self._lines_read = 0

    def read_new(self, max_bytes: int = 1 << 20) -> List[bytes]:
        """Complete lines appended since the last call (at most ~max_bytes read)."""
        try:
            with open(self._path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(max_bytes)
        except OSError:
            return []
        self._offset += len(data)
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        fresh: List[bytes] = []
        for line in lines:
            if self._skip > 0:
                self._skip -= 1
            else:
                fresh.append(line)
            self._lines_read += 1
        return fresh

    @property
    def position(self) -> int:
        """The seq of the next line a reader following this file will print."""
        return self._lines_read + self._skip


def parse_line(raw: bytes) -> Optional[Dict[str, Any]]:
    """A stored line as a dict, or None when it is not valid JSON."""
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
