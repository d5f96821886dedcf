"""Wall power read through each metering device follows what the simulated GPU draws, and
the 1 Hz sampler writes it as stream lines and keeps the last values for a wedge's record."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.power import PowerLog, driver_for
from reprofleet.power.base import PowerDriver
from reprofleet.power.wall import WallPowerSampler
from reprofleet.sim.power import HttpPlugServer, SnmpPdu
from reprofleet.sim.power.switch import write_switch
from reprofleet.sim.rfsim import gpu

pytestmark = pytest.mark.fleet


@pytest.fixture
def host_hw(tmp_path: Path) -> Iterator[Path]:
    """A host's hw folder: power switch on, one GPU, idle until a test writes a load."""
    hw = tmp_path / "host" / "hw"
    hw.mkdir(parents=True)
    write_switch(hw / "power", True)
    gpu.hwio.write_json(gpu.state_path(0, hw), gpu.initial_state("wall-test"))
    yield hw


def load_the_gpu(hw: Path) -> None:
    gpu.write_load(0, {"pid": os.getpid(), "level": 1.0, "started": time.time(), "memory_used_mib": 70000}, hw)


def metered(kind: str, workdir: Path, switch: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, PowerDriver]:
    if kind.startswith("snmp"):
        sim: Any = SnmpPdu(workdir, {"1": switch}, community="wall-comm").start()
        monkeypatch.setenv("RF_WALL", sim.secret)
        port = sim.power_port("1", "env:RF_WALL", model=kind.split("-", 1)[1])
    else:
        sim = HttpPlugServer(workdir, kind, {"1" if kind == "tasmota" else "0": switch}, password="wall-pw").start()
        monkeypatch.setenv("RF_WALL", str(sim.secret))
        port = sim.power_port("1" if kind == "tasmota" else "0", "env:RF_WALL")
    return sim, driver_for(port, "ws01", PowerLog(None))


@pytest.mark.parametrize("kind", ["tasmota", "shelly1", "shelly2", "snmp-apc_rpdu", "snmp-raritan_px"])
def test_wall_power_follows_the_simulated_gpu_through_each_meter(kind: str, host_hw: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sim, driver = metered(kind, tmp_path / "sim", host_hw / "power", monkeypatch)
    try:
        idle = driver.read_power()
        load_the_gpu(host_hw)
        busy = driver.read_power()
        write_switch(host_hw / "power", False)
        off = driver.read_power()
    finally:
        sim.stop()
    assert idle is not None and 90 < idle < 160
    assert busy is not None and busy > 400  # a frozen-under-load host reads like this at the wall
    assert off == 0


def test_the_sampler_writes_about_one_line_a_second_and_keeps_the_last(host_hw: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sim, driver = metered("tasmota", tmp_path / "sim", host_hw / "power", monkeypatch)
    lines: list[dict[str, Any]] = []
    try:
        load_the_gpu(host_hw)
        with WallPowerSampler([driver], lines.append, period_s=0.25, keep=3) as sampler:
            time.sleep(1.6)
    finally:
        sim.stop()
    assert 5 <= len(lines) <= 8
    assert all(line["k"] == "wall" and line["source"] == "tasmota" and line["w"] > 400 for line in lines)
    assert sampler.last() == lines[-3:] and sampler.summary()["wall_w"] == lines[-1]["w"]


def test_a_device_without_a_meter_starts_no_sampler(tmp_path: Path) -> None:
    from reprofleet.model import PowerPort, frozen_mapping

    port = PowerPort("pdudaemon", "127.0.0.1:9", "1", options=frozen_mapping({"pdu": "p"}))
    sampler = WallPowerSampler([driver_for(port, "ws01", PowerLog(None))], lambda line: None)
    sampler.start()
    assert not sampler.meters and sampler._thread is None
