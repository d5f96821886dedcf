"""A self-signed BMC trusted by its certificate's SHA-256 or a CA file, never by turning
verification off (issue 34 item 8): against a local HTTPS server with a self-signed
certificate, the pinned certificate is accepted, any other is refused before a request (and
its password) goes out, and a wrong option is one line naming it."""

from __future__ import annotations

import hashlib
import http.server
import json
import ssl
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from reprofleet.credentials import Secret
from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
from reprofleet.power import PowerConfigError, PowerLog, TransientPowerError, driver_for
from reprofleet.power.drivers.http import PIN_REFUSED, HttpDevice
from reprofleet.power.drivers.tls_pin import TlsTrust, parse_fingerprint

ROOT = {"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Id": "RootService",
        "Name": "Root Service", "RedfishVersion": "1.6.0", "UUID": "92384634-2938-2342-8820-489239905423",
        "Systems": {"@odata.id": "/redfish/v1/Systems"}}


def self_signed(folder: Path, name: str) -> tuple[Path, Path, str]:
    """A certificate for localhost and 127.0.0.1, its key, and its SHA-256 (as openssl prints it)."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    der = ssl.PEM_cert_to_DER_cert(cert.read_text())
    digest = hashlib.sha256(der).hexdigest().upper()
    return cert, key, ":".join(digest[i:i + 2] for i in range(0, 64, 2))


@pytest.fixture
def bmc(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """A BMC as shipped: HTTPS under a self-signed certificate; it counts the requests it got."""
    cert, key, fingerprint = self_signed(tmp_path, "bmc")
    _, _, other = self_signed(tmp_path, "other")
    got: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            got.append(self.headers.get("Authorization") or "")
            body = json.dumps(ROOT).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # refused handshakes, expected
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield SimpleNamespace(url=f"https://127.0.0.1:{server.server_address[1]}", port=server.server_address[1],
                              cert=cert, fingerprint=fingerprint, other=other, got=got)
    finally:
        server.shutdown()
        server.server_close()


def redfish(address: str, secret: str = "root:calvin", **options: Any) -> Any:
    port = PowerPort("redfish", address, None, CredentialRef("env", "UNUSED"), frozen_mapping(options))
    return driver_for(port, "ws01", PowerLog(None), secrets=lambda ref: Secret(secret))


def test_the_pinned_certificate_is_accepted_and_another_is_refused_before_any_request(bmc: SimpleNamespace) -> None:
    pinned = HttpDevice(bmc.url, 10, tls=TlsTrust(False, parse_fingerprint(bmc.fingerprint)))
    assert pinned.request("GET", "/redfish/v1/").json()["Id"] == "RootService"
    assert len(bmc.got) == 1
    wrong = HttpDevice(bmc.url, 10, tls=TlsTrust(False, parse_fingerprint(bmc.other)), auth=("root", "calvin"))
    with pytest.raises(Exception) as refused:
        wrong.request("GET", "/redfish/v1/")
    assert PIN_REFUSED in str(refused.value) and not isinstance(refused.value, TransientPowerError)
    assert len(bmc.got) == 1  # the other certificate's server never saw a request, nor its password


def test_a_redfish_bmc_pinned_by_fingerprint_is_reached_and_a_wrong_pin_sends_no_password(bmc: SimpleNamespace) -> None:
    driver = redfish(bmc.url, tls_fingerprint=bmc.fingerprint)
    driver._call("connect", driver._service)  # sushy reads the service root through the pinned session
    assert bmc.got  # the service root, read through the pinned session
    seen = len(bmc.got)
    stranger = redfish(bmc.url, tls_fingerprint=f"sha256:{bmc.other.replace(':', '').lower()}")
    with pytest.raises(Exception) as refused:
        stranger._call("connect", stranger._service)
    assert PIN_REFUSED in str(refused.value) and not isinstance(refused.value, TransientPowerError)
    assert len(bmc.got) == seen


def test_a_ca_file_verifies_the_self_signed_certificate_and_nothing_else_is_trusted(bmc: SimpleNamespace,
                                                                                    tmp_path: Path) -> None:
    driver = redfish(f"https://localhost:{bmc.port}", tls_ca_file=str(bmc.cert))
    driver._call("connect", driver._service)
    other_ca = tmp_path / "other.pem"  # written by the fixture: a CA that did not sign the BMC's certificate
    stranger = redfish(f"https://localhost:{bmc.port}", tls_ca_file=str(other_ca))
    with pytest.raises(Exception) as refused:
        stranger._call("connect", stranger._service)
    assert "TLS certificate not trusted" in str(refused.value)


@pytest.mark.parametrize("options, field", [
    ({"tls_fingerprint": "9F:86:D0"}, "tls_fingerprint"),
    ({"tls_fingerprint": "md5:" + "a" * 32}, "tls_fingerprint"),
    ({"tls_ca_file": "/nonexistent/bmc-ca.pem"}, "tls_ca_file"),
])
def test_a_wrong_tls_option_is_one_line_naming_it(options: dict[str, Any], field: str) -> None:
    with pytest.raises(PowerConfigError) as bad:
        redfish("https://bmc.lab", **options)
    assert bad.value.field == field and field in str(bad.value) and "\n" not in str(bad.value)


def test_the_http_drivers_take_the_same_tls_options() -> None:
    fingerprint = "ab" * 32
    for driver in ("shelly", "tasmota"):
        port = PowerPort(driver, "https://plug.lab", "1", None, frozen_mapping({"tls_fingerprint": fingerprint}))
        made = driver_for(port, "ws01", PowerLog(None), secrets=lambda ref: Secret("admin:pw"))
        assert made.device.session.get_adapter("https://plug.lab/").fingerprint == fingerprint
