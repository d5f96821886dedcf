"""What every power driver does the same way: timeouts, retries, read-back, one command
per PDU at a time, an inrush gate, and a log line per action.

A driver module only says how to switch and how to read one outlet (``_set``/``_read``,
one request each), and, where the device can power-cycle by itself, how to ask it to
(``_plan_device_cycle``/``_start_device_cycle``). Everything that makes a power cycle
trustworthy lives here once:

- every request has a timeout (``timeout_s``) and transient failures (no answer, HTTP 5xx,
  a BMC busy with an earlier change) are retried a bounded number of times with
  exponential backoff;
- after every set the state is read back until it matches or ``settle_s`` passes: some
  devices apply late (a Redfish BMC may take seconds), and a set that "succeeded" but did
  not switch anything is an error, not a success;
- commands to one device are serialised by a lock keyed by what the device serialises
  (``device_key``: host and port with the default port filled in; for pdudaemon the PDU
  behind it), across threads and, with a lock folder, across processes; a whole action
  holds its outlet's lock, so a by-hand ``invoke power`` waits for a campaign's cycle;
- every "on" waits its turn at the device's inrush gate (``stagger``): at most
  ``stagger_on`` outlets of one device switched on within ``stagger_window_s``;
- ``cycle`` uses the device's own cycle where it has one (``device_cycle``, see
  ``device_cycle.py``), so the host comes back even if this process dies in the dwell; it
  reads back off where the off can be seen, waits, reads back on, and switches on itself
  when the device did not. Otherwise it is off, read back off, dwell, on, read back on.
  Either way, once "off" was sent, "on" is always sent, whatever failed in between;
- every action becomes one ``PowerEvent`` in the campaign's power.jsonl, with secrets
  scrubbed from any error text.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum, unique
from pathlib import Path
from typing import Callable, ClassVar, Iterator, TypeVar

from reprofleet.clock import Clock, SystemClock
from reprofleet.credentials import Secret, scrub
from reprofleet.errors import PowerError, ReprofleetError
from reprofleet.model import PowerPort
from reprofleet.power.defaults import defaults_for
from reprofleet.power.device_cycle import DeviceCycle, covers
from reprofleet.power.locks import address_key, device_lock, file_lock, thread_lock
from reprofleet.power.log import PowerEvent, PowerLog
from reprofleet.records.store import iso_utc
from reprofleet.power.options import Options, PowerConfigError
from reprofleet.power.plug_behaviour import PlugSettings
from reprofleet.power.settings import DriverSettings, backoff_delays, settings_from_options
from reprofleet.power.stagger import Stagger, gate_for

__all__ = [
    "DeviceCycle", "DriverSettings", "PowerActionError", "PowerConfigError", "PowerDriver", "PowerLog",
    "PowerState", "PowerUnansweredError", "TransientPowerError", "UnansweredPowerActionError", "backoff_delays",
    "pdu_lock",
]

T = TypeVar("T")
CycleCallback = Callable[[str], None]  # hears "off", "dwell", "on" as a cycle reaches each
WATCH_POLL_S = 0.25  # watching for a BMC's short off window: at least this often


@unique
class PowerState(str, Enum):
    """What an outlet or a system is doing, as the device reports it."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class TransientPowerError(PowerError):
    """One try failed in a way worth retrying: no answer in time, connection refused, HTTP 5xx,
    a busy BMC, a status command that could not tell (exit 1)."""


class PowerUnansweredError(PowerError):
    """Every try of a request failed as a :class:`TransientPowerError` does: the device gave no
    usable answer. Any other PowerError is a definite answer (a refused password, a wrong
    outlet): the device was reached. The partition guard decides on this type, never on words."""


class PowerActionError(PowerError):
    """A power action failed; the message names host, driver, address, outlet and why.
    :func:`action_error` picks :class:`UnansweredPowerActionError` where the device never answered."""

    def __init__(self, where: str, action: str, reason: str) -> None:
        self.where = where
        self.action = action
        self.reason = reason
        super().__init__(f"{where}: {action} failed: {reason}")


