"""One simulated host, seen from the test bench: power, faults, and what it looks like now.

Power and wedges go through the hardware daemon (the power switch file and requests), so a
test that calls :meth:`SimHost.power_off` exercises exactly what a PDU simulator does.
Network faults act directly on the host's links and namespace.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from reprofleet.sim import netns
from reprofleet.sim.cgroup import CpuGroup, FreezerGroup
from reprofleet.sim.layout import FleetPaths, HostPaths
from reprofleet.sim.manifest import HostRecord
from reprofleet.sim.procs import SimError, parent_pid, wait_until
from reprofleet.sim.rfsim import boots, gpu, hwio, nvsmi
from reprofleet.sim.spec import SimHostSpec

BOOT_SLACK_S = 15.0


class SimHost:
    def __init__(self, record: HostRecord, fleet: FleetPaths) -> None:
        self.record = record
        self.fleet_paths = fleet
        self.paths: HostPaths = fleet.host(record.name)
        self.cgroup = FreezerGroup(record.cgroup)
        self.cpu = CpuGroup(record.cgroup)

    def __repr__(self) -> str:
        return f"SimHost({self.name!r}, {self.address})"

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def address(self) -> str:
        return self.record.address

    @property
    def spec(self) -> SimHostSpec:
        return self.record.spec

    # -- what it looks like ------------------------------------------------------------
    @property
    def boot_id(self) -> str | None:
        boot = boots.current(self.paths.boots)
        return boot.boot_id if boot else None

    @property
    def is_frozen(self) -> bool:
        return self.cgroup.state == "FROZEN"

    def hardware_state(self) -> dict[str, Any]:
        return dict(hwio.read_json(self.paths.state, {}) or {})

    @property
    def power(self) -> str:
        return str(self.hardware_state().get("power", "unknown"))

    @property
    def sshd_pid(self) -> int | None:
        try:
            pid = int(self.paths.sshd_pid.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid in self.cgroup.pids() else None

    def gpu_state(self, index: int = 0) -> dict[str, Any]:
        """The card's settings as the hardware holds them, plus the engine's load (or None)."""
        state = gpu.read_state(index, self.paths.hw)
        state["load"] = gpu.read_load(index, self.paths.hw)
        return state

    def nvidia_smi_setter_calls(self) -> list[dict[str, Any]]:
        """Every ``nvidia-smi`` setter (-lgc, -rgc, -pl, -pm ...) this host's tool was asked to run."""
        return [dict(call) for call in nvsmi.setter_calls(self.paths.hw)]

    def ssh_banner(self, timeout_s: float = 2.0) -> str | None:
        """sshd's first line, or None: no connection, or a connection that says nothing."""
        try:
            with socket.create_connection((self.address, 22), timeout=timeout_s) as conn:
                conn.settimeout(timeout_s)
                return conn.recv(256).decode(errors="replace").strip() or None
        except OSError:
            return None

    def wait_ssh(self, timeout_s: float) -> None:
        """Until sshd sends its banner; probes only once the hardware says sshd was started."""
        def answers() -> bool:
            if not self.hardware_state().get("sshd_pid"):
                return False
            return (self.ssh_banner(0.3) or "").startswith("SSH-2.0-")

        wait_until(answers, timeout_s, f"sshd of {self.name} at {self.address}:22 to answer", interval_s=0.03)

    # -- power -------------------------------------------------------------------------
    def set_switch(self, on: bool) -> None:
        """Flip the power switch, as a PDU outlet would; the hardware daemon acts on it."""
        tmp = self.paths.power.with_suffix(".tmp")
        tmp.write_text("on\n" if on else "off\n")
        os.replace(tmp, self.paths.power)

    def power_off(self, wait: bool = True, timeout_s: float = 10.0) -> None:
        self.set_switch(False)
        if wait:
            wait_until(lambda: self.power == "off", timeout_s, f"{self.name} to power off")

    def power_on(self, wait: bool = True, timeout_s: float | None = None) -> None:
        self.set_switch(True)
        if wait:
            self.wait_ssh(timeout_s or self.spec.boot_delay_s + BOOT_SLACK_S)

    def power_cycle(self, dwell_s: float = 0.2, wait: bool = True) -> None:
        self.power_off()
        time.sleep(dwell_s)
        self.power_on(wait=wait)

    # -- faults ------------------------------------------------------------------------
    def freeze(self, wait: bool = True, timeout_s: float = 3.0, xid: int | None = None) -> None:
        """Wedge now: the host drops every packet and stops running (as the fake vLLM does)."""
        extra = {} if xid is None else {"xid": xid}
        hwio.request("wedge", self.paths.hw, source="test", **extra)
        if wait:
            wait_until(lambda: self.is_frozen, timeout_s, f"{self.name} to freeze")

    def orderly_reboot(self, by: str = "person", wait: bool = True, timeout_s: float = 20.0) -> None:
        """Reboot the host in an orderly way, as ``sudo systemctl reboot`` (``by="person"``) or
        unattended-upgrades' automatic reboot (``by="unattended-upgrades"``) would: every
        process gets SIGTERM while the system is "stopping", systemd's shutdown lines end the
        boot's journal, and a new boot starts (hardware.py ``orderly_reboot``). ``wait``: until
        the new boot's sshd answers."""
        old = self.boot_id
        hwio.request("orderly_reboot", self.paths.hw, source="test", by=by)
        if wait:
            wait_until(lambda: self.boot_id not in (None, old), timeout_s, f"{self.name} to reboot in order")
            self.wait_ssh(self.spec.boot_delay_s + BOOT_SLACK_S)

    def stall(self, seconds: float, wait: bool = True) -> None:
        """SIGSTOP sshd and the agent for ``seconds`` (the host stays up and keeps its network)."""
        hwio.request("stall", self.paths.hw, seconds=seconds)
        if wait:
            wait_until(lambda: bool(self.hardware_state().get("stalled")), 3.0, f"{self.name} to stall")

    def set_packet_loss(self, pct: float, both_ways: bool = False) -> None:
        """Drop ``pct`` % of the packets arriving at the host, and as many it sends if
        ``both_ways`` (0 clears)."""
        if not 0 <= pct <= 100:
            raise SimError(f"packet loss must be 0..100 %, not {pct}")
        netns.set_loss(self.record.netns, pct / 100.0, pct / 100.0 if both_ways else 0.0)

    def starve_cpu(self, percent: float | None, spinners: int = 2) -> None:
        """Cap every process of the host at ``percent`` % of one CPU (cgroup v1 cpu quota),
        with ``spinners`` busy loops of the host's own competing for it; None lifts the cap.
        The kernel (echo replies, TCP handshakes) is not throttled."""
        self.cpu.set_quota(percent, spinners)

    def drop_ssh_sessions(self) -> int:
        """Kill sshd's per-connection children: every SSH session breaks, the host stays up."""
        master = self.sshd_pid
        if master is None:
            return 0
        children = [pid for pid in self.cgroup.pids() if parent_pid(pid) == master]
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(children)

    def cut_link(self) -> None:
        netns.set_link(self.record.veth, up=False)

    def restore_link(self) -> None:
        netns.set_link(self.record.veth, up=True)

    # -- convenience for tests ---------------------------------------------------------
    def ssh_argv(self, command: str, connect_timeout_s: int = 5) -> list[str]:
        """A real OpenSSH client command line with the fleet's key and strict host keys."""
        return [
            "ssh", "-i", str(self.fleet_paths.key),
            "-o", f"UserKnownHostsFile={self.fleet_paths.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes", "-o", f"ConnectTimeout={connect_timeout_s}",
            "-o", "LogLevel=ERROR", f"root@{self.address}", command,
        ]

    def ssh(self, command: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(self.ssh_argv(command), capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SimError(f"{self.name}: ssh {command!r} did not finish in {timeout_s:g}s") from exc

    def kernel_log(self) -> str:
        """This boot's /dev/kmsg (a regular file on a simulated host)."""
        boot = boots.current(self.paths.boots)
        return (self.paths.boots / boot.kmsg_name).read_text() if boot else ""

    def decisions(self) -> list[dict[str, Any]]:
        """Every outcome the wedge model decided on this host, oldest first."""
        path = self.paths.hw / "decisions.jsonl"
        text = path.read_text() if path.exists() else ""
        return [d for d in map(hwio.read_json_line, text.splitlines()) if d is not None]


def host_dir(fleet_dir: Path, name: str) -> HostPaths:
    return FleetPaths(fleet_dir).host(name)
