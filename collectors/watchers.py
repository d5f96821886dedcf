"""What watches an attempt besides the PoC's own output: vLLM phases and telemetry.

The supervisor calls these hooks; each watcher guards itself, because a failing
collector (NVML, kmsg) must never stop the attempt, only say so once with a `notice`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from event_log import EventLog
from vllm_phases import PhaseTracker


class Watchers:
    def __init__(self, log: EventLog, meta: Dict[str, Any]) -> None:
        self.log = log
        self.meta = meta
        self.phases = PhaseTracker()
        self._phase_failed = False

    def start(self) -> None:
        """Start the samplers before the PoC, so the stream has a baseline."""

    def on_log_line(self, text: str) -> None:
        """Every PoC line, in order: a `phase` line follows the line that entered it."""
        if self._phase_failed:
            return
        try:
            phase = self.phases.feed(text)
        except Exception as exc:  # a parser bug must not cost the attempt
            self._phase_failed = True
            self.log.append("notice", what="phases", detail="phase tracking stopped: %r" % exc)
            return
        if phase is not None:
            self.log.append("phase", phase=phase, line=text)

    def stop(self) -> Optional[Dict[str, Any]]:
        """Stop the samplers; the telemetry summary for the exit line."""
        return None
