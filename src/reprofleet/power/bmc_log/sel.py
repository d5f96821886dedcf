"""IPMI System Event Log records, decoded without the BMC's SDR. Pure.

A wedge's forensics need what the BMC saw (a watchdog reset, a PCIe fatal error, a machine
check, the power cycle itself), not sensor names: reading a BMC's whole SDR first can take
longer than reading its SEL, and some BMCs serve none. So the standard 16-byte record
(IPMI 2.0 section 32.1) is decoded from the sensor *type* and event offset alone, the way
``ipmitool sel list`` does without an SDR; the sensor number stays in the message.

The severity words are Redfish's (``OK``, ``Warning``, ``Critical``) so both BMC kinds read
alike in a record; ``Unknown`` where the record does not say (OEM records).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Callable, Optional

RECORD_BYTES = 16
PRE_INIT_LIMIT = 0x20000000  # timestamps below this count seconds since the BMC started, not the epoch
SYSTEM_EVENT = 0x02
OEM_TIMESTAMPED = range(0xC0, 0xE0)

SENSOR_TYPES = {
    0x01: "Temperature", 0x02: "Voltage", 0x04: "Fan", 0x05: "Physical Security", 0x07: "Processor",
    0x08: "Power Supply", 0x09: "Power Unit", 0x0C: "Memory", 0x0F: "System Firmware Progress",
    0x10: "Event Logging Disabled", 0x12: "System Event", 0x13: "Critical Interrupt", 0x14: "Button / Switch",
    0x19: "Chip Set", 0x1D: "System Boot / Restart Initiated", 0x20: "OS Stop / Shutdown",
    0x22: "System ACPI Power State", 0x23: "Watchdog 2", 0x2B: "Version Change", 0x2C: "FRU State",
}

# (sensor type, offset) -> (what it means, severity when asserted)
OFFSETS: dict[tuple[int, int], tuple[str, str]] = {
    (0x07, 0x00): ("IERR", "Critical"), (0x07, 0x01): ("Thermal Trip", "Critical"),
    (0x07, 0x05): ("Configuration Error", "Critical"),
    (0x07, 0x06): ("SM BIOS Uncorrectable CPU-complex Error", "Critical"),
    (0x07, 0x0A): ("Throttled", "Warning"), (0x07, 0x0B): ("Machine Check Exception (Uncorrectable)", "Critical"),
    (0x07, 0x0C): ("Correctable Machine Check Error", "Warning"),
    (0x08, 0x01): ("Failure detected", "Critical"), (0x08, 0x02): ("Predictive failure", "Warning"),
    (0x08, 0x03): ("AC lost", "Critical"), (0x08, 0x04): ("AC lost or out-of-range", "Critical"),
    (0x09, 0x00): ("Power off / Power down", "OK"), (0x09, 0x01): ("Power cycle", "OK"),
    (0x09, 0x02): ("240VA power down", "Critical"), (0x09, 0x03): ("Interlock power down", "Warning"),
    (0x09, 0x04): ("AC lost / Power input lost", "Critical"), (0x09, 0x05): ("Soft power control failure", "Critical"),
    (0x09, 0x06): ("Power unit failure detected", "Critical"), (0x09, 0x07): ("Predictive failure", "Warning"),
    (0x0C, 0x00): ("Correctable ECC", "Warning"), (0x0C, 0x01): ("Uncorrectable ECC", "Critical"),
    (0x0C, 0x02): ("Parity", "Critical"), (0x0C, 0x05): ("Correctable ECC logging limit reached", "Warning"),
    (0x0C, 0x0A): ("Critical overtemperature", "Critical"),
    (0x0F, 0x00): ("System firmware error (POST error)", "Critical"), (0x0F, 0x01): ("System firmware hang", "Critical"),
    (0x10, 0x02): ("Log area reset / cleared", "OK"), (0x10, 0x04): ("SEL full", "Warning"),
    (0x12, 0x00): ("System reconfigured", "OK"), (0x12, 0x01): ("OEM system boot event", "OK"),
    (0x12, 0x02): ("Undetermined system hardware failure", "Critical"), (0x12, 0x05): ("Timestamp clock sync", "OK"),
    (0x13, 0x00): ("Front panel NMI / diagnostic interrupt", "Critical"), (0x13, 0x01): ("Bus timeout", "Critical"),
    (0x13, 0x02): ("I/O channel check NMI", "Critical"), (0x13, 0x03): ("Software NMI", "Warning"),
    (0x13, 0x04): ("PCI PERR", "Critical"), (0x13, 0x05): ("PCI SERR", "Critical"),
    (0x13, 0x07): ("Bus correctable error", "Warning"), (0x13, 0x08): ("Bus uncorrectable error", "Critical"),
    (0x13, 0x09): ("Fatal NMI", "Critical"), (0x13, 0x0A): ("Bus fatal error", "Critical"),
    (0x13, 0x0B): ("Bus degraded", "Warning"),
    (0x1D, 0x00): ("Initiated by power up", "OK"), (0x1D, 0x01): ("Initiated by hard reset", "Warning"),
    (0x1D, 0x02): ("Initiated by warm reset", "Warning"), (0x1D, 0x07): ("System restart", "OK"),
    (0x20, 0x00): ("Critical stop during OS load", "Critical"), (0x20, 0x01): ("Run-time critical stop (panic)", "Critical"),
    (0x20, 0x02): ("OS graceful stop", "OK"), (0x20, 0x03): ("OS graceful shutdown", "OK"),
    (0x20, 0x05): ("Agent not responding", "Critical"),
    (0x22, 0x00): ("S0/G0 working", "OK"), (0x22, 0x05): ("S5/G2 soft-off", "OK"),
    (0x22, 0x07): ("G3 mechanical off", "OK"), (0x22, 0x0A): ("S5 entered by override", "Warning"),
    (0x23, 0x00): ("Timer expired", "Critical"), (0x23, 0x01): ("Hard reset", "Critical"),
    (0x23, 0x02): ("Power down", "Critical"), (0x23, 0x03): ("Power cycle", "Critical"),
    (0x23, 0x08): ("Timer interrupt", "Warning"),
}
THRESHOLD_CRITICAL = {0x02, 0x03, 0x04, 0x05, 0x09, 0x0A, 0x0B}  # lower/upper critical and non-recoverable


@dataclass(frozen=True)
class SelRecord:
    """One decoded SEL record; ``timestamp`` is the BMC's own clock (see PRE_INIT_LIMIT)."""

    record_id: int
    timestamp: int | None  # None: a record type without a timestamp
    severity: str
    message: str


