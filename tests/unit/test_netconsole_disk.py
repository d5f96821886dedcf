"""Bounded disk for netconsole (issue 34, item 2): what a source makes the receiver *file* is
budgeted in lines and bytes, each host's file has a cap, the campaign's cap is shared with the
streams, every check comes before the write, and the writing happens with the lock free.

Datagrams go over loopback to a receiver bound to 127.0.0.1 whose thread is not started: the
test polls it itself, so each step ends on what was filed, never on a sleep."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path
from typing import Any

from reprofleet.records.disk_caps import CampaignDiskBudget, DiskCaps
from reprofleet.remote.netconsole import NetconsoleReceiver
from reprofleet.remote.netconsole_budget import Budget, Dropped
from reprofleet.remote.netconsole_lines import Reassembler, WireCaps

UNFILED = re.compile(r"(\d+) lines? \((\d+) bytes\) not filed from 127\.0\.0\.1 over budget")


def _receiver(folder: Path, **kwargs: Any) -> NetconsoleReceiver:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    return NetconsoleReceiver([port], {"127.0.0.1": "ws01"}, folder, bind="127.0.0.1", **kwargs)


def _send_and_poll(rx: NetconsoleReceiver, *datagrams: bytes) -> None:
    """Datagrams sent over loopback (queued when sendto returns), then read and filed."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        for data in datagrams:
            out.sendto(data, ("127.0.0.1", rx.ports[0]))
    rx.poll_once(5.0)


def _filed(folder: Path) -> list[dict[str, Any]]:
    path = folder / "ws01.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_spoofed_datagrams_of_newlines_file_no_more_lines_than_a_kernels_datagram_holds(tmp_path: Path) -> None:
    """240,000 bytes in 4 datagrams, each ``x\\n`` 30,000 times: inside the byte budget of what a
    source sends, but 120,000 lines. A kernel's datagram is a 1000-byte chunk (500 lines at
    most): that many are filed from each, the rest counted, and the file says how many lines
    it did not get."""
    rx = _receiver(tmp_path, budget=Budget(report_every_s=0), clock=lambda: 1000.0)  # time stands: no refill
    try:
        flood = b"x\n" * 30_000
        _send_and_poll(rx, flood, flood)  # two at a time: a socket's receive buffer holds ~200 kB
        _send_and_poll(rx, flood, flood)
        filed = _filed(tmp_path)
        kernel = [line for line in filed if "note" not in line]
        noted = sum(int(m.group(1)) for m in (UNFILED.search(str(line["line"])) for line in filed) if m)
        assert len(kernel) == 4 * WireCaps().lines_per_datagram
        assert len(kernel) + rx.unfiled("ws01") == 120_000 and noted == rx.unfiled("ws01")
        assert (tmp_path / "ws01.jsonl").stat().st_size < 200_000  # not the 6.75 MB of 90,000 lines filed whole
    finally:
        rx.close()


def test_a_source_files_no_more_lines_than_its_filing_budget(tmp_path: Path) -> None:
    """Datagrams a kernel could send (500 short lines in 1000 bytes), 24 of them: under the
    datagram and byte budgets, but 12,000 lines. The filing budget's burst is filed, no more."""
    rx = _receiver(tmp_path, budget=Budget(report_every_s=0), clock=lambda: 1000.0)  # time stands: no refill
    try:
        for _ in range(4):
            _send_and_poll(rx, *[b"x\n" * 500] * 6)
        filed = _filed(tmp_path)
        kernel = [line for line in filed if "note" not in line]
        noted = sum(int(m.group(1)) for m in (UNFILED.search(str(line["line"])) for line in filed) if m)
        assert len(kernel) == Budget().line_burst and rx.unfiled("ws01") == noted == 2_000
    finally:
        rx.close()


def test_a_hosts_file_stops_at_its_cap_says_so_once_and_its_last_lines_still_reach_the_record(tmp_path: Path) -> None:
    rx = _receiver(tmp_path, files=DiskCaps(netconsole_lines=50))
    try:
        for first in range(1, 101, 25):
            _send_and_poll(rx, *[f"6,{i},{i},-;line {i}".encode() for i in range(first, first + 25)])
        filed = _filed(tmp_path)
        assert [line["line"] for line in filed[:50]] == [f"line {i}" for i in range(1, 51)]
        assert [line.get("note") for line in filed[50:]] == ["not_filed"]
        assert "reached its cap (50 lines" in filed[50]["line"]
        assert rx.not_filed("ws01")[0] == 50
        assert rx.lines("ws01", last=1)[0].line == "line 100"  # a wedge's record takes the tail, not the file
    finally:
        rx.close()


def test_past_the_campaign_cap_netconsole_lines_are_counted_not_filed(tmp_path: Path) -> None:
    disk = CampaignDiskBudget(cap_bytes=1000, used_bytes=850)  # the streams took the rest
    rx = _receiver(tmp_path, disk=disk)
    try:
        _send_and_poll(rx, *[f"6,{i},{i},-;kernel line {i}".encode() for i in range(1, 11)])
        filed = _filed(tmp_path)
        assert [line["line"] for line in filed[:-1]] == ["kernel line 1"]  # ~90 bytes: the one that fits
        assert filed[-1]["note"] == "not_filed" and "campaign folder reached its cap" in filed[-1]["line"]
        assert rx.not_filed("ws01")[0] == 9 and disk.used_bytes <= 1000
    finally:
        rx.close()


def test_an_attempts_stream_is_written_with_the_receivers_lock_free(tmp_path: Path) -> None:
    """The stream's writer may take its time (an fsync, a cut of a big file): meanwhile the
    receiver answers the campaign (a wedge's record asks it for lines)."""
    rx = _receiver(tmp_path)
    answered: list[bool] = []

    def sink(text: str) -> None:
        asker = threading.Thread(target=rx.not_filed, args=("ws01",), daemon=True)
        asker.start()
        asker.join(2.0)
        answered.append(not asker.is_alive())

    try:
        rx.follow("ws01", "a1", sink)
        _send_and_poll(rx, b"6,1,1,-;BUG: soft lockup - CPU#3 stuck for 22s!")
        assert answered == [True]
    finally:
        rx.close()


def test_a_datagram_of_newlines_is_parsed_only_as_far_as_the_lines_that_may_be_filed() -> None:
    """What the sender chose (30,000 lines) costs a count, not 30,000 parsed lines under the lock."""
    reassembler = Reassembler()
    lines = reassembler.feed(b"partial from before", 1.0)
    lines = reassembler.feed(b"\n".join([b"kept"] * 5 + [b"x"] * 30_000) + b"\ntail without newline", 2.0, room=5)
    assert [line.line for line in lines] == ["partial from beforekept"] + ["kept"] * 4
    assert reassembler.skipped[0] == 30_000 and reassembler.held_bytes() == len(b"tail without newline")
    words = Dropped("10.0.0.5", 0, 0, lines=30_001, line_bytes=60_000).words()
    assert words == "[... 30001 lines (60000 bytes) not filed from 10.0.0.5 over budget ...]"
