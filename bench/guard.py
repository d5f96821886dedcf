"""What the partition guard costs as a fleet grows: freeze -> declared, and PDU requests per
minute, with N hosts on one SNMP PDU and no gateway (issue 18, item 4).

Each host is played as its attempt follower plays it: a stream thread that hears a heartbeat
every 0.5 s and calls its watchdog's ``check()`` every 0.25 s. One host freezes ``--freeze-at``
seconds in (its heartbeats stop, its probes answer DEAD); the others keep streaming. The
guard is real: one simulated APC PDU (``sim/power/snmp_pdu``, a pysnmp agent on loopback)
feeds every host, and a UDP relay in front of it counts the requests that reach it. Host
addresses are on loopback (``ip route get`` gives no gateway), so the PDU is the only witness.

- ``ours``: the campaign's guard (``liveness.witness.campaign_guard``): one witness per
  device, asked at once within 1 s, cached from the time its check finished, peeked at
  from the stream threads.
- ``naive``: the guard as it was before (kept here as the baseline, from the code it
  replaced): every call reads every host's PDU in turn with a freshly built driver and full
  retries, cached without a lock and stamped when it started, called on the stream thread.

``ours-snmp`` is ours where the PDU does not answer an echo (ICMP filtered), so each check
is one SNMP status read; ``ours`` asks the echo first. Each request reaches the PDU
``--pdu-latency-ms`` late (a slow management card; 0 for the simulator's own speed).

    .venv/bin/python bench/guard.py --hosts 3 50 --seconds 40 --pdu-latency-ms 100
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from reprofleet.errors import ReprofleetError
from reprofleet.liveness.probes import ProbeAnswer
from reprofleet.liveness.watchdog import FleetLiveness, Verdict, Watchdog, WatchdogSettings
from reprofleet.liveness.witness import NetworkCheck, campaign_guard, local_link_up, route_to
from reprofleet.model import Host
from reprofleet.power import PowerLog, PowerState, driver_for
from reprofleet.sim.power.snmp_pdu import SnmpPdu

COMMUNITY_ENV = "BENCH_GUARD_COMMUNITY"


# -- the baseline: the guard before issue 18 ------------------------------------------------

def naive_network_ok(hosts: list[Host], log: PowerLog) -> NetworkCheck:
    links = [local_link_up(h.address) for h in hosts[:3]]
    if any(link is False for link in links):
        return NetworkCheck(False, "no carrier")
    gateways = [r.gateway for r in (route_to(h.address) for h in hosts[:3]) if r is not None and r.gateway]
    if gateways:
        raise SystemExit("the bench needs hosts without a gateway")
    answers = []
    for host in hosts:  # every host's PDU, in turn, a fresh driver each, full retries
        try:
            driver = driver_for(host.pdu, host.name, log)  # type: ignore[arg-type]
            answers.append(driver.status() is not PowerState.UNKNOWN)
        except ReprofleetError:
            answers.append(False)
    return NetworkCheck(any(answers), "a power device answers" if any(answers) else "none")


class NaiveCache:
    """The old CachedWitness: no lock, stamped when the check *started*."""

    def __init__(self, ask: Callable[[], NetworkCheck], ttl_s: float = 3.0) -> None:
        self._ask, self._ttl = ask, ttl_s
        self._answer: tuple[float, bool] | None = None

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._answer is None or now - self._answer[0] > self._ttl:
            answer = self._ask()
            self._answer = (now, bool(answer))
        return self._answer[1]


# -- the PDU's wire ----------------------------------------------------------------------------

class CountingRelay:
    """UDP relay in front of the PDU: every datagram towards it is counted, with its time."""

    def __init__(self, target: tuple[str, int], delay_s: float = 0.0) -> None:
        self.target = target
        self.delay_s = delay_s  # each request reaches the agent this much later (a PDU's slow management card)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.times: list[float] = []
        self._clients: dict[int, tuple[str, int]] = {}
        self._up: dict[tuple[str, int], socket.socket] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> "CountingRelay":
        thread = threading.Thread(target=self._down_loop, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def _upstream(self, client: tuple[str, int]) -> socket.socket:
        up = self._up.get(client)
        if up is None:
            up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            up.connect(self.target)
            up.settimeout(0.2)
            self._up[client] = up
            thread = threading.Thread(target=self._up_loop, args=(up, client), daemon=True)
            thread.start()
            self._threads.append(thread)
        return up

    def _down_loop(self) -> None:
        while not self._stop.is_set():
            try:
                data, client = self.sock.recvfrom(65535)
            except OSError:
                continue
            self.times.append(time.monotonic())
            up = self._upstream(client)
            if self.delay_s > 0:
                threading.Timer(self.delay_s, self._send, args=(up, data)).start()
            else:
                self._send(up, data)

    @staticmethod
    def _send(up: socket.socket, data: bytes) -> None:
        try:
            up.send(data)
        except OSError:
            pass

    def _up_loop(self, up: socket.socket, client: tuple[str, int]) -> None:
        while not self._stop.is_set():
            try:
                data = up.recv(65535)
            except OSError:
                continue
            self.sock.sendto(data, client)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(2)
        for up in self._up.values():
            up.close()
        self.sock.close()


# -- one run -------------------------------------------------------------------------------

def run(n_hosts: int, impl: str, seconds: float, freeze_at: float, work: Path, delay_s: float) -> dict[str, Any]:
    switches = {str(i + 1): work / f"outlet-{i + 1}" for i in range(n_hosts)}
    for path in switches.values():
        path.write_text("on\n")
    pdu = SnmpPdu(work / "pdu", switches, community="bench-community").start()
    relay = CountingRelay(("127.0.0.1", int(pdu.address.rsplit(":", 1)[1])), delay_s).start()
    os.environ[COMMUNITY_ENV] = pdu.secret
    try:
        return _measure(n_hosts, impl, seconds, freeze_at, pdu, relay, work)
    finally:
        relay.stop()
        pdu.stop()


def _measure(n_hosts: int, impl: str, seconds: float, freeze_at: float, pdu: SnmpPdu, relay: CountingRelay,
             work: Path) -> dict[str, Any]:
    from dataclasses import replace

    hosts = []
    for i in range(n_hosts):
        port = pdu.power_port(str(i + 1), credentials=f"env:{COMMUNITY_ENV}")
        port = replace(port, address=f"127.0.0.1:{relay.port}")
        hosts.append(Host(f"h{i:02d}", f"127.0.1.{i + 10}", pdu=port))
    log = PowerLog(work / f"power-{impl}-{n_hosts}.jsonl")
    from reprofleet.liveness import witness

    echo = witness.probe_icmp_echo
    if impl == "ours-snmp":  # a PDU that does not answer echo (ICMP filtered): one status read per check
        witness.probe_icmp_echo = lambda address, timeout: False  # type: ignore[assignment]
    try:
        return _follow_all(n_hosts, impl, seconds, freeze_at, hosts, log, relay)
    finally:
        witness.probe_icmp_echo = echo


def _follow_all(n_hosts: int, impl: str, seconds: float, freeze_at: float, hosts: list[Host], log: PowerLog,
                relay: CountingRelay) -> dict[str, Any]:
    if impl.startswith("ours"):
        guard: Any = campaign_guard(hosts, log)
    else:
        guard = NaiveCache(lambda: naive_network_ok(hosts, log))
    fleet = FleetLiveness(5.0, guard)
    settings = WatchdogSettings()
    frozen = threading.Event()
    declared: dict[str, float] = {}
    check_s: list[float] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def follower(index: int) -> None:
        name = hosts[index].name
        probe = (lambda: ProbeAnswer.DEAD if frozen.is_set() else ProbeAnswer.SSHD) if index == 0 \
            else (lambda: ProbeAnswer.SSHD)
        dog = Watchdog(name, probe, settings, fleet=fleet)
        next_beat = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_beat and not (index == 0 and frozen.is_set()):
                dog.heard()
                next_beat = now + 0.5
            began = time.monotonic()
            verdict = dog.check()
            check_s.append(time.monotonic() - began)
            if verdict is Verdict.WEDGED and name not in declared:
                declared[name] = time.monotonic()
                break
            stop.wait(0.25)
        dog.close()

    threads = [threading.Thread(target=follower, args=(i,), daemon=True) for i in range(n_hosts)]
    for thread in threads:
        thread.start()
    time.sleep(freeze_at)
    frozen_at = time.monotonic()
    frozen.set()
    time.sleep(max(0.0, seconds - freeze_at))
    stop.set()
    for thread in threads:
        thread.join(30)
    elapsed = time.monotonic() - t0
    latency = declared.get(hosts[0].name)
    return {
        "hosts": n_hosts, "guard": impl, "seconds": round(elapsed, 1),
        "freeze_to_declared_s": round(latency - frozen_at, 2) if latency else None,
        "false_wedges": len([h for h in declared if h != hosts[0].name]),
        "pdu_requests_per_min": round(len(relay.times) / elapsed * 60, 1),
        "check_median_ms": round(statistics.median(check_s) * 1000, 2) if check_s else None,
        "check_max_ms": round(max(check_s) * 1000, 1) if check_s else None,
        "guard_checks": getattr(guard, "checks", None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[3, 50])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--freeze-at", type=float, default=10.0)
    parser.add_argument("--impl", nargs="+", default=["naive", "ours-snmp", "ours"])
    parser.add_argument("--pdu-latency-ms", type=float, default=100.0,
                        help="each SNMP request reaches the PDU this much later (a slow management card)")
    parser.add_argument("--json", type=Path, default=Path(__file__).with_name("guard-results.json"))
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results = []
    for n in args.hosts:
        for impl in args.impl:
            with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
                result = run(n, impl, args.seconds, args.freeze_at, Path(tmp), args.pdu_latency_ms / 1000)
            result["pdu_latency_ms"] = args.pdu_latency_ms
            result["commit"] = commit
            print(json.dumps(result), flush=True)
            results.append(result)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"| hosts | guard | freeze → declared | PDU requests/min | check on stream thread, median / max | false wedges |",
          file=sys.stderr)
    for r in results:
        print(f"| {r['hosts']} | {r['guard']} | {r['freeze_to_declared_s']} s | {r['pdu_requests_per_min']} | "
              f"{r['check_median_ms']} / {r['check_max_ms']} ms | {r['false_wedges']} |", file=sys.stderr)


if __name__ == "__main__":
    main()
