"""Server BMCs over Redfish (iDRAC, iLO, XCC, OpenBMC ...), through the ``sushy`` library.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: redfish
      address: https://ws03-bmc.lab      # no scheme: https is assumed
      credentials: env:WS03_BMC          # "user:password"
      # system: System.Embedded.1        # required when the BMC lists several systems
      # tls_fingerprint: "9F:86:...:08"  # BMCs self-sign: pin the certificate's SHA-256 (tls_pin.py)
      # tls_ca_file: ~/lab/bmc-ca.pem    # or verify against this CA (never verify_tls: false)
      # device_cycle: true               # PowerCycle where the BMC lists it (default)
      # timeout_s: 60  connect_timeout_s: 30  tries: 5  settle_s: 120   (the defaults)

sushy finds the systems, reads ``PowerState`` and the reset types the service allows
(``ResetType@Redfish.AllowableValues``), and posts ``ComputerSystem.Reset``: ``ForceOff``
then ``On`` (or ``ForceOn``), read back until it matches. A reset is not sent when the
system already reads the wanted state (some BMCs reject that as an error), except right
after a cycle's "off" whose read-back failed: then "On" goes out whatever the BMC says,
since a BMC that still reads On may be about to apply the ForceOff.

A cycle (``device_cycle``, default true) is ``PowerCycle`` when the service lists it in
``ResetType@Redfish.AllowableValues`` and the system is on ("behaves like a full power
removal, followed by a power restore": DMTF Resource schema, ResetType): the BMC switches
the system back on itself, so a controller that dies in the dwell strands nothing. The BMC
chooses how long it stays off and may apply the reset late, so the base driver watches for
its off (up to 30 s) before it takes On for the end of the cycle, then accepts On (the
host's new boot_id is the evidence). Where PowerCycle is not listed (sushy-tools' emulator
lists none), it is ForceOff, dwell, On.

Real BMCs are slow: 10-30 s per call, resets applied seconds late, refusals while busy
(HTTP 409 after a power-off, "not ready" while in POST: ``redfish_errors``), self-signed
TLS. The defaults fit them: 60 s per call with a 30 s connect timeout (an unreachable BMC
fails on the connect), 5 tries backing off from 2 s to 30 s, 120 s to settle (Metal3's
power-state timeout).

The service is contacted at the first action, never when the driver is built (the
preflight builds every driver without contacting anything). sushy's own retries are off
(one try per call): the base driver retries, with its bounded backoff. Its HTTP
session ignores proxy variables and ``~/.netrc``.
"""

from __future__ import annotations

from typing import Any

import requests
import sushy
from sushy import exceptions as sushy_errors

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, DriverSettings, PowerDriver, PowerState
from reprofleet.power.drivers.http import base_url
from reprofleet.power.drivers.redfish_errors import translate
from reprofleet.power.drivers.tls_pin import TLS_OPTIONS, apply_trust, tls_trust
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError

SYSTEMS = "/redfish/v1/Systems"
WATCH_OFF_S = 30.0  # a PowerCycle's off is looked for this long (BMCs apply resets seconds late)
RESET_TYPES = {PowerState.ON: (sushy.ResetType.ON, sushy.ResetType.FORCE_ON),
               PowerState.OFF: (sushy.ResetType.FORCE_OFF, sushy.ResetType.GRACEFUL_SHUTDOWN)}
STATES = {sushy.PowerState.ON: PowerState.ON, sushy.PowerState.OFF: PowerState.OFF}


def parse_power_state(value: object) -> PowerState:
    """A ComputerSystem's ``PowerState``; transitional states (PoweringOn ...) are UNKNOWN."""
    if isinstance(value, sushy.PowerState):
        return STATES.get(value, PowerState.UNKNOWN)
    return {"On": PowerState.ON, "Off": PowerState.OFF}.get(str(value), PowerState.UNKNOWN)


def reset_type_for(target: PowerState, allowed: set[Any] | None) -> sushy.ResetType:
    """The ResetType that reaches ``target``, preferring the forceful one the service allows."""
    for candidate in RESET_TYPES[target]:
        if not allowed or candidate in allowed:
            return candidate
    offered = ", ".join(sorted(str(getattr(a, "value", a)) for a in allowed or ()))
    raise PowerError(f"the BMC allows no reset to {target.value}: it offers {offered}")


