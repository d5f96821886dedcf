"""What sushy-tools' emulator lacks, served in front of it: ``python -m reprofleet.sim.power.redfish_front CONFIG``.

sushy-tools 2.2 serves no ``Chassis/<id>/Power`` and no ``LogServices`` (its fake driver
has neither), and links every system to one shared chassis. This front forwards every
request to the emulator unchanged, except:

* ``Systems/<id>`` gains ``LogServices`` and links its own chassis first;
* ``Chassis/<id>`` and ``Chassis/<id>/Power`` (``PowerControl[0].PowerConsumedWatts``: the
  board plus what the simulated GPU draws now, as the plugs' meter reads it);
* ``Systems/<id>/LogServices/SEL`` and its ``Entries``: DMTF LogEntry resources for the
  host's power going off and on, a wedge (a PCIe fatal error, as firmware-first AER logs
  it) and every ``ComputerSystem.Reset`` asked for;
* what real BMCs do that the emulator does not (``redfish_quirks``): a latency on every
  answer, HTTP 409 to a power-on shortly after the host lost power, HTTP 400 to any reset
  while the host is in POST, and ``PowerCycle`` carried out by the BMC itself;
* HTTPS with a self-signed certificate, as BMCs ship, when ``tls`` names one;
* ``ResetType: Nmi`` (listed in the allowable values, as BMCs with a diagnostic interrupt do):
  the BMC tells its host's hardware (``hwio.request("nmi")``), whose kernel panics and reboots
  or logs it and stays as it was (rfsim/nmi.py); a switch with no simulated host behind it
  takes the NMI and nothing happens.

Resources of our own answer only to the credentials the emulator accepts (checked by
asking it). CONFIG (JSON): ``port``, ``emulator`` (URL), ``systems`` (name -> {uuid,
switch}), ``poll_s``, ``ready`` (written once serving), ``quirks`` (``Quirks`` fields),
``tls`` ({cert, key} file paths, or absent for plain HTTP).
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

import requests

from ..rfsim import hwio
from .daemons import LOOPBACK
from .host_events import HostEvent, HostEventKind, HostWatch
from .meter import wall_watts
from .redfish_log_sim import SystemLog
from .redfish_quirks import POWER_OFF_RESETS, POWER_ON_RESETS, PowerTimes, Quirks

SYSTEMS = "/redfish/v1/Systems/"
CHASSIS = "/redfish/v1/Chassis/"
FORWARDED_HEADERS = ("Authorization", "Content-Type", "Accept", "X-Auth-Token", "If-Match")
HOST_EVENT_ENTRIES: Mapping[HostEventKind, tuple[str, str, str, str]] = {
    # kind -> (severity, message, SensorType, EntryCode)
    HostEventKind.POWER_OFF: ("OK", "The system power was turned off.", "Power Unit", "Assert"),
    HostEventKind.POWER_ON: ("OK", "The system power was turned on.", "Power Unit", "Deassert"),
    HostEventKind.WEDGE: ("Critical", "A fatal PCIe error was detected on the bus of a GPU (uncorrectable, "
                                      "firmware-first AER); the system stopped responding.",
                          "Critical Interrupt", "Assert"),
}


class Front:
    """The systems, their logs and the emulator behind them."""

    def __init__(self, emulator: str, systems: Mapping[str, Mapping[str, str]], quirks: Quirks | None = None) -> None:
        self.quirks = quirks or Quirks()
        self.times = PowerTimes(self.quirks)
        self.emulator = emulator.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False
        self.switches = {name: Path(s["switch"]) for name, s in systems.items()}
        self.aliases = {**{n: n for n in systems}, **{s["uuid"]: n for n, s in systems.items()}}
        self.logs = {name: SystemLog(f"{SYSTEMS}{name}/LogServices/SEL") for name in systems}
        self.watches = {name: HostWatch(path) for name, path in self.switches.items()}
        self.lock = threading.Lock()

    def watch(self, poll_s: float, stop: threading.Event) -> None:
        while not stop.is_set():
            for name, watch in self.watches.items():
                for event in watch.poll():
                    self.log_host_event(name, event)
            stop.wait(poll_s)

    def log_host_event(self, name: str, event: HostEvent) -> None:
        if event.kind in (HostEventKind.POWER_ON, HostEventKind.POWER_OFF):
            self.times.powered(name, event.kind is HostEventKind.POWER_ON, event.t)
        severity, message, sensor, code = HOST_EVENT_ENTRIES[event.kind]
        with self.lock:
            self.logs[name].add(event.t, severity, message, sensor_type=sensor, entry_code=code)

    def authorised(self, headers: Mapping[str, str]) -> bool:
        reply = self.session.get(f"{self.emulator}/redfish/v1/Systems", headers=dict(headers), timeout=5)
        return reply.status_code < 400

    def own(self, path: str) -> tuple[str, str] | None:
        """(system name, rest of the path) when the path is one of ours to serve."""
        for prefix in (SYSTEMS, CHASSIS):
            if path.startswith(prefix):
                ident, _, rest = path[len(prefix):].partition("/")
                name = self.aliases.get(ident)
                if name is not None and (prefix == CHASSIS or rest.startswith("LogServices")):
                    return name, f"{prefix}{rest}"
        return None

    def resource(self, name: str, route: str) -> Any | None:
        """One of our resources, or None (404)."""
        with self.lock:
            if route == CHASSIS:
                return chassis_json(name)
            if route == f"{CHASSIS}Power":
                return power_json(name, wall_watts(self.switches[name]))
            return self.logs[name].resource(route.removeprefix(SYSTEMS))

    def system_json(self, name: str, system: dict[str, Any]) -> dict[str, Any]:
        """The emulator's ComputerSystem with our log services and chassis linked (and PowerCycle, if offered)."""
        system["LogServices"] = {"@odata.id": f"{SYSTEMS}{name}/LogServices"}
        links = system.setdefault("Links", {})
        links["Chassis"] = [{"@odata.id": f"{CHASSIS}{name}"}, *links.get("Chassis", [])]
        reset = system.get("Actions", {}).get("#ComputerSystem.Reset", {})
        allowed = reset.get("ResetType@Redfish.AllowableValues")
        if self.quirks.power_cycle_off_s is not None and isinstance(allowed, list) and "PowerCycle" not in allowed:
            allowed.append("PowerCycle")
        if isinstance(allowed, list) and "Nmi" not in allowed:
            allowed.append("Nmi")
        return system

    def nmi(self, name: str) -> bool:
        """The diagnostic interrupt, handed to the host's hardware; False: no simulated host behind the switch."""
        hw = self.switches[name].parent
        if not (hw / "state.json").exists():
            return False
        hwio.request("nmi", hw=hw, source="redfish")
        return True

    def emulator_reset(self, ident: str, reset_type: str, headers: Mapping[str, str]) -> None:
        self.session.post(f"{self.emulator}{SYSTEMS}{ident}/Actions/ComputerSystem.Reset", headers=dict(headers),
                          json={"ResetType": reset_type}, timeout=15)

    def power_cycle(self, ident: str, headers: Mapping[str, str]) -> None:
        """The BMC's own PowerCycle: off now, on after the off period, whatever the client does next."""
        def run() -> None:
            self.emulator_reset(ident, "ForceOff", headers)
            deadline = time.monotonic() + 30.0  # the emulator applies resets late: wait for its Off
            while time.monotonic() < deadline:
                reply = self.session.get(f"{self.emulator}{SYSTEMS}{ident}", headers=dict(headers), timeout=15)
                if reply.ok and reply.json().get("PowerState") == "Off":
                    break
                time.sleep(0.2)
            time.sleep(self.quirks.power_cycle_off_s or 0.0)
            self.emulator_reset(ident, "On", headers)

        threading.Thread(target=run, name=f"power-cycle {ident}", daemon=True).start()


