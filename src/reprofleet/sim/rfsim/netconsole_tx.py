"""A simulated host's kernel netconsole: every kernel message, as it is printed, over UDP to
the target its (fake) configfs names, until the host freezes.

The hardware daemon is the simulated kernel, so it sends: it calls :meth:`Sender.pump` each
tick while the host runs, right after a wedge's last message and before the freeze, and from
the lockup watchdog (a kernel that sees the lock still prints, and netpoll sends from the
panic path). Nothing else is sent while the host is frozen.

The configuration is what the agent wrote into ``hw/configfs/netconsole/<target>/``
(``$REPROFLEET_CONFIGFS`` on the host); the console loglevel is the first field of
``hw/proc-sys/kernel/printk``: messages at or above it never reach a console, as on Linux.
The socket lives in the host's network namespace with the host's address; its packets carry
a mark that a rule ahead of the wedge chain accepts (netpoll bypasses netfilter).

Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import boots

CLONE_NEWNET = 0x40000000
SO_MARK = 36
MARK = 0x6E63  # "nc"
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
        self.sockets: Dict[Tuple[str, int], socket.socket] = {}
        self.marked = False

    def reset(self) -> None:
        """A new boot: the module is gone, nothing sent yet."""
        self.sent = -1
        for sock in self.sockets.values():
            sock.close()
        self.sockets = {}

    def pump(self, hw: Path, kmsg: Path, started: float) -> int:
        """Send every message printed since the last pump; the count sent. ``started``: the
        boot's start (a record's time is ``started`` + its usec)."""
        enabled = targets(hw)
        if not enabled:
            self.sent = -1
            return 0
        records = boots.parse_kmsg(kmsg.read_text()) if kmsg.exists() else []
        if self.sent < 0:  # enabled since the last tick: netconsole sends what came after
            since = enabled_since(hw)
            self.sent = sum(1 for r in records if started + int(r["usec"]) / 1e6 < since)
        fresh, self.sent = records[self.sent:], len(records)
        level_cap = console_loglevel(hw)
        count = 0
        for target in enabled:
            sock = self._socket(target.get("local_ip", ""))
            if sock is None:
                continue
            for record in fresh:
                if record["level"] >= level_cap:
                    continue
                for data in datagrams(record, target.get("extended") == "1"):
                    try:
                        sock.sendto(data, (target["remote_ip"], int(target.get("remote_port") or 6666)))
                        count += 1
                    except OSError:
                        break
        return count

    def _socket(self, local_ip: str) -> Optional[socket.socket]:
        key = (local_ip, LOCAL_PORT)
        if key not in self.sockets:
            sock = in_netns(self.netns, lambda: _bound_socket(local_ip))
            if sock is None:
                return None
            if not self.marked:
                self.marked = _accept_marked(self.netns)
            self.sockets[key] = sock
        return self.sockets[key]


def _bound_socket(local_ip: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_MARK, MARK)
    try:
        sock.bind((local_ip, LOCAL_PORT) if local_ip else ("", 0))
    except OSError:
        sock.bind((local_ip, 0) if local_ip else ("", 0))
    sock.setblocking(False)
    return sock


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


def _accept_marked(netns: str) -> bool:
    """netpoll writes to the driver below netfilter: the wedge's DROP must not catch it."""
    rules = f"*filter\n-I OUTPUT 1 -m mark --mark {MARK} -j ACCEPT\nCOMMIT\n"
    try:
        subprocess.run(["ip", "netns", "exec", netns, "iptables-restore", "--noflush"], input=rules,
                       universal_newlines=True, timeout=5.0, check=True, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True
