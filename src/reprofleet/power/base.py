"""What every power driver does the same way: timeouts, retries, read-back, one command
per PDU at a time, and a log line per action.

A driver module only says how to switch and how to read one outlet (``_set``/``_read``,
one request each). Everything that makes a power cycle trustworthy lives here once:

- every request has a timeout (``timeout_s``) and transient failures (no answer, HTTP 5xx,
  connection refused) are retried a bounded number of times with exponential backoff;
- after every set the state is read back until it matches or ``settle_s`` passes: some
  devices apply late (a Redfish BMC may take seconds), and a set that "succeeded" but did
  not switch anything is an error, not a success;
- commands to one device are serialised by a lock keyed by what the device serialises
  (``device_key``: host and port with the default port filled in; for pdudaemon the PDU
  behind it), across threads and, with a lock folder, across processes; a whole action
  holds its outlet's lock, so a by-hand ``invoke power`` waits for a campaign's cycle;
- ``cycle`` is off, read back off, dwell, on, read back on; once "off" was sent, "on" is
  always sent, whatever failed in between; a device's own "reboot" is never trusted
  without reading back;
- every action becomes one ``PowerEvent`` in the campaign's power.jsonl, with secrets
  scrubbed from any error text.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum, unique
from pathlib import Path
from typing import Callable, ClassVar, Iterator, TypeVar

from reprofleet.clock import Clock, SystemClock
from reprofleet.config import DEFAULT_TIMINGS
from reprofleet.credentials import Secret, scrub
from reprofleet.errors import PowerError, ReprofleetError
from reprofleet.model import PowerPort
from reprofleet.power.locks import address_key, device_lock, file_lock, thread_lock
from reprofleet.power.log import PowerEvent, PowerLog, utc_now_iso
from reprofleet.power.options import Options, PowerConfigError

__all__ = [
    "DriverSettings", "PowerActionError", "PowerConfigError", "PowerDriver", "PowerLog",
    "PowerState", "TransientPowerError", "backoff_delays", "pdu_lock",
]

T = TypeVar("T")
CycleCallback = Callable[[str], None]  # hears "off", "dwell", "on" as a cycle reaches each


@unique
class PowerState(str, Enum):
    """What an outlet or a system is doing, as the device reports it."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class TransientPowerError(PowerError):
    """A failure worth retrying: no answer in time, connection refused, HTTP 5xx."""


class PowerActionError(PowerError):
    """A power action failed; the message names host, driver, address, outlet and why."""

    def __init__(self, where: str, action: str, reason: str) -> None:
        self.where = where
        self.action = action
        self.reason = reason
        super().__init__(f"{where}: {action} failed: {reason}")


@dataclass(frozen=True)
class DriverSettings:
    """Deadlines and retry bounds of one driver (each overridable per ``pdu:`` block)."""

    timeout_s: float = DEFAULT_TIMINGS.power_timeout_s  # one request
    settle_s: float = DEFAULT_TIMINGS.power_settle_s  # read-back deadline after a set
    tries: int = DEFAULT_TIMINGS.power_tries  # attempts per request when failures are transient
    poll_s: float = DEFAULT_TIMINGS.power_poll_s  # read-back poll interval
    backoff_s: float = DEFAULT_TIMINGS.power_backoff_s  # first retry delay; doubles, capped at backoff_cap_s
    backoff_cap_s: float = DEFAULT_TIMINGS.power_backoff_cap_s
    lock_wait_s: float = DEFAULT_TIMINGS.power_lock_wait_s  # waiting for another command to the same PDU


def backoff_delays(tries: int, base_s: float = 0.5, factor: float = 2.0, cap_s: float = 5.0) -> tuple[float, ...]:
    """The sleeps between ``tries`` attempts: base, base*factor, ... each capped."""
    delays: list[float] = []
    delay = base_s
    for _ in range(max(0, tries - 1)):
        delays.append(min(cap_s, delay))
        delay *= factor
    return tuple(delays)


