"""What a host's BMC logged around a wedge: its System Event Log, read after recovery.

A frozen host writes nothing that survives the power cut, but its BMC keeps its own log
through it: a watchdog reset, a PCIe fatal error or a machine check the firmware saw, and
the power cycle itself. After a wedge or reboot, once the host is back, every Redfish or
IPMI port of the host is asked for its log entries since the attempt started, and they go
into the record's forensics as ``bmc_events`` ({time, severity, message, source}).

A BMC that cannot be read is a note (``bmc_notes``), never an error: the record matters
more than its forensics. Each BMC gets a time budget; entries are put on the controller's
clock by the BMC's own idea of "now" (Redfish ``DateTime``, IPMI Get SEL Time), so a BMC
whose clock is off (or was never set) still places its entries correctly.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from reprofleet.credentials import Secret, resolve, scrub, split_user_password
from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.records.store import iso_utc
from reprofleet.power.bmc_log import redfish as redfish_log, sel
from reprofleet.power.base import PowerDriver
from reprofleet.power.drivers.ipmi import IpmiDriver
from reprofleet.power.locks import device_lock
from reprofleet.power.log import PowerLog
from reprofleet.power.ports import build_host_power
from reprofleet.power.drivers.redfish import RedfishDriver

T = TypeVar("T")

SLACK_S = 5.0  # entries this long before the attempt started still count (clock jitter, rounding)
BUDGET_S = 30.0  # per BMC
MAX_EVENTS = 200  # per host, the newest kept
MAX_SEL_RECORDS = 4096
LOCK_WAIT_S = 10.0
NETFN_STORAGE = 0x0A
GET_SEL_INFO, GET_SEL_ENTRY, GET_SEL_TIME = 0x40, 0x43, 0x48


@dataclass(frozen=True)
class BmcEvent:
    """One entry of a BMC's event log, on the controller's clock."""

    time: str
    severity: str
    message: str
    source: str

    def as_json(self) -> dict[str, str]:
        return {"time": self.time, "severity": self.severity, "message": self.message, "source": self.source}


@dataclass(frozen=True)
class BmcEventLog:
    """What one host's BMCs logged since an attempt started, and what could not be read."""

    events: tuple[BmcEvent, ...] = ()
    notes: tuple[str, ...] = ()

    def forensics(self) -> dict[str, Any]:
        found: dict[str, Any] = {"bmc_events": [event.as_json() for event in self.events]}
        if self.notes:
            found["bmc_notes"] = list(self.notes)
        return found


def has_bmc(host: Host) -> bool:
    return any(port.driver in (RedfishDriver.name, IpmiDriver.name) for port in host.power_ports)


def read_host_events(host: Host, since: float, *, log: PowerLog | None = None, lock_dir: Path | None = None,
                     budget_s: float = BUDGET_S) -> BmcEventLog | None:
    """Every BMC event of ``host`` since ``since`` (epoch seconds); None when it has no BMC."""
    if not has_bmc(host):
        return None
    try:
        drivers = build_host_power([host], log, lock_dir=lock_dir)[host.name].drivers
    except (ReprofleetError, KeyError) as exc:
        return BmcEventLog(notes=(f"the BMC's driver cannot be built: {exc}",))
    events: list[BmcEvent] = []
    notes: list[str] = []
    for driver in drivers:
        deadline = time.monotonic() + budget_s
        try:
            if isinstance(driver, RedfishDriver):
                found, said = read_redfish(driver, since, deadline)
            elif isinstance(driver, IpmiDriver):
                found, said = read_ipmi(driver, since, deadline)
            else:
                continue
        except (ReprofleetError, OSError, ValueError, struct.error) as exc:
            notes.append(f"{driver.where}: event log not read: {exc}")
            continue
        events += found
        notes += [f"{driver.where}: {note}" for note in said]
    events.sort(key=lambda event: event.time)
    if len(events) > MAX_EVENTS:
        notes.append(f"{len(events)} events; the oldest {len(events) - MAX_EVENTS} left out")
        events = events[-MAX_EVENTS:]
    return BmcEventLog(tuple(events), tuple(notes))


def _locked(driver: PowerDriver, what: str, call: Callable[[], T]) -> T:
    """One request under the device's lock, so it never interleaves with a power action on it."""
    with device_lock(driver.lock_dir, driver.device_key, LOCK_WAIT_S, what):
        return call()


