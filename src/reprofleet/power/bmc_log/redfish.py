"""A Redfish BMC's event logs: the LogServices of the system and of its managers.

Which log holds a wedge's evidence differs by vendor (iDRAC: the manager's ``Sel``;
OpenBMC: the system's ``EventLog``; HPE: the system's ``IML``), so every log service of the
system is read, and the managers' ones whose ``LogEntryType`` is ``SEL`` or ``Event``
(the others, e.g. audit logs, say who logged in, not what the host did). Entries are
DMTF ``LogEntry`` resources: ``Created``, ``Severity``, ``Message`` (and ``SensorType`` /
``EntryCode`` for SEL entries), listed in ``Members`` (inline or as links) over pages
joined by ``Members@odata.nextLink``. Every walk is bounded in pages, entries and time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping

GetJson = Callable[[str], Any]

MAX_PAGES = 40
MAX_LINKED_ENTRIES = 300  # members given only as links cost one GET each
MANAGER_LOG_TYPES = ("SEL", "Event")


@dataclass(frozen=True)
class LogEntry:
    """One Redfish LogEntry; ``created`` is seconds on the BMC's clock (None: no usable date)."""

    created: float | None
    severity: str
    message: str


def parse_time(value: object) -> float | None:
    """ISO 8601 as Redfish writes it (``2026-11-30T18:42:10+00:00``, ``...Z``) -> epoch seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def parse_entry(entry: Mapping[str, Any]) -> LogEntry:
    """A LogEntry resource -> time, severity and one line of message."""
    severity = entry.get("Severity") or entry.get("MessageSeverity") or "Unknown"
    message = str(entry.get("Message") or entry.get("Name") or entry.get("MessageId") or "(no message)").strip()
    detail = [str(entry[key]) for key in ("SensorType", "EntryCode") if isinstance(entry.get(key), str)]
    if detail and not all(part in message for part in detail):
        message = f"{message} ({', '.join(detail)})"
    if isinstance(entry.get("MessageId"), str) and entry["MessageId"] not in message:
        message = f"{message} [{entry['MessageId']}]"
    return LogEntry(parse_time(entry.get("Created") or entry.get("EventTimestamp")), str(severity), message)


def _links(resource: object, key: str) -> list[str]:
    members = resource.get(key) if isinstance(resource, dict) else None
    if isinstance(members, dict):
        members = [members]
    return [str(m["@odata.id"]) for m in members or () if isinstance(m, dict) and m.get("@odata.id")]


def log_service_paths(get: GetJson, system: Mapping[str, Any]) -> list[str]:
    """The system's log services, then its managers' SEL/Event ones."""
    paths: list[str] = []
    for collection in _links(system, "LogServices"):
        paths += _links(get(collection), "Members")
    for manager in _links(system.get("Links") or {}, "ManagedBy"):
        for collection in _links(get(manager), "LogServices"):
            for path in _links(get(collection), "Members"):
                service = get(path)
                if isinstance(service, dict) and service.get("LogEntryType") in MANAGER_LOG_TYPES:
                    paths.append(path)
    return list(dict.fromkeys(paths))


def read_entries(get: GetJson, service_path: str, deadline: float) -> tuple[list[LogEntry], float | None, str]:
    """One log service's entries, the BMC's clock now (its ``DateTime``) and a note ('' when complete)."""
    service = get(service_path)
    bmc_now = parse_time(service.get("DateTime")) if isinstance(service, dict) else None
    entries_path = _links(service, "Entries")
    if not entries_path:
        return [], bmc_now, f"{service_path}: no Entries"
    entries: list[LogEntry] = []
    for entry, note in _walk(get, entries_path[0], deadline):
        if note:
            return entries, bmc_now, note
        if isinstance(entry, dict):
            entries.append(parse_entry(entry))
    return entries, bmc_now, ""


def _walk(get: GetJson, first_page: str, deadline: float) -> Iterator[tuple[Mapping[str, Any] | None, str]]:
    """Every entry of a collection, following next links; a note when a bound stopped the walk."""
    page_path: str | None = first_page
    linked = 0
    for _ in range(MAX_PAGES):
        if page_path is None:
            return
        page = get(page_path)
        for member in page.get("Members", []) if isinstance(page, dict) else []:
            if time.monotonic() > deadline:
                yield None, f"{first_page}: stopped at the time limit"
                return
            if isinstance(member, dict) and set(member) - {"@odata.id"}:
                yield member, ""
            elif isinstance(member, dict) and member.get("@odata.id") and linked < MAX_LINKED_ENTRIES:
                linked += 1
                yield get(str(member["@odata.id"])), ""
        page_path = page.get("Members@odata.nextLink") if isinstance(page, dict) else None
    if page_path is not None:
        yield None, f"{first_page}: more than {MAX_PAGES} pages, the rest not read"
