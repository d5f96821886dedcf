"""The simulated kernel's netconsole (sim/rfsim/netconsole_tx.py): what it puts on the wire
is what the controller's receiver takes apart, and the frames are valid IPv4/UDP."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from reprofleet.remote.netconsole import Reassembler
from reprofleet.sim.rfsim import boots, netconsole_tx

TARGET = {"local_ip": "10.213.7.10", "remote_ip": "10.213.7.1", "remote_port": "6666",
          "remote_mac": "52:54:00:12:34:56"}


def test_a_frame_is_addressed_to_the_configured_mac_with_a_valid_ip_header() -> None:
    data = netconsole_tx.frame(b"\x02\x00\x00\x00\x00\x01", TARGET, b"3,1,2,-;NVRM: Xid 79")
    assert data[:6] == bytes.fromhex("525400123456") and data[12:14] == b"\x08\x00"
    header = data[14:34]
    total = sum(struct.unpack("!10H", header))
    assert (total & 0xFFFF) + (total >> 16) == 0xFFFF  # the header checksums to zero
    assert socket.inet_ntoa(header[12:16]) == "10.213.7.10" and socket.inet_ntoa(header[16:20]) == "10.213.7.1"
    sport, dport, length, _ = struct.unpack("!HHHH", data[34:42])
    assert (sport, dport, length) == (6665, 6666, 8 + len(b"3,1,2,-;NVRM: Xid 79"))
    assert data[42:] == b"3,1,2,-;NVRM: Xid 79"


def test_what_the_simulated_kernel_sends_the_receiver_reads_back_in_both_forms() -> None:
    record = {"level": 4, "seq": 17, "usec": 123, "message": "w" * 2300}
    for extended in (True, False):
        rx = Reassembler()
        lines = [line for data in netconsole_tx.datagrams(record, extended) for line in rx.feed(data, 1.0)]
        assert [line.line for line in lines] == ["w" * 2300]
        assert lines[0].seq == (17 if extended else None)


def test_only_enabled_targets_count_and_messages_at_or_above_the_loglevel_stay_home(tmp_path: Path) -> None:
    netconsole_tx.reset(tmp_path)
    target = netconsole_tx.configfs(tmp_path) / "netconsole" / "reprofleet"
    target.mkdir(parents=True)
    (target / "remote_ip").write_text("10.213.7.1\n")
    (target / "enabled").write_text("0\n")
    assert netconsole_tx.targets(tmp_path) == []
    (target / "enabled").write_text("1\n")
    assert netconsole_tx.targets(tmp_path)[0]["remote_ip"] == "10.213.7.1"
    assert netconsole_tx.console_loglevel(tmp_path) == 4  # Ubuntu's: KERN_INFO (6) does not reach a console
    assert boots.KERN_ERR < netconsole_tx.console_loglevel(tmp_path) <= boots.KERN_INFO