class NoAuth(sushy.auth.AuthBase):
    """A BMC without credentials in the inventory: send no Authorization header at all."""

    def _do_authenticate(self) -> None:
        return None

    def can_refresh_session(self) -> bool:
        return False


def watts_from_power(resource: object) -> float | None:
    """``Chassis/<id>/Power``: ``PowerControl[0].PowerConsumedWatts`` (the deprecated but common schema)."""
    controls = resource.get("PowerControl") if isinstance(resource, dict) else None
    first = controls[0] if isinstance(controls, list) and controls and isinstance(controls[0], dict) else {}
    watts = first.get("PowerConsumedWatts")
    return float(watts) if isinstance(watts, (int, float)) and not isinstance(watts, bool) else None


def watts_from_environment(resource: object) -> float | None:
    """``Chassis/<id>/EnvironmentMetrics``: ``PowerWatts.Reading`` (the PowerSubsystem era's schema)."""
    reading = resource.get("PowerWatts") if isinstance(resource, dict) else None
    watts = reading.get("Reading") if isinstance(reading, dict) else None
    return float(watts) if isinstance(watts, (int, float)) and not isinstance(watts, bool) else None


class RedfishDriver(PowerDriver):
    name = "redfish"
    default_scheme = "https"
    meters_power = True  # the system's chassis: Power (PowerControl) or EnvironmentMetrics, where served
    option_names = ("system", *TLS_OPTIONS, "device_cycle")
    sends_nmi = True  # ComputerSystem.Reset Nmi, where the service lists it
    defaults = DriverSettings(timeout_s=60.0, connect_timeout_s=30.0, tries=5, settle_s=120.0, poll_s=2.0,
                              backoff_s=2.0, backoff_cap_s=30.0)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self._user: str | None = None
        self._password: Secret | None = None
        if secret:
            self._user, self._password = split_user_password(secret, "root")
            self._secrets.append(self._password)
        self.trust = tls_trust(self.options)
        self.verify: bool | str = self.trust.verify
        self.url = base_url(port.address, "https") + "/redfish/v1/"
        self.system_id = self.options.text("system")
        self._root: Any = None
        self._sys: Any = None
        self._allowed: set[Any] | None = None
        self._force_next_on = False
        self._meter_paths: list[tuple[str, Any]] | None = None  # (path, parser) that gave watts; [] none
        self.device_cycles = self._device_cycle_option(True)

    def _outlet_id(self) -> str:
        return self.system_id or ""

    def _call(self, what: str, call: Any) -> Any:
        try:
            return call()
        except PowerError:
            raise
        except (sushy_errors.SushyError, requests.RequestException) as exc:
            if isinstance(exc, (sushy_errors.ConnectionError, sushy_errors.AccessError)):
                self._root = self._sys = None  # log in again next time
            raise translate(exc, what) from None

    def _service(self) -> Any:
        if self._root is None:
            # server_side_retries=1: one try per call (0 would mean sushy's default of 3, 2 s apart)
            connector = sushy.connector.Connector(self.url, verify=self.verify, server_side_retries=1,
                                                  server_side_retries_delay=0,
                                                  default_request_timeout=self.settings.timeout_s,
                                                  connect_timeout=self.settings.connect_s)
            connector._session.trust_env = False  # no proxy variables, no ~/.netrc
            apply_trust(connector._session, self.trust)  # a pinned certificate, checked before the password goes
            password = self._password.reveal() if self._password else None
            auth = sushy.auth.BasicAuth(self._user, password) if password is not None else NoAuth()
            self._root = sushy.Sushy(self.url, connector=connector, auth=auth, verify=self.verify,
                                     server_side_retries=1, read_timeout=self.settings.timeout_s,
                                     connect_timeout=self.settings.connect_s)
        return self._root

    def _system(self) -> Any:
        """The ComputerSystem (found once), refreshed; the first call learns the allowed reset types."""
        if self._sys is None:
            root = self._service()
            if self.system_id:
                path = f"{SYSTEMS}/{self.system_id}"
            else:
                paths = sorted(root.get_system_collection().members_identities)
                if len(paths) != 1:
                    ids = ", ".join(p.rstrip("/").rsplit("/", 1)[-1] for p in paths) or "none"
                    raise PowerConfigError(f"{self.where}: the BMC lists {len(paths)} systems ({ids}): "
                                           "name the one to switch with the pdu option system")
                path = paths[0]
            self._sys = root.get_system(path)
            self._allowed = set(self._sys.get_allowed_reset_system_values())
        else:
            self._sys.refresh(force=True)
        return self._sys

    def _read_power(self) -> float | None:
        """Watts from the first chassis resource that reports them; a BMC that reports none is not asked again."""
        if self._meter_paths == []:
            return None
        connection = self._service()._conn
        if self._meter_paths is None:
            links = self._call("read system", self._system).json.get("Links", {}).get("Chassis", [])
            chassis = [str(link.get("@odata.id")) for link in links if isinstance(link, dict)]
            candidates = [(f"{c.rstrip('/')}/{leaf}", parse) for c in chassis
                          for leaf, parse in (("Power", watts_from_power), ("EnvironmentMetrics", watts_from_environment))]
        else:
            candidates = self._meter_paths
        for path, parse in candidates:
            try:
                watts = parse(self._call(f"GET {path}", lambda: connection.get(path).json()))
            except PowerError:
                continue
            if watts is not None:
                self._meter_paths = [(path, parse)]
                return watts
        if self._meter_paths is None:
            self._meter_paths = []
        return None

    def get_json(self, path: str) -> Any:
        """One resource of this BMC as JSON (for readers such as the event log); errors are PowerErrors."""
        return self._call(f"GET {path}", lambda: self._service()._conn.get(path).json())

    def system_json(self) -> Any:
        """The ComputerSystem this driver switches, as the BMC serves it now."""
        return self._call("read system", self._system).json

    def _read(self) -> PowerState:
        return parse_power_state(self._call("read PowerState", lambda: self._system().power_state))

    def _set(self, state: PowerState) -> None:
        system = self._call("read PowerState", self._system)
        forced = state is PowerState.ON and self._force_next_on
        self._force_next_on = False
        if parse_power_state(system.power_state) is state and not forced:
            return
        reset_type = reset_type_for(state, self._allowed)
        self._call(f"ComputerSystem.Reset {reset_type.value}", lambda: system.reset_system(reset_type))

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        system = self._ask("read PowerState", lambda: self._call("read PowerState", self._system))
        if sushy.ResetType.POWER_CYCLE not in (self._allowed or set()):
            return None  # not listed: ForceOff, dwell, On
        if parse_power_state(system.power_state) is not PowerState.ON:
            return None  # an off system is switched on by the explicit path
        return DeviceCycle(off_s=None, visible=False, watch_s=min(self.settings.settle_s, WATCH_OFF_S),
                           note="ComputerSystem.Reset PowerCycle (listed in ResetType@Redfish.AllowableValues)")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        system = self._call("read PowerState", self._system)
        self._call("ComputerSystem.Reset PowerCycle", lambda: system.reset_system(sushy.ResetType.POWER_CYCLE))

    def _send_nmi(self) -> str:
        system = self._call("read PowerState", self._system)
        if sushy.ResetType.NMI not in (self._allowed or set()):
            offered = ", ".join(sorted(str(getattr(a, "value", a)) for a in self._allowed or ()))
            raise PowerError(f"the BMC does not list Nmi in ResetType@Redfish.AllowableValues (it offers {offered})")
        self._call("ComputerSystem.Reset Nmi", lambda: system.reset_system(sushy.ResetType.NMI))
        return "ComputerSystem.Reset Nmi"

    def cycle(self, dwell_s: float, on_state: Any = None, *, device: bool = True) -> PowerState:
        """As every driver's cycle; an "On" after an unconfirmed "ForceOff" is sent even if the BMC reads On."""
        self._force_next_on = False
        return super().cycle(dwell_s, on_state, device=device)

    def _on_after(self, failure: BaseException | None) -> PowerState:
        self._force_next_on = failure is not None
        return super()._on_after(failure)
