"""Fault injection on simulated hosts: what the wedge detector of issue 3 must tell apart."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from reprofleet.sim import Fleet, SimHostSpec, sweep_stale

pytestmark = pytest.mark.fleet

QUICK = dict(boot_delay_s=0.3)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def connects(address: str, timeout_s: float = 0.5) -> bool:
    try:
        socket.create_connection((address, 22), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def test_a_powered_off_host_is_silent_and_power_on_boots_it(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("po", **QUICK)])
    host = fleet.hosts[0]
    first = host.boot_id
    host.set_switch(False)  # exactly what a PDU simulator does
    deadline = time.monotonic() + 5
    while host.power != "off" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert host.power == "off" and host.sshd_pid is None and not host.cgroup.pids()
    assert not connects(host.address)  # no RST either: the NIC has no power
    host.power_on()
    assert host.boot_id != first and host.ssh("true").returncode == 0


def test_a_stalled_host_completes_the_handshake_but_says_nothing_until_it_resumes(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("st", **QUICK)])
    host = fleet.hosts[0]
    host.stall(1.5)
    assert connects(host.address) and host.ssh_banner(0.5) is None
    deadline = time.monotonic() + 5
    while host.ssh_banner(0.5) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (host.ssh_banner(1.0) or "").startswith("SSH-2.0-") and not host.is_frozen


def test_full_packet_loss_silences_a_host_and_clearing_it_brings_it_back(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("pl", **QUICK)])
    host = fleet.hosts[0]
    host.set_packet_loss(100)
    assert not connects(host.address)
    host.set_packet_loss(0)
    assert host.ssh("true").returncode == 0


def test_dropped_sessions_break_while_the_host_and_its_detached_work_survive(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("dr", **QUICK)])
    host = fleet.hosts[0]
    assert host.ssh("setsid nohup sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > /root/detached").returncode == 0
    session = subprocess.Popen(host.ssh_argv("sleep 30"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10  # the session is up once its command runs on the host

    def session_runs() -> bool:
        return any(_cmdline(pid).split()[-2:] == ["sleep", "30"] for pid in host.cgroup.pids())

    while not session_runs() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert session_runs(), "the ssh session never ran its command"
    assert host.drop_ssh_sessions() >= 1
    assert session.wait(timeout=5) != 0
    detached = int(host.ssh("cat /root/detached").stdout)
    assert detached in host.cgroup.pids()


def test_a_cut_link_and_a_cut_controller_network_silence_hosts_until_restored(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("l1", **QUICK), SimHostSpec("l2", **QUICK)])
    one, two = fleet.hosts
    one.cut_link()
    assert not connects(one.address) and connects(two.address)
    one.restore_link()
    fleet.cut_controller_network()
    assert not connects(one.address) and not connects(two.address)
    fleet.restore_controller_network()
    assert one.ssh("true").returncode == 0 and two.ssh("true").returncode == 0
    assert not one.is_frozen and not two.is_frozen


def test_the_sweep_removes_a_run_whose_hardware_died_and_spares_a_live_one(sim_ready, sim_fleet) -> None:
    live = sim_fleet([SimHostSpec("alive", **QUICK)])
    crashed = Fleet.up([SimHostSpec("dead", **QUICK)])
    try:
        crashed.manifest.hardware.signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while crashed.manifest.hardware.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        swept = sweep_stale()
        assert crashed.run_id in swept and live.run_id not in swept
        assert crashed.leftovers() == {"netns": [], "links": [], "cgroups": [], "processes": []}
        assert live.hosts[0].ssh("true").returncode == 0
    finally:
        crashed.down()
