"""HTTP for the power drivers: one timeout on every call, errors mapped once.

Transport failures become ``TransientPowerError`` (retried by the base driver), refused
credentials a plain ``PowerError``. Sessions ignore the environment (``trust_env`` off):
no proxy and no ``~/.netrc`` ever sees a device's password. Messages name the device and the path but never the
query string or the headers, which may carry a password (Tasmota takes it in the URL).
"""

from __future__ import annotations

import ssl
from typing import Any, Iterator, Mapping

import requests
from requests.auth import AuthBase

from reprofleet.errors import PowerError
from reprofleet.power.base import TransientPowerError
from reprofleet.power.drivers.tls_pin import TlsTrust, apply_trust


def base_url(address: str, default_scheme: str = "http") -> str:
    """``10.0.0.5`` / ``10.0.0.5:8080`` / ``https://bmc`` -> a URL without trailing slash."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = f"{default_scheme}://{address}"
    return address


TLS_ADVICE = ("TLS certificate not trusted: pin it with the pdu option tls_fingerprint (its SHA-256) or name "
              "its CA with tls_ca_file (verify_tls: false would send the password to anyone on the path)")
PIN_REFUSED = "TLS certificate is not the pinned one (tls_fingerprint): nothing was sent"


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error it wraps: its cause and context, urllib3's ``reason``, and errors
    passed as arguments (requests, urllib3 and sushy each wrap the one below this way)."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        pending += [inner for inner in (error.__cause__, error.__context__, getattr(error, "reason", None), *error.args)
                    if isinstance(inner, BaseException)]


def caused_by(exc: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    return any(isinstance(error, kinds) for error in causes(exc))


def tls_not_trusted(exc: BaseException) -> bool:
    """Did the TLS handshake fail because the device's certificate was not trusted (not a network
    fault)? Decided by the type ``ssl`` raises for it (an unknown issuer, a self-signed or expired
    certificate, a hostname mismatch), wherever the libraries above wrapped it."""
    return caused_by(exc, ssl.SSLCertVerificationError)


def pin_refused(exc: BaseException) -> bool:
    """Did the device present a certificate other than the pinned one? urllib3 raises its own
    SSLError for it (wrapped by requests and sushy), with no ``ssl`` type to tell it by."""
    return any("Fingerprints did not match" in str(error) for error in causes(exc))


def _connection_reason(exc: requests.ConnectionError) -> str:
    text = str(exc)
    for marker, reason in (("Connection refused", "connection refused"),
                           ("timed out", "connect timed out"),
                           ("Name or service not known", "name does not resolve"),
                           ("No route to host", "no route to host"),
                           ("RemoteDisconnected", "the device closed the connection"),
                           ("Connection reset", "connection reset")):
        if marker in text:
            return reason
    return "connection failed"


class HttpDevice:
    """A PDU/plug/BMC spoken to over HTTP(S)."""

    def __init__(self, base: str, timeout_s: float, *, auth: AuthBase | tuple[str, str] | None = None,
                 tls: TlsTrust = TlsTrust(), connect_timeout_s: float | None = None) -> None:
        self.base = base
        self.timeout_s = timeout_s
        self.connect_timeout_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        self.session = requests.Session()
        # No proxy variables, no ~/.netrc, no REQUESTS_CA_BUNDLE: a password (Tasmota's query,
        # Shelly's basic auth) must never travel through a proxy that logs it, and the
        # credentials sent are the ones the inventory names, not whatever .netrc holds.
        self.session.trust_env = False
        self.session.auth = auth
        apply_trust(self.session, tls)
        self.session.headers["User-Agent"] = "reprofleet-power"

    def request(self, method: str, path: str, *, query: str | None = None,
                params: Mapping[str, Any] | None = None, json_body: Any = None,
                retry_server_errors: bool = True, timeout_s: float | None = None) -> requests.Response:
        """Send one request; 401/403 and (unless told otherwise) 5xx are errors.

        ``timeout_s`` overrides the read timeout for this request (a call that answers only
        after a whole power cycle); the connect timeout stays the device's own.
        """
        url = self.base + path + (f"?{query}" if query else "")
        label = f"{method} {path}"
        read_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            response = self.session.request(method, url, params=params, json=json_body,
                                            timeout=(self.connect_timeout_s, read_s))
        except requests.Timeout:
            raise TransientPowerError(f"{label}: no answer within {read_s:g}s") from None
        except requests.exceptions.SSLError as exc:
            if pin_refused(exc):
                raise PowerError(f"{label}: {PIN_REFUSED}") from None
            if tls_not_trusted(exc):
                raise PowerError(f"{label}: {TLS_ADVICE}") from None
            raise TransientPowerError(f"{label}: TLS handshake failed") from None
        except requests.ConnectionError as exc:
            raise TransientPowerError(f"{label}: {_connection_reason(exc)}") from None
        except requests.RequestException as exc:
            raise PowerError(f"{label}: {type(exc).__name__}") from None
        if response.status_code in (401, 403):
            who = "refused the credentials" if self.session.auth or query else "asks for credentials (none configured)"
            raise PowerError(f"{label}: HTTP {response.status_code}: the device {who}")
        if response.status_code >= 500 and retry_server_errors:
            raise TransientPowerError(f"{label}: HTTP {response.status_code} {response.reason}")
        return response

    @staticmethod
    def json(response: requests.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            snippet = response.text[:80].replace("\n", " ")
            raise PowerError(f"reply is not JSON (HTTP {response.status_code}): {snippet!r}") from None