def lock_key(address: str, default_scheme: str = "http", default_port: int | None = None) -> str:
    """One key per physical device: scheme, case, trailing slash and a spelt-out default port do not matter."""
    ports = {"http": 80, "https": 443}
    if default_port is not None:
        ports[default_scheme] = default_port
    return address_key(address, default_scheme, ports)


def pdu_lock(address: str) -> threading.Lock:
    """The process-wide request lock of the device at ``address`` (HTTP defaults)."""
    return thread_lock(lock_key(address))


@dataclass
class _Action:
    """Mutable notes about the action in progress, turned into a PowerEvent at its end."""

    state: PowerState | None = None
    tries: int = 0
    note: str | None = None


class PowerDriver(ABC):
    """Switches one outlet (or one BMC's system) on, off, reads it, and power-cycles it."""

    name: ClassVar[str] = ""
    option_names: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[DriverSettings] = DriverSettings()
    reads_state: bool = True  # False: the device cannot report state (status is UNKNOWN)
    meters_power: bool = False  # True: _read_power may know the outlet's draw in watts
    flips_back: bool = False  # True: the device's own timer switches back on (_set_off_flipping_back)

    default_scheme: ClassVar[str] = "http"
    default_port: ClassVar[int | None] = None  # None: the scheme's (80 for http, 443 for https)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None,
                 lock_dir: Path | None = None) -> None:
        self.port = port
        self.host = host
        self.log = log
        self.lock_dir = lock_dir  # None: locks within this process only
        self.clock: Clock = SystemClock()  # its dwells, read-back polls and retry backoffs wait on this
        self.where = f"{host}: pdu {port.driver} {port.address}" + (f" outlet {port.outlet}" if port.outlet else "")
        self.options = Options(port.options, self.where, self.option_names)
        self.settings = self._settings(self.options)
        self._secrets: list[Secret] = [secret] if secret else []
        self._holding = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where}>"

    @property
    def device_key(self) -> str:
        """What the device serialises: requests with the same key never overlap."""
        return f"{self.name}:{lock_key(self.port.address, self.default_scheme, self.default_port)}"

    def _outlet_id(self) -> str:
        return self.port.outlet or ""

    @property
    def outlet_key(self) -> str:
        """One physical outlet (or BMC system): two hosts with the same key are fed by one outlet."""
        return f"{self.device_key}#{self._outlet_id()}"

    def _settings(self, options: Options) -> DriverSettings:
        base = self.defaults
        return replace(
            base,
            timeout_s=options.number("timeout_s", base.timeout_s, minimum=0.05),
            settle_s=options.number("settle_s", base.settle_s),
            tries=options.integer("tries", base.tries, minimum=1),
            poll_s=options.number("poll_s", base.poll_s, minimum=0.01),
        )

    # -- what a driver module implements ------------------------------------------------

    @abstractmethod
    def _set(self, state: PowerState) -> None:
        """Ask the device to switch to ``state`` (ON or OFF): one request, no read-back."""

    @abstractmethod
    def _read(self) -> PowerState:
        """Ask the device for the current state: one request."""

    def _read_power(self) -> float | None:
        """The outlet's (or system's) draw in watts now, if the device meters it: one request."""
        return None

    def read_power(self, wait_s: float = 0.5) -> float | None:
        """Watts at the wall, or None (no meter, device busy or not answering). One try, not logged.

        For sampling about once a second: a sample is worth less than a cycle, so it waits
        at most ``wait_s`` for the device and is never retried.
        """
        if not self.meters_power:
            return None
        try:
            with device_lock(self.lock_dir, self.device_key, wait_s, "read power"):
                return self._read_power()
        except (ReprofleetError, OSError):
            return None

    def _set_off_flipping_back(self, dwell_s: float) -> None:
        """Switch off with the device's own timer set to switch back on after ``dwell_s``.

        Devices with such a timer override this (and set ``flips_back``): a host is then not
        left off if the controller dies mid-cycle. Without one this is a plain "off", and the
        cycle switches the outlet back on itself; either way it reads back both states.
        """
        self._set(PowerState.OFF)

    # -- the public interface -----------------------------------------------------------

    @contextmanager
    def _outlet_held(self, what: str) -> Iterator[None]:
        """The outlet's file lock for a whole action (re-entrant within this driver)."""
        if self._holding:
            yield
            return
        wait_s = self.settings.lock_wait_s + 2 * self.settings.settle_s
        with file_lock(self.lock_dir, f"outlet-{self.outlet_key}", wait_s, what):
            self._holding = True
            try:
                yield
            finally:
                self._holding = False

    def status(self) -> PowerState:
        """The state the device reports now (UNKNOWN when it cannot report state)."""
        with self._logged("status") as action:
            if not self.reads_state:
                action.note = "this driver cannot read the outlet state"
                action.state = PowerState.UNKNOWN
                return PowerState.UNKNOWN
            action.state = self._request(action, "read state", self._read)
            return action.state

    def on(self) -> PowerState:
        with self._outlet_held("on"):
            return self._switch(PowerState.ON)

    def off(self) -> PowerState:
        with self._outlet_held("off"):
            return self._switch(PowerState.OFF)

    def cycle(self, dwell_s: float, on_state: CycleCallback | None = None) -> PowerState:
        """Off, read back off, wait ``dwell_s``, on, read back on; returns the final state.

        ``on_state`` hears "off" once the outlet reads back off, "dwell" as the wait begins and
        "on" once power is back, each when it happens (a controller killed mid-cycle has
        logged how far it got). Once "off" was sent, "on" is always sent, whatever failed in
        between: an "off" whose read-back failed (a BMC still saying On after the settle time,
        a lost SNMP reply) may well have switched the host off, and a cycle that raises
        without switching on would leave it off while it is quarantined. The first error is
        raised after "on" was sent and read back.
        """
        dwell_s = max(0.0, dwell_s)
        tell = on_state or (lambda state: None)
        with self._outlet_held("cycle"), self._logged("cycle") as action:
            if self.reads_state and self.flips_back:
                return self._cycle_flipping_back(dwell_s, action, tell)
            failure: BaseException | None = None
            try:
                self.off()
                tell("off")
                tell("dwell")
                self.clock.sleep(dwell_s)
            except BaseException as exc:  # Ctrl-C included: "on" still goes out, then it propagates
                failure = exc
            action.state = self._on_after(failure)
            tell("on")
            return action.state

    def _on_after(self, failure: BaseException | None) -> PowerState:
        """Switch on after an "off" was sent; re-raise ``failure`` once on is done (or failed too)."""
        try:
            state = self.on()
        except PowerActionError as on_error:
            if failure is None:
                raise
            raise PowerError(f"{_reason(failure)}; switching back on failed too: {on_error.reason}") from None
        if failure is not None:
            if isinstance(failure, ReprofleetError):
                raise PowerError(f"{_reason(failure)} (switched back on: the outlet reads {state.value})") from None
            raise failure
        return state

    # -- the machinery ------------------------------------------------------------------

    def _switch(self, target: PowerState) -> PowerState:
        with self._logged(target.value) as action:
            self._request(action, f"switch {target.value}", lambda: self._set(target))
            if not self.reads_state:
                action.note = "this driver cannot read the outlet state: not verified"
                action.state = PowerState.UNKNOWN
                return PowerState.UNKNOWN
            action.state = self._expect(action, target, self.settings.settle_s)
            return action.state

    def _cycle_flipping_back(self, dwell_s: float, cycle: _Action, tell: CycleCallback) -> PowerState:
        """Off with the device's flip-back timer, read back off, dwell, read back on.

        If the timer has not switched the outlet back on by ``settle_s`` after the dwell,
        switch it on ourselves (and read that back).
        """
        try:
            with self._logged("off") as action:
                self._request(action, "switch off (flipping back)", lambda: self._set_off_flipping_back(dwell_s))
                action.note = f"device timer set to switch back on after {dwell_s:g}s"
                action.state = self._expect(action, PowerState.OFF, self.settings.settle_s)
            tell("off")
            tell("dwell")
            self.clock.sleep(dwell_s)
            back_on = self._poll_for(cycle, PowerState.ON, self.settings.settle_s) is PowerState.ON
        except BaseException as exc:  # the "off" went out: make sure "on" does too
            cycle.state = self._on_after(exc)
            return cycle.state
        if back_on:
            cycle.note = "switched back on by the device's own timer"
            cycle.state = PowerState.ON
        else:
            cycle.note = "the device's timer did not switch back on: switched on explicitly"
            cycle.state = self.on()
        tell("on")
        return cycle.state

    def _expect(self, action: _Action, target: PowerState, settle_s: float) -> PowerState:
        state = self._poll_for(action, target, settle_s)
        if state is not target:
            raise PowerError(f"asked {target.value}, the device still reports {state.value} after {settle_s:g}s")
        return state

    def _poll_for(self, action: _Action, target: PowerState, settle_s: float) -> PowerState:
        """Read until the state is ``target`` or ``settle_s`` passes; returns the last state."""
        deadline = self.clock.monotonic() + settle_s
        state = PowerState.UNKNOWN
        for _ in range(int(settle_s / self.settings.poll_s) + 2):
            state = self._request(action, "read back", self._read)
            remaining = deadline - self.clock.monotonic()
            if state is target or remaining <= 0:
                return state
            self.clock.sleep(min(self.settings.poll_s, remaining))
        return state

    def _request(self, action: _Action, what: str, call: Callable[[], T]) -> T:
        """One device request under the PDU lock, retried with backoff when transient."""
        s = self.settings
        delays = backoff_delays(s.tries, s.backoff_s, 2.0, s.backoff_cap_s)
        last: TransientPowerError | None = None
        for attempt in range(s.tries):
            action.tries = max(action.tries, attempt + 1)
            try:
                with device_lock(self.lock_dir, self.device_key, s.lock_wait_s, what):
                    return call()
            except TransientPowerError as exc:
                last = exc
            if attempt < len(delays):
                self.clock.sleep(delays[attempt])
        raise PowerError(f"{what}: {last} (gave up after {s.tries} tries)")

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    @contextmanager
    def _logged(self, name: str) -> Iterator[_Action]:
        """Log the action when it ends; turn any failure into one scrubbed PowerActionError."""
        action = _Action()
        started_at, started = utc_now_iso(), self.clock.monotonic()
        try:
            yield action
        except PowerActionError as exc:  # a nested action failed and was logged already
            self._append(name, started_at, started, action, self._scrub(str(exc)))
            raise
        except ReprofleetError as exc:
            error = PowerActionError(self.where, name, self._scrub(str(exc)))
            self._append(name, started_at, started, action, error.reason)
            raise error from None
        except Exception as exc:  # a library error a driver did not map: never leak it raw
            error = PowerActionError(self.where, name, self._scrub(f"{type(exc).__name__}: {exc}"))
            self._append(name, started_at, started, action, error.reason)
            raise error from None
        else:
            self._append(name, started_at, started, action, None)

    def _append(self, name: str, started_at: str, started: float, action: _Action, error: str | None) -> None:
        if error is not None:
            result = "failed"
        elif not self.reads_state:
            result = "unverified"
        else:
            result = "ok"
        self.log.append(PowerEvent(
            time=started_at, host=self.host, driver=self.port.driver, address=self.port.address,
            outlet=self.port.outlet, action=name, result=result,
            state=action.state.value if action.state else None,
            duration_s=round(self.clock.monotonic() - started, 3), error=error, tries=max(1, action.tries),
            note=action.note,
        ))


def _reason(error: BaseException) -> str:
    return error.reason if isinstance(error, PowerActionError) else str(error)
