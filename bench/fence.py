"""Fence agents against the power simulators: off -> verified off -> on -> verified on, per cycle,
and how many requests (agent runs, for the fence driver) one cycle takes; the native driver of
the same simulator beside each for comparison.

    python3 bench/fence.py --cycles 3 --results bench/RESULTS.md

Each simulator runs on loopback with one outlet (or system) wired to a switch file in a temporary
folder. A cycle is the base driver's explicit one (``cycle(dwell, device=False)``): off, read
back until off, dwell, on, read back until on. "to verified off" is from the cycle's start to
the off read back; "verified on" is from the end of the dwell to the on read back. Requests
are the driver's ``_set``/``_read`` calls (one fence agent run each for the fence driver, which
itself makes several device requests: log in, read, set, poll).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from reprofleet.model import CredentialRef, PowerPort, frozen_mapping  # noqa: E402
from reprofleet.power import PowerLog, driver_for  # noqa: E402
from reprofleet.power.base import PowerDriver  # noqa: E402
from reprofleet.sim.power import IpmiBmc, RedfishBmc, SnmpPdu  # noqa: E402
from reprofleet.sim.power.redfish_bmc import system_uuid  # noqa: E402
from reprofleet.sim.power.switch import write_switch  # noqa: E402

Setup = Callable[[Path, Path], tuple[Any, PowerDriver]]
SECRET = "RF_BENCH_FENCE_SECRET"
SETTINGS = {"poll_s": 0.1, "settle_s": 20.0, "stagger_window_s": 0}


def _fence(address: str, outlet: str | None, secret: str, agent: str, **options: Any) -> PowerDriver:
    os.environ[SECRET] = secret
    ip, _, port = address.rpartition(":")
    agent_options = {"ipport": port, **options.pop("agent_options", {})}
    return driver_for(PowerPort("fence", ip, outlet, CredentialRef("env", SECRET),
                                frozen_mapping({"agent": agent, "agent_options": agent_options, **SETTINGS,
                                                "timeout_s": 30.0, **options})), "bench", PowerLog(None))


def _native(sim: Any, outlet: str, **options: Any) -> PowerDriver:
    os.environ[SECRET] = str(sim.secret)
    return driver_for(sim.power_port(outlet, f"env:{SECRET}", **{**SETTINGS, **options}), "bench", PowerLog(None))


def apc_snmp(fence: bool) -> Setup:
    def setup(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
        sim = SnmpPdu(work, {"1": switch}, community="bench-comm").start()
        if not fence:
            return sim, _native(sim, "1", model="apc_spdu")
        return sim, _fence(sim.address, "1", sim.secret, "fence_apc_snmp", secret_option="community",
                           agent_options={"snmp_version": "2c"})
    return setup


def ipmilan(fence: bool) -> Setup:
    def setup(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
        sim = IpmiBmc(work, {"bench": switch}, password="bench-ipmi-pw").start()
        if not fence:
            return sim, _native(sim, "bench")
        return sim, _fence(sim.address_of("bench"), None, sim.secret, "fence_ipmilan",
                           agent_options={"lanplus": True, "cipher": 3, "power_wait": 0})
    return setup


def redfish(fence: bool) -> Setup:
    def setup(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
        sim = RedfishBmc(work, {"bench": switch}, password="bench-rf-pw", tls=True, apply_delay_s=(1, 1)).start()
        if not fence:
            return sim, _native(sim, "bench", verify_tls=str(sim.ca_file))
        return sim, _fence(sim.address.removeprefix("https://"), None, str(sim.secret), "fence_redfish",
                           agent_options={"ssl_insecure": True,
                                          "systems_uri": f"/redfish/v1/Systems/{system_uuid('bench')}"})
    return setup


SETUPS: dict[str, Setup] = {
    "fence_apc_snmp (SNMP PDU sim)": apc_snmp(True), "snmp apc_spdu (same sim)": apc_snmp(False),
    "fence_ipmilan (ipmi_sim)": ipmilan(True), "ipmi (same ipmi_sim)": ipmilan(False),
    "fence_redfish (sushy-tools, TLS front, 1 s apply delay)": redfish(True),
    "redfish (same sim)": redfish(False),
}


def _counting(driver: PowerDriver) -> list[int]:
    """Count the driver's device requests (``_set``/``_read``) from now on."""
    count = [0]
    for name in ("_set", "_read"):
        real = getattr(driver, name)

        def counted(*args: Any, _real: Callable[..., Any] = real) -> Any:
            count[0] += 1
            return _real(*args)
        setattr(driver, name, counted)
    return count


