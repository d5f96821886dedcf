"""Outside records/, a record's fields are attributes of the typed read (records/reader.py),
never looked up by their JSON names: a renamed or retyped field is then found by mypy, not
by a report that quietly prints None."""

from __future__ import annotations

import re
from pathlib import Path

from reprofleet.model import Record

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "reprofleet"

# records/ is the reader itself. playbook/ takes records in their mapping form (a
# RecordedAttempt is one): it sits beside records/ in the layers and cannot import the reader.
# sim/ writes its own lines, never reads ours.
NOT_SCANNED = ("records", "playbook", "sim")
FIELDS = sorted(set(Record.__dataclass_fields__) | {"amended", "cut"})
# The names a record goes by in this code base (a stop or power event is an ``entry``, ``e`` or ``s``).
HOLDERS = r"(?:r|rec|record|records|attempt|first|second|last|sample|\w+_record|\w+\.record|\w+\[[^\]\n]*\])"
# A write (``record["reason"] = ...``, a simulator building its line) is no lookup.
LOOKUP = re.compile(rf"\b{HOLDERS}\s*(?:\.get\(\s*|\[\s*)[\"']({'|'.join(FIELDS)})[\"'](?!\]\s*=[^=])")


def lookups(text: str) -> list[str]:
    """Each string lookup of a record field in ``text``, as written."""
    return [match.group(0) for match in LOOKUP.finditer(text)]


def scanned() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if path.relative_to(PACKAGE).parts[0] not in NOT_SCANNED]


def test_the_pattern_finds_a_record_field_looked_up_by_name_and_leaves_events_alone() -> None:
    assert lookups('outcome = r.get("outcome")') == ['r.get("outcome"']
    assert lookups("f\"{record['host']} {samples[a].get('factors')} {judged.record.get('cell')}\"") == [
        "record['host'", "samples[a].get('factors'", "judged.record.get('cell'"]
    assert lookups('host = entry.get("host"); rule = stop.get("rule"); r.outcome; record["reason"] = why') == []
    assert lookups('same = record["reason"] == why') == ['record["reason"']


def test_the_scan_covers_the_readers_of_records() -> None:
    packages = {path.relative_to(PACKAGE).parts[0] for path in scanned()}
    assert {"verdicts", "report", "campaign", "cli"} <= packages


def test_no_module_outside_records_looks_a_record_field_up_by_its_json_name() -> None:
    found = [f"{path.relative_to(PACKAGE)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
             for path in scanned() for text in [path.read_text(encoding="utf-8")]
             for match in LOOKUP.finditer(text)]
    assert found == [], "read these as attributes of records.reader.RecordedAttempt:\n" + "\n".join(found)
