"""The one event loop every SNMP driver of the process runs its pysnmp engines on.

Why a loop of its own, on a thread of its own: pysnmp 7's ``AsyncioDispatcher`` starts a
``handle_timeout`` task on its loop when a transport is registered, and that task runs until
``close_dispatcher`` cancels it; closing a UDP transport also ends only on the loop's next
turn. A driver that owned a loop could close it only from a thread where no other loop runs:
a driver collected by the garbage collector inside another driver's ``run_until_complete``
(or inside any caller's loop) closed its loop with the cancelled task still pending, and
asyncio logged "Task was destroyed but it is pending!" and "unclosed transport" (20 in a
4-minute campaign; lextudio/pysnmp issues 58 and 178 are the same leak). Here the loop lives
for the process; an engine is closed *on* the loop (``close_dispatcher``, then its timer task
and the transports' ``connection_lost`` awaited), from whatever thread asks, without blocking
a thread that is collecting garbage; at exit the engines still open are closed, pending tasks
cancelled and awaited, and only then the loop is closed.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pysnmp.hlapi.v3arch.asyncio import SnmpEngine

T = TypeVar("T")

CLOSE_WAIT_S = 5.0  # an engine's close is a few loop turns; this only bounds a wedged loop


class _SnmpLoop:
    """A daemon thread running one asyncio loop, and the engines built on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.engines: set[SnmpEngine] = set()
        self.closing: set[asyncio.Task[None]] = set()  # asyncio holds tasks weakly: these are held here
        self.thread = threading.Thread(target=self._serve, name="reprofleet-snmp-loop", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def here(self) -> bool:
        return threading.current_thread() is self.thread

    def run(self, coro: Coroutine[Any, Any, T], wait_s: float) -> T:
        """Run ``coro`` on the loop and wait for it; past ``wait_s`` it is cancelled and TimeoutError raised."""
        if self.here():
            coro.close()
            raise RuntimeError("an SNMP request cannot wait on the loop that would answer it")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(wait_s)
        except TimeoutError:
            future.cancel()
            raise

    def new_engine(self) -> SnmpEngine:
        """An engine whose dispatcher belongs to this loop (pysnmp binds the running loop)."""
        async def build() -> SnmpEngine:
            engine = SnmpEngine()
            self.engines.add(engine)
            return engine
        return self.run(build(), CLOSE_WAIT_S)

    def close_engine(self, engine: SnmpEngine, *, wait: bool) -> None:
        """Close ``engine`` on the loop; wait for it unless the caller cannot block (the collector, the loop)."""
        if self.loop.is_closed() or engine not in self.engines:
            return
        self.engines.discard(engine)
        if wait and not self.here():
            self.run(_closed(engine), CLOSE_WAIT_S)
            return
        self.loop.call_soon_threadsafe(self._start_close, engine)

    def _start_close(self, engine: SnmpEngine) -> None:
        task = self.loop.create_task(_closed(engine))
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    def shut(self) -> None:
        """Close every engine left, cancel and await what is still pending, then close the loop."""
        if self.loop.is_closed() or not self.thread.is_alive() or self.pid != os.getpid():
            return
        try:
            self.run(self._drain(), CLOSE_WAIT_S)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(CLOSE_WAIT_S)
            if not self.thread.is_alive():
                self.loop.close()

    async def _drain(self) -> None:
        engines, self.engines = list(self.engines), set()
        for engine in engines:
            await _closed(engine)
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _closed(engine: SnmpEngine) -> None:
    """``close_dispatcher``, then the turns that let its timer task and its transports finish."""
    dispatcher = engine.transport_dispatcher
    timer = getattr(dispatcher, "loopingcall", None)
    engine.close_dispatcher()
    if isinstance(timer, asyncio.Future):
        await asyncio.gather(timer, return_exceptions=True)
    await asyncio.sleep(0)  # UDP transports call connection_lost on the next turn
    await asyncio.sleep(0)


_lock = threading.Lock()
_current: _SnmpLoop | None = None


def shared() -> _SnmpLoop:
    """The process's SNMP loop, started on first use (again in a forked child, whose thread is gone)."""
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid() or _current.loop.is_closed():
            _current = _SnmpLoop()
        return _current


@atexit.register
def _shut_at_exit() -> None:
    if _current is not None:
        _current.shut()
