"""The partition guard: is the controller's own network working? Asked before any verdict
that would power-cycle a host, and before every power action.

A frozen host and a cut network look the same from here (nothing answers), and hosts of one
campaign run the same PoC in near lockstep, so several really can freeze within seconds.
The guard therefore never counts silent hosts; it asks witnesses that do not depend on them:

1. the carrier of the local interface the route to the hosts uses: no carrier, network down;
2. a witness on the hosts' side of the network: an inventory ``witness:`` address (host or
   group var), or the gateway our route to them goes through; an echo, SYN-ACK or RST is an
   answer;
3. the power devices of the hosts: any answer at all proves the network (a TCP handshake or
   RST on an HTTP device's port, an echo from an SNMP or IPMI device, one status read where
   nothing cheaper can be asked, a status command's exit code).

The network is up when the carrier is up (or unknown) and some witness answers. With no
witness to ask at all (no gateway, no ``witness:``, no power port), a carrier that is up is
taken as enough: those hosts have no port, nothing would be cycled anyway.

What it costs must not grow with the fleet (50 hosts on one PDU once made every host read
every PDU in turn, on its stream thread, and a freeze took ~30 s to declare): the witnesses
are built once, one per physical device; a check asks them all at once and stops at the
first answer, within ``budget_s``; its answer is kept under a lock, stamped with the time it
*finished*, for ``period_s``; one check runs at a time, in the guard's own thread. The
watchdogs only :meth:`PartitionGuard.peek` (never blocking a stream thread): no fresh answer
yet means no verdict yet.
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from reprofleet.errors import ReprofleetError
from reprofleet.model import Host, PowerPort
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.power.base import PowerUnansweredError
from reprofleet.liveness.probes import probe_icmp_echo, resolve, tcp_answers

WITNESS_TIMEOUT_S = 1.0  # one witness's own timeout, and the whole check's budget
GUARD_PERIOD_S = 3.0  # an answer is reused this long after the check that gave it finished
MAX_WORKERS = 8  # witnesses asked at once
# a TCP handshake on the port answers (Home Assistant's REST API included); a Kasa plug's port
# depends on its transport (9999 or 80) and a fence agent's device on the agent: those get the echo,
# then one status read
HTTP_DRIVERS = frozenset({"tasmota", "shelly", "redfish", "pdudaemon", "homeassistant"})


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


@dataclass(frozen=True)
class Witness:
    """One thing the guard asks: ``ask()`` is True (it answered), False (silence) or None
    (it cannot be asked). A *carrier* that says False is decisive: our link is down."""

    name: str
    ask: Callable[[], bool | None]
    carrier: bool = False


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
    return bool(probe_icmp_echo(target, timeout)) or tcp_answers(target, 22, timeout)


def named_witnesses(host: Host) -> list[str]:
    """The host's ``witness:`` addresses (one, or a list): on the hosts' side of the network."""
    value = host.vars.get("witness")
    if not value:
        return []
    values = value if isinstance(value, (list, tuple)) else [value]
    return [str(v) for v in values if str(v).strip()]


def witnesses(hosts: Sequence[Host]) -> list[str]:
    """The hosts' side of the network: inventory ``witness:`` addresses, then our gateways to them."""
    named = [w for h in hosts for w in named_witnesses(h)]
    gateways = [r.gateway for r in (route_to(h.address) for h in hosts[:3]) if r is not None and r.gateway]
    return list(dict.fromkeys(named + gateways))


def _device_address_answers(address: str, timeout: float) -> bool:
    from urllib.parse import urlsplit

    from reprofleet.power.drivers.http import base_url

    parts = urlsplit(base_url(address))
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = resolve(parts.hostname)
    return tcp_answers(target, port, timeout) or bool(probe_icmp_echo(target, timeout))


def _host_of(address: str) -> str:
    """The host part of a device address (``udp://pdu:161``, ``pdu:623``, ``[::1]``, ``pdu``)."""
    from urllib.parse import urlsplit

    text = address if "//" in address else f"//{address}"
    return urlsplit(text).hostname or address


