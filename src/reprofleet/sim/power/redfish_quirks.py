"""How real Redfish BMCs answer power changes, as options of the simulated one.

Written from vendors' behaviour as published, independently of the driver under test:

- every call takes time: 10-30 s per call on busy iDRAC/iLO, resets applied seconds late
  (Ironic's 30 -> 60 s, Metal3's 120 s power-state timeouts, metal3-io/ironic-image#143 and
  #366; an HPE Cray model measured ~6 s to power off, ~46 s to power on, chaos/powerman#67):
  ``latency_s`` before every answer;
- Dell iDRAC answers HTTP 409 Conflict to ``On`` for a short while after a power-off (Ironic
  bug 2162995): ``conflict_after_off_s``, counted from when the host lost power, with a DMTF
  Base ``ResourceInUse`` message;
- HPE iLO refuses resets while the server is in POST, HTTP 400 with
  ``iLO.2.15.InvalidOperationForSystemState`` (Ironic bug 2136275; the body as iLO sends it in
  goldyfruit/ansible-ilo#1): ``post_s``, counted from when the host got power;
- ``PowerCycle`` listed in ``ResetType@Redfish.AllowableValues`` and carried out by the BMC
  itself (off, ``power_cycle_off_s``, on) where a service offers it (DMTF Resource schema,
  ResetType: "a full power removal, followed by a power restore"); sushy-tools lists none.

Pure decisions plus the times of each system's last power change; the front applies them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping

POWER_ON_RESETS = ("On", "ForceOn", "PowerCycle", "PushPowerButton")
POWER_OFF_RESETS = ("ForceOff", "GracefulShutdown")


@dataclass(frozen=True)
class Quirks:
    latency_s: float = 0.0
    conflict_after_off_s: float = 0.0
    post_s: float = 0.0
    power_cycle_off_s: float | None = None  # None: PowerCycle is not offered

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Quirks":
        data = data or {}
        cycle = data.get("power_cycle_off_s")
        return cls(float(data.get("latency_s", 0.0)), float(data.get("conflict_after_off_s", 0.0)),
                   float(data.get("post_s", 0.0)), None if cycle is None else float(cycle))


def conflict_body() -> dict[str, Any]:
    return {"error": {"code": "Base.1.12.GeneralError", "message": "The request could not be completed.",
                      "@Message.ExtendedInfo": [{
                          "MessageId": "Base.1.12.ResourceInUse", "Severity": "Warning",
                          "Message": "The change to the requested resource failed because the resource is in use "
                                     "or in transition.",
                          "Resolution": "Remove the condition and resubmit the request if the operation failed."}]}}


def post_body() -> dict[str, Any]:
    return {"error": {"code": "iLO.0.10.ExtendedInfo", "message": "See @Message.ExtendedInfo for more information.",
                      "@Message.ExtendedInfo": [{"MessageId": "iLO.2.15.InvalidOperationForSystemState",
                                                 "MessageArgs": ["In POST"]}]}}


class PowerTimes:
    """When each system last lost and got power (a reset it took, or the host's switch), and its answers."""

    def __init__(self, quirks: Quirks) -> None:
        self.quirks = quirks
        self.off_at: dict[str, float] = {}
        self.on_at: dict[str, float] = {}
        self.lock = threading.Lock()

    def powered(self, name: str, on: bool, at: float) -> None:
        with self.lock:
            (self.on_at if on else self.off_at)[name] = at

    def refusal(self, name: str, reset_type: str, now: float) -> tuple[int, dict[str, Any]] | None:
        """The BMC's refusal of this reset now, or None when it takes it."""
        q = self.quirks
        with self.lock:
            on_at, off_at = self.on_at.get(name), self.off_at.get(name)
        if q.post_s and on_at is not None and now - on_at < q.post_s:
            return 400, post_body()
        if q.conflict_after_off_s and reset_type in POWER_ON_RESETS and off_at is not None \
                and now - off_at < q.conflict_after_off_s:
            return 409, conflict_body()
        return None
