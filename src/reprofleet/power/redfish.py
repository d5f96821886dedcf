"""Server BMCs over Redfish (iDRAC, iLO, XCC, OpenBMC ...), plain HTTPS with requests.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: redfish
      address: https://ws03-bmc.lab      # no scheme: https is assumed
      credentials: env:WS03_BMC          # "user:password", HTTP basic auth
      # system: System.Embedded.1        # required when the BMC lists several systems
      # verify_tls: false                # or a CA bundle path; BMCs often self-sign
      # settle_s: 30                     # BMCs apply resets late

``ComputerSystem.Reset`` with ``ForceOff`` then ``On`` (the ``target`` the system
advertises), ``PowerState`` read back until it matches. ``PowerCycle`` is not used: not
every BMC offers it, and a cycle we cannot watch is not one we can trust. A reset is not
sent when the system is already in the wanted state (some BMCs reject that as an error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..credentials import Secret, split_user_password
from ..errors import PowerError
from ..model import PowerPort
from .base import DriverSettings, PowerDriver, PowerState
from .http import HttpDevice, base_url
from .log import PowerLog
from .options import PowerConfigError

SYSTEMS = "/redfish/v1/Systems"
RESET_TYPES = {PowerState.ON: ("On", "ForceOn"), PowerState.OFF: ("ForceOff", "Off")}


def parse_power_state(system: object) -> PowerState:
    """A ComputerSystem's ``PowerState``; transitional states (PoweringOn ...) are UNKNOWN."""
    value = system.get("PowerState") if isinstance(system, dict) else None
    return {"On": PowerState.ON, "Off": PowerState.OFF}.get(str(value), PowerState.UNKNOWN)


def reset_type_for(target: PowerState, allowed: list[str] | None) -> str:
    """The ResetType that reaches ``target``, preferring the forceful one the BMC allows."""
    for candidate in RESET_TYPES[target]:
        if not allowed or candidate in allowed:
            return candidate
    raise PowerError(f"the BMC allows no reset to {target.value}: it offers {', '.join(allowed or [])}")


class RedfishDriver(PowerDriver):
    name = "redfish"
    default_scheme = "https"
    option_names = ("system", "verify_tls")
    defaults = DriverSettings(timeout_s=10.0, settle_s=30.0, poll_s=1.0)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        auth: tuple[str, str] | None = None
        if secret:
            user, password = split_user_password(secret, "root")
            self._secrets.append(password)
            auth = (user, password.reveal())
        raw_verify = self.options.raw.get("verify_tls")
        verify: bool | str = self.options.flag("verify_tls", True) if not isinstance(raw_verify, str) \
            or not raw_verify.startswith(("/", "~")) else str(Path(raw_verify).expanduser())
        self.device = HttpDevice(base_url(port.address, "https"), self.settings.timeout_s, auth=auth, verify=verify)
        self.system_id = self.options.text("system")
        self._system_path: str | None = None
        self._reset_target: str | None = None
        self._allowed: list[str] | None = None

    def _outlet_id(self) -> str:
        return self.system_id or ""

    def _get(self, path: str) -> Any:
        response = self.device.request("GET", path)
        if response.status_code == 404:
            raise PowerError(f"GET {path}: HTTP 404: no such resource on this BMC")
        if response.status_code != 200:
            raise PowerError(f"GET {path}: HTTP {response.status_code}")
        return self.device.json(response)

    def _find_system(self) -> str:
        if self.system_id:
            return f"{SYSTEMS}/{self.system_id}"
        members = self._get(SYSTEMS).get("Members", [])
        paths = [m.get("@odata.id", "") for m in members if isinstance(m, dict)]
        if len(paths) != 1:
            ids = ", ".join(p.rsplit("/", 1)[-1] for p in paths) or "none"
            raise PowerConfigError(f"{self.where}: the BMC lists {len(paths)} systems ({ids}): "
                                   "name the one to switch with the pdu option system")
        return str(paths[0])

    def _system(self) -> dict[str, Any]:
        """GET the system; the first call also learns its reset target and reset types."""
        if self._system_path is None:
            system = self._get(self._find_system())
            self._system_path = str(system.get("@odata.id") or self._find_system())
            action = system.get("Actions", {}).get("#ComputerSystem.Reset", {})
            self._reset_target = action.get("target") or f"{self._system_path}/Actions/ComputerSystem.Reset"
            self._allowed = action.get("ResetType@Redfish.AllowableValues")
            return dict(system)
        return dict(self._get(self._system_path))

    def _read(self) -> PowerState:
        return parse_power_state(self._system())

    def _set(self, state: PowerState) -> None:
        if parse_power_state(self._system()) is state:
            return
        reset_type = reset_type_for(state, self._allowed)
        path = str(self._reset_target)
        response = self.device.request("POST", path, json_body={"ResetType": reset_type})
        if response.status_code not in (200, 202, 204):
            raise PowerError(f"POST {path} ResetType {reset_type}: HTTP {response.status_code}: {response.text[:120]}")
