"""The simulated fleet over real OpenSSH: separate machines, a GPU, wedges, power cycles."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from reprofleet.sim import Fleet, SimHostSpec
from reprofleet.sim.procs import start_ticks

pytestmark = pytest.mark.fleet

QUICK = dict(boot_delay_s=0.3)


def test_hosts_are_separate_machines_reached_over_real_ssh(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("ha", **QUICK), SimHostSpec("hb", **QUICK)])
    a, b = fleet.hosts
    seen = {}
    for host in fleet.hosts:
        result = host.ssh("hostname; cat /proc/sys/kernel/random/boot_id; command -v python3 nvidia-smi")
        assert result.returncode == 0, result.stderr
        seen[host.name] = result.stdout.split()
    root_boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert [seen[h][0] for h in ("ha", "hb")] == ["ha", "hb"]
    assert seen["ha"][1] != seen["hb"][1] and root_boot_id not in (seen["ha"][1], seen["hb"][1])
    assert seen["ha"][1] == a.boot_id
    assert seen["ha"][2:] == ["/usr/bin/python3", "/usr/local/bin/nvidia-smi"]
    assert a.ssh("echo only-on-a > /root/marker && cat /root/marker").stdout.strip() == "only-on-a"
    assert b.ssh("test -e /root/marker; echo $?").stdout.strip() == "1"


def test_a_clock_lock_set_with_nvidia_smi_reads_back_through_pynvml(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("gpu", **QUICK)])
    host = fleet.hosts[0]
    probe = ("import pynvml as n; n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0); "
             "print(*n.nvmlDeviceGetMinMaxClockOfPState(h, n.NVML_CLOCK_GRAPHICS, n.NVML_PSTATE_0), "
             "n.nvmlDeviceGetPowerManagementLimit(h))")
    result = host.ssh(f"nvidia-smi -i 0 -lgc 180,2800 && nvidia-smi -pl 350 && python3 -c '{probe}'")
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'GPU clocks set to "(gpuClkMin 180, gpuClkMax 2800)"' in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "180 2800 350000"
    assert host.gpu_state()["locked_graphics"] == [180, 2800]


def test_a_frozen_host_accepts_no_connection_and_sends_nothing(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("fz", **QUICK), SimHostSpec("ok", **QUICK)])
    frozen, other = fleet.hosts
    frozen.freeze()
    assert frozen.is_frozen
    with pytest.raises(socket.timeout):  # no RST (ConnectionRefused), no banner: silence
        socket.create_connection((frozen.address, 22), timeout=1.0)
    assert frozen.ssh_banner(0.5) is None
    assert (other.ssh_banner(2.0) or "").startswith("SSH-2.0-")
    wedges = [e for e in fleet.events() if e["event"] == "wedge"]
    assert [(w["host"], w["source"]) for w in wedges] == [("fz", "test")]
    assert wedges[0]["latency_s"] < 1.0


def test_a_power_cycle_brings_a_new_boot_default_gpu_settings_and_the_same_host_key(sim_fleet) -> None:
    fleet = sim_fleet([SimHostSpec("pc", **QUICK)])
    host = fleet.hosts[0]
    assert host.ssh("nvidia-smi -pl 350 && nvidia-smi -lgc 180,2800").returncode == 0
    first_boot = host.boot_id
    host.freeze()
    host.power_cycle(dwell_s=0.1)
    assert not host.is_frozen and host.boot_id != first_boot
    result = host.ssh("cat /proc/sys/kernel/random/boot_id; "
                      "nvidia-smi --query-gpu=power.limit,clocks.max.gr --format=csv,noheader; "
                      "journalctl -k -b -1 -o short-iso --no-pager | head -1")
    assert result.returncode == 0, result.stderr  # StrictHostKeyChecking=yes: the key was kept
    boot_id, settings, previous = result.stdout.strip().splitlines()
    assert boot_id == host.boot_id
    assert settings == "600.00 W, 3090 MHz"
    assert "kernel: Linux version" in previous
    assert host.gpu_state()["locked_graphics"] is None
    kinds = [e["event"] for e in fleet.events() if e.get("host") == "pc"]
    assert kinds[-4:] == ["wedge", "power_off", "power_on", "boot"]


def test_down_leaves_no_process_namespace_link_or_cgroup(sim_ready: None) -> None:
    fleet = Fleet.up([SimHostSpec("d1", **QUICK), SimHostSpec("d2", **QUICK)])
    try:
        pids = [h.sshd_pid for h in fleet.hosts]
        hardware = fleet.manifest.hardware
        assert all(pids) and hardware is not None and hardware.alive()
        fleet.hosts[0].freeze()  # a frozen host must go down too
    finally:
        fleet.down()
    assert fleet.leftovers() == {"netns": [], "links": [], "cgroups": [], "processes": []}
    assert not hardware.alive()
    time.sleep(0.05)
    assert all(start_ticks(pid) is None or _not_sshd(pid) for pid in pids if pid)
    assert not fleet.fleet_dir.exists()


def _not_sshd(pid: int) -> bool:
    try:
        return "sshd" not in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return True


@pytest.mark.fleet
def test_a_fleet_whose_test_process_was_killed_is_swept_though_its_daemon_lives(sim_ready: None, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from reprofleet.sim import sweep_stale
    from reprofleet.sim.teardown import run_objects

    script = ("import sys,time; from reprofleet.sim import Fleet, SimHostSpec; "
              "f = Fleet.up([SimHostSpec('orph')]); print(f.run_id, flush=True); time.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        run_id = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert run_id and run_objects(run_id)["netns"]
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # a test killed mid-run: no teardown ran
        proc.wait(10)
    assert run_id in sweep_stale()
    assert not run_objects(run_id)["netns"]
