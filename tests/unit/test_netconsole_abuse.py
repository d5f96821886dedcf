"""The netconsole receiver under abuse (issue 20, item 3): anything that can send UDP to the
controller chooses these bytes, so the receiver listens only on the hosts' side, gives each
source a budget and says what it dropped, caps every size a sender controls, keeps a source
address to one host, and shows the kernel's lost messages in the filed text.

Datagrams go over loopback to a receiver bound to 127.0.0.1; every wait ends on evidence (a
line filed after the ones under test), never on a sleep."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.model import Host, NetconsoleSetting, Outcome
from reprofleet.remote.netconsole import (NetconsoleError, NetconsoleReceiver, SourceConflict,
                                          hosts_facing_address)
from reprofleet.remote.netconsole_budget import Allowance, Budget
from reprofleet.remote.netconsole_lines import Note, Reassembler, WireCaps
from reprofleet.remote.replies import NetconsoleReply
from reprofleet.runner.host_log import HostLog
from reprofleet.runner.netconsole import HostNetconsole, start_receiver

CAPS = WireCaps()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _send(port: int, *datagrams: bytes, source: str = "127.0.0.1", to: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        out.bind((source, 0))
        for data in datagrams:
            out.sendto(data, (to, port))


def _until(rx: NetconsoleReceiver, host: str, text: str) -> list[str]:
    """The host's lines once one containing ``text`` is filed (5 s at most)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [line.line for line in rx.lines(host, last=10_000)]
        if any(text in line for line in lines):
            return lines
        time.sleep(0.02)
    raise AssertionError(f"no line with {text!r} from {host}: {lines}")


DROP_NOTE = re.compile(r"^\[\.\.\. dropped (\d+) datagrams? \((\d+) bytes\) from 127\.0\.0\.1 over budget \.\.\.\]$")


