"""The controller's netconsole receiver: kernel lines put together from datagrams (plain text
split anywhere, the extended header, ncfrag fragments) and filed by host and attempt."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Iterator

import pytest

from reprofleet.remote.netconsole import NetconsoleError, NetconsoleReceiver, Reassembler
from reprofleet.sim.rfsim import netconsole_tx


def test_the_extended_header_gives_level_and_the_kernels_sequence_number() -> None:
    lines = Reassembler().feed(b"3,1234,5678901,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.",
                               10.0)
    assert [(l.level, l.seq, l.usec, l.line, l.t) for l in lines] == [
        (3, 1234, 5678901, "NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.", 10.0)]


def test_an_extended_message_drops_its_dictionary_lines() -> None:
    [line] = Reassembler().feed(b"6,7,8,-;usb 1-1: new device\n SUBSYSTEM=usb\n DEVICE=c189:1\n", 1.0)
    assert line.line == "usb 1-1: new device"


def test_ncfrag_fragments_are_put_together_in_offset_order_whatever_order_they_arrive() -> None:
    text = ("watchdog: BUG: soft lockup - CPU#5 stuck for 22s! " * 40).encode()
    wire = netconsole_tx.datagrams({"level": 0, "seq": 99, "usec": 5, "message": text.decode()}, extended=True)
    assert len(wire) > 1 and all(b",ncfrag=" in d.split(b";")[0] for d in wire)
    rx = Reassembler()
    got = [line for data in reversed(wire) for line in rx.feed(data, 2.0)]
    assert [(l.seq, l.level, l.line) for l in got] == [(99, 0, text.decode())]


def test_a_message_missing_a_fragment_is_never_filed_half() -> None:
    wire = netconsole_tx.datagrams({"level": 4, "seq": 5, "usec": 1, "message": "x" * 2500}, extended=True)
    rx = Reassembler()
    assert [line for data in wire[:-1] for line in rx.feed(data, 1.0)] == []


def test_plain_text_split_across_datagrams_is_one_line_timed_by_its_first_piece() -> None:
    rx = Reassembler()
    assert rx.feed(b"NVRM: Xid (PCI:0000:01:00): 79, ", 1.0) == []
    lines = rx.feed(b"GPU has fallen off the bus.\nnvidia 0000:01:00.0: lost\n", 1.5)
    assert [(l.t, l.line, l.seq) for l in lines] == [
        (1.0, "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", None),
        (1.5, "nvidia 0000:01:00.0: lost", None)]


def test_the_last_words_of_a_freeze_without_their_newline_are_filed_after_a_while() -> None:
    rx = Reassembler()
    rx.feed(b"Kernel panic - not syncing: softlockup: hung ta", 5.0)
    assert rx.flush(5.5) == []
    [line] = rx.flush(6.1)
    assert (line.t, line.line) == (5.0, "Kernel panic - not syncing: softlockup: hung ta")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[NetconsoleReceiver]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rx = NetconsoleReceiver([port], {"127.0.0.1": "ws01"}, tmp_path / "netconsole", bind="127.0.0.1").start()
    yield rx
    rx.close()


def _send(rx: NetconsoleReceiver, *datagrams: bytes, source: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        out.bind((source, 0))
        for data in datagrams:
            out.sendto(data, ("127.0.0.1", rx.ports[0]))


def _wait_for(rx: NetconsoleReceiver, host: str, count: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(rx.lines(host, last=1000)) < count:
        time.sleep(0.02)


def test_lines_are_filed_by_host_and_by_the_attempt_running_at_arrival(receiver: NetconsoleReceiver,
                                                                       tmp_path: Path) -> None:
    _send(receiver, b"6,1,10,-;between attempts")
    _wait_for(receiver, "ws01", 1)
    stream: list[str] = []
    started = time.time()
    receiver.follow("ws01", "attempt-1", stream.append, since=started)
    _send(receiver, b"6,2,20,-;during the attempt", b"3,3,30,-;NVRM: Xid 79")
    _wait_for(receiver, "ws01", 3)
    receiver.unfollow("ws01")
    _send(receiver, b"6,4,40,-;after the attempt")
    _wait_for(receiver, "ws01", 4)
    assert [json.loads(s)["line"] for s in stream] == ["during the attempt", "NVRM: Xid 79"]
    assert all(json.loads(s)["k"] == "netconsole" for s in stream)
    filed = [json.loads(l) for l in (tmp_path / "netconsole" / "ws01.jsonl").read_text().splitlines()]
    assert [(f["attempt"], f["seq"]) for f in filed] == [(None, 1), ("attempt-1", 2), ("attempt-1", 3), (None, 4)]
    assert [l.seq for l in receiver.lines("ws01", last=2)] == [3, 4]
    assert [l.seq for l in receiver.lines("ws01", since=started)] == [2, 3, 4]  # a record's lines: its attempt's


def test_datagrams_from_an_address_of_no_host_are_counted_not_filed(receiver: NetconsoleReceiver) -> None:
    _send(receiver, b"6,1,10,-;who is this", source="127.0.0.2")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not receiver.strays:
        time.sleep(0.02)
    assert receiver.strays == 1 and receiver.lines("ws01") == []


def test_a_port_another_receiver_holds_is_a_clear_error(receiver: NetconsoleReceiver, tmp_path: Path) -> None:
    with pytest.raises(NetconsoleError, match=f"UDP 127.0.0.1:{receiver.ports[0]}"):
        NetconsoleReceiver(receiver.ports, {}, tmp_path / "other", bind="127.0.0.1")


def test_the_kernel_documents_fragment_example_is_put_together() -> None:
    """Documentation/networking/netconsole.rst's own example of ncfrag (a tiny chunk size)."""
    rx = Reassembler()
    assert rx.feed(b"6,416,1758426,-,ncfrag=0/31;the first chunk,", 1.0) == []
    [line] = rx.feed(b"6,416,1758426,-,ncfrag=16/31; the 2nd chunk.", 1.0)
    assert (line.level, line.seq, line.usec, line.line) == (6, 416, 1758426, "the first chunk, the 2nd chunk.")


def test_a_header_led_by_the_kernel_release_is_still_the_extended_form() -> None:
    """With the target's ``release`` set, newer kernels put their release before the header."""
    [line] = Reassembler().feed(b"6.13.0-04048-g4f561a87745a,13,468,514729715,-;NVRM: Xid 79", 1.0)
    assert (line.level, line.seq, line.line) == (5, 468, "NVRM: Xid 79")
