"""Shelly relays and plugs, Gen1 (REST) and Gen2+ (JSON-RPC), over HTTP.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: shelly
      address: 10.0.0.42
      outlet: 0                    # switch/relay id; default 0
      gen: 2                       # 1 or 2 (Gen3/Gen4 speak Gen2's API); absent: ask /shelly
      credentials: file:~/.config/reprofleet/shelly   # "admin:password" or the password
      # device_cycle: true         # cycles by the plug's own timer (default); false: off, dwell, on
      #                            # (flip_back: is the older name of the same option)

Gen1: ``GET /relay/<id>?turn=on|off[&timer=S]``, the reply's ``ison`` is the state; HTTP
basic auth. Gen2+: ``POST /rpc`` with ``Switch.Set {id, on[, toggle_after]}`` and
``Switch.GetStatus {id}`` whose ``output`` is the state; HTTP digest auth (SHA-256, user
``admin``). ``GET /shelly`` (never behind auth) says which generation a device is. The plug's
own behaviour (power-on state, auto-off, power limit) is read from its configuration
(``shelly_settings``).

In a cycle (``device_cycle``, default true) the plug is switched off with its flip-back
timer (Gen1 ``timer``, Gen2 ``toggle_after``, whole seconds) set to the dwell, so a host is
not left off if the controller dies mid-cycle; the base driver still reads back off, and
after the dwell reads back on (switching on itself if the timer did not).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from requests.auth import HTTPBasicAuth, HTTPDigestAuth

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, PowerDriver, PowerState
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.drivers.shelly_settings import gen1_settings, gen2_settings
from reprofleet.power.plug_behaviour import PlugSettings
from reprofleet.power.drivers.tls_pin import TLS_OPTIONS, tls_trust
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError

RPC_INVALID_ARGUMENT = -105  # Gen2 JSON-RPC: "Argument 'id', value N not found!"


def generation_of(shelly_info: object) -> int:
    """The generation from a ``GET /shelly`` reply: Gen2+ says ``gen``, Gen1 does not."""
    if not isinstance(shelly_info, dict):
        raise PowerError(f"/shelly reply is not an object: {shelly_info!r}")
    gen = shelly_info.get("gen")
    return int(gen) if isinstance(gen, int) and gen >= 2 else 1


def flip_back_seconds(dwell_s: float) -> int:
    """Shelly timers take whole seconds; never shorter than the dwell, at least 1."""
    return max(1, math.ceil(dwell_s))


class ShellyDriver(PowerDriver):
    name = "shelly"
    option_names = ("gen", "device_cycle", "flip_back", *TLS_OPTIONS)
    meters_power = True  # Gen2 Switch.GetStatus apower, Gen1 /meter/<i> power (PM models)

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.switch_id = str(port.outlet if port.outlet is not None else "0")
        if not self.switch_id.isdigit():
            raise PowerConfigError(f"{self.where}: a Shelly outlet is a switch id >= 0, got {self.switch_id!r}")
        gen = self.options.choice("gen", ("1", "2", "3", "4"), None)
        self._gen: int | None = None if gen is None else min(2, int(gen))
        old_name = "flip_back" if self.options.has("flip_back") and not self.options.has("device_cycle") else None
        self.device_cycles = self.options.flag(old_name, True) if old_name else self._device_cycle_option(True)
        self._user = "admin"
        self._password: Secret | None = None
        if secret:
            self._user, self._password = split_user_password(secret, "admin")
            self._secrets.append(self._password)
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s, tls=tls_trust(self.options),
                                 connect_timeout_s=self.settings.connect_s)
        self._rpc_ids = itertools.count(1)

    @property
    def gen(self) -> int:
        if self._gen is None:
            response = self.device.request("GET", "/shelly")
            self._gen = generation_of(self.device.json(response))
        if self._password and self.device.session.auth is None:
            password = self._password.reveal()
            self.device.session.auth = (HTTPBasicAuth(self._user, password) if self._gen == 1
                                        else HTTPDigestAuth(self._user, password))
        return self._gen

    # -- Gen1 ---------------------------------------------------------------------------

    def _relay(self, query: str | None) -> PowerState:
        path = f"/relay/{self.switch_id}"
        response = self.device.request("GET", path, query=query)
        if response.status_code == 404:
            raise PowerError(f"the plug has no relay {self.switch_id} (GET {path}: HTTP 404)")
        if response.status_code != 200:
            raise PowerError(f"GET {path}: HTTP {response.status_code}")
        reply = self.device.json(response)
        if not isinstance(reply, dict) or not isinstance(reply.get("ison"), bool):
            raise PowerError(f"GET {path}: reply has no 'ison': {reply!r}")
        return PowerState.ON if reply["ison"] else PowerState.OFF

    # -- Gen2+ --------------------------------------------------------------------------

    def _rpc(self, method: str, params: dict[str, Any]) -> Any:
        body = {"id": next(self._rpc_ids), "method": method, "params": params}
        response = self.device.request("POST", "/rpc", json_body=body)
        reply = self.device.json(response)
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            if error.get("code") == RPC_INVALID_ARGUMENT:
                raise PowerError(f"the plug has no switch {self.switch_id} ({method}: {error.get('message')})")
            raise PowerError(f"{method}: error {error.get('code')}: {error.get('message')}")
        if response.status_code != 200 or not isinstance(reply, dict) or "result" not in reply:
            raise PowerError(f"{method}: unexpected reply (HTTP {response.status_code}): {reply!r}")
        return reply["result"]

    # -- the driver interface -----------------------------------------------------------

    def _set(self, state: PowerState) -> None:
        on = state is PowerState.ON
        if self.gen == 1:
            self._relay(f"turn={'on' if on else 'off'}")
        else:
            self._rpc("Switch.Set", {"id": int(self.switch_id), "on": on})

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        seconds = flip_back_seconds(dwell_s)
        return DeviceCycle(off_s=float(seconds), note=f"off with the plug's flip-back timer at {seconds} s")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        seconds = int(plan.off_s or 1)
        if self.gen == 1:
            self._relay(f"turn=off&timer={seconds}")
        else:
            self._rpc("Switch.Set", {"id": int(self.switch_id), "on": False, "toggle_after": seconds})

    def _read_power(self) -> float | None:
        if self.gen == 1:
            response = self.device.request("GET", f"/meter/{self.switch_id}")
            reply = self.device.json(response) if response.status_code == 200 else None
            watts = reply.get("power") if isinstance(reply, dict) else None
        else:
            status = self._rpc("Switch.GetStatus", {"id": int(self.switch_id)})
            watts = status.get("apower") if isinstance(status, dict) else None
        return float(watts) if isinstance(watts, (int, float)) and not isinstance(watts, bool) else None

    def _read_plug_settings(self) -> PlugSettings:
        if self.gen == 1:
            path = f"/settings/relay/{self.switch_id}"
            response = self.device.request("GET", path)
            if response.status_code != 200:
                raise PowerError(f"GET {path}: HTTP {response.status_code}")
            return gen1_settings(self.device.json(response), self.switch_id)
        return gen2_settings(self._rpc("Switch.GetConfig", {"id": int(self.switch_id)}), self.switch_id)

    def _read(self) -> PowerState:
        if self.gen == 1:
            return self._relay(None)
        status = self._rpc("Switch.GetStatus", {"id": int(self.switch_id)})
        if not isinstance(status, dict) or not isinstance(status.get("output"), bool):
            raise PowerError(f"Switch.GetStatus: no 'output' in {status!r}")
        return PowerState.ON if status["output"] else PowerState.OFF
