"""Simulated TP-Link Kasa and Tapo plugs and power strips on 127.0.0.1, in this process.

    plug = KasaXorPlug([host / "hw/power"])                       # a Kasa HS103 on the legacy protocol
    strip = KasaKlapPlug([a, b, c], user="me@example.com", password="pw", strip=True)   # a Tapo P300
    strip.address                     # "127.0.0.1:<port>"
    strip.after_switch = AfterSwitch.OVERLOAD_TRIP
    strip.stop()

Each outlet is a switch file (``switch.py``). A plug answers for itself; a strip answers for its
children, each with an id and a 1-based position, as the devices report them. The JSON follows
the devices' own, as recorded in python-kasa's fixtures of real devices (an HS300 strip:
https://github.com/python-kasa/python-kasa/blob/master/tests/fixtures/iot/HS300(US)_2.0_1.0.12.json;
a P300 strip: https://github.com/python-kasa/python-kasa/blob/master/tests/fixtures/smart/P300(EU)_1.0_1.0.15.json):

- IOT (the XOR plug, and the IOT.KLAP one): ``{"system": {"get_sysinfo": {}}}`` answers
  ``relay_state`` (a plug) or ``children: [{"id", "state", "alias"}]`` (a strip);
  ``{"system": {"set_relay_state": {"state": 0|1}}}``, for a strip's socket with
  ``{"context": {"child_ids": [id]}}`` beside it, answers ``{"err_code": 0}``;
- SMART (Tapo, KLAP v2): ``get_device_info`` answers ``device_on``; ``set_device_info
  {"device_on"}`` switches; a strip's ``get_child_device_list`` lists ``{"device_id", "position",
  "device_on"}`` and ``control_child {"device_id", "requestData": {"method", "params"}}`` switches
  one; every answer is ``{"error_code": 0, "result": ...}`` (-1008 for bad parameters, -1002 for an
  unknown method).
- The device's own behaviour (settable on ``outlets``): a Tapo plug's ``default_states`` in its
  device info, ``get_auto_off_config`` (``{"enable", "delay_min"}``) and ``get_protection_power``
  (``{"enabled", "protection_power"}``), as the P110 fixture
  (https://github.com/python-kasa/python-kasa/blob/master/tests/fixtures/smart/P110(EU)_1.0_1.2.3.json)
  answers them; a Kasa plug's ``{"count_down": {"get_rules": {}}}`` -> ``rule_list`` of
  ``{"enable", "delay", "act", "remain"}`` (python-kasa iot/modules/countdown.py). A strip answers
  none of the Tapo ones ("unknown method").

A KLAP handshake with credentials other than the owner's gets a handshake1 hash the client cannot
match (what a real device does: it proves the owner's account, whoever asks), so a client with
the wrong TP-Link account gives up there; handshake2 with a wrong proof is HTTP 403.
"""

from __future__ import annotations

import json
import secrets
import socket
import socketserver
import struct
import threading
from pathlib import Path
from typing import Any, Sequence

from .kasa_wire import KlapCipher, frame, handshake1_proof, handshake2_proof, owner_hash, xor_decipher, xor_encipher
from .loopback_http import HttpAnswer, HttpAsk, LoopbackHttp
from .plug_faults import AfterSwitch, switch_outlet
from .switch import read_switch

SMART_PARAMS_ERROR = -1008
SMART_UNKNOWN_METHOD = -1002
IOT_BAD_CHILD = -14  # what HS300 firmware answers for a child id it does not have


