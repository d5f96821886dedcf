"""The facts ``invoke doctor`` judges beyond the host's identity: can this login read the
kernel's log, where does a panic land (pstore), can netconsole be set up, how much disk the
agent's folder has, and the host's clock (which lockup detectors exist: ``panic_sysctls``).

Each is read from the files the kernel already exposes, without root and without changing
anything; one that cannot be read is null with a note (doctor says "unknown", never "ok").
``$REPROFLEET_SYSFS`` replaces ``/sys`` (the simulated hosts' own trees), as for pci_config.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Dict, List, Optional

import attempt_state as state
import pci_config

JOURNALCTL_TIMEOUT_S = 5.0


def _exists(*parts: str) -> bool:
    return os.path.exists(os.path.join(*parts))


def _text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def kernel_log_access() -> Dict[str, Optional[bool]]:
    """Whether this login can read kernel messages: the journal's kernel lines (the
    ``systemd-journal``/``adm`` group or root) and ``/dev/kmsg`` (root-only on Ubuntu)."""
    journal: Optional[bool] = None
    journalctl = shutil.which("journalctl")
    if journalctl:
        try:
            done = subprocess.run([journalctl, "-k", "-n", "1", "-q", "--no-pager"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=JOURNALCTL_TIMEOUT_S)
            # journalctl exits 0 with a hint on stderr when the user may see no system journal
            journal = done.returncode == 0 and b"not seeing messages" not in done.stderr.lower() \
                and b"permission" not in done.stderr.lower()
        except (OSError, subprocess.TimeoutExpired):
            journal = None
    return {"journal": journal, "kmsg": os.access("/dev/kmsg", os.R_OK) if os.path.exists("/dev/kmsg") else None}


def pstore(sysfs: str) -> Dict[str, Any]:
    """The pstore backend (``efi_pstore``, ``ramoops``, ...; None: no backend registered) and
    whether /sys/fs/pstore is mounted (systemd mounts it) and readable by this login."""
    backend = _text(os.path.join(sysfs, "module", "pstore", "parameters", "backend"))
    mounts = _text("/proc/self/mounts") or ""
    mounted = any(line.split()[1:3] == ["/sys/fs/pstore", "pstore"] for line in mounts.splitlines()
                  if len(line.split()) > 2)
    return {"backend": backend if backend not in (None, "", "(null)") else None, "mounted": mounted,
            "readable": os.access(os.path.join(sysfs, "fs", "pstore"), os.R_OK | os.X_OK) if mounted else None}


def netconsole_support(sysfs: str) -> Dict[str, Optional[bool]]:
    """Whether netconsole can be configured at run time: its module loaded or installed for this
    kernel, and configfs mounted (its dynamic targets live under /sys/kernel/config/netconsole)."""
    release = os.uname().release
    installed = any(os.path.exists(os.path.join("/lib/modules", release, "kernel", "drivers", "net", name))
                    for name in ("netconsole.ko", "netconsole.ko.zst", "netconsole.ko.xz", "netconsole.ko.gz"))
    loaded = _exists(sysfs, "module", "netconsole")
    return {"module": loaded or installed or None, "loaded": loaded,
            "configfs": _exists(sysfs, "kernel", "config")}


def disk(path: str) -> Dict[str, Any]:
    """Free bytes where the agent keeps attempts, caches and venvs (its nearest existing folder)."""
    probe = path
    while probe and not os.path.isdir(probe):
        probe = os.path.dirname(probe)
    usage = shutil.disk_usage(probe or "/")
    return {"path": path, "free_bytes": usage.free, "total_bytes": usage.total}


def collect(notes: List[str]) -> Dict[str, Any]:
    """The facts' ``readiness`` block (see the module text)."""
    sysfs = pci_config.sysfs_root()
    out: Dict[str, Any] = {"time_unix": time.time(), "user": None, "euid": os.geteuid()}
    for name, read in (("user", lambda: _user()), ("kernel_log", kernel_log_access), ("pstore", lambda: pstore(sysfs)),
                       ("netconsole", lambda: netconsole_support(sysfs)),
                       ("disk", lambda: disk(state.default_state_dir()))):
        try:
            out[name] = read()
        except Exception as exc:  # one unreadable fact must not hide the others
            notes.append("readiness.%s: %s: %s" % (name, type(exc).__name__, exc))
            out[name] = None
    return out


def _user() -> Optional[str]:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None
