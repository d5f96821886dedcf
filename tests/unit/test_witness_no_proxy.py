"""An HTTP(S)_PROXY answer can never prove a power device (or the hosts' network) up (issue 20, item 5).

The partition guard asks HTTP power devices with a TCP handshake (no request at all), and
every HTTP request a driver sends ignores the proxy variables (``trust_env`` off): a proxy
that answers 200 to anything must see nothing, and a dead device must stay dead.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power.base import TransientPowerError
from reprofleet.power.log import PowerLog
from reprofleet.power.registry import driver_for


class _YesProxy(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    do_CONNECT = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A proxy that answers 200 to everything, named in every proxy variable."""
    _YesProxy.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _YesProxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        yield _YesProxy.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def a_closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pdudaemon_port(address: str) -> PowerPort:
    return PowerPort("pdudaemon", address, "2", options=frozen_mapping({"pdu": "pdu1", "timeout_s": 2.0,
                                                                       "tries": 1, "stagger_window_s": 0}))


def test_a_pdudaemon_request_never_goes_through_the_proxy_variables(answering_proxy: list[str], tmp_path: Path) -> None:
    driver = driver_for(pdudaemon_port(f"http://192.0.2.1:{a_closed_port()}"), "ws02", PowerLog(tmp_path / "p.jsonl"))
    driver.device.connect_timeout_s = 0.5
    with pytest.raises(TransientPowerError):
        driver.device.request("GET", "/power/control/on", query="hostname=pdu1&port=2")
    assert answering_proxy == []