def power_witness(host: Host, port: PowerPort, log: PowerLog, timeout: float) -> Witness:
    """How the guard asks one power device, as cheaply as the protocol allows.

    HTTP devices (plugs, Redfish, pdudaemon): a TCP handshake or RST on their port, no request.
    SNMP and IPMI (UDP): an echo; without one, a single status read (one try, ``timeout``).
    A ``command`` driver: its status command (0 on, 2 off: an answer; 1 or anything else: the
    command could not tell, which is no answer).
    A status read that fails definitely (a wrong outlet, a refused password) is still the device
    answering; one whose every try failed without an answer (``PowerUnansweredError``) is silence.
    The answer is decided on the exception's type, never on its words.
    """
    name = f"power device {port.address}"
    if port.driver in HTTP_DRIVERS:
        return Witness(name, lambda: _device_address_answers(port.address, timeout))
    try:
        driver = driver_for(port, host.name, log)
    except ReprofleetError:
        driver = None
    if driver is not None:  # one try, no backoff: a guard that waits is a guard that is late
        driver.settings = replace(driver.settings, tries=1, timeout_s=timeout, settle_s=0.0, lock_wait_s=timeout)

    def status_answers() -> bool | None:
        if driver is None or not driver.reads_state:
            return None
        try:
            return driver.status() is not PowerState.UNKNOWN
        except PowerUnansweredError:  # no try got an answer (no reply in time, a status that could not tell)
            return False
        except ReprofleetError:  # a definite refusal: the device answered
            return True

    if port.driver == "command":
        return Witness(name, status_answers)

    def echo_or_status() -> bool | None:
        if probe_icmp_echo(resolve(_host_of(port.address)), timeout):
            return True
        return status_answers()

    return Witness(name, echo_or_status)


def build_witnesses(hosts: Sequence[Host], log: PowerLog, timeout: float = WITNESS_TIMEOUT_S) -> list[Witness]:
    """Every witness of a campaign, once: carriers of the routes to the first hosts, the named
    witnesses and gateways, and one per physical power device (hosts sharing a PDU share it)."""
    found: list[Witness] = []
    for address in dict.fromkeys(h.address for h in hosts[:3]):
        found.append(Witness(f"carrier towards {address}", partial(local_link_up, address), carrier=True))
    for address in witnesses(hosts):
        found.append(Witness(f"witness {address}", partial(witness_answers, address, timeout)))
    devices: dict[tuple[str, str], Witness] = {}
    for host in hosts:
        for port in host.power_ports:
            key = (port.driver, port.address.lower().rstrip("/"))
            if key not in devices:
                devices[key] = power_witness(host, port, log, timeout)
    return found + list(devices.values())


def judge(answers: Iterable[tuple[Witness, bool | None]]) -> NetworkCheck:
    """The network from the witnesses' answers (a carrier's False outweighs everything)."""
    answers = list(answers)
    if any(w.carrier and a is False for w, a in answers):
        return NetworkCheck(False, "no carrier on the local link towards the hosts")
    answered = [w.name for w, a in answers if a and not w.carrier]
    if answered:
        return NetworkCheck(True, f"{answered[0]} answers")
    asked = [w.name for w, a in answers if not w.carrier and a is not None]
    if not asked and not [w for w, _ in answers if not w.carrier]:
        return NetworkCheck(True, "carrier up and no witness to ask")
    if not asked:
        return NetworkCheck(True, "carrier up and no witness could be asked")
    return NetworkCheck(False, f"no witness answers ({', '.join(asked)})")


