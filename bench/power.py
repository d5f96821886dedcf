"""Power drivers against their simulators: how long a switch takes from the command sent to
the state read back, per driver; and what 1 Hz wall-power sampling costs in controller CPU.

    python3 bench/power.py --switches 4 --sample-seconds 30 --results bench/RESULTS.md
    python3 bench/power.py --plugs --cycles 5 --results bench/RESULTS.md    # consumer plugs: verified cycles

``--plugs`` times the consumer-plug drivers (kasa over XOR and KLAP, homeassistant) through
whole explicit cycles (off, read back off, dwell, on, read back on) against their in-process
simulators, and counts the requests a cycle takes twice: the driver's (``_set``/``_read``
calls) and what reached the device (TCP messages, HTTP requests: a KLAP session's two
handshake requests included when the cycle had to set one up). It rewrites its own section.

Each simulator runs on loopback with one outlet wired to a switch file in a temporary
folder (no simulated host needed). A switch is timed through the driver's public
``off()``/``on()``: one request to switch, then reads until the device reports the new
state (pdudaemon cannot report state: its time is the request alone). The sampler's CPU
is the sampling thread's own CPU time (``time.thread_time``), so nothing else running on
the machine is counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from reprofleet.power import PowerLog, driver_for  # noqa: E402
from reprofleet.power.base import PowerDriver  # noqa: E402
from reprofleet.power.wall import WallPowerSampler  # noqa: E402
from reprofleet.sim.power import HttpPlugServer, IpmiBmc, PdudaemonServer, RedfishBmc, SnmpPdu  # noqa: E402
from reprofleet.sim.power.switch import write_switch  # noqa: E402

Setup = Callable[[Path, Path], tuple[Any, PowerDriver]]


def _driver(sim: Any, outlet: str, **options: Any) -> PowerDriver:
    if sim.secret:
        os.environ["RF_BENCH_SECRET"] = str(sim.secret)
    port = sim.power_port(outlet, "env:RF_BENCH_SECRET" if sim.secret else None, **{"poll_s": 0.05, **options})
    return driver_for(port, "bench", PowerLog(None))


def plug(kind: str) -> Setup:
    outlet = "1" if kind == "tasmota" else "0"

    def setup(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
        sim = HttpPlugServer(work, kind, {outlet: switch}, password="bench-pw").start()
        return sim, _driver(sim, outlet)
    return setup


def snmp(model: str) -> Setup:
    def setup(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
        sim = SnmpPdu(work, {"1": switch}, community="bench-comm").start()
        return sim, _driver(sim, "1", model=model)
    return setup


def redfish(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
    sim = RedfishBmc(work, {"bench": switch}, password="bench-pw").start()
    return sim, _driver(sim, "bench", poll_s=0.2, settle_s=20.0)


def ipmi(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
    sim = IpmiBmc(work, {"bench": switch}, password="bench-pw").start()
    return sim, _driver(sim, "bench")


def pdudaemon(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
    sim = PdudaemonServer(work, {"1": switch}).start()
    return sim, _driver(sim, "1")


class NoSim:
    def stop(self) -> None:
        pass


def command(work: Path, switch: Path) -> tuple[Any, PowerDriver]:
    from reprofleet.model import PowerPort, frozen_mapping

    port = PowerPort("command", "local", "1", options=frozen_mapping({
        "on_command": f"echo on > {switch}", "off_command": f"echo off > {switch}",
        "status_command": f"cat {switch}", "poll_s": 0.05}))
    return NoSim(), driver_for(port, "bench", PowerLog(None))


SETUPS: dict[str, Setup] = {
    "tasmota": plug("tasmota"), "shelly gen1": plug("shelly1"), "shelly gen2": plug("shelly2"),
    "snmp apc_rpdu": snmp("apc_rpdu"), "snmp raritan_px": snmp("raritan_px"), "redfish (sushy-tools)": redfish,
    "ipmi (ipmi_sim)": ipmi, "pdudaemon": pdudaemon, "command": command,
}


def _plug_sims() -> dict[str, Callable[[Path], tuple[Any, PowerDriver]]]:
    from reprofleet.model import CredentialRef, PowerPort, frozen_mapping
    from reprofleet.sim.power.plug_homeassistant import HomeAssistantSim
    from reprofleet.sim.power.plug_kasa import KasaKlapPlug, KasaXorPlug

    settings = {"poll_s": 0.05, "stagger_window_s": 0}

    def made(sim: Any, outlet: str | None, secret: str | None, **options: Any) -> tuple[Any, PowerDriver]:
        if secret:
            os.environ["RF_BENCH_SECRET"] = secret
        port = PowerPort(options.pop("driver", "kasa"), sim.address, outlet,
                         CredentialRef("env", "RF_BENCH_SECRET") if secret else None,
                         frozen_mapping({**settings, **options}))
        return sim, driver_for(port, "bench", PowerLog(None))

    return {
        "kasa xor (HS103 sim)": lambda switch: made(KasaXorPlug([switch]), None, None, transport="xor"),
        "kasa xor, strip socket 2 (HS300 sim)": lambda switch: made(
            KasaXorPlug([switch.with_name("a"), switch], strip=True), "2", None, transport="xor"),
        "kasa klap v2 (Tapo P110 sim)": lambda switch: made(
            KasaKlapPlug([switch], user="bench@example.com", password="bench-pw"), None,
            "bench@example.com:bench-pw", transport="klap"),
        "kasa klap v2, strip socket 2 (Tapo P300 sim)": lambda switch: made(
            KasaKlapPlug([switch.with_name("a"), switch], user="bench@example.com", password="bench-pw", strip=True),
            "2", "bench@example.com:bench-pw", transport="klap"),
        "homeassistant (REST sim)": lambda switch: made(
            HomeAssistantSim({"switch.bench": switch}, token="bench-token"), "switch.bench", "bench-token",
            driver="homeassistant"),
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


def time_plug_cycles(name: str, setup: Callable[[Path], tuple[Any, PowerDriver]], cycles: int, dwell_s: float,
                     work: Path) -> dict[str, Any]:
    """Verified explicit cycles: off -> read back off, and (after the dwell) on -> read back on."""
    switch = work / "hw" / "power"
    write_switch(switch, True)
    write_switch(switch.with_name("a"), True)
    sim, driver = setup(switch)
    to_off, to_on, requests, wire = [], [], [], []
    try:
        driver.status()  # the connection (and a KLAP session) is set up outside the timed cycles
        count = _counting(driver)
        for _ in range(cycles):
            marks: dict[str, float] = {}
            count[0], served = 0, len(sim.served())
            started = time.perf_counter()
            driver.cycle(dwell_s, lambda state: marks.setdefault(state, time.perf_counter()), device=False)
            to_off.append(marks["off"] - started)
            to_on.append(marks["on"] - marks["dwell"] - dwell_s)
            requests.append(count[0])
            wire.append(len(sim.served()) - served)
    finally:
        sim.stop()
    return {"driver": name, "cycles": cycles,
            "to_verified_off_s": [round(statistics.median(to_off), 4), round(max(to_off), 4)],
            "to_verified_on_s": [round(statistics.median(to_on), 4), round(max(to_on), 4)],
            "requests_per_cycle": [min(requests), max(requests)], "device_requests_per_cycle": [min(wire), max(wire)]}


def plugs_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, commit: str) -> str:
    def span(pair: list[int]) -> str:
        return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}-{pair[1]}"

    table = ["| driver (simulator) | off -> verified off: median / max | on -> verified on: median / max | "
             "driver requests per cycle | requests the device saw per cycle |", "| --- | --- | --- | --- | --- |"]
    table += [f"| {r['driver']} | {r['to_verified_off_s'][0] * 1000:.1f} / {r['to_verified_off_s'][1] * 1000:.1f} ms"
              f" | {r['to_verified_on_s'][0] * 1000:.1f} / {r['to_verified_on_s'][1] * 1000:.1f} ms | "
              f"{span(r['requests_per_cycle'])} | {span(r['device_requests_per_cycle'])} |" for r in rows]
    return (f"Command: `PYTHONPATH=src python3 bench/power.py --plugs --cycles {args.cycles} --dwell {args.dwell:g} "
            f"--results bench/RESULTS.md` (commit {commit}, python-kasa {_kasa_version()}) on {args.where}.\n\n"
            f"{args.cycles} explicit cycles per driver (off, read back off, {args.dwell:g} s dwell, on, read back on) "
            "against the in-process simulators on loopback (sim/power/plug_kasa.py, plug_homeassistant.py). "
            "Driver requests are its `_set`/`_read` calls; the device's count is what reached it (a KLAP request is "
            "one HTTP POST; its session was set up before the timed cycles, by the first status read). A strip's "
            "socket costs one more read at the driver's first request (its position becomes the device's child id), "
            "outside the timed cycles too.\n\n" + "\n".join(table))


def _kasa_version() -> str:
    from importlib.metadata import version

    return version("python-kasa")


def time_switches(name: str, setup: Setup, switches: int, work: Path) -> dict[str, Any]:
    switch = work / "hw" / "power"
    write_switch(switch, True)
    try:
        sim, driver = setup(work / "sim", switch)
    except Exception as exc:  # noqa: BLE001 (a simulator that cannot start here is reported, not fatal)
        return {"driver": name, "error": f"{type(exc).__name__}: {exc}"[:160]}
    times: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for _ in range(switches):
            for action in ("off", "on"):
                started = time.perf_counter()
                getattr(driver, action)()
                times[action].append(time.perf_counter() - started)
    finally:
        sim.stop()
    return {"driver": name, "verified": driver.reads_state,
            **{f"{a}_median_s": round(statistics.median(v), 3) for a, v in times.items()},
            **{f"{a}_max_s": round(max(v), 3) for a, v in times.items()}}


def sampling_cost(name: str, setup: Setup, seconds: float, work: Path) -> dict[str, Any]:
    switch = work / "hw" / "power"
    write_switch(switch, True)
    sim, driver = setup(work / "sim", switch)
    lines: list[dict[str, Any]] = []
    try:
        first = time.thread_time()
        driver.read_power()  # the first reading builds the client (pysnmp's engine: ~0.5 s CPU, once per driver)
        first = time.thread_time() - first
        sampler = WallPowerSampler([driver], lines.append, period_s=1.0)
        started = time.monotonic()
        with sampler:
            time.sleep(seconds)
        wall = time.monotonic() - started
    finally:
        sim.stop()
    return {"driver": name, "seconds": round(wall, 1), "readings": sampler.readings, "gaps": sampler.gaps,
            "cpu_s": round(sampler.cpu_s, 3), "cpu_percent_of_one_core": round(100 * sampler.cpu_s / wall, 3),
            "cpu_ms_per_reading": round(1000 * sampler.cpu_s / max(1, sampler.readings), 2),
            "first_reading_cpu_ms": round(1000 * first, 1)}


def markdown(cycles: list[dict[str, Any]], sampling: list[dict[str, Any]], args: argparse.Namespace) -> str:
    rows = ["| driver | off: median / max | on: median / max | read back |", "| --- | --- | --- | --- |"]
    for r in cycles:
        if "error" in r:
            rows.append(f"| {r['driver']} | not run: {r['error']} | | |")
            continue
        rows.append(f"| {r['driver']} | {r['off_median_s']:.3f} / {r['off_max_s']:.3f} s | "
                    f"{r['on_median_s']:.3f} / {r['on_max_s']:.3f} s | "
                    f"{'yes' if r['verified'] else 'no (cannot report state)'} |")
    cost = ["| meter | readings in | CPU of the sampling thread | per reading | first reading (once per driver) |",
            "| --- | --- | --- | --- | --- |"]
    cost += [f"| {s['driver']} | {s['readings']} in {s['seconds']:g} s ({s['gaps']} gaps) | "
             f"{s['cpu_percent_of_one_core']:.3f} % of one core | {s['cpu_ms_per_reading']:.2f} ms | "
             f"{s['first_reading_cpu_ms']:.1f} ms |" for s in sampling]
    return (f"Command: `python3 bench/power.py --switches {args.switches} --sample-seconds {args.sample_seconds:g} "
            f"--results bench/RESULTS.md` on {args.where}.\n\n"
            "Time from the switch command sent to the state read back (`off()`/`on()`), "
            f"{args.switches} of each per driver, against the simulators on loopback. The Redfish emulator "
            "applies a reset 1-11 s late on purpose (as slow BMCs do), so its times are the emulator's delay. A driver's first switch includes its login or client "
            "set-up (pysnmp's engine, the IPMI session): that is the max of the off column.\n\n"
            + "\n".join(rows) + "\n\nCPU cost of 1 Hz wall-power sampling (the sampling thread's own CPU time):\n\n"
            + "\n".join(cost))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--switches", type=int, default=4, help="off/on pairs per driver")
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--drivers", default=",".join(SETUPS), help="comma-separated names from the table")
    parser.add_argument("--results", help="rewrite this RESULTS.md's power section")
    parser.add_argument("--where", default="this host", help="words for RESULTS.md: where it ran")
    parser.add_argument("--plugs", action="store_true", help="the consumer plugs' verified cycles only")
    parser.add_argument("--cycles", type=int, default=5, help="with --plugs: cycles per driver")
    parser.add_argument("--dwell", type=float, default=0.5, help="with --plugs: the dwell of each cycle")
    args = parser.parse_args()
    if args.plugs:
        return plugs_main(args)
    work = Path(tempfile.mkdtemp(prefix="rf-bench-power-"))
    try:
        cycles = [time_switches(name, SETUPS[name], args.switches, work / f"c{i}")
                  for i, name in enumerate(args.drivers.split(",")) if name in SETUPS]
        sampling = [sampling_cost(name, SETUPS[name], args.sample_seconds, work / f"s{i}")
                    for i, name in enumerate(("tasmota", "shelly gen2", "snmp apc_rpdu"))]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cycles": cycles, "sampling": sampling}, indent=2))
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import rewrite_section

        rewrite_section(Path(args.results), "power", "Power drivers: switch time and wall-power sampling cost "
                        "(bench/power.py)", markdown(cycles, sampling, args))
    return 0


def plugs_main(args: argparse.Namespace) -> int:
    import subprocess

    work = Path(tempfile.mkdtemp(prefix="rf-bench-plugs-"))
    try:
        rows = [time_plug_cycles(name, setup, args.cycles, args.dwell, work / f"p{i}")
                for i, (name, setup) in enumerate(_plug_sims().items())]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(rows, indent=2))
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import rewrite_section

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        rewrite_section(Path(args.results), "power-plugs", "Consumer plugs: a verified cycle and its requests "
                        "(bench/power.py --plugs)", plugs_markdown(rows, args, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
