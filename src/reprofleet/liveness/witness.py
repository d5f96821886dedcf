"""The partition guard: is the controller's own network working? Asked before any verdict
that would power-cycle a host, and before every power action.

A frozen host and a cut network look the same from here (nothing answers), and hosts of one
campaign run the same PoC in near lockstep, so several really can freeze within seconds.
The guard therefore never counts silent hosts; it asks witnesses that do not depend on them:

1. the carrier of the local interface the route to the hosts uses: no carrier, network down;
2. a witness on the hosts' side of the network: the gateway our route to them goes through,
   or an inventory ``witness:`` address (host or group var); an echo, SYN-ACK or RST is an
   answer;
3. the power devices of the hosts: any answer at all proves the network (a status read, an
   HTTP reply from pdudaemon whatever its code, a status command's exit code).

The network is up when the carrier is up (or unknown) and some witness answers. With no
witness to ask at all (no gateway, no ``witness:``, no power port), a carrier that is up is
taken as enough: those hosts have no port, nothing would be cycled anyway.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from reprofleet.errors import ReprofleetError
from reprofleet.model import Host
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.liveness.probes import ProbeAnswer, probe_icmp_echo, probe_tcp, resolve

WITNESS_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Route:
    device: str
    gateway: str | None


@dataclass(frozen=True)
class NetworkCheck:
    """The guard's answer, with the reason a paused campaign reports."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


def route_to(address: str) -> Route | None:
    try:
        out = subprocess.run(["ip", "-o", "route", "get", resolve(address)], capture_output=True, text=True,
                             timeout=2).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.split()
    if "dev" not in words:
        return None
    gateway = words[words.index("via") + 1] if "via" in words else None
    return Route(words[words.index("dev") + 1], gateway)


def local_link_up(address: str) -> bool | None:
    """Carrier of the interface the route to ``address`` uses; None when it cannot be told."""
    route = route_to(address)
    if route is None:
        return None
    try:
        return (Path("/sys/class/net") / route.device / "carrier").read_text().strip() == "1"
    except OSError:
        return None


def witness_answers(address: str, timeout: float = WITNESS_TIMEOUT_S) -> bool:
    """Any answer from the witness's kernel: an echo reply, a SYN-ACK or a RST on port 22."""
    target = resolve(address)
    return bool(probe_icmp_echo(target, timeout)) or probe_tcp(target, 22, timeout) is not ProbeAnswer.DEAD


def witnesses(hosts: Sequence[Host]) -> list[str]:
    """The hosts' side of the network: inventory ``witness:`` addresses, then our gateways to them."""
    named = [str(h.vars["witness"]) for h in hosts if h.vars.get("witness")]
    gateways = [r.gateway for r in (route_to(h.address) for h in hosts[:3]) if r is not None and r.gateway]
    return list(dict.fromkeys(named + gateways))


def power_device_answers(host: Host, log: PowerLog) -> bool | None:
    """True when the host's power device said anything; None when it cannot be asked.

    A status read that fails (a wrong outlet, a refused password) is still the device
    answering, and so is its address answering at all (a SYN-ACK or RST on its port, an echo):
    either way our packets reach the hosts' network.
    """
    if host.pdu is None:
        return None
    if host.pdu.driver == "pdudaemon":
        return _http_answers(host.pdu.address)
    try:
        driver = driver_for(host.pdu, host.name, log)
        if driver.reads_state and driver.status() is not PowerState.UNKNOWN:
            return True
    except ReprofleetError:
        pass
    if host.pdu.driver == "command":
        return None  # a local command: its failure says nothing about our network
    return _device_address_answers(host.pdu.address)


def _device_address_answers(address: str) -> bool:
    from urllib.parse import urlsplit

    from reprofleet.power.drivers.http import base_url

    parts = urlsplit(base_url(address))
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = resolve(parts.hostname)
    return probe_tcp(target, port, WITNESS_TIMEOUT_S) is not ProbeAnswer.DEAD or \
        bool(probe_icmp_echo(target, WITNESS_TIMEOUT_S))


def _http_answers(address: str) -> bool:
    import requests

    from reprofleet.power.drivers.http import base_url

    try:
        requests.get(base_url(address), timeout=WITNESS_TIMEOUT_S)
    except requests.RequestException:
        return False
    return True  # any status code: something on the other side of our network replied


def controller_network_ok(hosts: Sequence[Host], log: PowerLog) -> NetworkCheck:
    links = [local_link_up(h.address) for h in hosts[:3]]
    if any(link is False for link in links):
        return NetworkCheck(False, "no carrier on the local link towards the hosts")
    asked = witnesses(hosts)
    if any(witness_answers(w) for w in asked):
        return NetworkCheck(True, "a witness on the hosts' network answers")
    pdus = [power_device_answers(h, log) for h in hosts if h.pdu is not None]
    if any(pdus):
        return NetworkCheck(True, "a power device answers")
    if not asked and all(p is None for p in pdus):
        return NetworkCheck(True, "carrier up and no witness to ask")
    return NetworkCheck(False, f"no witness ({', '.join(asked) or 'none'}) and no power device answers")


class CachedWitness:
    """The guard's answer, re-asked at most every ``ttl_s`` seconds (it costs PDU requests)."""

    def __init__(self, ask: Callable[[], bool | NetworkCheck], ttl_s: float = 3.0) -> None:
        self._ask = ask
        self._ttl = ttl_s
        self._answer: tuple[float, bool] | None = None
        self.reason = ""

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._answer is None or now - self._answer[0] > self._ttl:
            answer = self._ask()
            self.reason = answer.reason if isinstance(answer, NetworkCheck) else ""
            self._answer = (now, bool(answer))
        return self._answer[1]
