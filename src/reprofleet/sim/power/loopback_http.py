"""A small HTTP server on 127.0.0.1 in a thread of this process, for the in-process plug simulators.

The consumer-plug simulators (Home Assistant, TP-Link KLAP) run inside the test or bench that
drives them: no process to start or stop, and a fault switched between two requests is seen
by the next one. Every request's ``METHOD /path`` is kept (never its headers or body, which
carry tokens and credentials), so a test or a bench counts what a driver sent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP reply of a simulator."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpAsk:
    """One HTTP request as a simulator sees it (header names lowercased)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes


Handler = Callable[[HttpAsk], HttpAnswer]


class LoopbackHttp:
    """``handle`` served on 127.0.0.1:<free port> until ``stop()``."""

    def __init__(self, handle: Handler, server_name: str) -> None:
        self.requests: list[str] = []
        self._lock = threading.Lock()
        outer = self

        class RequestHandler(BaseHTTPRequestHandler):
            server_version = server_name
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def _serve(self, method: str) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
                body = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                with outer._lock:
                    outer.requests.append(f"{method} {url.path}")
                ask = HttpAsk(method, url.path, dict(parse_qsl(url.query, keep_blank_values=True)),
                              {key.lower(): value for key, value in self.headers.items()}, body)
                answer = handle(ask)
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(answer.body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the request list above is the log; headers (tokens) are never written

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"{server_name}-{self.port}")
        self._thread.start()

    def served(self) -> list[str]:
        """``METHOD /path`` of every request so far."""
        with self._lock:
            return list(self.requests)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
