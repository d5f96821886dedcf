"""Turning a PoC's raw output bytes into log lines (pure: no I/O, the clock is passed in).

Progress bars matter here more than anywhere: tqdm writes into a pipe as ``\\r<bar>``
with no newline until the bar closes, and the seed's host froze *during* CUDA-graph
capture, i.e. while its tqdm bar was open. So ``\\r`` ends a line too, and a fragment
that has waited `idle_s` without a terminator is emitted as a partial line: the last
thing a PoC printed before the host froze must reach the stream.
"""

from __future__ import annotations

import re
from typing import List, Tuple

_TERMINATOR = re.compile(b"(\r|\n)")
# CSI (colours, cursor moves; ESC [ or the C1 byte), OSC (titles, hyperlinks) up to BEL or ST,
# DCS/SOS/PM/APC strings up to ST, and the two-byte escapes (ESC c resets a terminal).
_ANSI = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
# What is left of a control once the sequences are gone: C0 but tab, DEL, C1 (a lone ESC too).
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def strip_ansi(text: str) -> str:
    """``text`` without escape sequences or control characters (tabs kept). Sequences are removed
    until none is left: one pass over ``\\x1b\\x1b[0m[2J`` leaves ``\\x1b[2J``."""
    while True:
        stripped = _ANSI.sub("", text)
        if stripped == text:
            return _CONTROL.sub("", text)
        text = stripped


def decode_line(raw: bytes) -> str:
    """Bytes of one line to text: invalid UTF-8 replaced, escape sequences and controls removed."""
    return strip_ansi(raw.decode("utf-8", "replace"))


def complete_utf8(raw: bytes) -> int:
    """The length of ``raw`` without a trailing UTF-8 sequence that is still incomplete."""
    for back in range(1, min(4, len(raw)) + 1):
        lead = raw[-back]
        if lead & 0xC0 == 0x80:  # a continuation byte: look further back for its lead
            continue
        need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
        return len(raw) - back if need > back else len(raw)
    return len(raw)


class LineSplitter:
    """Incremental splitter on ``\\n``, ``\\r\\n`` and ``\\r``.

    `feed` returns ``(text, partial)`` pairs; ``partial`` is True only for fragments
    emitted by `flush_idle`. The empty piece between a ``\\r`` and the ``\\n`` that follows
    it is dropped, so ``\\r\\n`` is one terminator; a real empty line is kept.
    """

    def __init__(self, idle_s: float = 0.3, max_line: int = 65536) -> None:
        self._buf = b""
        self._since = 0.0
        self._spoken = False  # this line already ended by \r or emitted as a partial
        self._idle_s = idle_s
        self._max_line = max_line

    def feed(self, data: bytes, now: float) -> List[Tuple[str, bool]]:
        lines: List[Tuple[str, bool]] = []
        for piece in _TERMINATOR.split(data):
            if piece in (b"\r", b"\n"):
                if self._buf or (piece == b"\n" and not self._spoken):
                    lines.append((decode_line(self._buf), False))
                self._buf = b""
                self._spoken = piece == b"\r"
            elif piece:
                if not self._buf:
                    self._since = now
                self._buf += piece
                if len(self._buf) >= self._max_line:  # a runaway line: cut, never grow forever
                    lines.extend(self.flush())
        return lines

    def flush_idle(self, now: float) -> List[Tuple[str, bool]]:
        """The pending fragment, if it has waited `idle_s` for its terminator; a character
        whose bytes have not all arrived stays for the next read (docker's client relays a
        container's output in pieces that may end inside a character)."""
        if not self._buf or now - self._since < self._idle_s:
            return []
        cut = complete_utf8(self._buf)
        if cut == 0:
            return []
        self._buf, tail = self._buf[:cut], self._buf[cut:]
        lines = self.flush()
        self._buf = tail
        return lines

    def flush(self) -> List[Tuple[str, bool]]:
        """Whatever is pending (at end of output), as a partial line."""
        if not self._buf:
            return []
        text, self._buf = decode_line(self._buf), b""
        self._spoken = True
        return [(text, True)]
