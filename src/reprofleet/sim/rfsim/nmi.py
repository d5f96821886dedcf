"""An NMI from a simulated BMC, as the host's kernel takes it.

A BMC's diagnostic interrupt (IPMI "chassis power diag", Redfish ``ResetType: Nmi``) reaches
the kernel as an NMI no handler claims. With ``kernel.unknown_nmi_panic`` = 1 (or
``kernel.panic_on_unrecovered_nmi`` = 1, for BMCs whose NMI arrives as an I/O check) the
kernel panics even when it is otherwise frozen: a hard lock-up still takes NMIs. With a
capture kernel loaded (``/sys/kernel/kexec_crash_loaded`` = 1) kdump writes a vmcore under
the host's crash folder (``hw/crash``, the agent's ``REPROFLEET_CRASH_DIR``) and reboots;
without one the panic reboots after ``kernel.panic`` seconds, or never (0). Without either
sysctl the kernel only logs "Uhhuh. NMI received for unknown reason" and a frozen host stays
frozen. The BMCs ask the hardware daemon (``hwio.request("nmi")``), the one actor that changes
a host's state; these functions decide what the kernel does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from . import kernel_panic, sysfs

KDUMP_REBOOT_S = 1.0  # the capture kernel's boot, the dump and its reboot, shortened for tests
NMI_SYSCTLS = ("unknown_nmi_panic", "panic_on_unrecovered_nmi")


def crash_dir(hw: Path) -> Path:
    return hw / "crash"


@dataclass(frozen=True)
class NmiEffect:
    """What the kernel does with the NMI: its kernel log lines, whether it panics, and when it reboots."""

    lines: Tuple[Tuple[int, str], ...]
    panics: bool
    reboot_after_s: Optional[float]  # None: it does not reboot by itself
    kdump: bool


def effect(hw: Path) -> NmiEffect:
    """The kernel's answer to an NMI, under this boot's sysctls and kdump."""
    panics = any(kernel_panic.sysctl(hw, name) for name in NMI_SYSCTLS)
    if not panics:
        return NmiEffect(((4, "Uhhuh. NMI received for unknown reason 3c on CPU 0."),
                          (4, "Dazed and confused, but trying to continue")), False, None, False)
    kdump = (sysfs.root(hw) / "kernel" / "kexec_crash_loaded").exists() and \
        (sysfs.root(hw) / "kernel" / "kexec_crash_loaded").read_text().strip() == "1"
    lines = ((0, "Kernel panic - not syncing: NMI: Not continuing"),
             (4, "CPU: 0 PID: 0 Comm: swapper/0 Not tainted"), (4, "Call Trace:"), (4, " <NMI>"),
             (4, " panic+0x118/0x2f0"), (4, " nmi_panic+0x35/0x40"), (4, " unknown_nmi_error+0x7a/0x90"),
             (4, " default_do_nmi+0xef/0x100"), (4, " exc_nmi+0x103/0x180"), (4, " </NMI>"))
    timeout = kernel_panic.sysctl(hw, "panic")
    after = KDUMP_REBOOT_S if kdump else (None if timeout == 0 else max(0.0, float(timeout)))
    return NmiEffect(lines, True, after, kdump)


def write_vmcore(hw: Path, when: float) -> Path:
    """kdump-tools' layout: ``<crash>/<YYYYmmddHHMM>/dump.<YYYYmmddHHMM>`` (a small stand-in, ELF magic)."""
    stamp = time.strftime("%Y%m%d%H%M", time.gmtime(when))
    folder = crash_dir(hw) / stamp
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / f"dump.{stamp}"
    dump.write_bytes(b"\x7fELF" + b"\0" * 60)
    return dump
