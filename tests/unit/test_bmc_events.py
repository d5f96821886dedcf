"""Reading a BMC's event log: IPMI SEL records and Redfish LogEntry resources, parsed
without a BMC; the walk over log services bounded; a BMC that cannot be read is a note."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from reprofleet.credentials import parse_credential_ref
from reprofleet.errors import PowerError
from reprofleet.model import Host, PowerPort
from reprofleet.power.bmc_log import redfish as redfish_log, sel
from reprofleet.power.bmc_log.events import BmcEvent, BmcEventLog, bmc_forensics, within
from reprofleet.sim.power.daemons import free_port


def sel_record(record_id: int, timestamp: int, sensor_type: int, number: int, dir_type: int, offset: int,
               record_type: int = 0x02) -> bytes:
    return struct.pack("<HBIHBBBBBBB", record_id, record_type, timestamp, 0x0020, 0x04, sensor_type, number,
                       dir_type, offset, 0xFF, 0xFF)


# -- IPMI SEL ------------------------------------------------------------------------------

def test_a_power_unit_power_off_record_reads_as_a_power_event_not_an_alarm() -> None:
    record = sel.decode(sel_record(7, 1_796_000_000, 0x09, 0x01, 0x6F, 0x00))
    assert record.record_id == 7 and record.timestamp == 1_796_000_000
    assert record.severity == "OK"
    assert record.message.startswith("Power Unit #0x01: Power off / Power down Asserted")


def test_a_pcie_fatal_error_and_a_watchdog_reset_are_critical_and_a_deassertion_is_not() -> None:
    assert sel.decode(sel_record(1, 0, 0x13, 0x03, 0x6F, 0x08)).severity == "Critical"
    assert "Bus uncorrectable error" in sel.decode(sel_record(1, 0, 0x13, 0x03, 0x6F, 0x08)).message
    watchdog = sel.decode(sel_record(2, 0, 0x23, 0x05, 0x6F, 0x01))
    assert watchdog.severity == "Critical" and "Watchdog 2 #0x05: Hard reset" in watchdog.message
    cleared = sel.decode(sel_record(3, 0, 0x13, 0x03, 0xEF, 0x08))
    assert cleared.severity == "OK" and "Bus uncorrectable error Deasserted" in cleared.message
    mce = sel.decode(sel_record(4, 0, 0x07, 0x10, 0x6F, 0x0B))
    assert mce.severity == "Critical" and "Machine Check Exception" in mce.message


def test_threshold_and_unknown_offsets_and_oem_records_are_named_not_guessed() -> None:
    hot = sel.decode(sel_record(1, 0, 0x01, 0x30, 0x01, 0x09))
    assert hot.severity == "Critical" and "Temperature #0x30: upper threshold crossed" in hot.message
    odd = sel.decode(sel_record(2, 0, 0x7A, 0x01, 0x6F, 0x03))
    assert odd.severity == "Warning" and "sensor type 0x7A" in odd.message and "offset 3" in odd.message
    oem = sel.decode(sel_record(3, 1234, 0, 0, 0, 0, record_type=0xC1))
    assert oem.severity == "Unknown" and oem.message.startswith("OEM record 0xC1") and oem.timestamp == 1234
    untimed = sel.decode(sel_record(4, 1234, 0, 0, 0, 0, record_type=0xE0))
    assert untimed.timestamp is None


def test_a_short_sel_record_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        sel.decode(b"\x01\x00\x02")


def test_a_bmc_clock_that_was_never_set_still_places_its_records_by_its_own_now() -> None:
    # the BMC counts 5000 s since it started; a record at 4990 happened 10 s ago
    assert sel.bmc_epoch(4990, 5000, 1_800_000_000.0) == 1_799_999_990.0
    assert sel.bmc_epoch(4990, None, 1_800_000_000.0) is None  # without its now, a pre-init time means nothing
    assert sel.bmc_epoch(1_790_000_000, None, 1_800_000_000.0) == 1_790_000_000.0
    # a BMC whose epoch clock runs 100 s fast: its records move back by 100 s
    assert sel.bmc_epoch(1_800_000_050, 1_800_000_100, 1_800_000_000.0) == 1_799_999_950.0


# -- Redfish LogEntry ---------------------------------------------------------------------

def test_a_redfish_sel_entry_keeps_its_time_severity_message_and_sensor() -> None:
    entry = redfish_log.parse_entry({"Created": "2026-11-30T18:42:10Z", "Severity": "Critical",
                                     "Message": "PCIe fatal error", "SensorType": "Critical Interrupt",
                                     "EntryCode": "Assert", "MessageId": "PCI1308"})
    assert entry.created == 1_796_064_130.0
    assert entry.severity == "Critical"
    assert entry.message == "PCIe fatal error (Critical Interrupt, Assert) [PCI1308]"


def test_an_entry_without_severity_or_a_usable_date_says_so() -> None:
    entry = redfish_log.parse_entry({"Created": "yesterday", "MessageSeverity": "Warning", "Name": "Fan 3"})
    assert entry == redfish_log.LogEntry(None, "Warning", "Fan 3")
    assert redfish_log.parse_entry({}).severity == "Unknown"
    assert redfish_log.parse_time("2026-11-30T18:42:10") is None  # no zone: not guessed
    assert redfish_log.parse_time("2026-11-30T19:42:10+01:00") == 1_796_064_130.0


class FakeBmc:
    """A Redfish tree as a dict of paths; counts the GETs."""

    def __init__(self, tree: dict[str, Any]) -> None:
        self.tree = tree
        self.gets: list[str] = []

    def __call__(self, path: str) -> Any:
        self.gets.append(path)
        return self.tree[path]


def entry(n: int, t: str = "2026-11-30T18:42:10Z") -> dict[str, Any]:
    return {"@odata.id": f"/e/{n}", "Created": t, "Severity": "OK", "Message": f"entry {n}"}


def test_the_systems_log_services_and_the_managers_sel_are_read_but_not_their_audit_log() -> None:
    bmc = FakeBmc({
        "/S/LS": {"Members": [{"@odata.id": "/S/LS/EventLog"}]},
        "/M": {"LogServices": {"@odata.id": "/M/LS"}},
        "/M/LS": {"Members": [{"@odata.id": "/M/LS/Sel"}, {"@odata.id": "/M/LS/Audit"}]},
        "/M/LS/Sel": {"LogEntryType": "SEL"},
        "/M/LS/Audit": {"LogEntryType": "Oem"},
    })
    system = {"LogServices": {"@odata.id": "/S/LS"}, "Links": {"ManagedBy": [{"@odata.id": "/M"}]}}
    assert redfish_log.log_service_paths(bmc, system) == ["/S/LS/EventLog", "/M/LS/Sel"]


def test_entries_are_followed_over_pages_and_links_with_the_bmc_clock() -> None:
    bmc = FakeBmc({
        "/L": {"DateTime": "2026-11-30T18:43:00+00:00", "Entries": {"@odata.id": "/L/E"}},
        "/L/E": {"Members": [entry(1), {"@odata.id": "/e/2"}], "Members@odata.nextLink": "/L/E?skip=2"},
        "/L/E?skip=2": {"Members": [entry(3)]},
        "/e/2": entry(2),
    })
    entries, bmc_now, note = redfish_log.read_entries(bmc, "/L", time.monotonic() + 10)
    assert [e.message for e in entries] == ["entry 1", "entry 2", "entry 3"] and note == ""
    assert bmc_now == 1_796_064_180.0


def test_a_log_with_endless_pages_stops_at_the_page_bound_with_a_note() -> None:
    tree: dict[str, Any] = {"/L": {"Entries": {"@odata.id": "/L/E"}}}
    for page in range(redfish_log.MAX_PAGES + 5):
        tree["/L/E" + (f"?p={page}" if page else "")] = {"Members": [entry(page)],
                                                          "Members@odata.nextLink": f"/L/E?p={page + 1}"}
    entries, _, note = redfish_log.read_entries(FakeBmc(tree), "/L", time.monotonic() + 10)
    assert len(entries) == redfish_log.MAX_PAGES and "more than" in note


def test_a_log_read_past_its_deadline_keeps_what_it_read_and_says_where_it_stopped() -> None:
    bmc = FakeBmc({"/L": {"Entries": {"@odata.id": "/L/E"}}, "/L/E": {"Members": [entry(1), entry(2)]}})
    entries, _, note = redfish_log.read_entries(bmc, "/L", time.monotonic() - 1)
    assert entries == [] and "time limit" in note


# -- what goes into the record ---------------------------------------------------------------

def test_only_entries_since_the_attempt_started_are_kept_and_undated_ones_are_counted() -> None:
    notes: list[str] = []
    kept = within([(1000.0, "OK", "old"), (1096.0, "OK", "just before, within the slack"), (1200.0, "Critical", "x"),
                   (None, "OK", "no time")], 1100.0, "ipmi SEL 10.0.0.5", notes)
    assert [e.message for e in kept] == ["just before, within the slack", "x"]
    assert kept[1] == BmcEvent("1970-01-01T00:20:00.000Z", "Critical", "x", "ipmi SEL 10.0.0.5")
    assert notes == ["ipmi SEL 10.0.0.5: 1 entries without a usable time left out"]


def test_the_forensics_carry_events_and_notes_only_when_there_are_notes() -> None:
    event = BmcEvent("2026-11-30T18:42:10.000Z", "OK", "power off", "ipmi SEL x")
    assert BmcEventLog((event,)).forensics() == {"bmc_events": [event.as_json()]}
    assert BmcEventLog((), ("unreachable",)).forensics() == {"bmc_events": [], "bmc_notes": ["unreachable"]}


def test_a_host_without_a_bmc_gets_no_bmc_fields() -> None:
    plug = PowerPort(driver="tasmota", address="127.0.0.1:1", outlet="1")
    assert bmc_forensics(Host(name="ws01", address="x", pdu=plug), "2026-11-30T18:00:00.000Z") == {}
    assert bmc_forensics(Host(name="ws02", address="x"), "2026-11-30T18:00:00.000Z") == {}


def test_a_bmc_that_does_not_answer_is_a_note_in_the_forensics_never_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RF_UNIT_BMC", "root:pw")
    closed = free_port()  # nothing listens there: the connection is refused
    port = PowerPort(driver="redfish", address=f"http://127.0.0.1:{closed}", credentials=parse_credential_ref(
        "env:RF_UNIT_BMC"), options={"system": "ws01", "timeout_s": 1.0})
    started = time.monotonic()
    found = bmc_forensics(Host(name="ws01", address="x", pdu=port), "2026-11-30T18:00:00.000Z")
    assert found["bmc_events"] == []
    assert "event log not read" in found["bmc_notes"][0] and "refused" in found["bmc_notes"][0]
    assert time.monotonic() - started < 10


def test_a_bmc_whose_credential_is_gone_is_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RF_UNIT_GONE", raising=False)
    port = PowerPort(driver="ipmi", address="127.0.0.1:1", credentials=parse_credential_ref("env:RF_UNIT_GONE"))
    found = bmc_forensics(Host(name="ws01", address="x", pdu=port), "2026-11-30T18:00:00.000Z")
    assert found["bmc_events"] == [] and "cannot be built" in found["bmc_notes"][0]


def test_an_attempt_start_that_is_not_a_time_is_a_note() -> None:
    port = PowerPort(driver="ipmi", address="127.0.0.1:1")
    found = bmc_forensics(Host(name="ws01", address="x", pdu=port), "not a time")
    assert found["bmc_events"] == [] and "not a time" in found["bmc_notes"][0]


class FakeSel:
    """A SEL of records 1..n at times 1000, 1010, ...; ``gap`` ids are missing (a BMC that skips ids)."""

    def __init__(self, n: int, gap: tuple[int, ...] = ()) -> None:
        self.ids = [i for i in range(1, n + 1) if i not in gap]
        self.fetched: list[int] = []

    def fetch(self, record_id: int) -> tuple[sel.SelRecord, int]:
        self.fetched.append(record_id)
        if record_id == sel.LAST:
            record_id = self.ids[-1]
        elif record_id == sel.FIRST:
            record_id = self.ids[0]
        if record_id not in self.ids:
            raise PowerError("Get SEL Entry: completion code 0xcb")
        index = self.ids.index(record_id)
        after = self.ids[index + 1] if index + 1 < len(self.ids) else sel.LAST
        return sel.SelRecord(record_id, 1000 + 10 * record_id, "OK", f"record {record_id}"), after


def place(record: sel.SelRecord) -> float | None:
    return float(record.timestamp) if record.timestamp is not None else None


def test_a_long_sel_is_read_from_its_newest_record_back_to_the_attempts_start_only() -> None:
    log = FakeSel(3000)
    notes: list[str] = []
    placed = sel.newest_first(log.fetch, place, since=1000 + 10 * 2997, deadline=time.monotonic() + 10, limit=3000,
                              notes=notes)
    assert [m for _, _, m in placed] == ["record 2997", "record 2998", "record 2999", "record 3000"]
    assert len(log.fetched) == 5 and notes == []  # not 3000 round trips to a BMC


def test_a_sel_with_gaps_in_its_ids_is_read_from_the_start_instead() -> None:
    log = FakeSel(6, gap=(4,))
    with pytest.raises(PowerError):
        sel.newest_first(log.fetch, place, since=0, deadline=time.monotonic() + 10, limit=6, notes=[])
    placed = sel.oldest_first(log.fetch, place, deadline=time.monotonic() + 10, limit=6, notes=[])
    assert [m for _, _, m in placed] == ["record 1", "record 2", "record 3", "record 5", "record 6"]


def test_a_sel_walk_past_its_deadline_keeps_the_newest_it_read_and_says_so() -> None:
    notes: list[str] = []
    placed = sel.newest_first(FakeSel(50).fetch, place, since=0, deadline=time.monotonic() - 1, limit=50, notes=notes)
    assert [m for _, _, m in placed] == ["record 50"] and "time limit" in notes[0]


def test_an_unexpected_reader_failure_is_a_note_scrubbed_of_the_bmc_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from reprofleet.power.bmc_log import events

    monkeypatch.setenv("RF_UNIT_BMC_LEAK", "root:bmc-Pa55")

    def leaking(*args: Any, **kwargs: Any) -> Any:  # a library bug whose text echoes the URL it was given
        raise RuntimeError("GET https://root:bmc-Pa55@10.0.0.9/redfish/v1 failed (password=bmc-Pa55)")

    monkeypatch.setattr(events, "read_host_events", leaking)
    port = PowerPort(driver="redfish", address="http://127.0.0.1:1", credentials=parse_credential_ref(
        "env:RF_UNIT_BMC_LEAK"), options={"system": "ws01"})
    found = bmc_forensics(Host(name="ws01", address="x", pdu=port), "2026-11-30T18:00:00.000Z")
    assert "event log not read: RuntimeError" in found["bmc_notes"][0]
    assert "bmc-Pa55" not in str(found) and "***" in found["bmc_notes"][0]
