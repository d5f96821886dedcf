"""Every byte a host sends is read with a bound and parsed here, in one place.

A test host runs arbitrary PoC, pip and docker code, so what comes back over SSH is
untrusted (DESIGN.md): a line that never ends, a reply of a gigabyte, bytes that are not
UTF-8, JSON nested ten thousand deep, an integer of a million digits. Read
without a bound, any of them costs the controller its memory; parsed with ``json.loads``
as is, they leave as ``MemoryError``, ``RecursionError`` or ``ValueError`` three modules
later. Here every read has a size bound and every parse maps every failure to one
:class:`HostBytesError` (an :class:`~reprofleet.errors.AgentError`, so it names the host
and every caller that handles a broken protocol already handles it).

The bounds are far above what the agent sends (its longest line, a ``facts`` reply, is a
few KiB; ``cache send``'s manifest line grows with the files it names) and far below what
hurts a controller that runs 32 hosts at once.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Protocol

from reprofleet.errors import AgentError

MAX_LINE_BYTES = 1 << 20  # one JSON line from the agent
MAX_MANIFEST_BYTES = 32 << 20  # ``cache send``'s first line: one entry per file of a harvested cache
MAX_REPLY_BYTES = 16 << 20  # a command's whole stdout (or stderr), read to its end
MAX_DEPTH = 32  # nesting of objects and lists in one reply (the agent's deepest is 4)
MAX_INT_DIGITS = 40  # an integer the agent sends: byte counts, nanoseconds, PIDs (a u128 has 39 digits)
_READ_CHUNK = 1 << 16


class HostBytesError(AgentError):
    """A host sent bytes the controller will not read: too long, not UTF-8, not JSON, too deep."""


class Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


def read_line(host: str, stream: BinaryIO, what: str, limit: int = MAX_LINE_BYTES) -> bytes:
    """One line (with its ``\\n``, or what came before EOF) of at most ``limit`` bytes; a
    longer one is refused after reading ``limit + 1`` bytes, never more."""
    line = stream.readline(limit + 1)
    if len(line) > limit:
        raise HostBytesError(host, f"{what}: a line longer than {limit} bytes")
    return bytes(line)


def read_to_eof(host: str, stream: Readable, what: str, limit: int = MAX_REPLY_BYTES) -> bytes:
    """Everything up to EOF, at most ``limit`` bytes; more is refused once the bound is passed."""
    out = bytearray()
    while True:
        chunk = stream.read(min(_READ_CHUNK, limit + 1 - len(out)))
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > limit:
            raise HostBytesError(host, f"{what}: more than {limit} bytes")


def decode(host: str, raw: bytes | str, what: str, limit: int = MAX_LINE_BYTES) -> str:
    """``raw`` as text: strict UTF-8, at most ``limit`` bytes, no NUL."""
    if isinstance(raw, (bytes, bytearray)):
        if len(raw) > limit:
            raise HostBytesError(host, f"{what}: a line longer than {limit} bytes")
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HostBytesError(host, f"{what}: not UTF-8 at byte {exc.start}: {bytes(raw)[:80]!r}") from None
    else:
        if len(raw) > limit:  # a character is at least one byte
            raise HostBytesError(host, f"{what}: a line longer than {limit} bytes")
        text = raw
    if "\x00" in text:
        raise HostBytesError(host, f"{what}: a NUL byte at {text.index(chr(0))}: {text[:80]!r}")
    return text


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(digits)


def _check_depth(host: str, value: Any, what: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, walking with a list (never the C stack)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise HostBytesError(host, f"{what}: nested deeper than {MAX_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def parse_json(host: str, raw: bytes | str, what: str, limit: int = MAX_LINE_BYTES) -> Any:
    """One JSON value from a host, or HostBytesError naming the host and what it was."""
    text = decode(host, raw, what, limit)
    try:
        value = json.loads(text, parse_int=_bounded_int)  # NaN stays readable: the agent's json.dumps may write it
    except RecursionError:
        raise HostBytesError(host, f"{what}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise HostBytesError(host, f"{what}: not JSON ({exc}): {text[:200]!r}") from None
    _check_depth(host, value, what)
    return value


def parse_object(host: str, raw: bytes | str, what: str, limit: int = MAX_LINE_BYTES) -> dict[str, Any]:
    """One JSON object (the agent's every line is one)."""
    value = parse_json(host, raw, what, limit)
    if not isinstance(value, dict):
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
        raise HostBytesError(host, f"{what}: a line is not a JSON object: {text[:200]!r}")
    return value


def json_lines(host: str, out: bytes | str, what: str, limit: int = MAX_REPLY_BYTES) -> list[dict[str, Any]]:
    """A command's whole stdout as JSON objects, one a line (blank lines skipped)."""
    if len(out) > limit:
        raise HostBytesError(host, f"{what}: more than {limit} bytes")
    text = decode(host, out, what, limit)
    return [parse_object(host, line, what) for line in text.splitlines() if line.strip()]


class LineBuffer:
    """Bytes as they arrive (``feed``), handed back as complete lines (``pop_line``), with a
    bound on the partial line it holds: a host that never sends ``\\n`` is refused, not kept."""

    def __init__(self, host: str, what: str, limit: int = MAX_LINE_BYTES) -> None:
        self._host, self._what, self._limit = host, what, limit
        self._data = bytearray()

    def __len__(self) -> int:
        return len(self._data)

    def has_line(self) -> bool:
        return b"\n" in self._data

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._limit and self._data.find(b"\n", 0, self._limit + 1) < 0:
            raise HostBytesError(self._host, f"{self._what}: a line longer than {self._limit} bytes")

    def pop_line(self) -> str | None:
        """The next complete line as text (without its ``\\n``), or None when none is whole."""
        end = self._data.find(b"\n")
        if end < 0:
            return None
        raw = bytes(self._data[:end])
        del self._data[:end + 1]
        return decode(self._host, raw, self._what, self._limit)

    def pop_rest(self) -> str | None:
        """What is left after EOF (a last line without ``\\n``), or None when nothing is."""
        if not self._data:
            return None
        raw = bytes(self._data)
        self._data.clear()
        return decode(self._host, raw, self._what, self._limit)
