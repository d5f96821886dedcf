"""A simulated host's kernel sysctls and what its lockup watchdog prints when it sees a freeze.

The sysctls live in ``hw/proc-sys/kernel/<name>`` (the host's agent reads them there through
``REPROFLEET_PROC_SYS``); every boot starts from :data:`SYSCTL_DEFAULTS`, as a real reboot
resets what ``sysctl -w`` set. When the wedge model says the kernel saw the lock, the
hardware daemon asks :func:`report` what the kernel prints: the soft-lockup BUG or the
hard-lockup warning with a backtrace, and when ``kernel.softlockup_panic`` (or
``hardlockup_panic`` with ``nmi_watchdog``) is set, the panic that follows, whose text also
goes to pstore (``hw/pstore/dmesg-ramoops-0``) like ramoops on a real host.

The wording follows Linux 6.x (kernel/watchdog.c, kernel/panic.c); addresses are made up.

Host-side module: standard library only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from . import boots

# An Ubuntu host's own values, except the NMI watchdog (off here, as tuned/laptop profiles and
# many BIOS-managed servers have it) so that turning it on and back off is exercised.
SYSCTL_DEFAULTS = {
    "nmi_watchdog": 0, "softlockup_panic": 0, "hardlockup_panic": 0, "panic": 0, "panic_on_oops": 0,
    "softlockup_all_cpu_backtrace": 0, "watchdog_thresh": 10,
}
KERN_EMERG = 0
LOCKUP_CPU = 5
MODULES = ("nvidia_uvm(POE) nvidia_drm(POE) nvidia_modeset(POE) nvidia(POE) snd_hda_intel "
           "amdgpu kvm_amd ccp nvme r8169")
TAINTS = "Tainted: P           OEL     "


def proc_sys(hw: Path) -> Path:
    return hw / "proc-sys"


def pstore(hw: Path) -> Path:
    return hw / "pstore"


def reset_sysctls(hw: Path, conf: Tuple[Tuple[str, int], ...] = ()) -> None:
    """A new boot: the kernel starts with its defaults, then the host's /etc/sysctl.d (``conf``)."""
    kernel = proc_sys(hw) / "kernel"
    kernel.mkdir(parents=True, exist_ok=True)
    for name, value in {**SYSCTL_DEFAULTS, **dict(conf)}.items():
        (kernel / name).write_text(f"{value}\n")