def time_cycles(name: str, setup: Setup, cycles: int, dwell_s: float, work: Path) -> dict[str, Any]:
    switch = work / "hw" / "power"
    write_switch(switch, True)
    try:
        sim, driver = setup(work / "sim", switch)
    except Exception as exc:  # noqa: BLE001 (a simulator or agent that cannot start here is reported)
        return {"driver": name, "error": f"{type(exc).__name__}: {exc}"[:160]}
    to_off, to_on, requests = [], [], []
    try:
        driver.status()  # the session or client is set up outside the timed cycles
        count = _counting(driver)
        for _ in range(cycles):
            marks: dict[str, float] = {}
            count[0] = 0
            started = time.perf_counter()
            driver.cycle(dwell_s, lambda state: marks.setdefault(state, time.perf_counter()), device=False)
            to_off.append(marks["off"] - started)
            to_on.append(marks["on"] - marks["dwell"] - dwell_s)
            requests.append(count[0])
    finally:
        sim.stop()
    return {"driver": name, "cycles": cycles,
            "to_verified_off_s": [round(statistics.median(to_off), 2), round(max(to_off), 2)],
            "to_verified_on_s": [round(statistics.median(to_on), 2), round(max(to_on), 2)],
            "requests_per_cycle": [min(requests), max(requests)]}


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, commit: str) -> str:
    table = ["| driver (simulator) | off -> verified off: median / max | on -> verified on: median / max | "
             "requests per cycle |", "| --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            table.append(f"| {r['driver']} | not run: {r['error']} | | |")
            continue
        low, high = r["requests_per_cycle"]
        table.append(f"| {r['driver']} | {r['to_verified_off_s'][0]:.2f} / {r['to_verified_off_s'][1]:.2f} s | "
                     f"{r['to_verified_on_s'][0]:.2f} / {r['to_verified_on_s'][1]:.2f} s | "
                     f"{low if low == high else f'{low}-{high}'} |")
    return (f"Command: `python3 bench/fence.py --cycles {args.cycles} --dwell {args.dwell:g} --results "
            f"bench/RESULTS.md` (commit {commit}, Debian fence-agents {_agents_version()}) on {args.where}.\n\n"
            f"{args.cycles} explicit cycles per driver (off, read back off, {args.dwell:g} s dwell, on, read back "
            "on). A fence request is one agent run (a fresh Python process that logs in, reads, switches and "
            "polls by itself before it exits), so a fence agent costs seconds where the native driver of the "
            "same device costs milliseconds; the Redfish emulator applies each reset 1 s late, for both.\n\n"
            + "\n".join(table))


def _agents_version() -> str:
    try:
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "fence-agents"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "?"
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--dwell", type=float, default=1.0)
    parser.add_argument("--results", help="rewrite this RESULTS.md's fence section")
    parser.add_argument("--where", default="this host", help="words for RESULTS.md: where it ran")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rf-bench-fence-"))
    try:
        rows = [time_cycles(name, setup, args.cycles, args.dwell, work / f"c{i}")
                for i, (name, setup) in enumerate(SETUPS.items())]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(rows, indent=2))
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import rewrite_section

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        rewrite_section(Path(args.results), "fence", "Fence agents: a verified cycle and its requests "
                        "(bench/fence.py)", markdown(rows, args, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
