"""A simulated system's ``LogServices/SEL``: DMTF LogService and LogEntry resources.

Written from the DMTF schemas (LogService v1_x: ``LogEntryType``, ``DateTime``,
``MaxNumberOfRecords``, ``OverWritePolicy``, ``Entries``; LogEntry v1_x: ``EntryType``,
``Created``, ``Severity``, ``Message``, ``SensorType``, ``EntryCode``, ``SensorNumber``),
not from what our reader expects. The log wraps when full, as ``WrapsWhenFull`` says.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

MAX_RECORDS = 1000


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class SimEntry:
    entry_id: int
    t: float
    severity: str
    message: str
    sensor_type: str
    entry_code: str


class SystemLog:
    """One system's SEL; ``base`` is its path (``/redfish/v1/Systems/<id>/LogServices/SEL``)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.services = base.rsplit("/", 1)[0]
        self.entries: deque[SimEntry] = deque(maxlen=MAX_RECORDS)
        self.next_id = 1

    def add(self, t: float, severity: str, message: str, *, sensor_type: str, entry_code: str) -> None:
        self.entries.append(SimEntry(self.next_id, t, severity, message, sensor_type, entry_code))
        self.next_id += 1

    def resource(self, route: str) -> dict[str, Any] | None:
        """``LogServices``, ``LogServices/SEL``, ``.../Entries`` or ``.../Entries/<id>``; None: no such."""
        parts = route.split("/")
        if parts == ["LogServices"]:
            return {"@odata.type": "#LogServiceCollection.LogServiceCollection", "@odata.id": self.services,
                    "Name": "Log Service Collection", "Members@odata.count": 1,
                    "Members": [{"@odata.id": self.base}]}
        if parts == ["LogServices", "SEL"]:
            return self.service()
        if parts == ["LogServices", "SEL", "Entries"]:
            members = [self.entry(e) for e in self.entries]
            return {"@odata.type": "#LogEntryCollection.LogEntryCollection", "@odata.id": f"{self.base}/Entries",
                    "Name": "System Event Log Entries", "Members@odata.count": len(members), "Members": members}
        if len(parts) == 4 and parts[:3] == ["LogServices", "SEL", "Entries"]:
            return next((self.entry(e) for e in self.entries if str(e.entry_id) == parts[3]), None)
        return None

    def service(self) -> dict[str, Any]:
        return {"@odata.type": "#LogService.v1_4_0.LogService", "@odata.id": self.base, "Id": "SEL",
                "Name": "System Event Log", "LogEntryType": "SEL", "ServiceEnabled": True,
                "MaxNumberOfRecords": MAX_RECORDS, "OverWritePolicy": "WrapsWhenFull", "DateTime": iso(time.time()),
                "Entries": {"@odata.id": f"{self.base}/Entries"},
                "Status": {"State": "Enabled", "Health": "OK"}}

    def entry(self, entry: SimEntry) -> dict[str, Any]:
        return {"@odata.type": "#LogEntry.v1_15_0.LogEntry", "@odata.id": f"{self.base}/Entries/{entry.entry_id}",
                "Id": str(entry.entry_id), "Name": f"Log Entry {entry.entry_id}", "EntryType": "SEL",
                "Created": iso(entry.t), "Severity": entry.severity, "Message": entry.message,
                "SensorType": entry.sensor_type, "EntryCode": entry.entry_code, "SensorNumber": 1}
