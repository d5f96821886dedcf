"""A simulated host's kernel netconsole: every kernel message, as it is printed, over UDP to
the target its (fake) configfs names, until the host freezes.

The hardware daemon is the simulated kernel, so it sends: it calls :meth:`Sender.pump` each
tick while the host runs, right after a wedge's last message and before the freeze, and from
the lockup watchdog (a kernel that sees the lock still prints, and netpoll sends from the
panic path). Nothing else is sent while the host is frozen.

The configuration is what the agent wrote into ``hw/configfs/netconsole/<target>/``
(``$REPROFLEET_CONFIGFS`` on the host); the console loglevel is the first field of
``hw/proc-sys/kernel/printk``: messages at or above it never reach a console, as on Linux.
Like netpoll, it writes whole frames (to ``remote_mac``, from ``local_ip``) on the host's
interface through a packet socket in the host's network namespace: below routing, ARP and
netfilter, so the wedge's DROP rules and ARP-off do not stop a kernel that still prints.

Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import struct
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import boots

CLONE_NEWNET = 0x40000000
ETH_P_IP = 0x0800
BROADCAST = "ff:ff:ff:ff:ff:ff"
LOCAL_PORT = 6665  # the kernel's default source port
CHUNK = 1000  # MAX_PRINT_CHUNK: longer messages go in pieces (ncfrag= in the extended form)
DEFAULT_PRINTK = "4\t4\t1\t7"


def configfs(hw: Path) -> Path:
    return hw / "configfs"


def reset(hw: Path) -> None:
    """A new boot: no netconsole module loaded, console loglevel at Ubuntu's default."""
    shutil.rmtree(configfs(hw) / "netconsole", ignore_errors=True)
    configfs(hw).mkdir(parents=True, exist_ok=True)
    kernel = hw / "proc-sys" / "kernel"
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "printk").write_text(DEFAULT_PRINTK + "\n")


def console_loglevel(hw: Path) -> int:
    try:
        return int((hw / "proc-sys" / "kernel" / "printk").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 4


def targets(hw: Path) -> List[Dict[str, str]]:
    """Enabled targets and their attributes."""
    found = []
    root = configfs(hw) / "netconsole"
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        attrs = {}
        for item in folder.iterdir() if folder.is_dir() else []:
            try:
                attrs[item.name] = item.read_text().strip()
            except OSError:
                continue
        if attrs.get("enabled") == "1" and attrs.get("remote_ip"):
            found.append(attrs)
    return found


def enabled_since(hw: Path) -> float:
    """When the newest target was enabled (the mtime of its ``enabled``)."""
    root = configfs(hw) / "netconsole"
    times = [f.stat().st_mtime for f in root.glob("*/enabled")] if root.is_dir() else []
    return max(times, default=0.0)


def datagrams(record: Dict[str, Any], extended: bool) -> List[bytes]:
    """What the kernel puts on the wire for one message (netconsole.c's send_ext_msg_udp)."""
    text = str(record["message"]).encode()
    if not extended:
        line = text + b"\n"
        return [line[i:i + CHUNK] for i in range(0, len(line), CHUNK)]
    header = "%d,%d,%d,-" % (record["level"], record["seq"], record["usec"])
    if len(text) + len(header) + 1 <= CHUNK:
        return [("%s;" % header).encode() + text]
    return [("%s,ncfrag=%d/%d;" % (header, at, len(text))).encode() + text[at:at + CHUNK - 100]
            for at in range(0, len(text), CHUNK - 100)]


class Sender:
    """One host's netconsole: what it has sent of this boot's kernel log."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self.sent = -1  # records of this boot already past; -1: not yet enabled
        self.size_before = 0  # the kernel log's size at the last tick before netconsole was enabled
        self.sockets: Dict[str, socket.socket] = {}  # dev_name -> packet socket on it

    def reset(self) -> None:
        """A new boot: the module is gone, nothing sent yet."""
        self.sent, self.size_before = -1, 0
        for sock in self.sockets.values():
            sock.close()
        self.sockets = {}

    def pump(self, hw: Path, kmsg: Path, started: float) -> int:
        """Send every message printed since the last pump; the count sent. ``started``: the
        boot's start (a record's time is ``started`` + its usec)."""
        enabled = targets(hw)
        if not enabled:
            self.sent, self.size_before = -1, _size(kmsg)
            return 0
        text = kmsg.read_text() if kmsg.exists() else ""
        records = boots.parse_kmsg(text)
        if self.sent < 0:  # enabled since the last tick: what was there then stays home, and
            since = enabled_since(hw)  # of what came later, what was printed before the enable
            old = len(boots.parse_kmsg(text[:self.size_before]))
            self.sent = old + sum(1 for r in records[old:] if started + int(r["usec"]) / 1e6 < since)
        fresh, self.sent = records[self.sent:], len(records)
        level_cap = console_loglevel(hw)
        count = 0
        for target in enabled:
            sock = self._socket(target.get("dev_name") or "eth0")
            if sock is None:
                continue
            for record in fresh:
                if record["level"] >= level_cap:
                    continue
                for data in datagrams(record, target.get("extended") == "1"):
                    try:
                        sock.send(frame(sock.getsockname()[4], target, data))
                        count += 1
                    except (OSError, ValueError, KeyError):
                        break
        return count

    def _socket(self, dev: str) -> Optional[socket.socket]:
        if dev not in self.sockets:
            sock = in_netns(self.netns, lambda: _packet_socket(dev))
            if sock is None:
                return None
            self.sockets[dev] = sock
        return self.sockets[dev]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _packet_socket(dev: str) -> socket.socket:
    """netpoll writes whole frames to the driver: below routing, ARP and netfilter (the
    wedge's DROP rules), to the MAC it was given."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    sock.bind((dev, 0))
    sock.setblocking(False)
    return sock


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack("!%dH" % (len(header) // 2), header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(src_mac: bytes, target: Dict[str, str], payload: bytes) -> bytes:
    """Ethernet + IPv4 + UDP, as netpoll_send_udp builds it (UDP checksum 0: optional in IPv4)."""
    dst_mac = bytes.fromhex((target.get("remote_mac") or BROADCAST).replace(":", ""))
    src_ip = socket.inet_aton(target["local_ip"])
    dst_ip = socket.inet_aton(target["remote_ip"])
    udp = struct.pack("!HHHH", int(target.get("local_port") or LOCAL_PORT),
                      int(target.get("remote_port") or 6666), 8 + len(payload), 0) + payload
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, socket.IPPROTO_UDP, 0,
                         src_ip, dst_ip)
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return dst_mac + src_mac + struct.pack("!H", ETH_P_IP) + header + udp


def in_netns(netns: str, make: Any) -> Any:
    """``make()`` in a thread that entered the host's network namespace (a socket keeps the
    namespace it was created in; the daemon's own thread never moves)."""
    result: List[Any] = [None]

    def enter() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    return
            finally:
                os.close(fd)
            result[0] = make()
        except OSError:
            return

    thread = threading.Thread(target=enter, name=f"netns-{netns}", daemon=True)
    thread.start()
    thread.join(5.0)
    return result[0]
