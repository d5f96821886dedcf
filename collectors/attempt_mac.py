"""Authenticating an attempt's lines: what the supervisor wrote, and nothing a PoC wrote.

The PoC runs under the agent's own uid, so it can open events.jsonl and exit.json by path
and append or replace what it likes (one line appended there once made a controller record
``clean, exit 0`` for an attempt that exited 3). So every line the supervisor writes, and
every line ``run``/``attach`` make up themselves (a ``lost`` exit, an error), carries
``mac``: HMAC-SHA256 over the line's canonical JSON under a per-attempt key. The controller
generates the key, sends it on the agent's stdin (never argv, env or a file), keeps it in
its own campaign folder, and ignores (and counts) a line whose MAC fails.

The key lives in the memory of the supervisor and of ``run``/``attach`` only, and those
processes make themselves non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): then another
process of the same uid can neither ptrace them nor read their /proc/<pid>/environ or mem.

Canonical JSON: the line without ``mac``, keys sorted, ``,``/``:`` separators, ASCII only
(``\\uXXXX`` escapes), so that both sides hash the same bytes whatever order or spacing the
line arrived in. Heartbeats carry no MAC: the streaming process writes them itself, not
from the file, and they only prove that the stream is alive, which every byte does.

Host-side module: standard library only.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import re
from typing import Any, Dict, Optional

MAC_FIELD = "mac"
KEY_HEX = re.compile(r"^[0-9a-f]{64}$")  # 32 random bytes, as hex
PR_SET_DUMPABLE = 4
UNSIGNED_KINDS = ("hb",)


def parse_key(text: str) -> bytes:
    """The key a ``--key-stdin`` line carries (64 lowercase hex digits); ValueError otherwise."""
    value = text.strip()
    if not KEY_HEX.match(value):
        raise ValueError("an attempt key is 64 lowercase hex digits")
    return bytes.fromhex(value)


def canonical(line: Dict[str, Any]) -> bytes:
    """The bytes a MAC covers: the line less ``mac``, sorted, compact, ASCII."""
    body = {k: v for k, v in line.items() if k != MAC_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def mac_of(key: bytes, line: Dict[str, Any]) -> str:
    return hmac.new(key, canonical(line), hashlib.sha256).hexdigest()


def sign(key: bytes, line: Dict[str, Any]) -> Dict[str, Any]:
    """``line`` as a reader will parse it (through JSON once, so a value ``default=str`` wrote
    is hashed as the string it became), with its ``mac`` last."""
    parsed = json.loads(json.dumps(line, default=str))
    parsed.pop(MAC_FIELD, None)
    parsed[MAC_FIELD] = mac_of(key, parsed)
    return parsed


def verify(key: bytes, line: Any) -> bool:
    """True when ``line`` (a parsed JSON object) carries the MAC of its own content."""
    if not isinstance(line, dict) or not isinstance(line.get(MAC_FIELD), str):
        return False
    try:
        expected = mac_of(key, line)
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, line[MAC_FIELD])


def protect_memory() -> bool:
    """Make this process non-dumpable, so that a process of the same uid (the PoC) cannot
    ptrace it or read its /proc/<pid>/environ and mem. Best effort: False where prctl is
    not available (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class Signer:
    """Signs the lines one process writes; with no key (an attempt started without one) it
    leaves them as they are."""

    def __init__(self, key: Optional[bytes]) -> None:
        self.key = key

    def __call__(self, line: Dict[str, Any]) -> Dict[str, Any]:
        if self.key is None or line.get("k") in UNSIGNED_KINDS:
            return line
        return sign(self.key, line)

    def authentic(self, line: Any) -> bool:
        """Whether ``line`` is one an authenticated writer wrote (always, without a key)."""
        return self.key is None or verify(self.key, line)
