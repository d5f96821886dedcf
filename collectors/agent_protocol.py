"""What every agent subcommand shares: JSON lines on stdout, exit statuses, errors.

The controller reads stdout as JSON lines and nothing else, so everything that goes there
passes through `emit`, which flushes after every line: a line that sits in a buffer when
the host freezes is a line the controller never sees. Diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from enum import IntEnum, unique
from typing import Any, Callable, Dict, Optional


@unique
class ExitStatus(IntEnum):
    """Exit statuses of the agent (collectors/PROTOCOL.md)."""

    OK = 0
    FAILED = 1  # the requested action failed on the host; stdout has the details
    USAGE = 2  # usage or protocol error; stdout has {"k":"error",...}


class AgentFailure(Exception):
    """Root of the errors the agent raises on purpose; each maps to one exit status."""

    status = ExitStatus.FAILED


class UsageError(AgentFailure):
    """Bad arguments, unknown attempt id, an id that already exists."""

    status = ExitStatus.USAGE


def dumps(event: Dict[str, Any]) -> str:
    """One compact JSON line (no newline); non-ASCII kept as UTF-8."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)


def event(kind: str, **fields: Any) -> Dict[str, Any]:
    """A stream line: ``t`` (host clock) and ``k`` first, then the fields."""
    line: Dict[str, Any] = {"t": round(time.time(), 6), "k": kind}
    line.update(fields)
    return line


class StdoutClosed(Exception):
    """The reader of our stdout went away (the SSH session dropped)."""


def emit_raw(line: bytes) -> None:
    """Write one already-encoded JSON line (without newline) to stdout and flush it."""
    out = sys.stdout.buffer
    try:
        out.write(line + b"\n")
        out.flush()
    except (BrokenPipeError, ConnectionResetError, ValueError, OSError) as exc:
        raise StdoutClosed(str(exc)) from None


_own_lines_signer: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None


def sign_own_lines(signer: Callable[[Dict[str, Any]], Dict[str, Any]]) -> None:
    """From now on every line this process writes itself (a synthesized ``lost`` exit, an
    error) carries the attempt's MAC (attempt_mac.py); lines copied from events.jsonl go out
    through ``emit_raw`` as they are."""
    global _own_lines_signer
    _own_lines_signer = signer


def emit(line: Dict[str, Any]) -> None:
    """Write one JSON line to stdout and flush it."""
    if _own_lines_signer is not None:
        line = _own_lines_signer(line)
    emit_raw(dumps(line).encode("utf-8"))


def warn(message: str) -> None:
    """A human-readable diagnostic on stderr (never parsed by the controller)."""
    try:
        sys.stderr.write("agent: %s\n" % message)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def quiet_exit_on_closed_stdout() -> None:
    """Point stdout at /dev/null so that interpreter shutdown does not fail flushing it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError:
        pass
