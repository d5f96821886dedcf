"""Server BMCs over IPMI 2.0 (RMCP+ LAN), with pyghmi.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: ipmi
      address: 10.0.0.61             # or 10.0.0.61:623
      credentials: env:WS01_IPMI     # "user:password"
      # device_cycle: true           # cycles by the BMC's own "chassis power cycle" (default)
      # timeout_s: 30  settle_s: 60  tries: 4   (the defaults: real BMCs, login included)

Chassis control ``power off`` (hard) and ``power on``, with ``get_power`` read back; wall
power from DCMI "Get Power Reading" where the BMC implements DCMI.

A cycle (``device_cycle``, default true) is Chassis Control "power cycle" (NetFn Chassis,
command 02h, data 2: IPMI 2.0 section 28.3; pyghmi has no call for it, so it is sent raw),
which the BMC carries out itself: "a power off interval of at least 1 second" (ipmitool(1)).
The interval is first set to the dwell with Set Power Cycle Interval (command 0Bh, whole
seconds), which is optional in IPMI 2.0: a BMC that refuses it (OpenIPMI's ipmi_sim answers
C1h) cycles with its own interval, noted in the power log, and the off is then too short
to read back reliably, so it is watched for a few seconds and "on" is accepted after that
(the host's new boot_id is the evidence). A system that is off is not power-cycled (no
action in S4/S5, ipmitool(1)): it is switched on by off, dwell, on instead.

Defaults fit real BMCs, whose IPMI answers take seconds (a RAKP login, a busy BMC): 30 s
per call, 4 tries, 60 s to settle.
pyghmi has no per-call timeout of its own that we can set, and logs in synchronously, so
every pyghmi call runs in a worker thread joined with our deadline; a call past it is
reported as no answer. Before that report (and so before any retry) the worker is joined
again, still under the device lock, until pyghmi's own timeout ends it: a worker left
running could deliver a late "off" after a later "on". A worker still running after
``LATE_JOIN_S`` is an error that is not retried.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable

from pyghmi.exceptions import IpmiException  # nosec B415  # IPMI is what this BMC speaks (the inventory's model: ipmi); Redfish BMCs use drivers/redfish.py
from pyghmi.ipmi import command as ipmi_command  # nosec B415  # as above: the driver of the IPMI protocol itself

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, DriverSettings, PowerDriver, PowerState, TransientPowerError
from reprofleet.power.device_cycle import seconds_at_least
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.drivers.snmp import split_host_port

AUTH_MARKERS = ("password", "unauthorized", "privilege", "authentication", "rakp")
LATE_JOIN_S = 30.0  # pyghmi's own session timeout is well under this
CHASSIS_NETFN, CHASSIS_CONTROL, SET_POWER_CYCLE_INTERVAL = 0x00, 0x02, 0x0B
POWER_CYCLE = 2  # Chassis Control data: 0 down, 1 up, 2 power cycle, 3 hard reset
PULSE_DIAGNOSTIC_INTERRUPT = 4  # ... 4: an NMI to the host (ipmitool's "chassis power diag")
WATCH_SHORT_OFF_S = 5.0  # a BMC's own interval (at least 1 s): how long its off is looked for

# pyghmi keeps one session per BMC, port and user for the whole process, and a second
# Command built for a BMC whose session is alive hangs; so every driver of one BMC shares
# one Command (requests to it are serialised by the device lock anyway).
_COMMANDS: dict[tuple[str, int, str], Any] = {}
_COMMANDS_GUARD = threading.Lock()


def classify_ipmi_error(exc: BaseException) -> PowerError:
    """pyghmi's exception -> an auth/permanent PowerError or a transient one."""
    text = str(exc) if str(exc) not in ("", "None") else "no answer"
    if any(marker in text.lower() for marker in AUTH_MARKERS):
        return PowerError(f"the BMC refused the login: {text}")
    return TransientPowerError(f"IPMI: {text}")


