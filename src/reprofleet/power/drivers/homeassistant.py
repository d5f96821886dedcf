"""A Home Assistant ``switch`` entity, over Home Assistant's REST API.

Selected by an inventory ``pdu:`` block like::

    pdu:
      driver: homeassistant
      address: http://homeassistant.local:8123     # or https://ha.lab (TLS options as for every HTTP driver)
      outlet: switch.ws01_plug                     # the switch entity that feeds the host
      credentials: file:~/.config/reprofleet/ha-token   # a long-lived access token (HA profile page)
      # timeout_s: 10  settle_s: 15  poll_s: 0.5   (every driver)

One token reaches every plug Home Assistant controls, whatever its brand. Requests
(developers.home-assistant.io/docs/api/rest): ``GET /api/states/<entity_id>`` answers the
state object (``{"entity_id", "state", "attributes", "last_changed", ...}``, HTTP 404 for an
unknown entity); ``POST /api/services/switch/turn_off|turn_on`` with ``{"entity_id": ...}``
asks the integration behind the entity to switch and answers the states that changed meanwhile
(it returns once the call ran, or after 10 s). Every request carries ``Authorization: Bearer
<token>``; a refused token is HTTP 401. ``POST /api/states/...`` is never used: it rewrites
Home Assistant's picture of the entity without touching the plug.

``unavailable`` (the integration lost the plug) and ``unknown`` (Home Assistant has not heard
from it since it started) are errors, never "off": a host behind a plug Home Assistant cannot
see may well be on. They are retried (a plug back on the WiFi a second later answers), and
a read whose every try says so fails as unanswered. Home Assistant has no flip-back timer for a switch entity that every
integration honours, so a cycle is the controller's: off, read back off, dwell, on, read
back on.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import requests
from requests.auth import AuthBase

from reprofleet.credentials import Secret
from reprofleet.errors import PowerError
from reprofleet.model import PowerPort
from reprofleet.power.base import PowerDriver, PowerState, TransientPowerError
from reprofleet.power.drivers.http import HttpDevice, base_url
from reprofleet.power.drivers.tls_pin import TLS_OPTIONS, tls_trust
from reprofleet.power.log import PowerLog
from reprofleet.power.options import PowerConfigError
from reprofleet.power.settings import DriverSettings

DOMAIN = "switch"
ENTITY_ID = re.compile(r"^switch\.[a-z0-9_]+$")  # Home Assistant's object ids: lowercase, digits, underscores
NOT_A_STATE = ("unavailable", "unknown")  # Home Assistant's STATE_UNAVAILABLE / STATE_UNKNOWN


class EntityStateError(TransientPowerError):
    """Home Assistant holds no on/off for the entity (``unavailable``/``unknown``): not an off.

    Home Assistant answered, but the plug behind it did not answer Home Assistant: retried like
    a device that gave no answer, and, when every try says so, no answer (the partition guard
    must not take a plug nobody can reach as proof that the hosts' network works)."""


def parse_entity_state(reply: object, entity_id: str) -> PowerState:
    """A ``GET /api/states/<entity_id>`` reply -> ON/OFF; ``unavailable``/``unknown`` and
    anything else raise, naming the entity."""
    if not isinstance(reply, dict) or not isinstance(reply.get("state"), str):
        raise PowerError(f"{entity_id}: reply has no 'state': {str(reply)[:120]!r}")
    if reply.get("entity_id") not in (None, entity_id):
        raise PowerError(f"{entity_id}: Home Assistant answered for {reply.get('entity_id')!r}")
    state = reply["state"]
    if state in NOT_A_STATE:
        raise EntityStateError(f"{entity_id} is {state} in Home Assistant (the integration cannot reach the plug, "
                               "or has not heard from it since Home Assistant started): its power is not known")
    if state in ("on", "off"):
        return PowerState(state)
    raise PowerError(f"{entity_id}: state {state[:40]!r} is neither on nor off")


class BearerToken(AuthBase):
    """``Authorization: Bearer <token>`` on each request; the token is revealed only there."""

    def __init__(self, token: Secret) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token.reveal()}"
        return request

    def __repr__(self) -> str:
        return "BearerToken(***)"


class HomeAssistantDriver(PowerDriver):
    name = "homeassistant"
    option_names = TLS_OPTIONS
    # HA's service call returns once the integration ran it (at most 10 s): the read timeout covers that.
    defaults = DriverSettings(timeout_s=12.0, settle_s=15.0, poll_s=0.5)
    default_port = 8123

    def __init__(self, port: PowerPort, host: str, log: PowerLog, *, secret: Secret | None = None) -> None:
        super().__init__(port, host, log, secret=secret)
        self.entity_id = str(port.outlet or "")
        if not ENTITY_ID.match(self.entity_id):
            raise PowerConfigError(f"{self.where}: a Home Assistant outlet is a switch entity id like "
                                   f"switch.ws01_plug, got {self.entity_id!r}", field="outlet")
        if not secret:
            raise PowerConfigError(f"{self.where}: Home Assistant needs credentials: a long-lived access token "
                                   "(env:VAR or file:/path)", field="credentials")
        self.device = HttpDevice(base_url(port.address), self.settings.timeout_s, auth=BearerToken(secret),
                                 tls=tls_trust(self.options), connect_timeout_s=self.settings.connect_s)

    def _read(self) -> PowerState:
        path = f"/api/states/{quote(self.entity_id)}"
        response = self.device.request("GET", path)
        if response.status_code == 404:
            raise PowerError(f"Home Assistant has no entity {self.entity_id} (GET {path}: HTTP 404)")
        if response.status_code != 200:
            raise PowerError(f"GET {path}: HTTP {response.status_code}")
        return parse_entity_state(self.device.json(response), self.entity_id)

    def _set(self, state: PowerState) -> None:
        path = f"/api/services/{DOMAIN}/turn_{state.value}"
        response = self.device.request("POST", path, json_body={"entity_id": self.entity_id})
        if response.status_code == 504:  # the integration did not answer Home Assistant in time
            raise TransientPowerError(f"POST {path}: HTTP 504")
        if response.status_code != 200:
            raise PowerError(f"POST {path}: HTTP {response.status_code} (the service call was refused)")