def read_redfish(driver: RedfishDriver, since: float, deadline: float) -> tuple[list[BmcEvent], list[str]]:
    """Entries of the system's (and its managers' SEL/Event) log services since ``since``."""
    def get(path: str) -> Any:
        return _locked(driver, "read the event log", lambda: driver.get_json(path))

    system = _locked(driver, "read the event log", driver.system_json)
    paths = redfish_log.log_service_paths(get, system if isinstance(system, dict) else {})
    if not paths:
        return [], ["the BMC serves no LogServices for this system or its managers"]
    events: list[BmcEvent] = []
    notes: list[str] = []
    for path in paths:
        entries, bmc_now, note = redfish_log.read_entries(get, path, deadline)
        offset = time.time() - bmc_now if bmc_now is not None else 0.0
        events += within(((e.created + offset if e.created is not None else None, e.severity, e.message)
                          for e in entries), since, f"redfish {path}", notes)
        if note:
            notes.append(note)
    return events, notes


def read_ipmi(driver: IpmiDriver, since: float, deadline: float) -> tuple[list[BmcEvent], list[str]]:
    """The SEL, record by record (Get SEL Entry), on the controller's clock via Get SEL Time."""
    def raw(what: str, command: int, data: bytes = b"") -> bytes:
        return _locked(driver, what, lambda: driver.raw(what, NETFN_STORAGE, command, data))

    count = struct.unpack_from("<H", raw("Get SEL Info", GET_SEL_INFO), 1)[0]
    try:
        bmc_now: int | None = struct.unpack_from("<I", raw("Get SEL Time", GET_SEL_TIME))[0]
    except (ReprofleetError, struct.error):
        bmc_now = None
    controller_now = time.time()

    def fetch(record_id: int) -> tuple[sel.SelRecord, int]:
        reply = raw("Get SEL Entry", GET_SEL_ENTRY, struct.pack("<HHBB", 0, record_id, 0, 0xFF))
        return sel.decode(reply[2:2 + sel.RECORD_BYTES]), struct.unpack_from("<H", reply, 0)[0]

    def place(record: sel.SelRecord) -> float | None:
        return sel.bmc_epoch(record.timestamp, bmc_now, controller_now) if record.timestamp is not None else None

    notes: list[str] = []
    if count == 0:
        return [], notes
    limit = min(count, MAX_SEL_RECORDS)
    try:
        placed = sel.newest_first(fetch, place, since - SLACK_S, deadline, limit, notes)
    except ReprofleetError:  # record ids with gaps: walk from the first record instead
        notes.clear()
        placed = sel.oldest_first(fetch, place, deadline, limit, notes)
    return within(placed, since, f"ipmi SEL {driver.port.address}", notes), notes


def within(entries: Iterable[tuple[float | None, str, str]], since: float, source: str,
           notes: list[str]) -> list[BmcEvent]:
    """The entries from ``since`` on; those without a usable time are counted in a note, not guessed."""
    kept: list[BmcEvent] = []
    undated = 0
    for when, severity, message in entries:
        if when is None:
            undated += 1
        elif when >= since - SLACK_S:
            kept.append(BmcEvent(str(iso_utc(when)), severity, message, source))
    if undated:
        notes.append(f"{source}: {undated} entries without a usable time left out")
    return kept


def bmc_forensics(host: Host, started: str | None, *, log: PowerLog | None = None,
                  lock_dir: Path | None = None) -> dict[str, Any]:
    """``bmc_events`` (and ``bmc_notes``) for a record's forensics; {} for a host without a BMC.

    ``started`` is the attempt's start (the record's ISO time). Whatever goes wrong here
    is a note: forensics never cost a record.
    """
    if not has_bmc(host):
        return {}
    try:
        since = datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return {"bmc_events": [], "bmc_notes": [f"the attempt's start {started!r} is not a time: log not read"]}
    try:
        found = read_host_events(host, since, log=log, lock_dir=lock_dir)
    except Exception as exc:  # noqa: BLE001 (a reader bug must not cost the record)
        found = BmcEventLog(notes=(f"event log not read: {type(exc).__name__}: {exc}",))
    if found is None:
        return {}
    # A library's exception text (a URL, an echoed header, a bug's repr) may carry the password:
    # every note is scrubbed of the host's power secrets before it reaches a record.
    secrets = _host_secrets(host)
    return BmcEventLog(found.events, tuple(scrub(note, secrets) for note in found.notes)).forensics()


def _host_secrets(host: Host) -> list[Secret]:
    """Every power secret of ``host`` that can be read now, whole and as the password of ``user:password``."""
    found: list[Secret] = []
    for port in host.power_ports:
        if port.credentials is None:
            continue
        try:
            secret = resolve(port.credentials)
        except ReprofleetError:
            continue
        found += [secret, split_user_password(secret, "")[1]]
    return found
