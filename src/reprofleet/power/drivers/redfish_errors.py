"""What a Redfish BMC's refusal means: retry it later, or stop and tell the user.

Real BMCs refuse a power change for a while after the last one, and the refusal is not an
error of the request: retried with backoff, it goes through.

- HTTP 409 Conflict: Dell iDRAC answers 409 to ``On`` for a short while after a power-off
  and while a previous reset is in progress (Ironic bug 2162995, retried since); 409 with
  ``IDRAC.*.PSU501`` ("Server is already powered ON") is the same busy BMC seen too late,
  and the retry finds it on (dell/dellemc-openmanage-ansible-modules#132).
- A BMC not ready after its last operation: iDRAC ``SYS518`` and ``SWC0700`` ("iDRAC is not
  ready ... retry after a few minutes", quadsproject/badfish#129), HPE iLO
  ``InvalidOperationForSystemState`` (HTTP 400 while the server is in POST; Ironic bug
  2136275; sushy's own Connector retries the first two for the same reason) and
  ``ResourceNotReadyRetry``; HTTP 503 Service Unavailable.
- TLS: BMCs ship self-signed certificates. A failed verification is not a network fault and
  no retry fixes it; the error says what to set.
"""

from __future__ import annotations

from typing import Any

import requests
from sushy import exceptions as sushy_errors

from reprofleet.errors import PowerError
from reprofleet.power.base import TransientPowerError
from reprofleet.power.drivers.http import PIN_REFUSED, TLS_ADVICE, caused_by, pin_refused, tls_not_trusted

__all__ = ["BUSY_MESSAGES", "message_ids", "translate"]

# The last part of a MessageId (``IDRAC.2.8.SYS518`` -> ``SYS518``) that means "busy: try again later".
BUSY_MESSAGES = frozenset({"SYS518", "SWC0700", "PSU501", "InvalidOperationForSystemState", "ResourceNotReadyRetry"})


def message_ids(exc: sushy_errors.HTTPError) -> list[str]:
    """Every ``MessageId`` of the error's extended info, shortened to its last part."""
    info: Any = exc.extended_info or []
    entries = info if isinstance(info, list) else [info]
    ids = [str(entry.get("MessageId") or entry.get("MessageID") or "") for entry in entries if isinstance(entry, dict)]
    return [found.rsplit(".", 1)[-1] for found in ids if found]


def _detail(exc: sushy_errors.HTTPError) -> str:
    ids = message_ids(exc)
    text = str(exc.detail or "").strip()
    return ", ".join(ids) + (f": {text[:160]}" if text else "") if ids or text else "no detail"


def _busy(exc: sushy_errors.HTTPError) -> bool:
    return exc.status_code in (409, 503) or bool(BUSY_MESSAGES.intersection(message_ids(exc)))


def translate(exc: BaseException, what: str) -> PowerError:
    """sushy's and requests' errors -> transient (retried) or permanent PowerErrors."""
    if pin_refused(exc):
        return PowerError(f"{what}: {PIN_REFUSED}")
    if tls_not_trusted(exc):
        return PowerError(f"{what}: {TLS_ADVICE}")
    if isinstance(exc, sushy_errors.AccessError):
        return PowerError(f"{what}: HTTP {exc.status_code}: the device refused the credentials")
    if isinstance(exc, sushy_errors.ResourceNotFoundError):
        return PowerError(f"{what}: HTTP 404: no such resource on this BMC")
    if isinstance(exc, sushy_errors.HTTPError) and _busy(exc):
        return TransientPowerError(f"{what}: HTTP {exc.status_code}: the BMC is busy with an earlier power change "
                                   f"or still in POST ({_detail(exc)})")
    if isinstance(exc, sushy_errors.ServerSideError):
        return TransientPowerError(f"{what}: HTTP {exc.status_code}")
    if isinstance(exc, requests.Timeout) or (isinstance(exc, sushy_errors.ConnectionError)  # sushy wraps a ReadTimeout
                                             and caused_by(exc, (requests.Timeout, TimeoutError))):
        return TransientPowerError(f"{what}: no answer in time")
    if isinstance(exc, (sushy_errors.ConnectionError, requests.ConnectionError)):
        refused = "connection refused" if caused_by(exc, ConnectionRefusedError) else "connection failed"
        return TransientPowerError(f"{what}: {refused}")
    if isinstance(exc, sushy_errors.HTTPError):
        return PowerError(f"{what}: HTTP {exc.status_code} ({_detail(exc)})")
    return PowerError(f"{what}: {type(exc).__name__}")
