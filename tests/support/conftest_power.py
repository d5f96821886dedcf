"""Fixtures for the power drivers and their simulators (a pytest plugin module).

Registered from tests/conftest.py (``pytest_plugins``, as ``tests.support.conftest_power``).

Simulators are started once per test module (they take 0.2-1 s to start) and always
stopped by PID in the fixture's teardown, also when a test fails. Switch files live in a
tmp directory: no simulated host is needed to test a driver against a real protocol.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Mapping

import pytest

from reprofleet.model import PowerPort
from reprofleet.power import PowerLog
from reprofleet.sim.power import HttpPlugServer, IpmiBmc, PdudaemonServer, RedfishBmc, SnmpPdu
from reprofleet.sim.power.daemons import PowerSim
from reprofleet.sim.power.switch import read_switch, write_switch

HOSTS = ("ws01", "ws02", "ws03")


class Switches:
    """Three hosts' power switch files (``<dir>/<host>/hw/power``), all on to begin with."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = {host: root / host / "hw" / "power" for host in HOSTS}
        self.reset()

    def reset(self) -> None:
        for path in self.paths.values():
            write_switch(path, True)

    def __getitem__(self, host: str) -> Path:
        return self.paths[host]

    def is_on(self, host: str) -> bool:
        return read_switch(self.paths[host])


class SwitchRecorder:
    """Records every state a switch file passes through (polled every 5 ms)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.states: list[bool] = [read_switch(path)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="switch-recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 120.0
        while not self._stop.is_set() and time.monotonic() < deadline:
            state = read_switch(self.path)
            if state != self.states[-1]:
                self.states.append(state)
            self._stop.wait(0.005)

    def stop(self) -> list[bool]:
        """Stop recording (after one last look) and return the states seen, in order."""
        self._stop.set()
        self._thread.join(5.0)
        if read_switch(self.path) != self.states[-1]:
            self.states.append(read_switch(self.path))
        return self.states


@pytest.fixture
def power_log(tmp_path: Path) -> PowerLog:
    """A campaign's power log: reports/<campaign>/power.jsonl under tmp_path."""
    return PowerLog.for_campaign(tmp_path / "reports", "c-test")


@pytest.fixture
def record_switch() -> Iterator[Callable[[Path], SwitchRecorder]]:
    recorders: list[SwitchRecorder] = []

    def start(path: Path) -> SwitchRecorder:
        recorders.append(SwitchRecorder(path))
        return recorders[-1]

    yield start
    for recorder in recorders:
        recorder.stop()


@pytest.fixture(scope="module")
def switches(tmp_path_factory: pytest.TempPathFactory) -> Switches:
    return Switches(tmp_path_factory.mktemp("switches"))


@pytest.fixture(autouse=True)
def _switches_on(request: pytest.FixtureRequest) -> None:
    """Every test that uses the module's switches starts with all hosts on."""
    if "switches" in request.fixturenames:
        request.getfixturevalue("switches").reset()


def _started(sim: PowerSim) -> Iterator[PowerSim]:
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def sim_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("powersim")


@pytest.fixture(scope="module")
def tasmota_plug(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    """A 3-relay Tasmota board, relay N = ws0N, web password set."""
    outlets = {str(i + 1): switches[h] for i, h in enumerate(HOSTS)}
    yield from _started(HttpPlugServer(sim_workdir / "tasmota", "tasmota", outlets, password="tasmota-pw-41c7"))


@pytest.fixture(scope="module")
def shelly1_plug(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    outlets = {str(i): switches[h] for i, h in enumerate(HOSTS)}
    yield from _started(HttpPlugServer(sim_workdir / "shelly1", "shelly1", outlets, password="shelly1-pw-9d2e"))


@pytest.fixture(scope="module")
def shelly2_plug(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    outlets = {str(i): switches[h] for i, h in enumerate(HOSTS)}
    yield from _started(HttpPlugServer(sim_workdir / "shelly2", "shelly2", outlets, password="shelly2-pw-5b80"))


@pytest.fixture(scope="module")
def snmp_pdu(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    """An SNMP PDU (APC rPDU/sPDU and Raritan OIDs), outlet N = ws0N."""
    outlets = {str(i + 1): switches[h] for i, h in enumerate(HOSTS)}
    yield from _started(SnmpPdu(sim_workdir / "snmp", outlets, community="comm-7a1f", reboot_s=0.3))


@pytest.fixture(scope="module")
def redfish_bmc(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    """One Redfish service, one ComputerSystem per host (named after it)."""
    yield from _started(RedfishBmc(sim_workdir / "redfish", switches.paths, password="bmc-pw-c03d"))


@pytest.fixture(scope="module")
def ipmi_bmcs(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    """One ipmi_sim per host."""
    if shutil.which("ipmi_sim") is None:
        pytest.skip("ipmi_sim is not installed (apt-get install openipmi)")
    yield from _started(IpmiBmc(sim_workdir / "ipmi", switches.paths, password="ipmi-pw-62b9"))


@pytest.fixture(scope="module")
def pdudaemon_server(switches: Switches, sim_workdir: Path) -> Iterator[PowerSim]:
    """A real pdudaemon whose localcmdline PDU's port N is ws0N."""
    outlets = {str(i + 1): switches[h] for i, h in enumerate(HOSTS)}
    server = PdudaemonServer(sim_workdir / "pdudaemon", outlets)
    try:
        from reprofleet.sim.power.pdudaemon_server import pdudaemon_path

        pdudaemon_path()
    except Exception as exc:  # noqa: BLE001 (a missing install is a skip, with its reason)
        pytest.skip(str(exc))
    yield from _started(server)


CYCLE_IN_A_CHILD = """
import json, sys
from reprofleet.credentials import parse_credential_ref
from reprofleet.model import PowerPort, frozen_mapping
from reprofleet.power import PowerLog, driver_for
spec = json.loads(sys.argv[1])
ref = parse_credential_ref(spec["credentials"]) if spec["credentials"] else None
port = PowerPort(spec["driver"], spec["address"], spec["outlet"], ref, frozen_mapping(spec["options"]))
driver_for(port, "victim", PowerLog(None)).cycle(spec["dwell_s"])
"""


def kill_mid_dwell(port: PowerPort, switch: Path, dwell_s: float, back_by_s: float,
                   env: Mapping[str, str] | None = None) -> list[bool]:
    """Cycle ``port`` in a child process and SIGKILL it as soon as ``switch`` reads off (the
    controller dies in the dwell); the states the switch passes through until it is on
    again, or ``back_by_s`` after the kill."""
    recorder = SwitchRecorder(switch)
    spec = {"driver": port.driver, "address": port.address, "outlet": port.outlet,
            "credentials": f"{port.credentials.source}:{port.credentials.name}" if port.credentials else None,
            "options": dict(port.options), "dwell_s": dwell_s}
    child = subprocess.Popen([sys.executable, "-c", CYCLE_IN_A_CHILD, json.dumps(spec)],
                             env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20.0
        while recorder.states[-1] and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(5)
    back_by = time.monotonic() + back_by_s
    while not recorder.states[-1] and time.monotonic() < back_by:
        time.sleep(0.05)
    return recorder.stop()
