"""Shelly Gen1 (REST) and Gen2+ (JSON-RPC over HTTP) relay APIs, as Shelly documents them.

Gen1: ``GET /shelly`` (device info, never behind auth), ``GET /relay/<id>[?turn=on|off|toggle
[&timer=S]]`` answering ``{"ison": ..., "has_timer": ...}``; HTTP basic auth when a password
is set; an unknown relay is HTTP 404.

Gen2+: ``GET /shelly`` (with ``gen: 2``), ``POST /rpc`` with ``{"id", "method", "params"}``
answering ``{"id", "src", "result"}`` or ``{"id", "src", "error": {"code", "message"}}``, and
``GET /rpc/<Method>?<params>`` answering the bare result. Gen1 meters: ``GET /meter/<i>``
(``power`` in watts). Methods: ``Switch.Set {id, on,
toggle_after}``, ``Switch.Toggle {id}``, ``Switch.GetStatus {id}`` (``output``, ``apower`` in W,
``timer_started_at``/``timer_duration`` while a flip-back timer runs),
``Shelly.GetDeviceInfo``. Auth is HTTP digest, SHA-256, user ``admin``, realm = device id.

The relay's own behaviour, as each generation's API documents it: Gen1 ``GET /settings/relay/<id>``
answers (and with query parameters sets) ``default_state`` (off | on | last | switch),
``auto_on``/``auto_off`` (seconds, 0 disabled) and ``max_power`` (W); Gen2 ``Switch.GetConfig
{id}`` / ``Switch.SetConfig {id, config}`` hold ``initial_state`` (off | on | restore_last |
match_input), ``auto_on``/``auto_off`` (bool) with ``auto_on_delay``/``auto_off_delay`` (s) and
``power_limit`` (W). The settings are answered and kept; the simulator does not act on them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from typing import Any, Mapping

from .plug_device import PlugDevice, Reply, json_reply, text_reply

INVALID_ARGUMENT = -105
GEN1_RELAY_DEFAULTS = {"name": None, "appliance_type": "General", "default_state": "last", "btn_type": "toggle",
                       "btn_reverse": 0, "auto_on": 0.0, "auto_off": 0.0, "max_power": 2500, "schedule": False}
GEN1_STATES = ("off", "on", "last", "switch")
GEN2_SWITCH_DEFAULTS = {"name": None, "in_mode": "follow", "initial_state": "restore_last", "auto_on": False,
                        "auto_on_delay": 60.0, "auto_off": False, "auto_off_delay": 60.0, "power_limit": 3680,
                        "voltage_limit": 280, "current_limit": 16.0}
GEN2_STATES = ("off", "on", "restore_last", "match_input")
METHOD_NOT_FOUND = -114
DIGEST_FIELD = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\s]*))')


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ShellyPlug:
    """One Shelly personality (gen 1 or 2) over a PlugDevice."""

    def __init__(self, device: PlugDevice, gen: int) -> None:
        self.device = device
        self.gen = gen
        self.nonces: set[str] = set()
        defaults = GEN1_RELAY_DEFAULTS if gen == 1 else GEN2_SWITCH_DEFAULTS
        self.config: dict[str, dict[str, Any]] = {outlet: dict(defaults) for outlet in device.outlets}

    # -- auth ----------------------------------------------------------------------------

    def _basic_ok(self, headers: Mapping[str, str]) -> bool:
        value = headers.get("authorization", "")
        if not value.lower().startswith("basic "):
            return False
        try:
            user, _, password = base64.b64decode(value[6:]).decode().partition(":")
        except ValueError:
            return False
        return user == (self.device.user or "admin") and password == self.device.password

    def _digest_ok(self, method: str, headers: Mapping[str, str]) -> bool:
        value = headers.get("authorization", "")
        if not value.lower().startswith("digest "):
            return False
        fields = {key.lower(): quoted or bare for key, quoted, bare in DIGEST_FIELD.findall(value[7:])}
        if fields.get("nonce") not in self.nonces or fields.get("username") != "admin":
            return False
        ha1 = _sha256(f"admin:{self.device.device_id}:{self.device.password}")
        ha2 = _sha256(f"{method}:{fields.get('uri', '')}")
        expected = _sha256(":".join([ha1, fields["nonce"], fields.get("nc", ""), fields.get("cnonce", ""),
                                     fields.get("qop", ""), ha2]))
        return secrets.compare_digest(expected, fields.get("response", ""))

    def _challenge(self) -> Reply:
        if self.gen == 1:
            return Reply(401, b"401 Unauthorized", "text/plain", {"WWW-Authenticate": 'Basic realm="shelly"'})
        nonce = secrets.token_hex(16)
        self.nonces.add(nonce)
        header = (f'Digest qop="auth", realm="{self.device.device_id}", nonce="{nonce}", algorithm=SHA-256')
        return json_reply({"code": 401, "message": "unauthorized"}, 401, {"WWW-Authenticate": header})

    # -- routing ---------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        auth = self.device.password is not None
        if self.gen == 1:
            return {"type": "SHSW-25", "mac": "A4CF12F0A1B2", "auth": auth, "fw": "20230913-112003/v1.14.0-gcb84623",
                    "num_outputs": len(self.device.outlets)}
        return {"name": None, "id": self.device.device_id, "mac": "A8032ABE54DC", "model": "SPSW-004PE16EU",
                "gen": 2, "fw_id": "20241011-114455/1.4.4-g6d2a586", "ver": "1.4.4", "app": "Pro4PM",
                "auth_en": auth, "auth_domain": self.device.device_id if auth else None}

    def handle(self, device: PlugDevice, method: str, path: str, query: Mapping[str, str],
               headers: Mapping[str, str], body: bytes) -> Reply:
        if path == "/shelly":
            return json_reply(self.info())
        if device.password is not None:
            ok = self._basic_ok(headers) if self.gen == 1 else self._digest_ok(method, headers)
            if not ok:
                return self._challenge()
        if self.gen == 1:
            meter = re.fullmatch(r"/meter/(\d+)", path)
            if meter:
                return self._meter(meter.group(1))
            settings = re.fullmatch(r"/settings/relay/(\d+)", path)
            if settings:
                return self._relay_settings(settings.group(1), query)
            match = re.fullmatch(r"/relay/(\d+)", path)
            return self._relay(match.group(1), query) if match else text_reply(404, "Not Found")
        if path == "/rpc" and method == "POST":
            return self._rpc_envelope(body)
        if path.startswith("/rpc/"):
            params: dict[str, Any] = {k: _json_value(v) for k, v in query.items()}
            result, error = self._call(path[5:], params)
            return json_reply(result) if error is None else json_reply(error, 500 if error["code"] != 401 else 401)
        return text_reply(404, "Not Found")

    # -- Gen1 ------------------------------------------------------------------------------

    def _relay(self, relay: str, query: Mapping[str, str]) -> Reply:
        if relay not in self.device.outlets:
            return text_reply(404, "Not Found")
        turn = query.get("turn")
        if turn is not None:
            if turn not in ("on", "off", "toggle"):
                return text_reply(400, "Bad turn!")
            on = (not self.device.is_on(relay)) if turn == "toggle" else turn == "on"
            timer = float(query["timer"]) if query.get("timer") else None
            self.device.switch(relay, on, timer)
        flip = self.device.flip_back_of(relay)
        return json_reply({"ison": self.device.is_on(relay), "has_timer": flip is not None,
                           "timer_started": int(flip.started_at) if flip else 0,
                           "timer_duration": flip.duration_s if flip else 0, "source": "http"})

    def _relay_settings(self, relay: str, query: Mapping[str, str]) -> Reply:
        """``GET /settings/relay/<id>[?default_state=...&auto_off=...&max_power=...]``."""
        if relay not in self.device.outlets:
            return text_reply(404, "Not Found")
        config = self.config[relay]
        for key, value in query.items():
            if key == "default_state":
                if value not in GEN1_STATES:
                    return text_reply(400, "Bad default_state!")
                config[key] = value
            elif key in ("auto_on", "auto_off", "max_power"):
                try:
                    config[key] = float(value) if key != "max_power" else int(value)
                except ValueError:
                    return text_reply(400, f"Bad {key}!")
        return json_reply({**config, "ison": self.device.is_on(relay), "has_timer": False})

    def _meter(self, meter: str) -> Reply:
        """Gen1 ``GET /meter/<i>``: ``power`` is the instantaneous draw in watts."""
        if meter not in self.device.outlets:
            return text_reply(404, "Not Found")
        return json_reply({"power": self.device.watts(meter), "overpower": 0.0, "is_valid": True,
                           "timestamp": 0, "counters": [0.0, 0.0, 0.0], "total": 0})

    # -- Gen2 ------------------------------------------------------------------------------

    def _rpc_envelope(self, body: bytes) -> Reply:
        try:
            request = json.loads(body or b"{}")
            method, params = str(request["method"]), dict(request.get("params") or {})
        except (ValueError, KeyError, TypeError):
            return json_reply({"id": None, "src": self.device.device_id,
                               "error": {"code": -32700, "message": "Parse error"}})
        result, error = self._call(method, params)
        envelope: dict[str, Any] = {"id": request.get("id"), "src": self.device.device_id}
        envelope.update({"result": result} if error is None else {"error": error})
        return json_reply(envelope)

    def _call(self, method: str, params: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        if method == "Shelly.GetDeviceInfo":
            return self.info(), None
        if method not in ("Switch.Set", "Switch.Toggle", "Switch.GetStatus", "Switch.GetConfig", "Switch.SetConfig"):
            return None, {"code": METHOD_NOT_FOUND, "message": f"No handler for {method}"}
        switch_id = str(params.get("id", ""))
        if switch_id not in self.device.outlets:
            return None, {"code": INVALID_ARGUMENT, "message": f"Argument 'id', value {params.get('id')} not found!"}
        if method == "Switch.GetStatus":
            return self._status(switch_id), None
        if method == "Switch.GetConfig":
            return {"id": int(switch_id), **self.config[switch_id]}, None
        if method == "Switch.SetConfig":
            return self._set_config(switch_id, params.get("config"))
        on = (not self.device.is_on(switch_id)) if method == "Switch.Toggle" else bool(params.get("on"))
        toggle_after = params.get("toggle_after")
        was_on = self.device.switch(switch_id, on, float(toggle_after) if toggle_after else None)
        return {"was_on": was_on}, None

    def _set_config(self, switch_id: str, config: Any) -> tuple[Any, dict[str, Any] | None]:
        """``Switch.SetConfig``: only known keys, of the documented kinds; answers ``restart_required``."""
        if not isinstance(config, dict):
            return None, {"code": INVALID_ARGUMENT, "message": "Missing required argument 'config'!"}
        for key, value in config.items():
            known = GEN2_SWITCH_DEFAULTS.get(key, KeyError)
            bad = (known is KeyError or (key == "initial_state" and value not in GEN2_STATES)
                   or (isinstance(known, bool) and not isinstance(value, bool))
                   or (isinstance(known, (int, float)) and not isinstance(known, bool)
                       and (isinstance(value, bool) or not isinstance(value, (int, float)))))
            if bad:
                return None, {"code": INVALID_ARGUMENT, "message": f"Invalid argument '{key}'!"}
        self.config[switch_id].update(config)
        return {"restart_required": False}, None

    def _status(self, switch_id: str) -> dict[str, Any]:
        status: dict[str, Any] = {"id": int(switch_id), "source": "HTTP_in", "output": self.device.is_on(switch_id),
                                  "apower": self.device.watts(switch_id), "voltage": 230.1, "temperature": {"tC": 41.2, "tF": 106.2}}
        flip = self.device.flip_back_of(switch_id)
        if flip:
            status.update(timer_started_at=flip.started_at, timer_duration=flip.duration_s)
        return status


def _json_value(text: str) -> Any:
    """``GET /rpc/Switch.Set?id=0&on=false``: query values are JSON where they parse."""
    try:
        return json.loads(text)
    except ValueError:
        return text
