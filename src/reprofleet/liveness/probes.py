"""Independent liveness probes: they never use an attempt's (possibly stalled) connection.

A probe asks two layers of the host at once and gives one of three answers:

- ``SSHD``: a fresh TCP connect returned an SSH banner (userspace answers);
- ``KERNEL``: the kernel answered (an ICMP echo reply, a SYN-ACK without a banner, or a
  RST) but sshd did not: the host runs, its userspace is stuck or busy (SIGSTOP, a CPU
  starved by a cgroup quota, an OOM storm);
- ``DEAD``: nothing answered: no echo reply, no SYN-ACK, no RST. A frozen host looks like
  this, and so does a cut network (which is why a wedge also needs the partition guard);
- ``UNRESOLVED``: the host's name did not resolve, so nothing could be asked. It says nothing
  of the host (a DNS server down, a DHCP lease moving ``ws01.lab``): it never counts toward a
  wedge, and a watchdog keeps its suspicion without a verdict until the name resolves again.

A host's name is resolved on every probe (every round of a silence, from its first), as ssh
resolves on every connect; nothing is cached here, so after DHCP moves a host its silence is
probed at the address the name has now. The system resolver's own cache keeps each answer for
its DNS TTL, which is the lifetime the name's owner chose.

A router's "unreachable" is not the host answering: it counts as DEAD. ICMP goes through
icmplib, on a raw socket when we may open one, else on a datagram ICMP socket (Linux,
where ``net.ipv4.ping_group_range`` admits our group), else not at all: then only the TCP
handshake speaks for the kernel, and :func:`icmp_mode` says so once.
"""

from __future__ import annotations

import errno
import random
import socket
import threading
import time
from enum import IntEnum, unique
from functools import lru_cache
from typing import Callable

from icmplib import ICMPRequest, ICMPv4Socket, ICMPv6Socket
from icmplib.exceptions import ICMPLibError

from reprofleet.errors import ReprofleetError


@unique
class ProbeAnswer(IntEnum):
    """What a host said to one probe; falsy only when it was asked and nothing answered.

    ``UNRESOLVED`` is truthy on purpose: no proof of silence, so a check that asks ``if
    probe():`` to decide a host is gone does not count it (a name that fails to resolve must
    never lead to a power cycle); a verdict that needs an answer compares members."""

    DEAD = 0
    KERNEL = 1
    SSHD = 2
    UNRESOLVED = 3


@unique
class IcmpMode(IntEnum):
    NONE = 0
    DATAGRAM = 1  # unprivileged ICMP socket (ping_group_range)
    RAW = 2


_REFUSED = {errno.ECONNREFUSED, errno.ECONNRESET}


def probe_ssh_banner(address: str, port: int, timeout: float) -> bool:
    """A fresh TCP connect that must yield an SSH banner within ``timeout``."""
    return probe_tcp(address, port, timeout) is ProbeAnswer.SSHD


def probe_tcp(address: str, port: int, timeout: float, banner: bool = True) -> ProbeAnswer:
    """SSHD for a banner, KERNEL for a handshake without one or a RST, DEAD for silence.

    ``banner=False``: the handshake (or RST) is the whole answer, KERNEL, nothing is awaited
    after it (a device's port, where no SSH banner will ever come)."""
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect((address, port))
        except OSError as exc:
            return ProbeAnswer.KERNEL if exc.errno in _REFUSED else ProbeAnswer.DEAD
        if not banner:
            return ProbeAnswer.KERNEL
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            return ProbeAnswer.SSHD if sock.recv(4).startswith(b"SSH-") else ProbeAnswer.KERNEL
        except OSError:
            return ProbeAnswer.KERNEL  # the handshake completed: the kernel is there


def tcp_answers(address: str, port: int, timeout: float) -> bool:
    """A SYN-ACK or a RST within ``timeout``: the address's kernel answered (no banner awaited)."""
    return probe_tcp(address, port, timeout, banner=False) is not ProbeAnswer.DEAD


@lru_cache(maxsize=1)
def icmp_mode() -> IcmpMode:
    """Which ICMP socket this process may open (asked once: it does not change)."""
    for mode, privileged in ((IcmpMode.RAW, True), (IcmpMode.DATAGRAM, False)):
        try:
            ICMPv4Socket(privileged=privileged).close()
            return mode
        except ICMPLibError:
            continue
    return IcmpMode.NONE


def probe_icmp_echo(address: str, timeout: float, mode: IcmpMode | None = None) -> bool | None:
    """One echo with a random ident and sequence; None where no ICMP socket can be opened."""
    mode = icmp_mode() if mode is None else mode
    if mode is IcmpMode.NONE:
        return None
    kind = ICMPv6Socket if ":" in address else ICMPv4Socket
    request = ICMPRequest(address, id=random.getrandbits(16), sequence=random.getrandbits(16),
                          payload=b"reprofleet-liveness")
    try:
        with kind(privileged=mode is IcmpMode.RAW) as sock:
            sock.send(request)
            deadline = time.monotonic() + timeout
            while (remaining := deadline - time.monotonic()) > 0:
                reply = sock.receive(request, remaining)
                if reply.type == 0 and reply.source == address:  # not a router's unreachable
                    return True
    except (ICMPLibError, OSError):
        return False
    return False


class UnresolvedName(ReprofleetError):
    """A host's name did not resolve to an address (now: the next lookup may)."""


Resolver = Callable[[str], str]  # a name (or an address) -> the address it has now; raises UnresolvedName


def resolve_now(name: str) -> str:
    """The address ``name`` has now (an address is itself); asked anew on every call."""
    try:
        return str(socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0])
    except (OSError, UnicodeError) as exc:
        raise UnresolvedName(f"{name} does not resolve ({getattr(exc, 'strerror', None) or exc})") from None


def resolve(name: str) -> str:
    """``name``'s address now, or the name itself when it does not resolve (a witness or a
    segment then asks the name, and fails as silence); asked anew on every call."""
    try:
        return resolve_now(name)
    except UnresolvedName:
        return name


class HostProbe:
    """One host's probe: its name resolved on every call, then ICMP echo and TCP banner in
    parallel at the address it has now (UNRESOLVED when it has none)."""

    def __init__(self, address: str, port: int, timeout: float, resolver: Resolver = resolve_now) -> None:
        self.name = address
        self.port = port
        self.timeout = timeout
        self.resolver = resolver
        self.address: str | None = None  # the address the last round asked (what a person reads)
        self.unresolved: str | None = None  # why the last round's name did not resolve

    def __call__(self) -> ProbeAnswer:
        try:
            address = self.resolver(self.name)
        except UnresolvedName as exc:
            self.unresolved = str(exc)
            return ProbeAnswer.UNRESOLVED
        self.address, self.unresolved = address, None
        echo: list[bool | None] = []
        icmp = threading.Thread(target=lambda: echo.append(probe_icmp_echo(address, self.timeout)),
                                daemon=True, name="probe-icmp")
        icmp.start()
        tcp = probe_tcp(address, self.port, self.timeout)
        icmp.join(self.timeout + 0.5)
        if tcp is ProbeAnswer.SSHD:
            return tcp
        return ProbeAnswer.KERNEL if tcp is ProbeAnswer.KERNEL or any(echo) else ProbeAnswer.DEAD


def probe_host(address: str, port: int, timeout: float, resolver: Resolver = resolve_now) -> ProbeAnswer:
    """Both independent probes at once, at the address ``address`` has now."""
    return HostProbe(address, port, timeout, resolver)()
