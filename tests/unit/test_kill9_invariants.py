"""The kill -9 harness's checks can fail (no fleet): a campaign folder that breaks an invariant
a crash-safe resume keeps (a lost wedge, a slot recorded twice or not at all, a torn line, an
attempt started and never recorded, a cell under two identities) is named, and one like the
uninterrupted run breaks nothing. The fleet test that holds resumed campaigns to these is
tests/fleet/test_fleet_kill9.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.kill9_harness import Snapshot, broken_invariants


def _folder(tmp_path: Path, attempts: list[Any], events: list[Any]) -> Snapshot:
    def lines(entries: list[Any]) -> str:
        return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries)

    (tmp_path / "attempts.jsonl").write_text(lines(attempts))
    (tmp_path / "events.jsonl").write_text(lines(events))
    return Snapshot.read(tmp_path)


def _record(attempt: str, cell: str, outcome: str = "clean", reason: str | None = None) -> dict[str, Any]:
    return {"schema": 1, "attempt": attempt, "host": "h", "cell": cell, "outcome": outcome, "reason": reason}


WANT = {("h", "a"): 1, ("h", "b"): 1}


def test_a_folder_like_the_uninterrupted_run_breaks_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a", "infra", "interrupted: SIGKILL"), _record("2", "a", "wedge"),
                                _record("3", "b"), {"schema": 1, "amends": "2", "forensics": {}}],
                     [{"event": "wedge", "host": "h", "attempt": "2"}])
    assert broken_invariants(folder, WANT) == []


def test_a_wedge_event_without_its_wedge_record_is_a_lost_wedge(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a"), _record("3", "b")], [{"event": "wedge", "host": "h", "attempt": "9"}])
    (problem,) = broken_invariants(folder, WANT)
    assert problem.startswith("lost wedge: events.jsonl entry 1")


def test_a_slot_recorded_twice_a_missing_slot_and_a_torn_line_are_each_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a"), _record("1", "a"), '{"schema": 1, "attem'], [])
    problems = broken_invariants(folder, WANT)
    assert any("records per (host, cell)" in p and "('h', 'b'): (0, 1)" in p for p in problems), problems
    assert any(p == "attempt ids recorded more than once: ['1']" for p in problems), problems
    assert any(p.startswith("torn line attempts.jsonl:3") for p in problems), problems


def test_an_attempt_that_started_and_has_no_record_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [_record("1", "a"), _record("2", "b")],
                     [{"event": "attempt_started", "host": "h", "attempt": a} for a in ("1", "ran-away", "2")])
    assert broken_invariants(folder, WANT) == ["attempts started and never recorded: ['ran-away']"]


def test_a_cell_recorded_under_two_identities_on_one_host_is_named(tmp_path: Path) -> None:
    split = [{**_record("1", "a", "wedge"), "cell_id": "a@1111"}, {**_record("2", "a"), "cell_id": "a@2222"},
             {**_record("3", "b"), "cell_id": "b@3333"}]
    problems = broken_invariants(_folder(tmp_path, split, []), {("h", "a"): 2, ("h", "b"): 1})
    assert problems == ["cells recorded under more than one identity on one host (a resume lost what ran): "
                        "{('h', 'a'): ['a@1111', 'a@2222']}"]


def test_a_line_appended_after_a_read_is_seen_by_the_next_read_torn_or_whole(tmp_path: Path) -> None:
    """The folder's files are parsed again whenever they change (a kill point polls them every few
    ms and only an unchanged file is served from the last parse): a new line, or a torn one, is
    never hidden behind an earlier read."""
    first = _folder(tmp_path, [_record("1", "a")], [])
    assert [r["attempt"] for r in first.records] == ["1"] and Snapshot.read(tmp_path).records == first.records
    with (tmp_path / "attempts.jsonl").open("a") as appended:
        appended.write(json.dumps(_record("2", "b")) + "\n")
    assert [r["attempt"] for r in Snapshot.read(tmp_path).records] == ["1", "2"]
    with (tmp_path / "attempts.jsonl").open("a") as appended:
        appended.write('{"schema": 1, "attempt": "3", "ho')
    assert Snapshot.read(tmp_path).attempts.torn
