"""The simulated fleet's hardware: power switches, boots, wedges. One daemon per fleet.

    python -m reprofleet.sim.hardware <fleet_dir>

It is the only actor that changes a host's "physical" state, so that every path to a state
change (a test, SimHost.power_off(), a PDU simulator speaking SNMP or Redfish, the fake
vLLM asking to wedge) goes through the same code:

* ``<host>/hw/power`` holds ``on`` or ``off``; whoever plays the PDU writes it. Off = thaw,
  SIGKILL every task of the host's cgroup, clear the wedge rules, reset the GPU settings
  (a driver reload), close the boot. On = a new boot (boot_id, kernel log, the host's sysfs:
  its PCI bus, watchdog, kexec), then sshd after ``boot_delay_s``. A GPU that fell off the
  bus (``gpu_lost_after_wedge``: at the wedge) stays off through every cycle: its config
  space reads all ones and the driver says so in each new boot's kernel log.
* ``<host>/hw/requests/*.json`` asks for ``wedge`` (iptables DROP in the host's netns, then
  freezer FROZEN: the host goes silent within ~100 ms), ``reboot`` (a reset: off + on by
  itself), ``orderly_reboot`` (what a person's ``reboot`` or unattended-upgrades' automatic
  reboot does: the system is "stopping", systemd-logind says who asked, every process gets
  SIGTERM, then what is left gets SIGKILL and systemd's shutdown lines end the boot's journal,
  and a new boot starts), ``stall`` (SIGSTOP sshd and the agent, SIGCONT later) or ``nmi`` (a
  BMC's diagnostic interrupt: a kernel set to panic on it panics, frozen or not, writes a vmcore
  where kdump is loaded and reboots: rfsim/nmi.py; otherwise it only logs it).

Everything it does is appended to ``<fleet>/hardware.jsonl``; each host's current state is
in ``<host>/hw/state.json``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprofleet.sim import manifest as manifest_io
from reprofleet.sim import netns
from reprofleet.sim.cgroup import FreezerGroup, prune
from reprofleet.sim.layout import FleetPaths, HostPaths
from reprofleet.sim.manifest import HostRecord
from reprofleet.sim.rfsim import boots, gpu, hwio, kernel_panic, netconsole_tx, nmi, orderly_shutdown, sysfs

TICK_S = 0.02
PR_SET_CHILD_SUBREAPER = 36
BOOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


@dataclass
class HostMachine:
    """The daemon's view of one host. Mutable: it is the state machine's state."""

    record: HostRecord
    paths: HostPaths
    cgroup: FreezerGroup
    power: str = "off"  # off | booting | on
    boot_at: float = 0.0
    frozen: bool = False
    stall_until: float | None = None
    stalled: list[int] = field(default_factory=list)
    sshd: int | None = None  # pid of the process that became sshd
    first_boot: bool = True
    lockup: dict[str, Any] | None = None  # a freeze the kernel's watchdog will see: kind, comm, pid, at
    panic_reboot_at: float | None = None  # kernel.panic seconds after a panic
    panicked: bool = False  # this boot panicked: the next boot keeps its pstore record
    stopping: dict[str, Any] | None = None  # an orderly reboot under way: by whom, and when its SIGTERM grace ends


class Hardware:
    def __init__(self, fleet_dir: Path) -> None:
        self.manifest = manifest_io.load(fleet_dir)
        self.fleet = FleetPaths(fleet_dir)
        self.hosts = [
            HostMachine(r, self.fleet.host(r.name), FreezerGroup(r.cgroup)) for r in self.manifest.hosts
        ]
        self.senders = {h.record.name: netconsole_tx.Sender(h.record.netns) for h in self.hosts}
        self.running = True

    # -- bookkeeping -------------------------------------------------------------------
    def event(self, host: HostMachine | None, name: str, **data: Any) -> None:
        entry = {"t": time.time(), "event": name, **data}
        if host is not None:
            entry["host"] = host.record.name
        hwio.append_jsonl(self.fleet.hardware_events, entry)

    def publish(self, host: HostMachine) -> None:
        boot = boots.current(host.paths.boots)
        hwio.write_json(
            host.paths.state,
            {
                "power": host.power,
                "frozen": host.frozen,
                "stalled": host.stall_until is not None,
                "stopping": host.stopping is not None,
                "boot_id": boot.boot_id if boot else None,
                "boot_index": boot.index if boot else None,
                "sshd_pid": host.sshd,
                "t": time.time(),
            },
        )

    # -- power -------------------------------------------------------------------------
    def power_off(self, host: HostMachine, reason: str) -> None:
        started = time.monotonic()
        self.resume(host)
        host.cgroup.kill_all()  # its dockerd and every container too: they are in its cgroup tree
        prune(host.record.cgroup)  # the containers' emptied groups, in every controller
        host.sshd = None
        netns.clear_wedge(host.record.netns)
        netns.set_host_link(host.record.netns, False, self.manifest.gateway, host.record.address)
        gpu.reset_settings(0, host.paths.hw)
        if host.frozen and not host.record.spec.journal_keeps_frozen_boot:
            self.forget_frozen_boot(host)
        ended = boots.end_current(host.paths.boots)
        host.power, host.frozen = "off", False
        host.lockup, host.panic_reboot_at, host.stopping = None, None, None
        self.event(host, "power_off", reason=reason, boot_id=ended.boot_id if ended else None,
                   took_s=round(time.monotonic() - started, 3))
        self.publish(host)

    def power_on(self, host: HostMachine, reason: str) -> None:
        boot = boots.new_boot(host.paths.boots, host.record.name)
        spec = host.record.spec
        kernel_panic.reset_sysctls(host.paths.hw, spec.sysctl_conf)  # a reboot forgets every sysctl -w
        sysfs.write_boot(host.paths.hw, spec.hardware_watchdog, spec.kdump_loaded)  # the kernel enumerates the bus again
        if gpu.is_lost(0, host.paths.hw):
            self.gpu_gone_at_boot(host, boot)
        netconsole_tx.reset(host.paths.hw)  # and its netconsole (configfs is not kept)
        self.senders[host.record.name].reset()
        if not host.panicked:
            kernel_panic.clear_pstore(host.paths.hw)
        host.panicked = False
        delay = 0.0 if host.first_boot else host.record.spec.boot_delay_s
        orderly_shutdown.set_state(host.paths.hw, "starting")
        host.power, host.boot_at, host.first_boot = "booting", time.monotonic() + delay, False
        self.event(host, "power_on", reason=reason, boot_id=boot.boot_id, boot_delay_s=delay)
        self.publish(host)

    def start_sshd(self, host: HostMachine) -> None:
        boot = boots.current(host.paths.boots)
        assert boot is not None, "a booting host has an open boot record"
        argv = [
            "ip", "netns", "exec", host.record.netns,
            "unshare", "--mount", "--uts", "--propagation", "private", "--",
            "/bin/sh", str(host.paths.boot_script),
            str(host.paths.boots / boot.boot_id_name), str(host.paths.boots / boot.kmsg_name),
        ]
        netns.set_host_link(host.record.netns, True, self.manifest.gateway, host.record.address)
        host.sshd = _spawn_in_cgroup(argv, host.paths.sshd_log, host.cgroup)
        orderly_shutdown.set_state(host.paths.hw, "running")
        host.power = "on"
        self.event(host, "boot", boot_id=boot.boot_id, sshd_pid=host.sshd)
        self.publish(host)

    # -- faults ------------------------------------------------------------------------
    def wedge(self, host: HostMachine, request: dict[str, Any]) -> None:
        if host.power != "on" or host.frozen:
            return
        boot = boots.current(host.paths.boots)
        xid = request.get("xid")
        if xid is None and host.record.spec.xid_on_wedge:
            xid = 79
        if xid is not None and boot is not None:
            message = boots.xid_message(int(xid), int(request.get("pid", 0)), str(request.get("name", "python3")))
            boots.append_kmsg(host.paths.boots / boot.kmsg_name, message, level=boots.KERN_ERR,
                              started=boot.started)
            hwio.append_jsonl(gpu.xid_path(0, host.paths.hw), {"t": time.time(), "xid": int(xid)})
        self.netconsole(host)  # the last messages leave before the freeze, nothing after
        netns.drop_everything(host.record.netns)
        host.cgroup.freeze()
        host.frozen = True
        if host.record.spec.gpu_lost_after_wedge and not gpu.is_lost(0, host.paths.hw):
            gpu.update_settings(0, {"lost": True}, host.paths.hw)  # off the bus now, and after every cycle
            sysfs.mark_card(host.paths.hw, 0)
            self.event(host, "gpu_lost", boot_id=boot.boot_id if boot else None)
        if request.get("lockup") in ("soft", "hard"):  # the wedge model says the kernel will see it
            host.lockup = {"kind": request["lockup"], "comm": str(request.get("name", "python3")),
                           "pid": int(request.get("pid", 0)),
                           "at": time.monotonic() + host.record.spec.lockup_detect_s}
        latency = time.time() - float(request.get("t", time.time()))
        self.event(host, "wedge", boot_id=boot.boot_id if boot else None, xid=xid,
                   source=request.get("source", "request"), latency_s=round(latency, 3))
        self.publish(host)

    def gpu_gone_at_boot(self, host: HostMachine, boot: boots.Boot) -> None:
        """A card off the bus is enumerated from the kernel's cache but never answers: the
        driver says so as it loads (NVRM's words: Bumblebee-Project/Bumblebee#554, and the Xid
        of its table)."""
        bus = str(gpu.read_state(0, host.paths.hw)["pci_bus_id"])[4:]
        for message in (f"NVRM: GPU at {bus} has fallen off the bus.",
                        boots.xid_message(79, 0, "<unknown>", bus=bus[:-2])):
            boots.append_kmsg(host.paths.boots / boot.kmsg_name, message, level=boots.KERN_ERR, usec=2_400_000)

    def orderly_reboot(self, host: HostMachine, request: dict[str, Any]) -> None:
        """systemd reboots the host on someone's request: the manager is "stopping", logind says
        who asked, and every process (the sessions, sshd, the agent's supervisor, the PoC) gets
        SIGTERM at once, as stopping their units does; ``finish_orderly_reboot`` follows."""
        if host.power != "on" or host.frozen or host.stopping is not None:
            return
        boot = boots.current(host.paths.boots)
        if boot is None:
            return
        by = str(request.get("by") or "person")
        orderly_shutdown.set_state(host.paths.hw, "stopping")
        orderly_shutdown.log(host.paths.boots / boot.journal_name, orderly_shutdown.begin_lines(by), boot.started)
        pids = host.cgroup.pids()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        host.stopping = {"by": by, "until": time.monotonic() + orderly_shutdown.SIGTERM_GRACE_S}
        self.event(host, "orderly_reboot", by=by, boot_id=boot.boot_id, sigterm=len(pids),
                   source=request.get("source", "request"))
        self.publish(host)

    def finish_orderly_reboot(self, host: HostMachine) -> None:
        """Every unit stopped (or its grace is over): systemd-shutdown's lines end the boot's
        journal, what is left is killed, and the host boots again."""
        boot = boots.current(host.paths.boots)
        if boot is not None:
            orderly_shutdown.log(host.paths.boots / boot.journal_name, orderly_shutdown.END_LINES, boot.started)
        self.event(host, "reset", source="orderly_reboot")
        self.power_off(host, "orderly reboot")
        self.power_on(host, "orderly reboot")

    def stall(self, host: HostMachine, seconds: float) -> None:
        if host.power != "on" or host.frozen:
            return
        host.stalled = [pid for pid in host.cgroup.pids() if _is_sshd_or_agent(pid)]
        for pid in host.stalled:
            _signal(pid, signal.SIGSTOP)
        host.stall_until = time.monotonic() + seconds
        self.event(host, "stall", seconds=seconds, pids=host.stalled)
        self.publish(host)

    def resume(self, host: HostMachine) -> None:
        if host.stall_until is None:
            return
        for pid in host.stalled:
            _signal(pid, signal.SIGCONT)
        host.stall_until, host.stalled = None, []
        self.event(host, "resume")
        self.publish(host)

    # -- the loop ----------------------------------------------------------------------
    def step(self, host: HostMachine) -> None:
        switch = _read_switch(host.paths.power)
        if switch == "off" and host.power != "off":
            self.power_off(host, "switch")
        elif switch == "on" and host.power == "off" and (host.first_boot or host.record.spec.restores_on_ac):
            self.power_on(host, "switch")  # after its first start, a BIOS set to stay off after AC loss stays dark
        if host.power == "booting" and time.monotonic() >= host.boot_at:
            self.start_sshd(host)
        for path in sorted(host.paths.requests.glob("*.json")):
            self.handle(host, path)
        if host.stall_until is not None and time.monotonic() >= host.stall_until:
            self.resume(host)
        if host.power == "on" and not host.frozen:
            self.netconsole(host)
        if host.lockup is not None and time.monotonic() >= host.lockup["at"]:
            self.watchdog_fires(host)
        if host.stopping is not None and (time.monotonic() >= host.stopping["until"] or not host.cgroup.pids()):
            self.finish_orderly_reboot(host)
        if host.panic_reboot_at is not None and time.monotonic() >= host.panic_reboot_at:
            self.event(host, "reset", source="panic")
            self.power_off(host, "panic")
            self.power_on(host, "panic")

    def watchdog_fires(self, host: HostMachine) -> None:
        """The kernel's lockup watchdog reports the freeze; with the panic sysctls set, it
        panics (kernel log and pstore) and reboots after kernel.panic seconds (0: stays hung)."""
        lock, host.lockup = host.lockup or {}, None
        boot = boots.current(host.paths.boots)
        if boot is None:
            return
        said = kernel_panic.report(host.paths.hw, lock["kind"], lock["comm"], lock["pid"])
        for level, message in said.lines:
            boots.append_kmsg(host.paths.boots / boot.kmsg_name, message, level=level, started=boot.started)
        self.netconsole(host)  # a kernel that sees the lock still prints: netpoll sends it
        if said.panics:
            kernel_panic.write_pstore(host.paths.hw, said.lines, time.time() - boot.started)
            host.panicked = True
            if said.reboot_after_s is not None:
                host.panic_reboot_at = time.monotonic() + said.reboot_after_s
        self.event(host, "lockup_seen", kind=lock["kind"], printed=bool(said.lines), panics=said.panics,
                   reboot_after_s=said.reboot_after_s)

    def nmi(self, host: HostMachine) -> None:
        """A BMC's NMI: a frozen kernel still takes it; one set to panic on it panics and reboots."""
        if host.power != "on":
            self.event(host, "nmi_ignored", why=f"power {host.power}")
            return
        said = nmi.effect(host.paths.hw)
        boot = boots.current(host.paths.boots)
        uptime = 0.0
        if boot is not None:
            uptime = time.time() - boot.started
            for level, message in said.lines:
                boots.append_kmsg(host.paths.boots / boot.kmsg_name, message, level=level, started=boot.started)
        vmcore = None
        if said.panics:
            kernel_panic.write_pstore(host.paths.hw, said.lines, uptime)
            host.panicked = True
            if said.kdump:
                vmcore = str(nmi.write_vmcore(host.paths.hw, time.time()))
            if said.reboot_after_s is not None:
                host.panic_reboot_at = time.monotonic() + said.reboot_after_s
        self.event(host, "nmi", panics=said.panics, frozen=host.frozen, kdump=said.kdump, vmcore=vmcore)

    def netconsole(self, host: HostMachine) -> None:
        """Kernel messages printed since the last call go out to the netconsole target, if any."""
        boot = boots.current(host.paths.boots)
        if boot is not None:
            sent = self.senders[host.record.name].pump(host.paths.hw, host.paths.boots / boot.kmsg_name,
                                                       boot.started)
            if sent and host.frozen:
                self.event(host, "netconsole_from_frozen_kernel", datagrams=sent)

    def forget_frozen_boot(self, host: HostMachine) -> None:
        """The power went before journald wrote the frozen boot to disk: its kernel log is lost."""
        boot = boots.current(host.paths.boots)
        if boot is not None:
            (host.paths.boots / boot.kmsg_name).write_text("")
            self.event(host, "journal_lost", boot_id=boot.boot_id)

    def reap(self) -> None:
        """Collect every exited child: sshd, and (as subreaper) the hosts' orphans."""
        for _ in range(1000):  # bounded per tick
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for host in self.hosts:
                if host.sshd == pid:
                    host.sshd = None
                    self.event(host, "sshd_exited", status=os.waitstatus_to_exitcode(status))
                    self.publish(host)

    def handle(self, host: HostMachine, path: Path) -> None:
        request = hwio.read_json(path, {}) or {}
        path.unlink(missing_ok=True)
        kind = request.get("kind")
        if kind == "wedge":
            self.wedge(host, request)
        elif kind == "reboot":
            if host.power == "on":
                self.event(host, "reset", source=request.get("source", "request"))
                self.power_off(host, "reset")
                self.power_on(host, "reset")
        elif kind == "orderly_reboot":
            self.orderly_reboot(host, request)
        elif kind == "stall":
            self.stall(host, float(request.get("seconds", 1.0)))
        elif kind == "nmi":
            self.nmi(host)
        else:
            self.event(host, "bad_request", request=request)

    def run(self) -> None:
        _become_subreaper()
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "running", False))
        for host in self.hosts:
            self.publish(host)
        self.fleet.hardware_ready.write_text(str(os.getpid()))
        self.event(None, "hardware_started", pid=os.getpid())
        while self.running:
            self.reap()
            for host in self.hosts:
                try:
                    self.step(host)
                except Exception:  # one host's failure must not stop the others' hardware
                    self.event(host, "hardware_error", error=traceback.format_exc(limit=5))
            time.sleep(TICK_S)
        self.event(None, "hardware_stopped", pid=os.getpid())


def _spawn_in_cgroup(argv: list[str], log_path: Path, cgroup: FreezerGroup) -> int:
    """fork + exec with the child in the host's cgroup and its own session from the start."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.fork()
    if pid == 0:
        try:
            cgroup.join(os.getpid())
            os.setsid()
            null_fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null_fd, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.closerange(3, 65536)
            os.execvpe(argv[0], argv, BOOT_ENV)
        finally:
            os._exit(127)
    os.close(log_fd)
    return pid


def _become_subreaper() -> None:
    """Orphans of host processes (detached agents, killed sessions) become ours to reap."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _read_switch(path: Path) -> str | None:
    try:
        value = path.read_text().strip().lower()
    except OSError:
        return None
    return value if value in ("on", "off") else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_sshd_or_agent(pid: int) -> bool:
    cmdline = _cmdline(pid)
    return cmdline.startswith("sshd") or "/usr/sbin/sshd" in cmdline or "agent.py" in cmdline


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m reprofleet.sim.hardware <fleet_dir>", file=sys.stderr)
        return 2
    Hardware(Path(argv[0])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
