"""How a power driver trusts a device's TLS certificate without turning verification off.

BMCs and some plugs ship self-signed certificates. ``verify_tls: false`` sends the device's
Basic credentials to anyone on the path who answers the handshake; instead a ``pdu:`` block
names what to trust::

    pdu:
      driver: redfish
      address: https://ws03-bmc.lab
      tls_fingerprint: "9F:86:D0:...:08"   # the certificate's SHA-256 (openssl x509 -noout -fingerprint -sha256)
      # tls_ca_file: ~/lab/bmc-ca.pem      # or: the CA (or the self-signed certificate itself) to verify against

A fingerprint pins the one certificate: the chain and the name are not checked, the bytes the
device presents must hash to it, or no request (and no password) is sent. A CA file verifies
the chain and the name as usual, against that file only. ``verify_tls`` (true, false, or a CA
path) stays for compatibility; a pin or a CA file wins over it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from reprofleet.power.options import Options, PowerConfigError

TLS_OPTIONS = ("verify_tls", "tls_fingerprint", "tls_ca_file")
HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class TlsTrust:
    """What a device's certificate is checked against: ``verify`` as requests takes it (True,
    False or a CA file), or ``fingerprint`` (64 lowercase hex digits) pinning one certificate."""

    verify: bool | str = True
    fingerprint: str | None = None


def parse_fingerprint(text: str) -> str | None:
    """``9F:86:D0...`` / ``sha256:9f86d0...`` / ``9f86d0...`` -> 64 lowercase hex digits, or None."""
    value = text.strip().lower()
    if value.startswith("sha256:") or value.startswith("sha256="):
        value = value[7:]
    value = value.replace(":", "").replace(" ", "")
    return value if HEX_SHA256.match(value) else None


def tls_trust(options: Options) -> TlsTrust:
    """The ``pdu:`` block's TLS options, checked: a wrong fingerprint or a missing CA file is one
    line naming the option, at load (never at the first power action)."""
    pinned = options.text("tls_fingerprint")
    if pinned is not None:
        fingerprint = parse_fingerprint(pinned)
        if fingerprint is None:
            raise PowerConfigError(f"{options.where}: pdu option tls_fingerprint must be a certificate's SHA-256 "
                                   f"(64 hex digits, colons allowed), got {pinned!r}", "tls_fingerprint")
        return TlsTrust(False, fingerprint)
    ca_file = options.text("tls_ca_file")
    if ca_file is not None:
        path = Path(ca_file).expanduser()
        if not path.is_file():
            raise PowerConfigError(f"{options.where}: pdu option tls_ca_file: no such file {str(path)!r}",
                                   "tls_ca_file")
        return TlsTrust(str(path))
    raw = options.raw.get("verify_tls")
    if isinstance(raw, str) and raw.startswith(("/", "~")):
        return TlsTrust(str(Path(raw).expanduser()))
    return TlsTrust(options.flag("verify_tls", True))


class PinnedAdapter(HTTPAdapter):
    """HTTPS whose one check is the certificate's SHA-256 (urllib3's ``assert_fingerprint``):
    checked on every new connection, before a request, and its password, goes out."""

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["assert_fingerprint"] = self.fingerprint
        super().init_poolmanager(*args, **kwargs)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs["verify"] = False  # the chain is not what is trusted: the pin is (checked by urllib3)
        return super().send(request, **kwargs)


def apply_trust(session: requests.Session, trust: TlsTrust) -> None:
    """Make ``session`` check certificates as ``trust`` says."""
    session.verify = trust.verify
    if trust.fingerprint is not None:
        session.mount("https://", PinnedAdapter(trust.fingerprint))

