"""Is this host ready to turn an NMI into a vmcore? The facts' ``kdump`` (the recovery ladder's nmi rung).

An NMI sent by the BMC before a power cycle (``recovery: [nmi, cycle]``) is only worth its
wait when the kernel panics on it and the panic is captured:

* ``crash_kernel_loaded``: ``/sys/kernel/kexec_crash_loaded`` is 1 (kdump's capture kernel
  is loaded; without it a panic leaves no vmcore);
* ``unknown_nmi_panic``: ``kernel.unknown_nmi_panic`` = 1 panics on an NMI no handler
  claims, which is what a BMC's diagnostic interrupt is on most machines;
* ``panic_on_unrecovered_nmi``: ``kernel.panic_on_unrecovered_nmi`` = 1 panics on an NMI
  reported as a hardware error (some BMCs' diagnostic interrupt arrives as one);
* ``vmcores``: the vmcore files under ``/var/crash`` (kdump-tools and kexec-tools both write
  ``/var/crash/<timestamp or address-date>/vmcore`` or ``dump.<date>``), newest last, at most
  ``MAX_VMCORES``: the next boot's facts say whether the NMI left one, and where.

``$REPROFLEET_SYSFS`` replaces ``/sys``, ``$REPROFLEET_PROC_SYS`` ``/proc/sys`` and
``$REPROFLEET_CRASH_DIR`` ``/var/crash``. Host-side module: standard library only.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import host_debug
import pci_config
import self_reset

CRASH_DIR_ENV = "REPROFLEET_CRASH_DIR"
NMI_SYSCTLS = ("unknown_nmi_panic", "panic_on_unrecovered_nmi")
MAX_VMCORES = 20
DUMP_NAMES = ("vmcore", "vmcore.flat")
DUMP_PREFIX = "dump."  # kdump-tools' dump.<date> (makedumpfile's output) beside its dmesg.<date>


def crash_dir() -> str:
    return os.environ.get(CRASH_DIR_ENV) or "/var/crash"


def vmcores(root: str) -> Optional[List[str]]:
    """The dump files one level below ``root``, oldest first by modification time; None when
    ``root`` cannot be read (a login that may not list /var/crash cannot tell)."""
    try:
        folders = os.listdir(root)
    except FileNotFoundError:
        return []
    except OSError:
        return None
    found = []
    for folder in folders:
        path = os.path.join(root, folder)
        try:
            names = os.listdir(path) if os.path.isdir(path) else []
        except OSError:
            continue
        for name in names:
            if name in DUMP_NAMES or name.startswith(DUMP_PREFIX):
                dump = os.path.join(path, name)
                try:
                    found.append((os.path.getmtime(dump), dump))
                except OSError:
                    continue
    return [dump for _, dump in sorted(found)][-MAX_VMCORES:]


def nmi_sysctls() -> Dict[str, Optional[int]]:
    """``kernel.unknown_nmi_panic`` and ``kernel.panic_on_unrecovered_nmi`` (None: absent or unreadable)."""
    return {name: host_debug.read_one(name)[0] for name in NMI_SYSCTLS}


def collect(notes: List[str]) -> Dict[str, Any]:
    """The facts' ``kdump``."""
    found = vmcores(crash_dir())
    if found is None:
        notes.append("kdump.vmcores: %s cannot be listed by this login" % crash_dir())
    return {"kdump": {"crash_kernel_loaded": self_reset.kdump_loaded(pci_config.sysfs_root()),
                      **nmi_sysctls(), "vmcores": found, "crash_dir": crash_dir()}}