class KasaOutlets:
    """The switch files behind one device, the JSON it answers, and its faults."""

    def __init__(self, switches: Sequence[Path], *, strip: bool, device_id: str) -> None:
        self.switches = list(switches)
        self.strip = strip
        self.device_id = device_id
        self.child_ids = [f"{device_id}{index:02d}" for index in range(len(self.switches))] if strip else []
        self.after_switch = AfterSwitch.NONE
        self.lock = threading.Lock()
        # the device's own behaviour, as its owner set it in the app (the defaults of a new P110 / HS103)
        self.default_states: dict[str, Any] = {"state": {}, "type": "last_states"}
        self.auto_off: dict[str, Any] = {"delay_min": 120, "enable": False}
        self.protection: dict[str, Any] = {"enabled": False, "protection_power": 0}
        self.countdown_rules: list[dict[str, Any]] = []

    def _switch(self, index: int, on: bool) -> None:
        switch_outlet(self.switches[index], on, self.after_switch)

    # -- IOT -------------------------------------------------------------------------------

    def iot_answer(self, request: dict[str, Any]) -> dict[str, Any]:
        countdown = request.get("count_down")
        if isinstance(countdown, dict) and "get_rules" in countdown:
            with self.lock:
                rules = [dict(rule) for rule in self.countdown_rules]
            return {"count_down": {"get_rules": {"rule_list": rules, "max_rules": 1, "err_code": 0}}}
        found = request.get("system")
        system: dict[str, Any] = found if isinstance(found, dict) else {}
        answer: dict[str, Any] = {}
        with self.lock:
            if "get_sysinfo" in system:
                answer["get_sysinfo"] = self._sysinfo()
            if "set_relay_state" in system:
                answer["set_relay_state"] = self._iot_set(request, system["set_relay_state"])
        return {"system": answer} if answer else {"system": {"err_code": -1, "err_msg": "module not support"}}

    def _sysinfo(self) -> dict[str, Any]:
        info: dict[str, Any] = {"sw_ver": "1.0.12 Build 220121 Rel.175814", "hw_ver": "2.0", "model": "HS300(US)"
                                if self.strip else "HS103(US)", "deviceId": self.device_id, "alias": "gpu lab",
                                "mic_type": "IOT.SMARTPLUGSWITCH", "feature": "TIM:ENE" if self.strip else "TIM",
                                "mac": "C0:06:C3:00:00:01", "led_off": 0, "rssi": -44, "updating": 0, "err_code": 0}
        if self.strip:
            info["child_num"] = len(self.switches)
            info["children"] = [{"id": child, "state": int(read_switch(path)), "alias": f"Plug {i + 1}",
                                 "on_time": 0, "next_action": {"type": -1}}
                                for i, (child, path) in enumerate(zip(self.child_ids, self.switches))]
        else:
            info["relay_state"] = int(read_switch(self.switches[0]))
        return info

    def _iot_set(self, request: dict[str, Any], params: Any) -> dict[str, Any]:
        state = params.get("state") if isinstance(params, dict) else None
        if state not in (0, 1):
            return {"err_code": -3, "err_msg": "invalid argument"}
        targets = [0]
        if self.strip:
            context = request.get("context")
            wanted = (context.get("child_ids") if isinstance(context, dict) else None) or []
            if not wanted or any(child not in self.child_ids for child in wanted):
                return {"err_code": IOT_BAD_CHILD, "err_msg": "entry not exist"}
            targets = [self.child_ids.index(child) for child in wanted]
        for index in targets:
            self._switch(index, bool(state))
        return {"err_code": 0}

    # -- SMART -----------------------------------------------------------------------------

    def smart_answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._smart_call(str(request.get("method")), request.get("params"))

    def _smart_call(self, method: str, params: Any) -> dict[str, Any]:
        if method == "get_device_info":
            return {"error_code": 0, "result": self._device_info(None)}
        if method == "set_device_info" and not self.strip:
            return self._smart_set(0, params)
        if method == "get_auto_off_config" and not self.strip:
            return {"error_code": 0, "result": dict(self.auto_off)}
        if method == "get_protection_power" and not self.strip:
            return {"error_code": 0, "result": dict(self.protection)}
        if method == "get_child_device_list" and self.strip:
            children = [self._device_info(i) for i in range(len(self.switches))]
            return {"error_code": 0, "result": {"child_device_list": children, "start_index": 0, "sum": len(children)}}
        if method == "control_child" and self.strip and isinstance(params, dict):
            child, inner = params.get("device_id"), params.get("requestData")
            if child not in self.child_ids or not isinstance(inner, dict) or inner.get("method") != "set_device_info":
                return {"error_code": SMART_PARAMS_ERROR}
            return {"error_code": 0, "result": {"responseData": self._smart_set(self.child_ids.index(child),
                                                                                inner.get("params"))}}
        return {"error_code": SMART_UNKNOWN_METHOD}

    def _smart_set(self, index: int, params: Any) -> dict[str, Any]:
        on = params.get("device_on") if isinstance(params, dict) else None
        if not isinstance(on, bool):
            return {"error_code": SMART_PARAMS_ERROR}
        self._switch(index, on)
        return {"error_code": 0}

    def _device_info(self, index: int | None) -> dict[str, Any]:
        info: dict[str, Any] = {"device_id": self.device_id, "model": "P300" if self.strip else "P110",
                                "type": "SMART.TAPOPLUG", "fw_ver": "1.0.15 Build 231130 Rel.122554",
                                "hw_ver": "1.0", "overheat_status": "normal", "auto_off_status": "off",
                                "auto_off_remain_time": 0, "default_states": dict(self.default_states),
                                "nickname": "Z3B1IGxhYg=="}
        if index is None:
            if not self.strip:
                info.update(device_on=read_switch(self.switches[0]), power_protection_status="normal")
            return info
        info.update(device_id=self.child_ids[index], position=index + 1, slot_number=len(self.switches),
                    device_on=read_switch(self.switches[index]), category="plug.powerstrip.sub-plug")
        return info