def decode(raw: bytes) -> SelRecord:
    """A 16-byte SEL record -> what it says; a short record raises ValueError."""
    if len(raw) < RECORD_BYTES:
        raise ValueError(f"a SEL record has {RECORD_BYTES} bytes, got {len(raw)}")
    record_id, record_type, timestamp = struct.unpack_from("<HBI", raw, 0)
    if record_type in OEM_TIMESTAMPED:
        return SelRecord(record_id, timestamp, "Unknown", f"OEM record 0x{record_type:02X}: {raw[10:16].hex(' ')}")
    if record_type != SYSTEM_EVENT:
        return SelRecord(record_id, None, "Unknown", f"OEM record 0x{record_type:02X}: {raw[3:16].hex(' ')}")
    generator, sensor_type, sensor_number, dir_type = struct.unpack_from("<H", raw, 7)[0], raw[10], raw[11], raw[12]
    deasserted, event_type = bool(dir_type & 0x80), dir_type & 0x7F
    offset = raw[13] & 0x0F
    kind = SENSOR_TYPES.get(sensor_type, f"sensor type 0x{sensor_type:02X}")
    meaning, severity = _meaning(sensor_type, event_type, offset)
    state = "Deasserted" if deasserted else "Asserted"
    return SelRecord(record_id, timestamp, "OK" if deasserted else severity,
                     f"{kind} #0x{sensor_number:02X}: {meaning} {state} (generator 0x{generator:04X})")


def _meaning(sensor_type: int, event_type: int, offset: int) -> tuple[str, str]:
    """What offset ``offset`` means for this sensor and event reading type."""
    if event_type == 0x01:  # threshold sensor
        side = "upper" if offset >= 0x06 else "lower"
        return f"{side} threshold crossed (offset {offset})", "Critical" if offset in THRESHOLD_CRITICAL else "Warning"
    if event_type == 0x6F and (sensor_type, offset) in OFFSETS:
        return OFFSETS[(sensor_type, offset)]
    return f"event type 0x{event_type:02X} offset {offset}", "Warning"


def bmc_epoch(timestamp: int, bmc_now: int | None, controller_now: float) -> float | None:
    """A record's time on the controller's clock: offset by how far the BMC's clock is off.

    With the BMC's current SEL time known, any timestamp (even one counted from the BMC's
    start) maps onto the controller's clock; without it only epoch timestamps can be used.
    """
    if bmc_now is not None:
        return controller_now - (bmc_now - timestamp)
    return float(timestamp) if timestamp >= PRE_INIT_LIMIT else None


Fetch = Callable[[int], "tuple[SelRecord, int]"]  # record id -> (record, next record id)
Placed = list[tuple[Optional[float], str, str]]  # (time on the controller's clock, severity, message)
FIRST, LAST = 0x0000, 0xFFFF


def newest_first(fetch: Fetch, place: Callable[[SelRecord], Optional[float]], since: float, deadline: float,
                 limit: int, notes: list[str]) -> Placed:
    """From the last record back until one is older than ``since``: a wedge's entries are the newest,
    and a server's SEL can hold thousands that each cost a LAN round trip. Record ids are read
    as consecutive, as BMCs assign them; a missing id raises (the caller reads from the start).
    """
    record, _ = fetch(LAST)
    placed: Placed = []
    for _ in range(limit):
        when = place(record)
        if when is not None and when < since:
            break
        placed.append((when, record.severity, record.message))
        if record.record_id <= 1:
            break
        if time.monotonic() > deadline:
            notes.append(f"SEL: stopped at the time limit after the newest {len(placed)} records")
            break
        record, _ = fetch(record.record_id - 1)
    return placed[::-1]


def oldest_first(fetch: Fetch, place: Callable[[SelRecord], Optional[float]], deadline: float, limit: int,
                 notes: list[str]) -> Placed:
    """Every record from the first, following each record's next id (for BMCs with gaps in their ids)."""
    placed: Placed = []
    record_id = FIRST
    for _ in range(limit):
        if record_id == LAST:
            break
        if time.monotonic() > deadline:
            notes.append(f"SEL: stopped at the time limit after the oldest {len(placed)} records")
            break
        record, record_id = fetch(record_id)
        placed.append((place(record), record.severity, record.message))
    return placed
