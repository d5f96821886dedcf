"""The state behind a simulated smart plug: outlets, credentials, flip-back timers, faults.

Outlet state lives only in the switch files (so a host powered off by anything else reads
as off here too). Faults are read from a small JSON file on every request, so a test can
change them while the server runs: ``ok``, ``error`` (HTTP 500), ``hang`` (accept, never
answer), ``ignore_sets`` (answer as if switched, switch nothing), ``mute_while_off``
(Tasmota: a read of an outlet that is off gets HTTP 500, as a plug whose reply to "off"
was lost would look: the off took effect, its read-back fails).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .meter import wall_watts
from .switch import read_switch, write_switch

FAULTS = ("ok", "error", "hang", "ignore_sets", "mute_while_off")
HANG_LIMIT_S = 600.0  # a hung request is still bounded: the server gives up after this


@dataclass
class Reply:
    """One HTTP answer."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_reply(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(data).encode(), "application/json", dict(headers or {}))


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, text.encode(), "text/plain")


@dataclass
class FlipBack:
    started_at: float
    duration_s: float
    timer: threading.Timer


class PlugDevice:
    """Outlets mapped to switch files, plus what a plug remembers between requests."""

    def __init__(self, outlets: Mapping[str, Path], user: str | None, password: str | None,
                 faults_path: Path, device_id: str, *, legacy_auth: bool = False) -> None:
        self.outlets = dict(outlets)
        self.legacy_auth = legacy_auth  # Tasmota: an old firmware that reads credentials from the query only
        self.user = user
        self.password = password
        self.faults_path = faults_path
        self.device_id = device_id
        self.lock = threading.Lock()
        self.flip_backs: dict[str, FlipBack] = {}

    def fault(self) -> str:
        try:
            mode = json.loads(self.faults_path.read_text()).get("mode", "ok")
        except (OSError, ValueError, AttributeError):
            return "ok"
        return mode if mode in FAULTS else "ok"

    def hang(self) -> None:
        """Hold the request while the fault says hang (bounded)."""
        deadline = time.monotonic() + HANG_LIMIT_S
        while self.fault() == "hang" and time.monotonic() < deadline:
            time.sleep(0.1)

    def is_on(self, outlet: str) -> bool:
        return read_switch(self.outlets[outlet])

    def watts(self, outlet: str) -> float:
        """What the plug's meter reads: the host behind it, as ``meter.wall_watts`` models it."""
        return wall_watts(self.outlets[outlet])

    def switch(self, outlet: str, on: bool, flip_back_s: float | None = None) -> bool:
        """Switch ``outlet``; a new command cancels a pending flip-back. Returns was_on."""
        with self.lock:
            was_on = self.is_on(outlet)
            pending = self.flip_backs.pop(outlet, None)
            if pending:
                pending.timer.cancel()
            if self.fault() == "ignore_sets":
                return was_on
            write_switch(self.outlets[outlet], on)
            if flip_back_s:
                timer = threading.Timer(flip_back_s, self._flip_back, args=(outlet, not on))
                timer.daemon = True
                self.flip_backs[outlet] = FlipBack(time.time(), flip_back_s, timer)
                timer.start()
            return was_on

    def _flip_back(self, outlet: str, on: bool) -> None:
        with self.lock:
            self.flip_backs.pop(outlet, None)
            write_switch(self.outlets[outlet], on)

    def flip_back_of(self, outlet: str) -> FlipBack | None:
        with self.lock:
            return self.flip_backs.get(outlet)
