"""Independent liveness probes: they never use an attempt's (possibly stalled) connection.

A frozen host answers neither probe (no RST, no banner, no echo). A host whose sshd is
merely busy still completes a TCP handshake and sends ``SSH-``; a host whose kernel runs
answers ICMP even when its sshd is stuck, which is exactly the case that must not be
power-cycled.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time


def probe_ssh_banner(address: str, port: int, timeout: float) -> bool:
    """An independent liveness probe: a fresh TCP connect that must yield an SSH banner.

    A frozen host answers neither (no RST, no banner); a host whose sshd is merely busy
    still completes the handshake and sends ``SSH-`` within the timeout.
    """
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def probe_icmp_echo(address: str, timeout: float) -> bool | None:
    """A second independent probe: one ICMP echo. None where raw sockets are not permitted.

    A frozen host answers no ping either; a host whose kernel still runs does, even when its
    sshd is stuck, which is exactly the case that must not be power-cycled.
    """
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.getprotobyname("icmp"))
    except (PermissionError, OSError):
        return None
    ident = os.getpid() & 0xFFFF
    header = struct.pack("!BBHHH", 8, 0, 0, ident, 1)
    payload = b"reprofleet-probe"
    checksum = _icmp_checksum(header + payload)
    packet = struct.pack("!BBHHH", 8, 0, checksum, ident, 1) + payload
    deadline = time.monotonic() + timeout
    try:
        sock.sendto(packet, (address, 0))
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            reply, (source, _) = sock.recvfrom(2048)
            offset = (reply[0] & 0x0F) * 4  # skip the IP header
            kind, _, _, reply_ident, _ = struct.unpack("!BBHHH", reply[offset:offset + 8])
            if source == address and kind == 0 and reply_ident == ident:
                return True
    except OSError:
        return False
    finally:
        sock.close()
    return False


def _icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def probe_host(address: str, port: int, timeout: float) -> bool:
    """Both independent probes at once (SSH banner, ICMP echo); alive if either answers."""
    answers: list[bool | None] = []
    icmp = threading.Thread(target=lambda: answers.append(probe_icmp_echo(address, timeout)), daemon=True)
    icmp.start()
    banner = probe_ssh_banner(address, port, timeout)
    icmp.join(timeout + 1.0)
    return banner or any(answers)
