"""What watches an attempt besides the PoC's own output: phases now, telemetry later.

The supervisor calls these hooks; each watcher guards itself, because a failing
collector (NVML, kmsg) must never stop the attempt, only say so once with a `notice`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from event_log import EventLog


class Watchers:
    def __init__(self, log: EventLog, meta: Dict[str, Any]) -> None:
        self.log = log
        self.meta = meta

    def start(self) -> None:
        """Start the samplers before the PoC, so the stream has a baseline."""

    def on_log_line(self, text: str) -> None:
        """Every PoC line, in order (the phase tracker reads them)."""

    def stop(self) -> Optional[Dict[str, Any]]:
        """Stop the samplers; the telemetry summary for the exit line."""
        return None
