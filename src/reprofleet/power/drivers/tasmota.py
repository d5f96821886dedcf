"""Tasmota smart plugs and relay boards, over Tasmota's HTTP command API.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: tasmota
      address: 10.0.0.41          # or http://10.0.0.41:8080
      outlet: 1                   # relay number, Power<N>; default 1
      credentials: env:PLUG_PASS  # "user:password" or just the password (user admin)
      # device_cycle: true        # cycles by the plug's own Backlog (default); false: off, dwell, on
      # timeout_s: 5  settle_s: 10  tries: 3  poll_s: 0.25   (every driver)

Requests are ``GET /cm?cmnd=Power<N> On|Off`` and plain ``Power<N>`` to read. Credentials
go in an HTTP basic-auth header (``auth: basic``, the default; Tasmota accepts it on
``/cm``). ``user=&password=`` in the query string (old firmware) only with ``auth: query``,
never as a fallback: the query ends up in every proxy's and web server's access log, and
the "Need user=" reply that would trigger a fallback is plain HTTP anyone on the path can
forge. A plug that asks for it gets one clear error naming the option. A single-relay device
answers ``{"POWER":"ON"}``, a multi-relay one ``{"POWER<N>":"ON"}``; a relay that does not
exist answers ``{"Command":"Unknown"}``; wrong or missing credentials answer
``{"WARNING":"Need user=<username>&password=<password>"}``.

A cycle (``device_cycle``, default true) is one request that the plug runs by itself:
``Backlog Power<N> OFF; Delay <d>; Power<N> ON``. Tasmota queues backlog commands and runs
them from its own loop, 200 ms apart, ``Delay`` (2..3600 tenths of a second) waiting longer
before the next, and answers at once with ``{"WARNING":"Enable weblog 2 if response
expected"}`` (Tasmota support_command.ino CmndBacklog/CmndDelay; the Commands docs, "Using
Backlog"), so the host comes back even if the controller dies in the dwell. Dwells longer
than 360 s are cycled off, dwell, on. Not ``PulseTime``: it switches a relay *off* a while
after it was switched *on*, the opposite of what a power cycle needs (an armed one is an
auto-off timer: the plug's own behaviour is read by ``tasmota_settings``).
"""

from __future__ import annotations

import math
from urllib.parse import quote, urlencode

from requests.auth import HTTPBasicAuth

from reprofleet.credentials import Secret, split_user_password
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import DeviceCycle, PowerDriver, PowerState
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.drivers.tasmota_settings import tasmota_settings
from reprofleet.power.plug_behaviour import PlugSettings
from reprofleet.power.drivers.tls_pin import TLS_OPTIONS, tls_trust
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError


MAX_DELAY_TENTHS = 3600  # Tasmota's Delay: 2..3600 tenths of a second
MIN_DELAY_TENTHS = 2


def delay_tenths(dwell_s: float) -> int | None:
    """The ``Delay`` that keeps the relay off at least ``dwell_s``; None past Tasmota's 360 s."""
    tenths = max(MIN_DELAY_TENTHS, math.ceil(round(dwell_s * 10, 6)))
    return tenths if tenths <= MAX_DELAY_TENTHS else None


def backlog_cycle(relay: str, tenths: int) -> str:
    """The one command whose queue the plug runs by itself: off, wait, on."""
    return f"Backlog Power{relay} OFF; Delay {tenths}; Power{relay} ON"


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
    option_names = ("auth", "device_cycle", *TLS_OPTIONS)
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
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s, tls=tls_trust(self.options),
                                 connect_timeout_s=self.settings.connect_s)
        self.auth_mode = self.options.choice("auth", ("basic", "query"), "basic")
        self.device_cycles = self._device_cycle_option(True)

    def _reply(self, command: str) -> object:
        password = self._password.reveal() if self._password else None
        in_query = self.auth_mode == "query"
        self.device.session.auth = HTTPBasicAuth(self._user or "admin", password) if password and not in_query else None
        query = command_query(command, self._user, password if in_query else None)
        response = self.device.request("GET", "/cm", query=query)
        if response.status_code != 200:
            raise PowerError(f"GET /cm: HTTP {response.status_code}")
        return self.device.json(response)

    def _answer(self, command: str) -> object:
        reply = self._reply(command)
        if asks_for_credentials(reply) and self._password and self.auth_mode == "basic":
            raise PowerError(f"{self.where}: the plug refused the credentials and asks for user=&password= (a wrong "
                             "password, or old firmware that ignores basic auth: then set 'auth: query' in its pdu "
                             "block to send the password that way)")
        return reply

    def _command(self, command: str) -> PowerState:
        return parse_power_reply(self._answer(command), self.relay)

    def _plan_device_cycle(self, dwell_s: float) -> DeviceCycle | None:
        tenths = delay_tenths(dwell_s)
        if tenths is None:
            return DeviceCycle(off_s=MAX_DELAY_TENTHS / 10)  # the most Delay can wait: too short
        return DeviceCycle(off_s=tenths / 10, note=f"Backlog with Delay {tenths} (0.1 s each)")

    def _start_device_cycle(self, plan: DeviceCycle) -> None:
        reply = self._answer(backlog_cycle(self.relay, delay_tenths(plan.off_s or 0.0) or MAX_DELAY_TENTHS))
        if asks_for_credentials(reply):
            raise PowerError(f"the plug refused the credentials: {reply}")
        if not isinstance(reply, dict) or str(reply.get("Command", "")).lower() == "unknown":
            raise PowerError(f"the plug did not take the Backlog: {reply!r}")

    def _read_power(self) -> float | None:
        return parse_energy_reply(self._answer("Status 8"), self.relay)

    def _read_plug_settings(self) -> PlugSettings:
        return tasmota_settings(self.relay, self._answer("PowerOnState"), self._answer(f"PulseTime{self.relay}"),
                                self._answer("MaxPower"), self._answer("SetOption73"))

    def _set(self, state: PowerState) -> None:
        self._command(f"Power{self.relay} {'On' if state is PowerState.ON else 'Off'}")

    def _read(self) -> PowerState:
        return self._command(f"Power{self.relay}")
