"""What SIGINT, SIGTERM and SIGHUP do to a running campaign: ask for a clean stop, nothing more.

The stop is set before anything is printed: the terminal that sent SIGHUP is usually gone,
and a ``| tee`` may have closed, so the message can fail; the clean stop (attempts killed,
GPU defaults restored, the lease released) must not fail with it; a stop never cuts power
(recovery's gate refuses a power action once the stop is set). A second signal forces the way
out: campaign/left_off.py switches on, bounded, every outlet this controller left off first. SIGHUP stays ignored when it was ignored at start (``nohup``).
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

STOPPING = ("stopping — killing running attempts and restoring GPU defaults; no power is switched "
            "(again to force: outlets this controller left off are switched on first)")


def stop_handler(stop: threading.Event, say: Callable[[str], None]) -> Callable[[int, Any], None]:
    """The handler: the first signal sets ``stop`` then tries to say so; the second raises."""
    def _handle(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        try:
            say(f"{signal.Signals(signum).name}: {STOPPING}")
        except (OSError, ValueError):
            pass  # a dead terminal or a closed pipe: the stop is already set
    return _handle


def install_stop_handlers(stop: threading.Event, say: Callable[[str], None]) -> tuple[signal.Signals, ...]:
    """Route the stop signals to ``stop``; return the ones routed (SIGHUP is left alone under nohup)."""
    handler = stop_handler(stop, say)
    routed = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signum is signal.SIGHUP and signal.getsignal(signum) is signal.SIG_IGN:
            continue  # started under nohup: the operator asked for the campaign to outlive the terminal
        signal.signal(signum, handler)
        routed.append(signum)
    return tuple(routed)
