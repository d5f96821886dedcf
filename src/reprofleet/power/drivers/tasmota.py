"""Tasmota smart plugs and relay boards, over Tasmota's HTTP command API.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: tasmota
      address: 10.0.0.41          # or http://10.0.0.41:8080
      outlet: 1                   # relay number, Power<N>; default 1
      credentials: env:PLUG_PASS  # "user:password" or just the password (user admin)
      # timeout_s: 5  settle_s: 10  tries: 3  poll_s: 0.25   (every driver)

Requests are ``GET /cm?cmnd=Power<N> On|Off`` and plain ``Power<N>`` to read. Credentials
go in an HTTP basic-auth header first (Tasmota accepts it on ``/cm``); only a plug that
answers it with the "Need user=" warning (old firmware) gets ``user=&password=`` in the
query string, which ends up in every proxy's and web server's access log. ``auth: basic``
or ``auth: query`` fixes the choice. A single-relay device
answers ``{"POWER":"ON"}``, a multi-relay one ``{"POWER<N>":"ON"}``; a relay that does not
exist answers ``{"Command":"Unknown"}``; wrong or missing credentials answer
``{"WARNING":"Need user=<username>&password=<password>"}``.

No flip-back safety net: Tasmota's ``PulseTime`` switches a relay *off* after it was
switched on, the opposite of what a power cycle needs.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from requests.auth import HTTPBasicAuth

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver, PowerState
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError


def command_query(command: str, user: str | None, password: str | None) -> str:
    """The query string of one Tasmota web command (spaces as %20, as Tasmota expects)."""
    params = {"cmnd": command}
    if password is not None:
        params.update(user=user or "admin", password=password)
    return urlencode(params, quote_via=quote)


def parse_power_reply(reply: object, relay: str) -> PowerState:
    """``{"POWER1":"ON"}`` / ``{"POWER":"OFF"}`` -> PowerState; anything else raises."""
    if not isinstance(reply, dict):
        raise PowerError(f"unexpected reply {reply!r}")
    if "WARNING" in reply:
        raise PowerError(f"the plug refused the credentials: {reply['WARNING']}")
    if str(reply.get("Command", "")).lower() == "unknown":
        raise PowerError(f"the plug has no relay {relay} (it answered Command: Unknown)")
    keys = [f"POWER{relay}"] + (["POWER"] if relay == "1" else [])
    for key in keys:
        if key in reply:
            value = str(reply[key]).upper()
            if value in ("ON", "OFF"):
                return PowerState(value.lower())
    raise PowerError(f"reply has no state for relay {relay}: {reply!r}")


NEED_CREDENTIALS = "need user="


def asks_for_credentials(reply: object) -> bool:
    return isinstance(reply, dict) and NEED_CREDENTIALS in str(reply.get("WARNING", "")).lower()


def parse_energy_reply(reply: object, relay: str) -> float | None:
    """``Status 8``'s ``StatusSNS.ENERGY.Power``: watts, a list on multi-channel devices; None if unmetered."""
    energy = reply.get("StatusSNS", {}).get("ENERGY") if isinstance(reply, dict) else None
    power = energy.get("Power") if isinstance(energy, dict) else None
    if isinstance(power, list):
        power = power[int(relay) - 1] if 0 < int(relay) <= len(power) else None
    return float(power) if isinstance(power, (int, float)) and not isinstance(power, bool) else None


class TasmotaDriver(PowerDriver):
    name = "tasmota"
    option_names = ("auth",)
    meters_power = True  # Status 8, where the device has an energy monitor

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.relay = str(port.outlet or "1")
        if not self.relay.isdigit() or int(self.relay) < 1:
            raise PowerConfigError(f"{self.where}: a Tasmota outlet is a relay number >= 1, got {self.relay!r}")
        self._user: str | None = None
        self._password: Secret | None = None
        if secret:
            self._user, self._password = split_user_password(secret, "admin")
            self._secrets.append(self._password)
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s)
        self.auth_mode = self.options.choice("auth", ("basic", "query"), "basic")
        self._auth_fixed = self.options.has("auth")

    def _reply(self, command: str) -> object:
        password = self._password.reveal() if self._password else None
        in_query = self.auth_mode == "query"
        self.device.session.auth = HTTPBasicAuth(self._user or "admin", password) if password and not in_query else None
        query = command_query(command, self._user, password if in_query else None)
        response = self.device.request("GET", "/cm", query=query)
        if response.status_code != 200:
            raise PowerError(f"GET /cm: HTTP {response.status_code}")
        return self.device.json(response)

    def _command(self, command: str) -> PowerState:
        reply = self._reply(command)
        if asks_for_credentials(reply) and self._password and self.auth_mode == "basic" and not self._auth_fixed:
            self.auth_mode = "query"  # old firmware: only the query string is understood
            reply = self._reply(command)
        return parse_power_reply(reply, self.relay)

    def _read_power(self) -> float | None:
        reply = self._reply("Status 8")
        if asks_for_credentials(reply) and self._password and self.auth_mode == "basic" and not self._auth_fixed:
            self.auth_mode = "query"
            reply = self._reply("Status 8")
        return parse_energy_reply(reply, self.relay)

    def _set(self, state: PowerState) -> None:
        self._command(f"Power{self.relay} {'On' if state is PowerState.ON else 'Off'}")

    def _read(self) -> PowerState:
        return self._command(f"Power{self.relay}")