def call_with_deadline(call: Callable[[], Any], timeout_s: float, what: str, late_join_s: float = LATE_JOIN_S) -> Any:
    """Run ``call`` in a daemon thread; past ``timeout_s`` raise TransientPowerError once it has ended.

    The worker is joined (up to ``late_join_s`` more) before the error is raised, so the
    caller's retry never overlaps it; one that will not end is a PowerError, not retried.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"ipmi {what}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        worker.join(late_join_s)
        if worker.is_alive():
            raise PowerError(f"{what}: no answer within {timeout_s:g}s, and the IPMI call was still running "
                             f"{late_join_s:g}s later: not retried, a late command could still reach the BMC")
        raise TransientPowerError(f"{what}: no answer within {timeout_s:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class IpmiDriver(PowerDriver):
    name = "ipmi"
    meters_power = True  # DCMI, where the BMC has it
    default_scheme = "udp"
    default_port = 623
    option_names = ("device_cycle",)
    sends_nmi = True  # Chassis Control "pulse diagnostic interrupt" (a BMC without it answers an error)
    defaults = DriverSettings(timeout_s=30.0, settle_s=60.0, tries=4, poll_s=1.0, backoff_s=2.0, backoff_cap_s=20.0)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        if secret is None:
            raise PowerConfigError(f"{self.where}: ipmi needs credentials (\"user:password\")")
        self._user, self._password = split_user_password(secret, "admin")
        self._secrets.append(self._password)
        self.bmc, self.udp_port = split_host_port(port.address, 623)
        self._no_dcmi = False
        self.device_cycles = self._device_cycle_option(True)

    @property
    def _key(self) -> tuple[str, int, str]:
        """BMC, port, user and a digest of the password: another password never reuses a session."""
        digest = hashlib.sha256(self._password.reveal().encode()).hexdigest()[:16]
        return (self.bmc, self.udp_port, f"{self._user}/{digest}")

    def _session(self) -> Any:
        with _COMMANDS_GUARD:
            command = _COMMANDS.get(self._key)
        if command is None:
            command = ipmi_command.Command(bmc=self.bmc, userid=self._user, password=self._password.reveal(),
                                           port=self.udp_port)
            with _COMMANDS_GUARD:
                _COMMANDS[self._key] = command
        return command

    def _forget_session(self) -> None:
        """A broken session is not reused (by this driver or any other of this BMC)."""
        with _COMMANDS_GUARD:
            _COMMANDS.pop(self._key, None)

    def _ipmi(self, what: str, call: Callable[[Any], Any]) -> Any:
        try:
            return call_with_deadline(lambda: call(self._session()), self.settings.timeout_s, what)
        except IpmiException as exc:
            self._forget_session()
            raise classify_ipmi_error(exc) from None
        except PowerError:
            self._forget_session()
            raise
        except OSError as exc:
            self._forget_session()
            raise TransientPowerError(f"{what}: {exc.strerror or type(exc).__name__}") from None

    def _read_power(self) -> float | None:
        """DCMI Get Power Reading; a BMC without DCMI answers with an error, and is not asked again."""
        if self._no_dcmi:
            return None
        try:
            watts = call_with_deadline(lambda: self._session().get_system_power_watts(), self.settings.timeout_s,
                                       "DCMI power reading")
        except IpmiException:
            self._no_dcmi = True
            return None
        return float(watts) if isinstance(watts, (int, float)) else None

    def raw(self, what: str, netfn: int, command: int, data: bytes = b"") -> bytes:
        """One raw IPMI request (for readers such as the SEL); a completion code other than 0 is a PowerError."""
        reply = self._ipmi(what, lambda c: c.raw_command(netfn=netfn, command=command, data=list(data)))
        if not isinstance(reply, dict):
            raise PowerError(f"{what}: no reply")
        if reply.get("code") or "error" in reply:
            raise PowerError(f"{what}: {reply.get('error') or 'completion code 0x%02x' % reply.get('code', 0xff)}")
        return bytes(reply.get("data") or b"")

    def _set(self, state: PowerState) -> None:
        self._ipmi(f"set power {state.value}", lambda c: c.set_power(state.value, wait=False))

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        if self._ask("get power", self._read) is not PowerState.ON:
            return None  # no action in S4/S5: off, dwell, on switches it on
        seconds = seconds_at_least(dwell_s, 1, 255)
        if seconds is not None:
            try:
                self._ask("Set Power Cycle Interval",
                          lambda: self.raw("Set Power Cycle Interval", CHASSIS_NETFN, SET_POWER_CYCLE_INTERVAL,
                                           bytes([seconds])))
            except TransientPowerError:
                raise
            except PowerError as exc:
                return DeviceCycle(off_s=None, visible=False, watch_s=WATCH_SHORT_OFF_S,
                                   note=f"chassis power cycle with the BMC's own interval (Set Power Cycle "
                                        f"Interval refused: {exc})")
            return DeviceCycle(off_s=float(seconds), visible=seconds >= 2,
                               note=f"chassis power cycle, interval set to {seconds} s")
        return DeviceCycle(off_s=255.0)  # the longest interval IPMI can set: too short for this dwell

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        self.raw("chassis power cycle", CHASSIS_NETFN, CHASSIS_CONTROL, bytes([POWER_CYCLE]))

    def _send_nmi(self) -> str:
        self.raw("chassis power diag", CHASSIS_NETFN, CHASSIS_CONTROL, bytes([PULSE_DIAGNOSTIC_INTERRUPT]))
        return "Chassis Control: pulse diagnostic interrupt (chassis power diag)"

    def _read(self) -> PowerState:
        reply = self._ipmi("get power", lambda c: c.get_power())
        value = reply.get("powerstate") if isinstance(reply, dict) else None
        return {"on": PowerState.ON, "off": PowerState.OFF}.get(str(value), PowerState.UNKNOWN)
