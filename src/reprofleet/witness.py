"""Is the controller's own network working? Asked only when every host went silent at once.

Hosts of one campaign run the same PoC in near lockstep, so two of them really can wedge
within seconds of each other; "everyone is silent" alone would then pause forever. Before
blaming our own network, ask witnesses that do not depend on the hosts:

1. the local link towards the hosts (the interface the route uses): no carrier means our
   network is down, whatever else answers;
2. the power devices of the silent hosts (a status read, short timeout): a PDU or BMC that
   answers is on the same network, so the network works and the silence is the hosts'.

With no power device to ask and a link that is up, the silence is the hosts' too: those
hosts are then marked wedged but nothing is power-cycled anyway (they have no port).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from .errors import ReprofleetError
from .model import Host
from .power import PowerLog, PowerState, driver_for


def local_link_up(address: str) -> bool | None:
    """Carrier of the interface the route to ``address`` uses; None when it cannot be told."""
    try:
        route = subprocess.run(["ip", "-o", "route", "get", address], capture_output=True, text=True,
                               timeout=2).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if " dev " not in route:
        return None
    device = route.split(" dev ", 1)[1].split()[0]
    try:
        carrier = (Path("/sys/class/net") / device / "carrier").read_text().strip()
    except OSError:
        return None
    return carrier == "1"


def power_device_answers(host: Host, log: PowerLog) -> bool:
    if host.pdu is None:
        return False
    try:
        return driver_for(host.pdu, host.name, log).status() is not PowerState.UNKNOWN
    except ReprofleetError:
        return False


def controller_network_ok(hosts: Sequence[Host], log: PowerLog) -> bool:
    links = [local_link_up(h.address) for h in hosts[:3]]
    if any(link is False for link in links):
        return False
    with_ports = [h for h in hosts if h.pdu is not None]
    if with_ports:
        return any(power_device_answers(h, log) for h in with_ports)
    return any(link is True for link in links)


class CachedWitness:
    """The answer, re-asked at most every ``ttl_s`` seconds (it costs PDU requests)."""

    def __init__(self, ask: Callable[[], bool], ttl_s: float = 3.0) -> None:
        self._ask = ask
        self._ttl = ttl_s
        self._answer: tuple[float, bool] | None = None

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._answer is None or now - self._answer[0] > self._ttl:
            self._answer = (now, self._ask())
        return self._answer[1]