class _PlugFront:
    """What a test asks of either transport's plug: its outlets' fault hook (an overload trip,
    an app switch), set on the shared outlets."""

    outlets: KasaOutlets

    @property
    def after_switch(self) -> AfterSwitch:
        return self.outlets.after_switch

    @after_switch.setter
    def after_switch(self, value: AfterSwitch) -> None:
        self.outlets.after_switch = value


class KasaXorPlug(_PlugFront):
    """A Kasa plug or strip on the legacy protocol (TCP, 4-byte length + XOR-enciphered JSON)."""

    def __init__(self, switches: Sequence[Path], *, strip: bool = False) -> None:
        self.outlets = KasaOutlets(switches, strip=strip, device_id="8006A1B2C3D4E5F60718293A4B5C6D7E8F901A2B")
        self.requests: list[str] = []
        outer = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(5.0)
                while (message := _read_frame(self.request)) is not None:
                    try:
                        request = json.loads(xor_decipher(message))
                    except ValueError:
                        return
                    outer.requests.append(" ".join(sorted(_iot_commands(request))))
                    answer = outer.outlets.iot_answer(request if isinstance(request, dict) else {})
                    self.request.sendall(frame(xor_encipher(json.dumps(answer).encode())))

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Connection)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def served(self) -> list[str]:
        return list(self.requests)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _read_frame(sock: socket.socket) -> bytes | None:
    header = _read_exactly(sock, 4)
    return None if header is None else _read_exactly(sock, struct.unpack(">I", header)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _iot_commands(request: Any) -> list[str]:
    system = request.get("system") if isinstance(request, dict) else None
    return list(system) if isinstance(system, dict) else ["?"]


class KasaKlapPlug(_PlugFront):
    """A Tapo (SMART, KLAP v2) or new-firmware Kasa (IOT, KLAP v1) plug or strip over HTTP."""

    def __init__(self, switches: Sequence[Path], *, user: str, password: str, strip: bool = False,
                 family: str = "smart") -> None:
        self.family = family
        self.version = 2 if family == "smart" else 1
        self.outlets = KasaOutlets(switches, strip=strip, device_id="802D6E7F8091A2B3C4D5E6F708192A3B")
        self._owner = owner_hash(self.version, user, password)
        self._sessions: dict[str, dict[str, Any]] = {}
        self.http = LoopbackHttp(self.handle, "SHIP 2.0")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.http.port}"

    def served(self) -> list[str]:
        return self.http.served()

    def stop(self) -> None:
        self.http.stop()

    def handle(self, ask: HttpAsk) -> HttpAnswer:
        if ask.method != "POST":
            return HttpAnswer(404)
        if ask.path == "/app/handshake1" and len(ask.body) == 16:
            return self._handshake1(ask.body)
        session = self._sessions.get(_cookie(ask.headers.get("cookie", "")))
        if session is None:
            return HttpAnswer(403)
        if ask.path == "/app/handshake2":
            return self._handshake2(session, ask.body)
        if ask.path == "/app/request" and session.get("cipher") is not None:
            return self._request(session["cipher"], ask)
        return HttpAnswer(403)

    def _handshake1(self, local_seed: bytes) -> HttpAnswer:
        remote_seed, session_id = secrets.token_bytes(16), secrets.token_hex(16).upper()
        self._sessions[session_id] = {"local": local_seed, "remote": remote_seed, "cipher": None}
        proof = handshake1_proof(self.version, local_seed, remote_seed, self._owner)
        return HttpAnswer(200, remote_seed + proof, "application/octet-stream",
                          {"Set-Cookie": f"TP_SESSIONID={session_id};TIMEOUT=86400"})

    def _handshake2(self, session: dict[str, Any], proof: bytes) -> HttpAnswer:
        expected = handshake2_proof(self.version, session["local"], session["remote"], self._owner)
        if not secrets.compare_digest(proof, expected):
            return HttpAnswer(403)
        session["cipher"] = KlapCipher(session["local"], session["remote"], self._owner)
        return HttpAnswer(200, b"", "application/octet-stream")

    def _request(self, cipher: KlapCipher, ask: HttpAsk) -> HttpAnswer:
        try:
            seq = int(ask.query.get("seq", ""))
        except ValueError:
            return HttpAnswer(400)
        plaintext = cipher.open(ask.body, seq)
        if plaintext is None:
            return HttpAnswer(403)
        try:
            request = json.loads(plaintext)
        except ValueError:
            return HttpAnswer(400)
        request = request if isinstance(request, dict) else {}
        answer = self.outlets.smart_answer(request) if self.family == "smart" else self.outlets.iot_answer(request)
        return HttpAnswer(200, cipher.seal(json.dumps(answer).encode(), seq), "application/octet-stream")


def _cookie(header: str) -> str:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "TP_SESSIONID":
            return value
    return ""