def chassis_json(name: str) -> dict[str, Any]:
    return {"@odata.type": "#Chassis.v1_14_0.Chassis", "@odata.id": f"{CHASSIS}{name}", "Id": name,
            "Name": f"{name} chassis", "ChassisType": "RackMount", "PowerState": "On",
            "Power": {"@odata.id": f"{CHASSIS}{name}/Power"},
            "Links": {"ComputerSystems": [{"@odata.id": f"{SYSTEMS}{name}"}]}}


def power_json(name: str, watts: float) -> dict[str, Any]:
    path = f"{CHASSIS}{name}/Power"
    return {"@odata.type": "#Power.v1_7_1.Power", "@odata.id": path, "Id": "Power", "Name": "Power",
            "PowerControl": [{"@odata.id": f"{path}#/PowerControl/0", "MemberId": "0",
                              "Name": "System Power Control", "PowerConsumedWatts": watts,
                              "Status": {"State": "Enabled", "Health": "OK"}}]}


class Handler(BaseHTTPRequestHandler):
    front: Front

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        return None

    def _headers(self) -> dict[str, str]:
        return {k: v for k in FORWARDED_HEADERS if (v := self.headers.get(k)) is not None}

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        time.sleep(self.front.quirks.latency_s)
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        owned = self.front.own(path)
        if owned is not None:
            if not self.front.authorised(self._headers()):
                self._send(401, b'{"error": "unauthorised"}')
                return
            found = self.front.resource(*owned)
            self._send(200 if found is not None else 404, json.dumps(found or {"error": "not found"}).encode())
            return
        self._forward("GET", None)

    def do_POST(self) -> None:  # noqa: N802
        time.sleep(self.front.quirks.latency_s)
        path = self.path.split("?", 1)[0].rstrip("/")
        data = self._body()
        ident = path[len(SYSTEMS):].split("/", 1)[0] if path.startswith(SYSTEMS) else ""
        name = self.front.aliases.get(ident)
        if not path.endswith("/Actions/ComputerSystem.Reset") or name is None:
            self._forward("POST", data)
            return
        asked = _json(data)
        reset = str(asked.get("ResetType", "?")) if isinstance(asked, dict) else "?"
        refused = self.front.times.refusal(name, reset, time.time())
        if refused is not None:
            self._send(refused[0], json.dumps(refused[1]).encode())
            return
        if reset == "Nmi":
            if not self.front.authorised(self._headers()):
                self._send(401, b'{"error": "unauthorised"}')
                return
            self.front.nmi(name)
            self._send(204, b"")
        elif reset == "PowerCycle" and self.front.quirks.power_cycle_off_s is not None:
            if not self.front.authorised(self._headers()):
                self._send(401, b'{"error": "unauthorised"}')
                return
            self.front.power_cycle(ident, self._headers())
            self._send(204, b"")
        elif self._forward("POST", data) is None:
            return
        if reset in POWER_ON_RESETS or reset in POWER_OFF_RESETS:  # the BMC knows what it was asked at once
            self.front.times.powered(name, reset in POWER_ON_RESETS, time.time())
        with self.front.lock:
            self.front.logs[name].add(time.time(), "OK", f"A ComputerSystem.Reset ({reset}) was requested.",
                                      sensor_type="System Event", entry_code="Assert")

    def do_PATCH(self) -> None:  # noqa: N802
        time.sleep(self.front.quirks.latency_s)
        self._forward("PATCH", self._body())

    def do_DELETE(self) -> None:  # noqa: N802
        time.sleep(self.front.quirks.latency_s)
        self._forward("DELETE", self._body())

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _forward(self, method: str, data: bytes | None) -> Any | None:
        """Send the request on to the emulator; return the JSON body sent when the emulator accepted it."""
        try:
            reply = self.front.session.request(method, f"{self.front.emulator}{self.path}", headers=self._headers(),
                                               data=data, timeout=15, allow_redirects=False)
        except requests.RequestException as exc:
            self._send(502, json.dumps({"error": f"emulator: {type(exc).__name__}"}).encode())
            return None
        body = reply.content
        path = self.path.split("?", 1)[0].rstrip("/")
        ident = path[len(SYSTEMS):] if path.startswith(SYSTEMS) else ""
        if method == "GET" and reply.status_code == 200 and ident in self.front.aliases:
            body = json.dumps(self.front.system_json(self.front.aliases[ident], reply.json())).encode()
        extra = {k: v for k in ("Location", "ETag", "WWW-Authenticate") if (v := reply.headers.get(k)) is not None}
        self._send(reply.status_code, body, reply.headers.get("Content-Type", "application/json"), extra)
        if reply.status_code >= 400 or not data:
            return None
        return _json(data) or {}


def _json(data: bytes | None) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def main(config: Mapping[str, Any]) -> None:
    front = Front(config["emulator"], config["systems"], Quirks.from_json(config.get("quirks")))
    handler = type("FrontHandler", (Handler,), {"front": front})
    server = ThreadingHTTPServer((LOOPBACK, int(config["port"])), handler)
    server.daemon_threads = True
    tls = config.get("tls")
    if tls:  # a BMC's self-signed certificate
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls["cert"], tls["key"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    stop = threading.Event()
    threading.Thread(target=front.watch, args=(float(config.get("poll_s", 0.2)), stop), daemon=True).start()
    Path(config["ready"]).write_text(json.dumps({"port": server.server_address[1]}))
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        stop.set()


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
