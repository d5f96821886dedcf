"""The simulated smart plug's HTTP server: ``python -m reprofleet.sim.power.plug_server CONFIG``.

CONFIG (JSON, written by ``HttpPlugServer``): ``personality`` (tasmota | shelly1 | shelly2),
``outlets`` (id -> switch file), ``user``/``password`` (null: no auth), ``faults`` (path of
the faults file), ``ready`` (where to write ``{"port", "pid"}`` once listening), ``port``
(0: any free port). One plug per process, stdlib only, one thread per request.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

from . import plug_tasmota
from .plug_device import PlugDevice, Reply, text_reply
from .plug_shelly import ShellyPlug
from .switch import outlets_from_json

Handler = Callable[[PlugDevice, str, str, Mapping[str, str], Mapping[str, str], bytes], Reply]
MAX_BODY = 64 * 1024


def make_handler(personality: str, device: PlugDevice) -> Handler:
    if personality == "tasmota":
        return plug_tasmota.handle
    if personality in ("shelly1", "shelly2"):
        return ShellyPlug(device, 1 if personality == "shelly1" else 2).handle
    raise SystemExit(f"unknown personality {personality!r}")


def build_request_handler(device: PlugDevice, handle: Handler) -> type[BaseHTTPRequestHandler]:
    class PlugRequestHandler(BaseHTTPRequestHandler):
        server_version = "reprofleet-plug-sim/1"
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

        def _serve(self, method: str) -> None:
            fault = device.fault()
            if fault == "hang":
                device.hang()
                self.close_connection = True
                return
            length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
            body = self.rfile.read(length) if length else b""
            if fault == "error":
                reply = text_reply(500, "Internal Server Error")
            else:
                url = urlsplit(self.path)
                query = dict(parse_qsl(url.query, keep_blank_values=True))
                headers = {key.lower(): value for key, value in self.headers.items()}
                reply = handle(device, method, url.path, query, headers, body)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            # Method and path only: a Tasmota query string carries the password.
            sys.stderr.write(f"{self.command} {urlsplit(self.path).path} -> {args[1] if len(args) > 1 else ''}\n")

    return PlugRequestHandler


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text())
    device = PlugDevice(outlets_from_json(config["outlets"]), config.get("user"), config.get("password"),
                        Path(config["faults"]), config.get("device_id", "shellypro4pm-a8032abe54dc"),
                        legacy_auth=bool(config.get("legacy_auth")))
    handler = build_request_handler(device, make_handler(config["personality"], device))
    server = ThreadingHTTPServer(("127.0.0.1", int(config.get("port", 0))), handler)
    server.daemon_threads = True
    ready = Path(config["ready"])
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(json.dumps({"port": server.server_address[1], "pid": os.getpid()}))
    os.replace(tmp, ready)
    sys.stderr.write(f"{config['personality']} plug listening on 127.0.0.1:{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
