"""NVML telemetry during an attempt: a sampler thread and an Xid event thread.

Both write `nvml` lines through the attempt's event log. A missing NVML, a field this
board does not report, an event set that cannot be created: each is one `notice`, and
the attempt goes on without it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import nvml_access as nv
from telemetry_summary import reason_names

XID_WAIT_MS = 250  # nvmlEventSetWait timeout: how long stop() may wait for the Xid thread
MAX_KEPT_SAMPLES = 200000  # for the summary; ~5.5 h at 10 Hz
# The one field that costs most of a sample on an H200 (~175 of ~220 us, bench/RESULTS.md):
# ``slow_every`` N reads it on every Nth sample only (1, the default: on every sample).
SLOW_FIELDS = frozenset({"pcie_replay"})


class Notices:
    """Says each thing once (thread-safe)."""

    def __init__(self, append: Callable[..., Any]) -> None:
        self._append = append
        self._said: set = set()
        self._lock = threading.Lock()

    def once(self, key: str, what: str, detail: str) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        self._append("notice", what=what, detail=detail)


def _fields(pynvml: Any) -> List[Tuple[str, Callable[[Any], Any]]]:
    """(field, read(handle)) for every sampled field of PROTOCOL.md."""
    gfx, sm, mem = pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    # pynvml before 12.535 names it "throttle reasons"; old hosts have old pynvml.
    event_reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                     or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
    return [
        ("gfx_mhz", lambda h: pynvml.nvmlDeviceGetClockInfo(h, gfx)),
        ("sm_mhz", lambda h: pynvml.nvmlDeviceGetClockInfo(h, sm)),
        ("mem_mhz", lambda h: pynvml.nvmlDeviceGetClockInfo(h, mem)),
        ("power_w", lambda h: nv.mw_to_w(pynvml.nvmlDeviceGetPowerUsage(h))),
        ("power_limit_w", lambda h: nv.mw_to_w(pynvml.nvmlDeviceGetEnforcedPowerLimit(h))),
        ("temp_c", lambda h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
        ("pstate", lambda h: int(pynvml.nvmlDeviceGetPerformanceState(h))),
        ("event_reasons", lambda h: int(event_reasons(h))),
        ("pcie_gen", lambda h: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        ("pcie_width", lambda h: pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
        ("pcie_replay", lambda h: pynvml.nvmlDeviceGetPcieReplayCounter(h)),
        ("mem_used_bytes", lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).used),
        ("util_gpu", lambda h: pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
    ]


def _is_unsupported(pynvml: Any, exc: Exception) -> bool:
    cls = getattr(pynvml, "NVMLError_NotSupported", None)
    return (cls is not None and isinstance(exc, cls)) or "Not Supported" in str(exc)


class NvmlSampler:
    """Samples one GPU at `hz` until stopped; keeps the samples for the summary."""

    def __init__(self, gpu: int, hz: float, append: Callable[..., Any], notices: Notices,
                 slow_every: int = 1) -> None:
        self.gpu, self.hz = gpu, hz
        self.slow_every = max(1, int(slow_every))
        self._taken = 0
        self.append, self.notices = append, notices
        self.samples: List[Dict[str, Any]] = []
        self.xids: List[int] = []
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    def start(self) -> None:
        for name, target in (("nvml-sampler", self._sample_loop), ("nvml-xid", self._xid_loop)):
            thread = threading.Thread(target=self._guarded(name, target), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _guarded(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as exc:  # a collector's bug never stops the attempt
                self.notices.once(name, name, "stopped: %s" % nv.describe(exc))
        return run

    def _sample_loop(self) -> None:
        if self.hz <= 0:
            return
        pynvml, handle = self._open("nvml")
        if pynvml is None:
            return
        try:
            fields = _fields(pynvml)
            interval = 1.0 / self.hz
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._take_sample(pynvml, handle, fields)
                next_at += interval
                self._stop.wait(max(0.0, next_at - time.monotonic()))
                next_at = max(next_at, time.monotonic() - interval)  # never burst to catch up
        finally:
            nv.release(pynvml)

    def _open(self, key: str) -> Tuple[Any, Any]:
        pynvml, reason = nv.load()
        if pynvml is None:
            self.notices.once("nvml", "nvml", "no NVML telemetry: %s" % reason)
            return None, None
        try:
            return pynvml, pynvml.nvmlDeviceGetHandleByIndex(self.gpu)
        except Exception as exc:
            nv.release(pynvml)
            self.notices.once(key + "-handle", "nvml", "GPU %d has no NVML handle: %s" % (self.gpu, nv.describe(exc)))
            return None, None

    def _take_sample(self, pynvml: Any, handle: Any, fields: List[Tuple[str, Callable[[Any], Any]]]) -> None:
        sample: Dict[str, Any] = {"gpu": self.gpu}
        slow_now = self._taken % self.slow_every == 0
        self._taken += 1
        for name, read in list(fields):
            if name in SLOW_FIELDS and not slow_now:
                continue
            try:
                sample[name] = read(handle)
            except Exception as exc:
                if _is_unsupported(pynvml, exc):
                    fields.remove((name, read))  # announced once, never asked again
                self.notices.once("field:" + name, "nvml_field", "%s: %s" % (name, nv.describe(exc)))
        if "event_reasons" in sample:
            sample["event_reason_names"] = reason_names(sample["event_reasons"])
        line = self.append("nvml", **sample)
        if len(self.samples) < MAX_KEPT_SAMPLES:
            self.samples.append(line)

    def _xid_loop(self) -> None:
        pynvml, handle = self._open("xid")
        if pynvml is None:
            return
        event_set = None
        try:
            event_set = pynvml.nvmlEventSetCreate()
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
            wait = getattr(pynvml, "nvmlEventSetWait_v2", None) or pynvml.nvmlEventSetWait
            while not self._stop.is_set():
                self._wait_for_xid(pynvml, wait, event_set)
        except Exception as exc:
            self.notices.once("xid", "nvml_xid", "no Xid events: %s" % nv.describe(exc))
        finally:
            if event_set is not None:
                try:
                    pynvml.nvmlEventSetFree(event_set)
                except Exception:
                    pass
            nv.release(pynvml)

    def _wait_for_xid(self, pynvml: Any, wait: Callable[..., Any], event_set: Any) -> None:
        try:
            data = wait(event_set, XID_WAIT_MS)
        except Exception as exc:
            timeout_cls = getattr(pynvml, "NVMLError_Timeout", None)
            if timeout_cls is not None and isinstance(exc, timeout_cls):
                return
            raise
        xid = int(data.eventData)
        self.xids.append(xid)
        self.append("nvml", gpu=self.gpu, xid=xid)
