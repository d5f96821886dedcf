"""Loading pynvml when the host has it, and reading values that may be unsupported.

Hosts differ: no pynvml, no driver, an old driver without a newer call, a field a
board does not report. Each of those becomes a reason string, never an exception that
escapes, so callers can say "unsupported" once and go on.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Tuple

_lock = threading.Lock()
_users = 0


def load() -> Tuple[Any, Optional[str]]:
    """``(pynvml, None)`` after a successful nvmlInit, else ``(None, reason)``.

    Every successful load must be paired with `release` (nvmlInit is reference-counted
    by the library; we count as well so threads can share it).
    """
    global _users
    pynvml, why = _binding()
    if pynvml is None:
        return None, why
    with _lock:
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return None, "nvmlInit failed: %s" % describe(exc)
        _users += 1
    return pynvml, None


def _binding() -> Tuple[Any, Optional[str]]:
    """The host's own pynvml when it has one (it matches the driver an admin installed, and a
    simulated host's is its GPU), else the copy of nvidia-ml-py the controller pushed beside
    this agent (``pynvml_bundled``): a host needs only the NVIDIA driver."""
    try:
        import pynvml
        return pynvml, None
    except ImportError as exc:
        host_missing = str(exc)
    try:
        import pynvml_bundled
        return pynvml_bundled, None
    except ImportError as exc:
        return None, "pynvml not importable (%s), and no bundled copy: %s" % (host_missing, exc)


def binding_name() -> Optional[str]:
    """Which binding ``load`` uses: ``host`` or ``bundled`` (None: neither imports)."""
    pynvml, _ = _binding()
    if pynvml is None:
        return None
    return "bundled" if getattr(pynvml, "__name__", "") == "pynvml_bundled" else "host"


def release(pynvml: Any) -> None:
    global _users
    with _lock:
        if pynvml is None or _users <= 0:
            return
        _users -= 1
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def describe(exc: BaseException) -> str:
    """An NVML error's text (pynvml's str() names the NVML error code)."""
    text = str(exc) or type(exc).__name__
    return "%s (%s)" % (text, type(exc).__name__) if type(exc).__name__ not in text else text


def text(value: Any) -> Optional[str]:
    """pynvml returns bytes in old releases and str in new ones."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def attempt(read: Callable[[], Any]) -> Tuple[Any, Optional[str]]:
    """``(value, None)`` or ``(None, reason)`` for one NVML read."""
    try:
        return read(), None
    except Exception as exc:
        return None, describe(exc)


def cuda_version_text(version: Optional[int]) -> Optional[str]:
    """12080 -> "12.8"; 13030 -> "13.3" (NVML encodes major*1000 + minor*10)."""
    if not isinstance(version, int) or version <= 0:
        return None
    return "%d.%d" % (version // 1000, (version % 1000) // 10)


def mw_to_w(value: Optional[int]) -> Optional[float]:
    return round(value / 1000.0, 3) if isinstance(value, (int, float)) else None