def sysctl(hw: Path, name: str) -> int:
    try:
        return int((proc_sys(hw) / "kernel" / name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return SYSCTL_DEFAULTS.get(name, 0)


def clear_pstore(hw: Path) -> None:
    """What systemd-pstore does at boot on a real host: earlier records are archived away."""
    shutil.rmtree(pstore(hw), ignore_errors=True)
    pstore(hw).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Report:
    """What the kernel prints about a lockup, and what it does next."""

    lines: Tuple[Tuple[int, str], ...]  # (level, message)
    panics: bool
    reboot_after_s: Optional[float]  # None: it stays hung (no panic, or kernel.panic = 0)


def report(hw: Path, kind: str, comm: str, pid: int, stuck_s: int = 22) -> Report:
    """The watchdog's report of a lock on CPU 5 held by ``comm``/``pid``, under this boot's sysctls."""
    hard = kind == "hard"
    if hard and not sysctl(hw, "nmi_watchdog"):
        return Report((), False, None)  # no NMI watchdog: nobody sees a hard lockup
    panics = bool(sysctl(hw, "hardlockup_panic" if hard else "softlockup_panic"))
    first = (f"watchdog: Watchdog detected hard LOCKUP on cpu {LOCKUP_CPU}" if hard else
             f"watchdog: BUG: soft lockup - CPU#{LOCKUP_CPU} stuck for {stuck_s}s! [{comm}:{pid}]")
    lines: List[Tuple[int, str]] = [(boots.KERN_WARNING if hard else KERN_EMERG, first)]
    lines += [(boots.KERN_WARNING, text) for text in _registers(comm, pid) + _stuck_trace(hard)]
    if not panics:
        return Report(tuple(lines), False, None)
    timeout = sysctl(hw, "panic")
    reason = "Hard LOCKUP" if hard else "softlockup: hung tasks"
    lines.append((KERN_EMERG, f"Kernel panic - not syncing: {reason}"))
    lines += [(KERN_EMERG, text) for text in _cpu_line(comm, pid) + _panic_trace(hard)]
    lines.append((KERN_EMERG, "Kernel Offset: 0x2c000000 from 0xffffffff81000000 "
                              "(relocation range: 0xffffffff80000000-0xffffffffbfffffff)"))
    if timeout > 0:
        lines.append((KERN_EMERG, f"Rebooting in {timeout} seconds.."))
    else:
        lines.append((KERN_EMERG, f"---[ end Kernel panic - not syncing: {reason} ]---"))
    return Report(tuple(lines), True, float(timeout) if timeout > 0 else None)


def write_pstore(hw: Path, lines: Tuple[Tuple[int, str], ...], uptime_s: float) -> Path:
    """The panic's dmesg as ramoops keeps it: ``<level>[uptime] message`` under a ``Panic#1`` header."""
    folder = pstore(hw)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dmesg-ramoops-0"
    body = [f"<{level}>[{uptime_s:12.6f}] {message}" for level, message in lines]
    path.write_text("\n".join(["Panic#1 Part1"] + body) + "\n")
    return path


def _cpu_line(comm: str, pid: int) -> List[str]:
    return [f"CPU: {LOCKUP_CPU} UID: 0 PID: {pid} Comm: {comm[:15]} {TAINTS}{boots.KERNEL_RELEASE} #28-Ubuntu",
            "Tainted: [P]=PROPRIETARY_MODULE, [O]=OOT_MODULE, [E]=UNSIGNED_MODULE, [L]=SOFTLOCKUP",
            "Hardware name: ASUS System Product Name/ROG STRIX X870E-E GAMING WIFI, BIOS 1402"]


def _registers(comm: str, pid: int) -> List[str]:
    return ([f"Modules linked in: {MODULES}"] + _cpu_line(comm, pid) +
            ["RIP: 0010:_nv044130rm+0x3c/0x80 [nvidia]",
             "RSP: 0018:ffffb1a4c3a37b28 EFLAGS: 00000246"])


def _stuck_trace(hard: bool) -> List[str]:
    return ["Call Trace:", " <NMI>" if hard else " <TASK>",
            " ? _nv044131rm+0x91/0x1a0 [nvidia]", " ? rm_gpu_ops_stop_channel+0x7b/0x140 [nvidia]",
            " nvUvmInterfaceStopChannel+0x3b/0x60 [nvidia]", " uvm_channel_manager_destroy+0x5e/0x1c0 [nvidia_uvm]",
            " __x64_sys_ioctl+0x94/0xd0", " do_syscall_64+0x82/0x190", " entry_SYSCALL_64_after_hwframe+0x76/0x7e",
            " </NMI>" if hard else " </TASK>"]


def _panic_trace(hard: bool) -> List[str]:
    if hard:
        frames = ["nmi_panic+0x35/0x40", "watchdog_hardlockup_check+0x1a3/0x1d0",
                  "__perf_event_overflow+0x10b/0x3f0", "amd_pmu_v2_handle_irq+0x1d8/0x3c0",
                  "perf_event_nmi_handler+0x2a/0x50", "nmi_handle+0x5e/0x120", "default_do_nmi+0x40/0x100",
                  "exc_nmi+0x103/0x180", "end_repeat_nmi+0xf/0x53"]
        return ["Call Trace:", " <NMI>", " dump_stack_lvl+0x5d/0x80", " panic+0x118/0x2f0"] + \
            [f" {f}" for f in frames] + [" </NMI>"]
    frames = ["watchdog_timer_fn+0x1f1/0x220", "? __pfx_watchdog_timer_fn+0x10/0x10",
              "__hrtimer_run_queues+0x12a/0x2b0", "hrtimer_interrupt+0xfc/0x230",
              "__sysvec_apic_timer_interrupt+0x5c/0x130", "sysvec_apic_timer_interrupt+0x6d/0x90"]
    return ["Call Trace:", " <IRQ>", " dump_stack_lvl+0x5d/0x80", " panic+0x118/0x2f0"] + \
        [f" {f}" for f in frames] + [" </IRQ>"]