class PartitionGuard:
    """The guard of one campaign: built once, asked concurrently, cached, never on a stream thread.

    ``__call__`` (recovery, between attempts) waits for a fresh answer, at most the budget
    plus a margin; :meth:`peek` (the watchdogs) returns the answer if it is fresh and
    otherwise starts a check in the background and returns None.
    """

    def __init__(self, witnesses: Callable[[], Sequence[Witness]] | Sequence[Witness], *,
                 period_s: float = GUARD_PERIOD_S, budget_s: float = WITNESS_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic, workers: int = MAX_WORKERS) -> None:
        self._witnesses_of = witnesses if callable(witnesses) else (lambda: witnesses)
        self._witnesses: Sequence[Witness] | None = None
        self._period = period_s
        self._budget = budget_s
        self._clock = clock
        self._lock = threading.Lock()
        self._answer: tuple[float, NetworkCheck] | None = None  # (finished at, answer)
        self._running: threading.Thread | None = None
        self._done = threading.Condition(self._lock)
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="guard-witness")
        self.checks = 0  # how many checks ran (a bench reads it)

    @property
    def reason(self) -> str:
        with self._lock:
            return self._answer[1].reason if self._answer else ""

    def peek(self) -> NetworkCheck | None:
        """A fresh answer, or None (a check was started in the background).

        An answer older than the period starts a new check but is still given for one more
        period: a watchdog never loses its verdict (a pause, say) to the gap between checks.
        """
        with self._lock:
            fresh = self._fresh()
            if fresh is not None:
                return fresh
            self._start()
            if self._answer is not None and self._clock() - self._answer[0] <= 2 * self._period:
                return self._answer[1]
            return None

    def __call__(self) -> bool:
        return bool(self.check())

    def check(self) -> NetworkCheck:
        """A fresh answer, waiting for one (bounded: the budget plus a margin)."""
        deadline = self._clock() + self._budget * 3 + 1.0
        with self._lock:
            for _ in range(1000):  # bounded by the deadline too
                fresh = self._fresh()
                if fresh is not None:
                    return fresh
                self._start()
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                self._done.wait(min(0.1, remaining))
            return self._answer[1] if self._answer else NetworkCheck(False, "the partition guard did not answer")

    def _fresh(self) -> NetworkCheck | None:
        if self._answer is not None and self._clock() - self._answer[0] <= self._period:
            return self._answer[1]
        return None

    def _start(self) -> None:
        """Start a check unless one runs (called under the lock)."""
        if self._running is not None and self._running.is_alive():
            return
        self._running = threading.Thread(target=self._refresh, daemon=True, name="partition-guard")
        self._running.start()

    def _refresh(self) -> None:
        try:
            answer = self._ask_all()
        except Exception as exc:  # the guard must never die; a broken check proves nothing up
            answer = NetworkCheck(False, f"the partition guard failed: {type(exc).__name__}: {exc}")
        with self._lock:
            self._answer = (self._clock(), answer)
            self.checks += 1
            self._done.notify_all()

    def _ask_all(self) -> NetworkCheck:
        if self._witnesses is None:
            self._witnesses = list(self._witnesses_of())
        carriers = [(w, _safe(w.ask)) for w in self._witnesses if w.carrier]  # local files: instant
        if any(a is False for _, a in carriers):
            return judge(carriers)
        others = [w for w in self._witnesses if not w.carrier]
        futures: dict[Future[bool | None], Witness] = {self._pool.submit(_safe, w.ask): w for w in others}
        answers: list[tuple[Witness, bool | None]] = list(carriers)
        deadline = self._clock() + self._budget
        pending = set(futures)
        while pending:
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            done, pending = wait(pending, timeout=remaining, return_when=FIRST_COMPLETED)
            for future in done:
                answers.append((futures[future], future.result()))
            if any(a for w, a in answers if not w.carrier):
                break  # the first answer is enough; the rest finish on their own timeouts
        answers.extend((futures[f], False) for f in pending)  # no answer within the budget: silence
        return judge(answers)


def _safe(ask: Callable[[], bool | None]) -> bool | None:
    try:
        return ask()
    except Exception:  # a witness that raises did not answer
        return False


class HostsSideWitness:
    """Whether a host's own ``witness:`` addresses answer, asked in the background and cached
    like the guard: for the correlated-silence hold, which must never block a stream thread."""

    def __init__(self, period_s: float = GUARD_PERIOD_S, timeout: float = WITNESS_TIMEOUT_S,
                 answers: Callable[[str, float], bool] = witness_answers,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._guards: dict[tuple[str, ...], PartitionGuard] = {}
        self._lock = threading.Lock()
        self._period = period_s
        self._timeout = timeout
        self._answers = answers
        self._clock = clock

    def peek(self, addresses: Sequence[str]) -> NetworkCheck | None:
        """None: no witness named, or no fresh answer yet."""
        key = tuple(addresses)
        if not key:
            return None
        with self._lock:
            guard = self._guards.get(key)
            if guard is None:
                asks = [Witness(f"witness {a}", partial(self._answers, a, self._timeout)) for a in key]
                guard = self._guards[key] = PartitionGuard(asks, period_s=self._period, budget_s=self._timeout,
                                                           clock=self._clock, workers=len(key))
        return guard.peek()


def campaign_guard(hosts: Sequence[Host], log: PowerLog, **kwargs: Any) -> PartitionGuard:
    """The guard a campaign installs: its witnesses are built on the guard's thread, at its first check."""
    return PartitionGuard(lambda: build_witnesses(hosts, log), **kwargs)
