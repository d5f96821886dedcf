"""Three answers from a probe: SSHD (banner), KERNEL (echo, handshake or RST), DEAD (silence).

Everything here talks to loopback only; the unprivileged ICMP case runs in a network
namespace of its own (where ``ping_group_range`` is ours to set).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from reprofleet.liveness import probes
from reprofleet.liveness.probes import HostProbe, IcmpMode, ProbeAnswer, probe_icmp_echo, probe_tcp


@pytest.fixture
def banner_server() -> Iterator[int]:
    """A loopback port that answers like sshd: a banner at once."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6 probe-test\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join(2)
    server.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_banner_is_sshd(banner_server: int) -> None:
    assert probe_tcp("127.0.0.1", banner_server, 1.0) is ProbeAnswer.SSHD


def test_a_handshake_without_a_banner_is_the_kernel_alone() -> None:
    with socket.create_server(("127.0.0.1", 0)) as stuck:  # listening, never accepting: a stopped sshd
        started = time.monotonic()
        assert probe_tcp("127.0.0.1", stuck.getsockname()[1], 0.5) is ProbeAnswer.KERNEL
        assert time.monotonic() - started < 1.0


def test_a_reset_is_the_kernel_answering() -> None:
    assert probe_tcp("127.0.0.1", _closed_port(), 1.0) is ProbeAnswer.KERNEL


def test_a_port_that_drops_syns_is_dead_within_the_timeout() -> None:
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers = []
        for _ in range(4):  # fill the accept queue: later SYNs are dropped, no SYN-ACK, no RST
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        started = time.monotonic()
        answer = probe_tcp("127.0.0.1", port, 0.5)
        took = time.monotonic() - started
        for filler in fillers:
            filler.close()
    assert answer is ProbeAnswer.DEAD
    assert 0.4 < took < 1.0


def test_an_echo_reply_comes_back_from_loopback_with_a_random_ident() -> None:
    assert probes.icmp_mode() is not IcmpMode.NONE  # root in the test VM: raw sockets
    idents = set()
    real = probes.ICMPRequest

    def spy(*args: object, **kwargs: object) -> object:
        idents.add((kwargs["id"], kwargs["sequence"]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(probes, "ICMPRequest", spy)
        assert all(probe_icmp_echo("127.0.0.1", 1.0) for _ in range(3))
    assert len(idents) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of its own needs root")
def test_an_unprivileged_datagram_socket_pings_where_ping_group_range_allows() -> None:
    script = (
        "import subprocess, sys\n"
        "subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)\n"
        "open('/proc/sys/net/ipv4/ping_group_range', 'w').write('0 0')\n"
        "from reprofleet.liveness.probes import IcmpMode, probe_icmp_echo\n"
        "sys.exit(0 if probe_icmp_echo('127.0.0.1', 1.0, mode=IcmpMode.DATAGRAM) else 3)\n"
    )
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr


def test_a_host_probe_is_dead_only_when_neither_echo_nor_tcp_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "probe_icmp_echo", lambda address, timeout: False)
    monkeypatch.setattr(probes, "probe_tcp", lambda address, port, timeout: ProbeAnswer.DEAD)
    assert HostProbe("127.0.0.1", 22, 0.2)() is ProbeAnswer.DEAD
    monkeypatch.setattr(probes, "probe_icmp_echo", lambda address, timeout: True)
    assert HostProbe("127.0.0.1", 22, 0.2)() is ProbeAnswer.KERNEL  # a stuck sshd behind a live kernel
    monkeypatch.setattr(probes, "probe_tcp", lambda address, port, timeout: ProbeAnswer.SSHD)
    assert HostProbe("127.0.0.1", 22, 0.2)() is ProbeAnswer.SSHD


class MovingName:
    """A resolver whose answer for ``ws01.lab`` changes as DHCP moves the host (None: no answer)."""

    def __init__(self, *addresses: str | None) -> None:
        self.addresses = list(addresses)
        self.asked: list[str] = []

    def __call__(self, name: str) -> str:
        self.asked.append(name)
        address = self.addresses.pop(0)
        if address is None:
            raise probes.UnresolvedName(f"{name} does not resolve (Name or service not known)")
        return address


def test_a_name_whose_address_changes_between_rounds_is_probed_at_its_new_address(banner_server: int) -> None:
    # the stream went silent because DHCP moved ws01.lab: its old address (127.0.0.2) has no sshd
    # on this port (a RST: KERNEL); the new one (127.0.0.1) answers with a banner
    moving = MovingName("127.0.0.2", "127.0.0.1", "127.0.0.1")
    probe = HostProbe("ws01.lab", banner_server, 1.0, resolver=moving)
    assert probe() is ProbeAnswer.KERNEL and probe.address == "127.0.0.2"
    assert probe() is ProbeAnswer.SSHD and probe.address == "127.0.0.1"
    assert probe() is ProbeAnswer.SSHD
    assert moving.asked == ["ws01.lab"] * 3  # once per round, nothing cached between rounds


def test_a_name_that_stops_resolving_is_unresolved_never_dead(banner_server: int) -> None:
    probe = HostProbe("ws01.lab", banner_server, 1.0, resolver=MovingName("127.0.0.1", None, "127.0.0.1"))
    assert probe() is ProbeAnswer.SSHD
    assert probe() is ProbeAnswer.UNRESOLVED and "ws01.lab does not resolve" in str(probe.unresolved)
    assert probe() is ProbeAnswer.SSHD and probe.unresolved is None
    assert ProbeAnswer.UNRESOLVED and not ProbeAnswer.DEAD  # no proof of silence for a check that asks `if probe():`


def test_the_real_resolver_asks_every_time_and_names_a_name_that_does_not_resolve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up = []
    real = socket.getaddrinfo

    def counting(*args: object, **kwargs: object) -> object:
        looked_up.append(kwargs.get("host", args[0] if args else None))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    assert [probes.resolve_now("localhost") for _ in range(3)] == ["127.0.0.1"] * 3
    assert looked_up.count("localhost") == 3
    with pytest.raises(probes.UnresolvedName, match="no-such-host.invalid does not resolve"):
        probes.resolve_now("no-such-host.invalid")
    assert probes.resolve("no-such-host.invalid") == "no-such-host.invalid"  # witnesses ask the name, as silence


def test_the_ssh_host_port_probes_a_moved_host_at_its_new_address(banner_server: int) -> None:
    from reprofleet.model import Host
    from reprofleet.runner.port import SshHostPort

    moving = MovingName("127.0.0.2", "127.0.0.1", None, "127.0.0.1")
    port = SshHostPort(None, Host("ws01", "ws01.lab", port=banner_server), resolver=moving)  # type: ignore[arg-type]
    assert [port.probe(1.0), port.probe(1.0), port.probe(1.0)] == [
        ProbeAnswer.KERNEL, ProbeAnswer.SSHD, ProbeAnswer.UNRESOLVED]
    assert port.banner(1.0) is True
