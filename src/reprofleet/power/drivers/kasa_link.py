"""python-kasa's protocols under a synchronous driver: one private event loop per driver, one
session kept between requests, python-kasa's exceptions turned into ours by their classes.

python-kasa is asyncio; the base driver calls ``_set``/``_read`` synchronously, one request at a
time under the device lock, from whichever thread acts. Each driver owns an event loop in a
thread of its own (started at its first request, stopped when the driver is collected: the
session's sockets are closed in the loop that opened them), and keeps python-kasa's protocol object between requests,
so a KLAP session (two handshake requests) is set up once, not before every read, and is set up
again by python-kasa when the device drops it. python-kasa's own retries are off
(``retry_count=0``): the base driver retries, with its backoff and its log line.

Errors are read by their classes, never their wording: ``AuthenticationError`` (the device
refused the TP-Link account: KLAP's handshake did not match) is definite; ``TimeoutError``,
python-kasa's retryable and connection errors, and any ``OSError`` beneath a library error (a
refused or reset connection) are transient; another ``DeviceError`` carries the device's error
code; anything else python-kasa raises is a definite error with its class named.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from kasa import AuthenticationError, Credentials, DeviceConfig, DeviceError, KasaException
from kasa import TimeoutError as KasaTimeoutError
from kasa.exceptions import _ConnectionError, _RetryableError  # the classes python-kasa itself retries on
from kasa.protocols import BaseProtocol, IotProtocol, SmartProtocol
from kasa.transports import KlapTransport, KlapTransportV2, XorTransport

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.power.base import TransientPowerError
from reprofleet.power.drivers.http import causes

XOR_PORT = 9999
KLAP_PORT = 80


@dataclass(frozen=True)
class KasaEndpoint:
    """Where and how to reach one TP-Link device."""

    host: str
    port: int | None  # None: the transport's own (9999 for XOR, 80 for KLAP)
    transport: str  # "xor" | "klap"
    family: str  # "iot" (Kasa's JSON) | "smart" (Tapo's)
    timeout_s: float


def translate(exc: BaseException, what: str, timeout_s: float) -> PowerError:
    """python-kasa's exception (or asyncio's timeout) -> ours, by class."""
    chain = list(causes(exc))
    if any(isinstance(error, AuthenticationError) for error in chain):
        return PowerError(f"{what}: the device refused the TP-Link account (KLAP handshake did not match: check the "
                          "e-mail and password of the account the plug was set up with, both case-sensitive)")
    if any(isinstance(error, (KasaTimeoutError, asyncio.TimeoutError)) for error in chain):
        return TransientPowerError(f"{what}: no answer within {timeout_s:g}s")
    if any(isinstance(error, (_RetryableError, _ConnectionError, ConnectionError)) for error in chain):
        return TransientPowerError(f"{what}: the device is unreachable or dropped the connection")
    if any(isinstance(error, OSError) for error in chain):
        return TransientPowerError(f"{what}: the device is unreachable ({type(exc).__name__})")
    device_error = next((error for error in chain if isinstance(error, DeviceError)), None)
    if device_error is not None:
        code = device_error.error_code.name if device_error.error_code else "no code"
        return PowerError(f"{what}: the device refused the request ({code})")
    if isinstance(exc, KasaException):
        return PowerError(f"{what}: python-kasa: {type(exc).__name__}")
    return PowerError(f"{what}: {type(exc).__name__}")


class KasaLink:
    """One device's python-kasa protocol, driven synchronously from any thread."""

    def __init__(self, endpoint: KasaEndpoint, user: str | None, password: Secret | None) -> None:
        self.endpoint = endpoint
        self._user = user
        self._password = password
        self._loop: asyncio.AbstractEventLoop | None = None  # started at the first request
        self._held: list[BaseProtocol] = []  # the protocol once made (a list: the finalizer closes what it holds)
        self._start_lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), daemon=True,
                                          name=f"kasa-{self.endpoint.host}")
                thread.start()
                self._loop = loop
                weakref.finalize(self, _close, loop, self._held)
            return self._loop

    def _protocol(self) -> BaseProtocol:
        if not self._held:
            self._held.append(self._make_protocol())
        return self._held[0]

    def _make_protocol(self) -> BaseProtocol:
        point = self.endpoint
        credentials = None
        if self._password is not None:
            credentials = Credentials(self._user or "", self._password.reveal())
        # python-kasa types the timeout as int but uses it as asyncio's and aiohttp's (floats): keep ours as given.
        config = DeviceConfig(host=point.host, port_override=point.port, credentials=credentials,
                              timeout=point.timeout_s)  # type: ignore[arg-type]
        if point.transport == "xor":
            return IotProtocol(transport=XorTransport(config=config))
        if point.family == "iot":
            return IotProtocol(transport=KlapTransport(config=config))
        return SmartProtocol(transport=KlapTransportV2(config=config))

    def query(self, request: dict[str, Any], what: str) -> dict[str, Any]:
        """One request and its answer; errors are ours (see ``translate``)."""
        # python-kasa bounds each step by the config's timeout; this bounds the whole (a KLAP set-up is 3 requests).
        limit_s = 3 * self.endpoint.timeout_s + 0.5
        future = asyncio.run_coroutine_threadsafe(self._ask(request, limit_s), self._running_loop())
        try:
            answer = future.result(limit_s + 5.0)  # the loop cancels at limit_s; this only guards a stuck loop
        except Exception as exc:  # noqa: BLE001 (every library error is translated by its class below)
            raise translate(exc, what, self.endpoint.timeout_s) from None
        if not isinstance(answer, dict):
            raise PowerError(f"{what}: unexpected answer type {type(answer).__name__}")
        return answer

    async def _ask(self, request: dict[str, Any], limit_s: float) -> Any:
        try:
            return await asyncio.wait_for(self._protocol().query(request, retry_count=0), limit_s)
        except BaseException:
            await self._reset()
            raise

    async def _reset(self) -> None:
        """After a failure the next request starts afresh (new connection, new KLAP handshake)."""
        if self._held:
            try:
                await self._held.pop().close()
            except Exception:  # noqa: BLE001,S110 (closing a broken session: nothing more to do)
                pass


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The driver's loop thread: runs until the driver is collected, then closes the loop."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def _close(loop: asyncio.AbstractEventLoop, held: list[BaseProtocol]) -> None:
    """When the driver goes: close the session in its loop, then stop the loop (never raises:
    it may run from the garbage collector anywhere, or at exit)."""
    async def shutdown() -> None:
        try:
            if held:
                await held.pop().close()
        except Exception:  # noqa: BLE001,S110 (best effort at garbage collection)
            pass
        finally:
            asyncio.get_running_loop().stop()

    try:
        asyncio.run_coroutine_threadsafe(shutdown(), loop)
    except RuntimeError:  # the loop is closed already
        pass
