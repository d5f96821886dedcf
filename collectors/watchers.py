"""What watches an attempt besides the PoC's own output: vLLM phases and telemetry.

The supervisor calls these hooks. Each watcher guards itself, because a failing
collector (NVML, kmsg) must never stop the attempt, only say so once with a `notice`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from event_log import EventLog
from kernel_log import KMSG, KernelLogReader, tags_of, xid_of
from nvml_sampler import Notices, NvmlSampler
from telemetry_summary import summarize
from vllm_phases import PhaseTracker


class Watchers:
    def __init__(self, log: EventLog, meta: Dict[str, Any]) -> None:
        self.log = log
        self.meta = meta
        self.notices = Notices(log.append)
        self.phases = PhaseTracker()
        self._phase_failed = False
        self.hz = float(meta.get("sample_hz", 10.0))
        self.sampler = NvmlSampler(int(meta.get("gpu", 0)), self.hz, log.append, self.notices)
        kmsg_path = meta.get("kmsg_path", KMSG)
        self.kernel_log: Optional[KernelLogReader] = (
            KernelLogReader(self._on_kernel_message, self._notice, kmsg_path) if kmsg_path else None)
        self.kernel_xids: List[int] = []

    def start(self) -> None:
        """Start the samplers before the PoC, so the stream has a baseline."""
        self.sampler.start()
        if self.kernel_log is not None:
            self.kernel_log.start()

    def on_log_line(self, text: str) -> None:
        """Every PoC line, in order: a `phase` line follows the line that entered it."""
        if self._phase_failed:
            return
        try:
            phase = self.phases.feed(text)
        except Exception as exc:  # a parser bug must not cost the attempt
            self._phase_failed = True
            self._notice("phases", "phase tracking stopped: %r" % exc)
            return
        if phase is not None and self.phases.note:
            self.log.append("phase", phase=phase, line=text, note=self.phases.note)
        elif phase is not None:
            self.log.append("phase", phase=phase, line=text)

    def _on_kernel_message(self, message: str) -> None:
        self.log.append("kmsg", line=message, tags=tags_of(message))
        xid = xid_of(message)
        if xid is not None:
            self.kernel_xids.append(xid)

    def _notice(self, what: str, detail: str) -> None:
        self.notices.once(what + ":" + detail, what, detail)

    def stop(self) -> Optional[Dict[str, Any]]:
        """Stop the collectors (bounded waits); the telemetry summary for the exit line."""
        self.sampler.stop()
        if self.kernel_log is not None:
            self.kernel_log.stop()
        interval = 1.0 / self.hz if self.hz > 0 else 0.1
        return summarize(self.sampler.samples, self.sampler.xids + self.kernel_xids,
                         float(self.meta.get("clock_threshold_mhz", 2800.0)), interval)
