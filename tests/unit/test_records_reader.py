"""attempts.jsonl read back typed (records/reader.py): amendments folded once, every older
line read as it always was, a torn tail skipped, and every key kept for the exporter."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reprofleet.model import Judging, Outcome, Phase, Record, Role
from reprofleet.records import identity
from reprofleet.records.export import folded
from reprofleet.records.pooling import Pool, load_pool
from reprofleet.records.reader import AttemptLines, RecordedAttempt, read_attempts
from reprofleet.records.store import AttemptLog, RecordError, read_records


def _record(attempt: str, outcome: Outcome = Outcome.CLEAN, **fields: object) -> Record:
    base = Record(campaign="c", attempt=attempt, controller="ctl", host="ws01", cell="default",
                  factors={"graphics_clocks": [180, 2800]}, policy={"power_limit_w": 600.0},
                  runtime={"kind": "docker", "label": "vllm:0.25"}, cache=None, attempt_index=0, attempt_in_boot=1,
                  cold_boot=True, boot_id="b", started="2026-12-01T00:00:00.000Z", ended="2026-12-01T00:01:30.500Z",
                  outcome=outcome)
    return replace(base, **fields)  # type: ignore[arg-type]


def test_a_record_reads_back_as_the_fields_it_was_written_with(tmp_path: Path) -> None:
    written = _record("a1", Outcome.WEDGE, phases=("loading_weights", "cuda_graph_capture"), detect_latency_s=12,
                      last_phase="cuda_graph_capture", cell_id="default@0123456789")
    AttemptLog(tmp_path / "attempts.jsonl").append_record(written)
    (read,) = read_attempts(tmp_path / "attempts.jsonl")
    assert (read.campaign, read.attempt, read.host, read.cell, read.outcome) == ("c", "a1", "ws01", "default", "wedge")
    assert read.phases == ("loading_weights", "cuda_graph_capture") and read.detect_latency_s == 12.0
    assert read.identity == read.cell_id == "default@0123456789"
    assert read.attempt_index == 0 and read.attempt_in_boot == 1 and read.cold_boot is True
    assert read.factors == {"graphics_clocks": [180, 2800]} and read.forensics == {} and not read.amended
    assert read.duration_s() == 90.5


def test_amendments_are_folded_into_their_record_once(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)
    log.append({**_record("a1", Outcome.WEDGE).to_json(), "cut": ["last_log_line: 10 characters"]})
    log.append_record(_record("a2"))
    log.amend("a1", forensics={"journal_persistent": False}, cut=["forensics.findings: 3 items"])
    log.amend("a1", outcome="reboot", reason="it came back by itself")
    records = read_attempts(path)
    assert [r.attempt for r in records] == ["a1", "a2"]  # one record per attempt, in file order
    wedge = records[0]
    assert (wedge.outcome, wedge.reason, wedge.amended) == ("reboot", "it came back by itself", True)
    assert wedge.forensics == {"journal_persistent": False}
    assert wedge.cut == ("last_log_line: 10 characters", "forensics.findings: 3 items")  # each cut said once
    assert read_attempts(path) == records  # reading again folds nothing twice
    assert [dict(r) for r in records] == list(read_records(path))  # the mapping is the folded line itself


def test_an_older_controllers_line_is_read_as_it_always_was(tmp_path: Path) -> None:
    """Written before cell identities, phase lists, cache snapshots and schema 1's later fields."""
    old = {"schema": 0, "campaign": "c", "attempt": "old-1", "controller": "ctl", "host": "ws01", "cell": "default",
           "factors": {"graphics_clocks": [180, 2800]}, "runtime": {"kind": "docker", "image": "vllm:0.24"},
           "outcome": "error", "last_phase": "cuda_graph_capture", "started": "2025-01-01T00:00:00Z"}
    path = tmp_path / "attempts.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (read,) = read_attempts(path)
    assert read.cell_id is None and read.identity == identity.cell_id("default", old["factors"], old["runtime"], None)
    assert read.phases is None and read.cache_snapshot is None and read.kernel_net == () and read.host_debug == {}
    assert read.telemetry == {} and read.policy == {} and read.attempt_index is None and read.ended is None
    assert read.duration_s() is None and read.schema == 0
    seed = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE)
    assert read.classified(seed).role is Role.FAILED_AT_RISK  # judged from its last phase, as before


def test_a_torn_last_line_is_skipped_and_no_file_is_no_record(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    assert read_attempts(path) == ()
    AttemptLog(path).append_record(_record("a1"))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"schema": 1, "attempt": "a2", "outc')
    assert [r.attempt for r in read_attempts(path)] == ["a1"]
    path.write_text(json.dumps({"schema": 99, "attempt": "x"}) + "\n")
    with pytest.raises(RecordError, match="schema 99"):
        read_attempts(path)


def test_a_key_this_version_does_not_know_survives_to_the_export(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    AttemptLog(folder / "attempts.jsonl").append({**_record("a1").to_json(), "gpu_serial": "1650", "outcome": "melted"})
    (read,) = load_pool([folder]).records
    assert read["gpu_serial"] == "1650" and read.outcome == "melted"
    (row,) = folded(load_pool([folder]))
    assert row["gpu_serial"] == "1650" and row["role"] is None  # an outcome it does not know: exported, not judged
    assert row["amended"] is False and row["duration_s"] == 90.5


def test_a_pool_reads_a_benchs_json_records_as_typed_ones() -> None:
    line = _record("a1", Outcome.REBOOT).to_json()
    pool = Pool((line,))
    (read,) = pool.records
    assert isinstance(read, RecordedAttempt) and read.outcome == "reboot" and read == line
    assert RecordedAttempt.from_json(read) is read


def test_an_amendment_told_line_by_line_carries_its_cell_and_only_when_it_says_an_outcome() -> None:
    lines = AttemptLines()
    first = lines.told(_record("a1", Outcome.INFRA, cell="pl-350").to_json())
    assert first is not None and first.cell == "pl-350"
    assert lines.told({"schema": 1, "amends": "a1", "forensics": {}}) is None
    assert lines.told({"schema": 1, "amends": "unknown", "outcome": "reboot"}) is None
    amended = lines.told({"schema": 1, "amends": "a1", "outcome": "reboot"})
    assert amended is not None and (amended.cell, amended.outcome, amended.host) == ("pl-350", "reboot", "")
