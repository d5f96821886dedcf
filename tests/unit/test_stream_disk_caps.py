"""Bounded disk for attempt streams (issue 34, item 2): a cap per stream file that keeps its head
and, at every instant, its last lines; the campaign's cap shared by every stream and netconsole
file; readers that take a stream a line at a time.

Lines are written as the agent sends them (``{"t", "k", "seq", "line", "stream", "mac"}``);
every test ends on what the file on disk holds, read back through the readers' own function."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.settings import ControllerConfig, disk_caps
from reprofleet.cli.config import DEFAULTS
from reprofleet.errors import UsageError
from reprofleet.model import SCHEMA_VERSION
from reprofleet.records.disk_caps import MIB, CampaignDiskBudget, DiskCaps
from reprofleet.records.store import AttemptLog
from reprofleet.records.stream_file import CUT, NOT_FILED, StreamWriter, gap_of, stream_lines
from reprofleet.report.freeze import load_trace

MAC = "0" * 64


def _log_line(seq: int, text: str = "x", t: float | None = None) -> str:
    """One PoC log line exactly as the agent's supervisor sends it (compact, signed)."""
    stamp = 1_796_000_000.0 + seq / 1000 if t is None else t
    return f'{{"t":{stamp:.6f},"k":"log","seq":{seq},"line":{json.dumps(text)},"stream":"out","mac":"{MAC}"}}'


def _seqs(lines: list[dict[str, Any]]) -> list[int]:
    return [int(line["seq"]) for line in lines if "seq" in line]


def _record(stream: str) -> dict[str, Any]:
    return {"schema": SCHEMA_VERSION, "attempt": "a1", "host": "ws01", "cell": "default", "outcome": "wedge",
            "started": "2026-12-06T20:00:00.000Z", "stream": stream}


def test_a_poc_printing_2_mb_of_x_leaves_a_stream_under_its_cap_with_its_head_its_last_lines_and_the_count_cut(
        tmp_path: Path) -> None:
    """``yes x | head -c 2000000``: a million lines of one character. Without a cap they made a
    72 MB stream file (145 MB with the MAC); with one, the file stays under it and says exactly
    how many lines it cut between the head and the tail."""
    caps = DiskCaps(stream_bytes=4 * MIB)
    path = tmp_path / "a1.jsonl"
    writer = StreamWriter(path, caps=caps)
    total = 1_000_000
    for seq in range(total):
        writer.write(_log_line(seq))
    writer.close()
    assert path.stat().st_size <= caps.stream_bytes
    lines = list(stream_lines(path))
    markers = [gap_of(line) for line in lines if gap_of(line) is not None]
    assert len(markers) == 1 and markers[0] is not None and markers[0][0] == CUT
    at = next(i for i, line in enumerate(lines) if gap_of(line) is not None)
    head, tail = _seqs(lines[:at]), _seqs(lines[at + 1:])
    assert head == list(range(len(head))) and len(head) * 145 > caps.stream_head_bytes * 0.9
    assert tail == list(range(total - len(tail), total))  # the last line and every one before it, back to the cut
    assert len(tail) * 145 >= caps.stream_tail_bytes * 0.9
    assert len(head) + markers[0][1] + len(tail) == total  # every line is filed or counted, none twice
    trace = load_trace(_record("streams/a1.jsonl"), path)
    assert trace.last_lines[-1] == "x" and trace.gaps == (
        f"{markers[0][1]} lines ({markers[0][2]} bytes) cut from the middle of this stream to keep it under its cap "
        "(its head and last lines are kept)",)


def test_an_attempt_that_never_ends_has_its_last_lines_on_disk_at_every_moment(tmp_path: Path) -> None:
    """A wedge: the host froze, the writer is never closed. Whatever instant the controller (or
    the host) stops, the file already holds the lines right up to the latest one."""
    caps = DiskCaps(stream_bytes=256 * 1024)
    path = tmp_path / "a1.jsonl"
    writer = StreamWriter(path, caps=caps)
    text = "vLLM capturing CUDA graphs " + "." * 80
    promised = caps.stream_tail_bytes // (len(_log_line(10_000, text)) + 1)  # the lines its tail always holds
    seq = 0
    for _ in range(12):  # 12 rounds of ~150 kB: the cap is passed many times over
        for _ in range(700):
            writer.write(_log_line(seq, text))
            seq += 1
        on_disk = _seqs(list(stream_lines(path)))
        assert path.stat().st_size <= caps.stream_bytes
        assert on_disk[-promised:] == list(range(seq - promised, seq))
    assert on_disk[0] == 0  # and its start is still there


