"""A Tasmota device's web command API (``/cm``), as its documentation and source describe.

``GET /cm?cmnd=Power<N> On|Off|Toggle|1|0|2`` switches relay N (``Power`` alone is relay 1),
``cmnd=Power<N>`` reads it. A one-relay device answers ``{"POWER":"ON"}``, a multi-relay one
``{"POWER<N>":"ON"}``. With a web password set, a request without the right
``user=&password=`` gets HTTP 200 and ``{"WARNING":"Need user=<username>&password=<password>"}``
(Tasmota's xdrv_01_webserver). Current firmware also takes the credentials as an HTTP
basic-auth header; ``legacy_auth`` plays an old firmware that only reads the query string.
Unknown commands and relays answer ``{"Command":"Unknown"}``. ``Status 8`` reads the energy
monitor: ``{"StatusSNS": {"ENERGY": {"Power": W}}}`` (a list of W, one per relay, on
multi-channel devices).

The relay's own behaviour, as the Commands docs give it (a command without an argument answers
its value, with one sets it): ``PowerOnState`` (0..5, default 3) -> ``{"PowerOnState": 3}``;
``PulseTime<N>`` (0 disabled, 1..111 tenths of a second, from 112 value - 100 s) ->
``{"PulseTime1": {"Set": 0, "Remaining": 0}}``; ``MaxPower`` (W, 0 disabled) ->
``{"MaxPower": 0}``; ``SetOption73`` (buttons detached from the relays) -> ``{"SetOption73": "OFF"}``.
The settings are answered and kept; the simulator does not act on them.

``Backlog <cmd>; <cmd>; ...`` queues up to 30 commands that the plug runs by itself, one
after the other with 200 ms between them (SetOption34's default), ``Delay <n>`` (2..3600,
0.1 s each) waiting longer before the next; the web reply comes at once and carries no
result: ``{"WARNING":"Enable weblog 2 if response expected"}`` (Tasmota's
support_command.ino CmndBacklog/CmndDelay, xdrv_01_webserver.ino). The queue runs in the
plug whatever becomes of the client: a controller killed mid-dwell does not stop it.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
import time
from typing import Mapping

from .plug_device import PlugDevice, Reply, json_reply, text_reply

POWER_COMMAND = re.compile(r"power(\d*)(?:\s+(\S+))?", re.IGNORECASE)
DELAY_COMMAND = re.compile(r"delay\s+(-?\d+)", re.IGNORECASE)
ON_ARGS, OFF_ARGS, TOGGLE_ARGS = ("on", "1", "true"), ("off", "0", "false"), ("toggle", "2")
MAX_BACKLOG = 30
BACKLOG_GAP_S = 0.2  # SetOption34's default between two backlog commands
NO_RESULT = {"WARNING": "Enable weblog 2 if response expected"}
SETTING_COMMAND = re.compile(r"(poweronstate|pulsetime(\d*)|maxpower|setoption73)(?:\s+(\S+))?", re.IGNORECASE)


class Backlog:
    """The plug's command queue: runs in its own thread, like the firmware's loop."""

    def __init__(self, device: PlugDevice) -> None:
        self.device = device
        self.queue: list[str] = []
        self.lock = threading.Lock()
        self.worker: threading.Thread | None = None

    def add(self, commands: list[str]) -> None:
        with self.lock:
            self.queue.extend(commands[:MAX_BACKLOG - len(self.queue)])
            if self.worker is None or not self.worker.is_alive():
                self.worker = threading.Thread(target=self._run, name="tasmota-backlog", daemon=True)
                self.worker.start()

    def _run(self) -> None:
        for _ in range(MAX_BACKLOG * 4):  # bounded: the queue never holds more than 30
            with self.lock:
                if not self.queue:
                    return
                command = self.queue.pop(0)
            delay = DELAY_COMMAND.fullmatch(command)
            if delay:
                tenths = int(delay.group(1))
                time.sleep(tenths / 10 if 2 <= tenths <= 3600 else BACKLOG_GAP_S)
                continue
            run_power_command(self.device, command)
            time.sleep(BACKLOG_GAP_S)


_BACKLOGS: dict[int, Backlog] = {}


def backlog_of(device: PlugDevice) -> Backlog:
    return _BACKLOGS.setdefault(id(device), Backlog(device))


def run_power_command(device: PlugDevice, command: str) -> Reply:
    """``Power<N> [On|Off|Toggle]``: switch (or read) relay N; anything else is an unknown command."""
    match = POWER_COMMAND.fullmatch(command)
    relay = (match.group(1) or "1") if match else ""
    if not match or relay not in device.outlets:
        return json_reply({"Command": "Unknown"})
    argument = (match.group(2) or "").lower()
    if not argument and device.fault() == "mute_while_off" and not device.is_on(relay):
        return text_reply(500, "Internal Server Error")
    if argument:
        if argument in ON_ARGS:
            device.switch(relay, True)
        elif argument in OFF_ARGS:
            device.switch(relay, False)
        elif argument in TOGGLE_ARGS:
            device.switch(relay, not device.is_on(relay))
        else:
            return json_reply({"Command": "Unknown"})
    key = "POWER" if len(device.outlets) == 1 else f"POWER{relay}"
    return json_reply({key: "ON" if device.is_on(relay) else "OFF"})


_SETTINGS: dict[int, dict[str, int]] = {}


def run_setting_command(device: PlugDevice, match: re.Match[str]) -> Reply:
    """``PowerOnState``, ``PulseTime<N>``, ``MaxPower``, ``SetOption73``: read, or set then answer."""
    settings = _SETTINGS.setdefault(id(device), {"poweronstate": 3, "maxpower": 0, "setoption73": 0})
    word, relay, argument = match.group(1).lower(), match.group(2), match.group(3)
    key = f"pulsetime{relay or '1'}" if word.startswith("pulsetime") else word
    if word.startswith("pulsetime") and (relay or "1") not in device.outlets:
        return json_reply({"Command": "Unknown"})
    if argument is not None:
        value = {"on": 1, "off": 0}.get(argument.lower(), argument)
        if not str(value).isdigit() or (key == "poweronstate" and int(value) > 5) or \
                (key == "setoption73" and int(value) > 1) or int(value) > 64900:
            return json_reply({"Command": "Unknown"})
        settings[key] = int(value)
    current = settings.get(key, 0)
    if key.startswith("pulsetime"):
        return json_reply({f"PulseTime{relay or '1'}": {"Set": current, "Remaining": 0}})
    if key == "setoption73":
        return json_reply({"SetOption73": "ON" if current else "OFF"})
    return json_reply({"PowerOnState" if key == "poweronstate" else "MaxPower": current})


def basic_credentials(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    value = headers.get("authorization", "")
    if not value.lower().startswith("basic "):
        return None, None
    try:
        user, _, password = base64.b64decode(value[6:]).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    return user, password


def authorised(device: PlugDevice, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
    if device.password is None:
        return True
    wanted = (device.user or "admin", device.password)
    if (query.get("user"), query.get("password")) == wanted:
        return True
    return not device.legacy_auth and basic_credentials(headers) == wanted


def handle(device: PlugDevice, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str],
           body: bytes) -> Reply:
    if path != "/cm":
        return text_reply(404, "Not Found")
    if not authorised(device, query, headers):
        return json_reply({"WARNING": "Need user=<username>&password=<password>"})
    command = query.get("cmnd", "").strip()
    if not command:
        return json_reply({"WARNING": "Enter command cmnd="})
    if command.lower() == "status 8":  # the energy monitor: one Power per relay (a list when several)
        watts = [device.watts(relay) for relay in sorted(device.outlets, key=int)]
        return json_reply({"StatusSNS": {"Time": "2026-01-01T00:00:00",
                                         "ENERGY": {"Power": watts[0] if len(watts) == 1 else watts,
                                                    "Voltage": 231, "Current": round(sum(watts) / 231, 3)}}})
    if command.lower().startswith("backlog"):
        queued = [part.strip() for part in command[len("backlog"):].split(";") if part.strip()]
        backlog_of(device).add(queued)
        return json_reply(NO_RESULT)
    setting = SETTING_COMMAND.fullmatch(command)
    if setting:
        return run_setting_command(device, setting)
    return run_power_command(device, command)