def _until_dropped(rx: NetconsoleReceiver, host: str, count: int) -> list[str]:
    """The host's lines once ``count`` drops are counted and all are in its drop notes (5 s at most)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [line.line for line in rx.lines(host, last=10_000)]
        noted = sum(int(m.group(1)) for m in map(DROP_NOTE.match, lines) if m)
        if rx.dropped(host) == count and noted == count:
            return lines
        time.sleep(0.02)
    raise AssertionError(f"not {count} drops noted for {host}: {rx.dropped(host)} counted, lines {lines}")


def _noted(lines: list[str]) -> tuple[int, int]:
    """Datagrams and bytes the drop notes among ``lines`` add up to (the receiving thread may
    have noted a flood in more than one poll)."""
    found = [m for m in map(DROP_NOTE.match, lines) if m]
    return sum(int(m.group(1)) for m in found), sum(int(m.group(2)) for m in found)


def _filed(folder: Path, host: str) -> list[dict[str, Any]]:
    path = folder / f"{host}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def receiver(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[NetconsoleReceiver]:
    budget = getattr(request, "param", Budget())
    rx = NetconsoleReceiver([_free_port()], {"127.0.0.1": "ws01"}, tmp_path / "netconsole", bind="127.0.0.1",
                            budget=budget).start()
    yield rx
    rx.close()


# -- where it listens -----------------------------------------------------------------------

def test_the_receiver_listens_on_the_controllers_address_toward_the_hosts_not_every_interface(tmp_path: Path) -> None:
    port = _free_port()
    host = Host(name="ws01", address="127.0.0.1", netconsole=NetconsoleSetting(port=port))
    rx = start_receiver([host], tmp_path / "netconsole")
    assert rx is not None
    try:
        assert rx.binds == ["127.0.0.1"] == [hosts_facing_address("127.0.0.1")]
        _send(port, b"6,1,1,-;to another of our addresses", to="127.0.0.2")  # every interface would take it
        _send(port, b"6,2,2,-;to the hosts-facing one")
        lines = _until(rx, "ws01", "hosts-facing")
        assert lines == ["to the hosts-facing one"]
    finally:
        rx.close()


def test_the_listening_address_is_the_inventorys_when_it_names_one(tmp_path: Path) -> None:
    port = _free_port()
    setting = NetconsoleSetting(port=port, listen="127.0.0.3")
    rx = start_receiver([Host(name="ws01", address="127.0.0.1", netconsole=setting)], tmp_path / "netconsole")
    assert rx is not None
    try:
        assert rx.binds == ["127.0.0.3"]
        _send(port, b"6,1,1,-;to the named address", to="127.0.0.3")
        assert _until(rx, "ws01", "named address") == ["to the named address"]
    finally:
        rx.close()


def test_a_host_the_controller_cannot_find_its_own_address_toward_is_one_clear_line(tmp_path: Path) -> None:
    setting = NetconsoleSetting(port=_free_port(), where="inventory.yml:4:netconsole")
    host = Host(name="ws01", address="255.255.255.255", netconsole=setting)  # no source address for it
    with pytest.raises(NetconsoleError, match=r"^inventory.yml:4:netconsole: ws01: no route to 255\.255\.255\.255 "
                                              r".*set netconsole.listen") as caught:
        start_receiver([host], tmp_path / "netconsole")
    assert "\n" not in str(caught.value)


def test_every_interface_is_refused_with_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(NetconsoleError, match=r"UDP 0\.0\.0\.0:\d+: every interface") as caught:
        NetconsoleReceiver([_free_port()], {}, tmp_path, bind="0.0.0.0")
    assert "\n" not in str(caught.value)


# -- budgets --------------------------------------------------------------------------------

@pytest.mark.parametrize("receiver", [Budget(datagrams_per_s=0.001, datagram_burst=5, report_every_s=0)], indirect=True)
def test_a_source_over_its_datagram_budget_is_counted_and_the_drop_filed(receiver: NetconsoleReceiver,
                                                                        tmp_path: Path) -> None:
    datagrams = [f"6,{i},{i},-;line {i}".encode() for i in range(1, 21)]
    _send(receiver.ports[0], *datagrams)
    lines = _until_dropped(receiver, "ws01", 15)
    assert lines[:5] == [f"line {i}" for i in range(1, 6)]
    assert _noted(lines[5:]) == (15, sum(len(d) for d in datagrams[5:])) and len(lines) > 5
    filed = _filed(tmp_path / "netconsole", "ws01")
    assert {f["note"] for f in filed if "note" in f} == {"dropped"}


@pytest.mark.parametrize("receiver", [Budget(bytes_per_s=0.001, byte_burst=1000, report_every_s=0)], indirect=True)
def test_a_source_over_its_byte_budget_is_cut_off_too(receiver: NetconsoleReceiver) -> None:
    big = [b"6,%d,1,-;" % i + b"x" * 292 for i in range(1, 10)]  # 300 bytes each
    _send(receiver.ports[0], *big)
    lines = _until_dropped(receiver, "ws01", 6)
    assert lines[:3] == ["x" * 292] * 3 and _noted(lines[3:]) == (6, 1800)


def test_a_budget_refills_with_time_and_notes_its_drops_once_a_second_at_most() -> None:
    allowance = Allowance("10.0.0.5", Budget(datagrams_per_s=10, datagram_burst=2), now=0.0)
    assert [allowance.admit(100, 0.0) for _ in range(4)] == [True, True, False, False]
    drop = allowance.due(0.0)
    assert drop is not None and drop.words() == "[... dropped 2 datagrams (200 bytes) from 10.0.0.5 over budget ...]"
    assert allowance.admit(100, 0.1)  # one token back after 0.1 s at 10/s
    assert not allowance.admit(100, 0.1)
    assert allowance.due(0.5) is None  # the last note was 0.5 s ago
    later = allowance.due(1.0)
    assert later is not None and (later.datagrams, allowance.dropped) == (1, 3)


def test_a_wedges_record_says_how_many_datagrams_were_dropped(tmp_path: Path) -> None:
    rx = NetconsoleReceiver([_free_port()], {"127.0.0.1": "ws01"}, tmp_path, bind="127.0.0.1",
                            budget=Budget(datagrams_per_s=0.001, datagram_burst=1, report_every_s=0)).start()
    try:
        netconsole = HostNetconsole(HostLog("ws01", lambda *a, **k: None), NetconsoleSetting(port=rx.ports[0]), rx)
        rx.attempt_started["ws01"] = time.time() - 1
        _send(rx.ports[0], b"6,1,1,-;BUG: soft lockup", *[b"6,2,2,-;flood"] * 9)
        _until_dropped(rx, "ws01", 9)
        kernel_net = netconsole.record_lines(Outcome.WEDGE)
        assert kernel_net is not None and kernel_net[0]["line"] == "BUG: soft lockup"
        notes = kernel_net[1:]
        assert {line.get("note") for line in notes} == {"dropped"}
        assert _noted([str(line["line"]) for line in notes]) == (9, 9 * 13)
    finally:
        rx.close()


# -- caps on what a source makes us hold ----------------------------------------------------

def test_newline_less_plain_text_holds_one_capped_line_and_files_it_cut() -> None:
    rx = Reassembler()
    for i in range(200):  # 12 MB without a newline: the partial line must not keep it
        assert rx.feed(b"A" * 60_000, float(i)) == []
        assert rx.held_bytes() <= CAPS.line_bytes
    [line] = rx.feed(b"tail\n", 200.0)
    cut = 200 * 60_000 + 4 - CAPS.line_bytes
    assert (line.t, line.note, line.line) == (0.0, Note.CUT, "A" * CAPS.line_bytes + f" [... {cut} bytes cut ...]")
    assert rx.held_bytes() == 0


def test_a_cut_partial_left_without_its_newline_is_filed_cut_after_a_while() -> None:
    rx = Reassembler(WireCaps(line_bytes=10))
    rx.feed(b"Kernel panic - not syncing", 5.0)
    [line] = rx.flush(6.5)
    assert line.line == "Kernel pan [... 16 bytes cut ...]" and line.note is Note.CUT


def test_plain_lines_in_one_datagram_are_each_capped() -> None:
    rx = Reassembler(WireCaps(line_bytes=8))
    lines = rx.feed(b"short\n" + b"y" * 20 + b"\n\nok\n", 1.0)
    assert [line.line for line in lines] == ["short", "yyyyyyyy [... 12 bytes cut ...]", "ok"]


def test_an_extended_message_longer_than_the_cap_is_cut_there() -> None:
    [line] = Reassembler().feed(b"4,9,1,-;" + b"z" * 20_000 + b"\n DICT=1", 1.0)
    assert line.line == "z" * CAPS.line_bytes + f" [... {20_000 - CAPS.line_bytes} bytes cut ...]"
    assert (line.seq, line.note) == (9, Note.CUT)


def test_fragments_declaring_a_message_too_big_to_be_the_kernels_are_refused_not_held() -> None:
    rx = Reassembler()
    chunk = b"f" * 60_000
    for i in range(300):  # 18 MB of chunks of one never-finished 100 MB message
        assert rx.feed(b"6,7,1,-,ncfrag=%d/100000000;" % (i * 60_000) + chunk, 1.0) == []
    assert rx.held_bytes() == 0 and rx.refused == 300


def test_a_message_takes_at_most_its_chunk_cap_and_pending_bytes_stay_capped() -> None:
    rx = Reassembler()
    for offset in range(1, 1001):  # 1-byte chunks, the first never sent
        rx.feed(b"6,7,1,-,ncfrag=%d/16000;x" % offset, 1.0)
    assert rx.held_bytes() == CAPS.chunks_per_message and rx.refused == 1000 - CAPS.chunks_per_message
    for seq in range(100, 1100):  # a thousand messages of which only one chunk ever comes
        rx.feed(b"6,%d,1,-,ncfrag=0/16000;" % seq + b"p" * 1000, 1.0)
    assert rx.held_bytes() <= CAPS.pending_bytes


@pytest.mark.parametrize("second", [
    b"6,7,1,-,ncfrag=5/99;other total",  # the same message declaring another total
    b"6,7,1,-,ncfrag=10/11;past its end",  # a chunk past the total it declares
    b"6,7,1,-,ncfrag=11/11;",  # an offset at the end
])
def test_a_fragment_that_contradicts_its_message_is_refused(second: bytes) -> None:
    rx = Reassembler()
    rx.feed(b"6,7,1,-,ncfrag=0/11;hello", 1.0)
    assert rx.feed(second, 1.0) == [] and rx.refused == 1
    [line] = rx.feed(b"6,7,1,-,ncfrag=5/11; world", 1.0)
    assert line.line == "hello world"


def test_the_receiver_holds_no_more_than_its_caps_for_a_host(receiver: NetconsoleReceiver) -> None:
    _send(receiver.ports[0], *[b"B" * 30_000] * 20, b"6,1,1,-;marker")
    assert "marker" in _until(receiver, "ws01", "marker")
    assert receiver.held_bytes("ws01") <= CAPS.line_bytes  # 600 kB sent without a newline


# -- one host per source address ------------------------------------------------------------

def test_a_host_reporting_another_hosts_address_is_refused_and_the_lines_stay_the_owners(
        receiver: NetconsoleReceiver) -> None:
    with pytest.raises(SourceConflict, match="ws02: its kernel's source address 127.0.0.1 is ws01's: refused"):
        receiver.add_source("127.0.0.1", "ws02")
    _send(receiver.ports[0], b"6,1,1,-;ws01's own line")
    assert _until(receiver, "ws01", "own line") == ["ws01's own line"]
    assert receiver.lines("ws02") == [] and receiver.sources == {"127.0.0.1": "ws01"}


class _Agent:
    host = "ws02"

    def __init__(self, local_ip: str) -> None:
        self.local_ip = local_ip

    def netconsole(self, args: list[str]) -> NetconsoleReply:
        return NetconsoleReply(ok=True, config={"local_ip": self.local_ip}, printk=(8, 4, 1, 7))


def test_the_refusal_is_an_event_of_the_host_that_claimed_the_address(receiver: NetconsoleReceiver) -> None:
    events: list[tuple[str, str, dict[str, Any]]] = []
    log = HostLog("ws02", lambda host, what, **fields: events.append((host, what.value, fields)))
    HostNetconsole(log, NetconsoleSetting(port=receiver.ports[0]), receiver).ensure(_Agent("127.0.0.1"), "b1")  # type: ignore[arg-type]
    [(host, what, fields)] = events
    assert (host, what) == ("ws02", "netconsole_failed") and "is ws01's: refused" in fields["error"]
    assert receiver.sources == {"127.0.0.1": "ws01"}


def test_an_address_two_hosts_share_at_the_start_is_filed_to_neither_and_both_are_told(tmp_path: Path) -> None:
    port = _free_port()
    hosts = [Host(name=name, address="127.0.0.1", port=22 + i, netconsole=NetconsoleSetting(port=port))
             for i, name in enumerate(("ws01", "ws02"))]
    rx = start_receiver(hosts, tmp_path / "netconsole")
    assert rx is not None
    try:
        rx.add_source("127.0.0.4", "ws01")  # ws01's kernel was told its own address
        _send(port, b"6,1,1,-;whose is this")
        _send(port, b"6,1,1,-;from ws01's own address", source="127.0.0.4")
        assert _until(rx, "ws01", "own address") == ["from ws01's own address"]
        assert rx.unattributed == 1 and rx.lines("ws02") == []
        assert rx.refusals == {"ws01": ["source address 127.0.0.1 is also ws02's: its datagrams are filed to neither"],
                               "ws02": ["source address 127.0.0.1 is also ws01's: its datagrams are filed to neither"]}
        with pytest.raises(SourceConflict, match="is ws01 and ws02's"):
            rx.add_source("127.0.0.1", "ws02")
        events: list[tuple[str, dict[str, Any]]] = []
        log = HostLog("ws02", lambda host, what, **fields: events.append((what.value, fields)))
        HostNetconsole(log, hosts[1].netconsole, rx).ensure(_Agent("127.0.0.5"), "b1")  # type: ignore[arg-type]
        assert events == [("netconsole_applied", {"config": {"local_ip": "127.0.0.5"}, "printk": (8, 4, 1, 7), "notes": [
            "source address 127.0.0.1 is also ws01's: its datagrams are filed to neither"]})]
        assert rx.sources["127.0.0.5"] == "ws02" and "ws02" not in rx.refusals  # told once
    finally:
        rx.close()


def test_a_contested_address_is_taken_from_the_host_that_had_it(receiver: NetconsoleReceiver) -> None:
    receiver.contest("127.0.0.1", ["ws01", "ws02"])
    receiver.add_source("127.0.0.4", "ws01")
    _send(receiver.ports[0], b"6,1,1,-;whose is this")
    _send(receiver.ports[0], b"6,2,2,-;from ws01's own address", source="127.0.0.4")
    assert _until(receiver, "ws01", "own address") == ["from ws01's own address"]
    assert receiver.unattributed == 1 and "127.0.0.1" not in receiver.sources


# -- the kernel's lost messages, shown -------------------------------------------------------

def test_a_jump_in_the_kernels_sequence_is_shown_as_lines_lost() -> None:
    rx = Reassembler()
    got = [line for seq in (1, 2, 6, 8) for line in rx.feed(b"6,%d,1,-;m%d" % (seq, seq), 1.0)]
    assert [(line.line, line.note) for line in got] == [
        ("m1", None), ("m2", None), ("[... 3 lines lost ...]", Note.GAP), ("m6", None),
        ("[... 1 line lost ...]", Note.GAP), ("m8", None)]


def test_a_message_still_being_put_together_is_not_counted_lost_and_files_late() -> None:
    rx = Reassembler()
    rx.feed(b"6,1,1,-;m1", 1.0)
    rx.feed(b"6,2,1,-,ncfrag=0/8;half", 1.0)
    assert [line.line for line in rx.feed(b"6,3,1,-;m3", 1.0)] == ["m3"]
    assert [line.line for line in rx.feed(b"6,2,1,-,ncfrag=4/8;done", 1.0)] == ["halfdone"]


def test_a_new_boot_numbers_anew_without_a_gap() -> None:
    rx = Reassembler()
    rx.feed(b"6,500,1,-;old boot", 1.0)
    rx.restart()
    assert [line.line for line in rx.feed(b"6,1200,1,-;new boot", 2.0)] == ["new boot"]


def test_a_hosts_new_boot_numbers_anew_once_its_netconsole_is_configured_again(receiver: NetconsoleReceiver) -> None:
    netconsole = HostNetconsole(HostLog("ws01", lambda *a, **k: None), NetconsoleSetting(port=receiver.ports[0]), receiver)
    netconsole.ensure(_Agent("127.0.0.1"), "boot-1")  # type: ignore[arg-type]
    _send(receiver.ports[0], b"6,900,1,-;old boot")
    _until(receiver, "ws01", "old boot")
    netconsole.ensure(_Agent("127.0.0.1"), "boot-2")  # type: ignore[arg-type]
    _send(receiver.ports[0], b"6,1500,1,-;new boot")
    assert _until(receiver, "ws01", "new boot") == ["old boot", "new boot"]


def test_lines_lost_are_in_the_filed_text(receiver: NetconsoleReceiver, tmp_path: Path) -> None:
    _send(receiver.ports[0], b"6,10,1,-;before", b"6,14,2,-;after")
    _until(receiver, "ws01", "after")
    filed = _filed(tmp_path / "netconsole", "ws01")
    assert [(f["line"], f.get("note")) for f in filed] == [
        ("before", None), ("[... 3 lines lost ...]", "gap"), ("after", None)]


def test_a_hosts_new_boot_restarts_its_sequence_in_the_receiver(receiver: NetconsoleReceiver) -> None:
    _send(receiver.ports[0], b"6,900,1,-;old boot")
    _until(receiver, "ws01", "old boot")
    receiver.restart("ws01")
    _send(receiver.ports[0], b"6,1500,1,-;new boot")
    assert _until(receiver, "ws01", "new boot") == ["old boot", "new boot"]