class UnansweredPowerActionError(PowerActionError, PowerUnansweredError):
    """A power action that failed because the device never answered (every try transient)."""


def action_error(where: str, action: str, reason: str, cause: BaseException) -> PowerActionError:
    """The action's error, of the type its cause says: unanswered, or a definite failure."""
    unanswered = isinstance(cause, (PowerUnansweredError, TransientPowerError))
    return (UnansweredPowerActionError if unanswered else PowerActionError)(where, action, reason)


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

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


class PowerDriver(ABC):
    """Switches one outlet (or one BMC's system) on, off, reads it, and power-cycles it."""

    name: ClassVar[str] = ""
    option_names: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[DriverSettings] = DriverSettings()
    reads_state: bool = True  # False: the device cannot report state (status is UNKNOWN)
    meters_power: bool = False  # True: _read_power may know the outlet's draw in watts
    device_cycles: bool = False  # True: cycle() asks the device to cycle by itself (option device_cycle)
    sends_nmi: bool = False  # True: nmi() asks the BMC for a diagnostic interrupt (the recovery ladder's rung)

    default_scheme: ClassVar[str] = "http"
    default_port: ClassVar[int | None] = None  # None: the scheme's (80 for http, 443 for https)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None,
                 lock_dir: Path | None = None) -> None:
        self.port = port
        self.host = host
        self.log = log
        self.lock_dir = lock_dir  # None: locks within this process only
        self.clock: Clock = SystemClock()  # its dwells, read-back polls and retry backoffs wait on this
        self.pdu_label: str | None = None  # a daisy-chained PDU's id when it is not the first (log, where)
        self.fallback: int | None = None  # the host's n-th ``fallback:`` device (log, where); None: its own pdu block
        self.where = self._describe()
        self.options = Options(port.options, self.where, self.option_names)
        self.settings = settings_from_options(defaults_for(self.name, self.defaults), self.options)
        self._secrets: list[Secret] = [secret] if secret else []
        self._holding = False
        self._asking: _Action | None = None  # the action whose requests _ask counts (a cycle being planned)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where}>"

    def _describe(self) -> str:
        """``host: pdu driver address [pdu N] [outlet M]``: how errors and the repr name this outlet."""
        port = self.port
        return (f"{self.host}: pdu {port.driver} {port.address}" + (f" pdu {self.pdu_label}" if self.pdu_label else "")
                + (f" outlet {port.outlet}" if port.outlet else "")
                + (f" (fallback {self.fallback})" if self.fallback else ""))

    def _device_cycle_option(self, available: bool, why_not: str = "") -> bool:
        """The ``device_cycle`` option (default: on where the device has a cycle of its own)."""
        wanted = self.options.flag("device_cycle", available)
        if wanted and not available:
            why = why_not or "this device has no cycle of its own"
            raise PowerConfigError(f"{self.where}: pdu option device_cycle: {why}", field="device_cycle")
        return wanted

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

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        """Prepare the device's own cycle for ``dwell_s`` (read or set its interval); None: not for this dwell.

        Drivers with ``device_cycles`` override this and ``_start_device_cycle``. Requests go
        through ``self._ask`` (timeouts, retries, the device lock, counted in the cycle's
        log line). Nothing may be switched here: a failure makes the cycle fall back to off,
        dwell, on.
        """
        return None

    def _ask(self, what: str, call: Callable[[], T]) -> T:
        """One request of the action in progress (retried like any other), for driver hooks."""
        return self._request(self._asking or _Action(), what, call)

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        """Ask the device to run ``plan``: one request, no read-back."""
        raise PowerError("this driver has no device-side cycle")

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

    def _read_plug_settings(self) -> PlugSettings | None:
        """What the device reports of its own behaviour (power-on state, auto-off, power limit, child
        lock; plug_behaviour.py): a few requests, nothing switched. None: it reports none of them."""
        return None

    def plug_settings(self) -> PlugSettings | None:
        """The device's own behaviour, read with the usual timeouts and retries; not logged (nothing switched)."""
        return self._request(_Action(), "read the device's own settings", self._read_plug_settings)

    def _send_nmi(self) -> str:
        """Ask the device for a diagnostic interrupt (NMI): one request; returns the power log's note."""
        raise PowerError("this device sends no NMI")

    def nmi(self) -> None:
        """An NMI to the host, sent once and logged as ``nmi``; never retried: a second NMI could
        land in the kdump the first one started. A PowerActionError where the device refused."""
        with self._outlet_held("nmi"), self._logged("nmi") as action:
            action.tries = 1
            if not self.sends_nmi:
                raise PowerError("this device sends no NMI (ipmi, redfish, or a fence agent with diag do)")
            with device_lock(self.lock_dir, self.device_key, self.settings.lock_wait_s, "nmi"):
                action.note = self._send_nmi()

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

    def cycle(self, dwell_s: float, on_state: CycleCallback | None = None, *, device: bool = True) -> PowerState:
        """Power-cycle the outlet for ``dwell_s``; returns the final state.

        With ``device`` (and the driver's ``device_cycles``) the device runs the cycle itself
        where it can keep the outlet off at least ``dwell_s``; otherwise (or when preparing
        it fails) off, read back off, wait ``dwell_s``, on, read back on.

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
            plan = self._device_plan(dwell_s, action) if device and self.device_cycles else None
            if plan is not None:
                return self._cycle_on_device(plan, dwell_s, action, tell)
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

    # -- the device's own cycle ---------------------------------------------------------

    def _device_plan(self, dwell_s: float, cycle: _Action) -> DeviceCycle | None:
        """The device's cycle for this dwell, or None (noted) to cycle off, dwell, on instead."""
        self._asking = cycle
        try:
            plan = self._plan_device_cycle(dwell_s)
        except ReprofleetError as exc:  # nothing was switched yet: the explicit cycle is safe
            cycle.add_note(f"the device's own cycle could not be prepared ({self._scrub(str(exc))}): off, dwell, on")
            return None
        finally:
            self._asking = None
        if plan is None:
            cycle.add_note("the device's own cycle does not apply now: off, dwell, on")
            return None
        if not covers(plan, dwell_s):
            cycle.add_note(f"the device's own cycle cannot give a {dwell_s:g} s dwell (it keeps the outlet off "
                           f"{plan.off_s:g} s at most): off, dwell, on")
            return None
        return plan

    def _cycle_on_device(self, plan: DeviceCycle, dwell_s: float, cycle: _Action, tell: CycleCallback) -> PowerState:
        """Start the device's cycle, read back off (where visible), wait, read back on; switch on if it did not."""
        cycle.add_note(plan.describe(dwell_s))
        self._wait_turn(cycle, lead_s=plan.off_s or 0.0)  # the device's own "on" is counted where it will happen
        try:
            started = self._send_device_cycle(plan)
            tell("off")
            tell("dwell")
            if not self.reads_state:
                cycle.state = PowerState.UNKNOWN
                tell("on")
                return PowerState.UNKNOWN
            self._sleep_until(started + (plan.off_s or 0.0))
            back_on, seen_off = self._await_device_on(cycle, plan)
        except BaseException as exc:  # the cycle was asked for: make sure "on" goes out too
            cycle.state = self._on_after(exc)
            return cycle.state
        if back_on:
            cycle.add_note("switched back on by the device's own cycle" if seen_off else
                           "the off was too short to see: the device reads on (judge it by the host's new boot_id)")
            cycle.state = PowerState.ON
        else:
            cycle.add_note("the device did not switch back on by itself: switched on explicitly")
            cycle.state = self.on()
        tell("on")
        return cycle.state

    def _send_device_cycle(self, plan: DeviceCycle) -> float:
        """The logged "off" of a device cycle; returns when it was asked for (the clock's monotonic)."""
        with self._logged("off") as off:
            started = self.clock.monotonic()
            off.note = plan.note or "the device's own cycle"
            self._request(off, "start the device's own cycle", lambda: self._start_device_cycle(plan))
            if not self.reads_state:
                off.state = PowerState.UNKNOWN
                off.add_note("this driver cannot read the outlet state: not verified")
            elif plan.visible and plan.off_s is not None:
                off.state = self._expect(off, PowerState.OFF, min(self.settings.settle_s, plan.off_s))
            else:
                off.add_note("the off window is not read back (too short, or applied late)")
        return started

    def _await_device_on(self, cycle: _Action, plan: DeviceCycle) -> tuple[bool, bool]:
        """Poll until the device reads on after its off, or the settle time passes: (back on, off seen).

        A visible off was read back already. An invisible one is watched for ``watch_s``: a
        BMC that applies late still reads On before its off, and accepting that On would be
        the fencing bug of a power state reported too early; after the watch, On is accepted.
        """
        seen_off = plan.visible and plan.off_s is not None
        watch_until = self.clock.monotonic() + (0.0 if seen_off else plan.watch_s)
        deadline = max(watch_until, self.clock.monotonic()) + self.settings.settle_s
        poll_s = self.settings.poll_s if seen_off else min(self.settings.poll_s, WATCH_POLL_S)
        state = PowerState.UNKNOWN
        for _ in range(int((deadline - self.clock.monotonic()) / poll_s) + 2):
            state = self._request(cycle, "read back", self._read)
            now = self.clock.monotonic()
            seen_off = seen_off or state is not PowerState.ON
            if state is PowerState.ON and (seen_off or now >= watch_until):
                return True, seen_off
            if now >= deadline:
                break
            self.clock.sleep(min(poll_s, max(0.0, deadline - now)))
        return state is PowerState.ON, seen_off

    def _sleep_until(self, moment: float) -> None:
        remaining = moment - self.clock.monotonic()
        if remaining > 0:
            self.clock.sleep(remaining)

    # -- the machinery ------------------------------------------------------------------

    def _wait_turn(self, action: _Action, lead_s: float = 0.0) -> None:
        """Wait for the device's inrush gate: an "on" (now, or ``lead_s`` from now) is counted there."""
        s = self.settings
        gate = gate_for(self.device_key, self.clock, self.lock_dir)
        waited = gate.wait_turn(Stagger(s.stagger_on, s.stagger_window_s), lead_s)
        if waited > 0:
            action.add_note(f"waited {waited:g} s for the device's inrush gate ({s.stagger_on} on per "
                            f"{s.stagger_window_s:g} s)")

    def _switch(self, target: PowerState) -> PowerState:
        with self._logged(target.value) as action:
            if target is PowerState.ON:
                self._wait_turn(action)
            self._request(action, f"switch {target.value}", lambda: self._set(target))
            if not self.reads_state:
                action.note = "this driver cannot read the outlet state: not verified"
                action.state = PowerState.UNKNOWN
                return PowerState.UNKNOWN
            action.state = self._expect(action, target, self.settings.settle_s)
            return action.state

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
        raise PowerUnansweredError(f"{what}: {last} (gave up after {s.tries} tries)")

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    @contextmanager
    def _logged(self, name: str) -> Iterator[_Action]:
        """Log the action when it ends; turn any failure into one scrubbed PowerActionError."""
        action = _Action()
        started_at, started = str(iso_utc(self.clock.wall())), self.clock.monotonic()  # the injected clock's time
        try:
            yield action
        except PowerActionError as exc:  # a nested action failed and was logged already
            self._append(name, started_at, started, action, self._scrub(str(exc)))
            raise
        except ReprofleetError as exc:
            error = action_error(self.where, name, self._scrub(str(exc)), exc)
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
            outlet=self.port.outlet, pdu=self.pdu_label, fallback=self.fallback, action=name, result=result,
            state=action.state.value if action.state else None,
            duration_s=round(self.clock.monotonic() - started, 3), error=error, tries=max(1, action.tries),
            note=action.note,
        ))


def _reason(error: BaseException) -> str:
    return error.reason if isinstance(error, PowerActionError) else str(error)