def test_the_campaign_cap_keeps_stream_lines_off_the_disk_but_never_a_record(tmp_path: Path) -> None:
    """Two attempts' streams share the campaign's budget: past it, their lines are counted, not
    filed, and each stream ends with the count; the attempt records are appended all the same."""
    budget = CampaignDiskBudget(cap_bytes=70_000)
    first, second = (StreamWriter(tmp_path / f"a{i}.jsonl", budget=budget) for i in (1, 2))
    for seq in range(400):  # ~55 kB
        first.write(_log_line(seq))
    for seq in range(400):  # ~55 kB: ~15 kB fit, the rest is over the cap
        second.write(_log_line(seq))
    first.close()
    second.close()
    filed = [_seqs(list(stream_lines(tmp_path / f"a{i}.jsonl"))) for i in (1, 2)]
    assert filed[0] == list(range(400)) and 0 < len(filed[1]) < 400
    assert budget.used_bytes <= 70_000
    notes = [gap_of(line) for line in stream_lines(tmp_path / "a2.jsonl") if gap_of(line) is not None]
    assert notes == [(NOT_FILED, 400 - len(filed[1]), budget.refused.size)]
    log = AttemptLog(tmp_path / "attempts.jsonl")
    log.append({"schema": SCHEMA_VERSION, "attempt": "a2", "outcome": "clean"})
    assert json.loads((tmp_path / "attempts.jsonl").read_text())["attempt"] == "a2"


def test_a_resumed_campaign_counts_the_streams_it_has_already(tmp_path: Path) -> None:
    streams = tmp_path / "streams"
    streams.mkdir()
    (streams / "old.jsonl").write_text(_log_line(0) + "\n")
    budget = CampaignDiskBudget.of_folders(1000, [streams, tmp_path / "netconsole"])
    assert budget.used_bytes == len(_log_line(0)) + 1


def test_a_report_reads_a_big_stream_with_memory_for_a_line_not_for_the_file(tmp_path: Path) -> None:
    """~40 MB of stream (a flood of log lines, then a minute of NVML samples before a freeze):
    the freeze figure is built with a few MB at most, and still from the last minute."""
    path = tmp_path / "big.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for seq in range(30_000):
            out.write(_log_line(seq, "y" * 1300, t=1000.0 + seq / 200) + "\n")
        for i in range(600):  # the last minute at 10 Hz
            out.write(json.dumps({"t": 1200.0 + i / 10, "k": "nvml", "gfx_mhz": 2800, "power_w": 400.0 + i,
                                  "temp_c": 70}) + "\n")
    assert path.stat().st_size > 35 * MIB
    tracemalloc.start()
    try:
        trace = load_trace(_record("streams/big.jsonl"), path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB, f"peak {peak / MIB:.1f} MiB reading a {path.stat().st_size / MIB:.0f} MiB stream"
    power = next(series for series in trace.series if series.key == "power_w")
    assert power.values[-1] == 999.0 and power.times[-1] == 0.0 and len(power.times) <= 200
    assert trace.last_lines[-1] == "y" * 1300


def test_a_line_longer_than_a_reader_takes_is_skipped_not_held(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_log_line(0).encode() + b"\n" + b"{" + b"z" * 3000 + b"\n" + _log_line(1).encode() + b"\n")
    assert _seqs(list(stream_lines(path, max_line=1000))) == [0, 1]


def test_the_caps_come_from_invoke_config_and_a_wrong_one_is_named() -> None:
    values = {**DEFAULTS, "stream_cap_mb": 8.0, "netconsole_cap_lines": 500, "controller": "c1"}
    caps = ControllerConfig(values).run_settings().disk
    assert (caps.stream_bytes, caps.netconsole_lines, caps.campaign_bytes) == (8 * MIB, 500, 4096 * MIB)
    with pytest.raises(UsageError, match=r"^reprofleet\.campaign_cap_mb: 'lots' is not a number$"):
        disk_caps({**DEFAULTS, "campaign_cap_mb": "lots"})
    with pytest.raises(UsageError, match=r"^reprofleet\.stream_cap_mb: .* too small"):
        disk_caps({**DEFAULTS, "stream_cap_mb": 0.01})
