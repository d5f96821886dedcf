"""A simulated Home Assistant: its REST API for ``switch`` entities, each wired to a switch file.

    ha = HomeAssistantSim({"switch.ws01_plug": host / "hw/power"}, token="llat-...")
    ha.address                              # http://127.0.0.1:<port>
    ha.set_entity_state("switch.ws01_plug", "unavailable")   # or "unknown"; None: back to the plug
    ha.after_switch = AfterSwitch.OVERLOAD_TRIP
    ha.stop()

Written from the REST API's documentation (https://developers.home-assistant.io/docs/api/rest/):
every request needs ``Authorization: Bearer <long-lived token>`` (else HTTP 401, body
``401: Unauthorized``); ``GET /api/states/<entity_id>`` answers the state object or HTTP 404
``{"message": "Entity not found."}``; ``POST /api/services/<domain>/<service>`` with
``{"entity_id": ...}`` runs the service and answers the list of states that changed. A service
call on an entity that is ``unavailable`` does nothing (Home Assistant skips entities that are
not available) and still answers 200 with an empty list. ``GET /api/`` answers ``{"message":
"API running."}``.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .loopback_http import HttpAnswer, HttpAsk, LoopbackHttp
from .plug_faults import AfterSwitch, switch_outlet
from .switch import read_switch

SERVICES = {"turn_on": True, "turn_off": False}
UNAVAILABLE_STATES = ("unavailable", "unknown")


def _json(data: Any, status: int = 200) -> HttpAnswer:
    return HttpAnswer(status, json.dumps(data).encode())


class HomeAssistantSim:
    """Home Assistant's REST API over the given switch entities, on 127.0.0.1, in this process."""

    def __init__(self, entities: Mapping[str, Path], token: str) -> None:
        self.entities = dict(entities)
        self.token = token
        self.after_switch = AfterSwitch.NONE
        self._overrides: dict[str, str] = {}
        self._changed: dict[str, str] = {}
        self._lock = threading.Lock()
        self.http = LoopbackHttp(self.handle, "HomeAssistantSim/1")

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    def served(self) -> list[str]:
        return self.http.served()

    def stop(self) -> None:
        self.http.stop()

    def set_entity_state(self, entity_id: str, state: str | None) -> None:
        """Make Home Assistant report ``unavailable``/``unknown`` for the entity (None: the plug's own state)."""
        if state is not None and state not in UNAVAILABLE_STATES:
            raise ValueError(f"only {', '.join(UNAVAILABLE_STATES)} (or None), got {state!r}")
        with self._lock:
            if state is None:
                self._overrides.pop(entity_id, None)
            else:
                self._overrides[entity_id] = state

    # -- the API -------------------------------------------------------------------------

    def handle(self, ask: HttpAsk) -> HttpAnswer:
        if ask.headers.get("authorization") != f"Bearer {self.token}":
            return HttpAnswer(401, b"401: Unauthorized", "text/plain")
        if ask.path == "/api/" and ask.method == "GET":
            return _json({"message": "API running."})
        if ask.path.startswith("/api/states/") and ask.method == "GET":
            state = self._state(ask.path.removeprefix("/api/states/"))
            return _json(state) if state else _json({"message": "Entity not found."}, 404)
        if ask.path.startswith("/api/services/") and ask.method == "POST":
            return self._service(ask.path.removeprefix("/api/services/"), ask.body)
        return _json({"message": "Not Found"}, 404)

    def _state(self, entity_id: str) -> dict[str, Any] | None:
        switch = self.entities.get(entity_id)
        if switch is None:
            return None
        with self._lock:
            state = self._overrides.get(entity_id) or ("on" if read_switch(switch) else "off")
            changed = self._changed.setdefault(entity_id, _now())
        attributes: dict[str, Any] = {"friendly_name": entity_id.split(".", 1)[1].replace("_", " ").title()}
        if state in UNAVAILABLE_STATES:
            attributes["restored"] = True  # what HA shows for an entity whose integration has not loaded it
        return {"entity_id": entity_id, "state": state, "attributes": attributes, "last_changed": changed,
                "last_updated": changed, "context": {"id": "01HSIM0000000000000000000", "parent_id": None,
                                                     "user_id": None}}

    def _service(self, route: str, body: bytes) -> HttpAnswer:
        domain, _, service = route.partition("/")
        if domain != "switch" or service not in SERVICES:
            return _json({"message": f"Service {domain}.{service} not found."}, 400)
        try:
            entity_id = json.loads(body or b"{}").get("entity_id")
        except (ValueError, AttributeError):
            return _json({"message": "Data should be valid JSON."}, 400)
        switch = self.entities.get(str(entity_id))
        with self._lock:
            skipped = switch is None or entity_id in self._overrides
        if skipped or switch is None:
            return _json([])
        switch_outlet(switch, SERVICES[service], self.after_switch)
        with self._lock:
            self._changed[str(entity_id)] = _now()
        state = self._state(str(entity_id))
        return _json([state] if state else [])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()
