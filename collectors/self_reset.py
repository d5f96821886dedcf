"""Can this host reset itself when it freezes? The facts the controller's reboot grace needs.

A frozen Linux host comes back without anyone cutting its power in three ways, and the
controller waits a grace for it before a power cycle only when one of them exists here:

* an armed hardware watchdog: a daemon or systemd (``RuntimeWatchdogSec=``) opened
  ``/dev/watchdog`` and keeps petting it; a frozen host stops, and the chip resets it after
  its timeout. The watchdog core shows each device in ``/sys/class/watchdog/watchdogN/``
  with ``state`` ``active`` while it runs (CONFIG_WATCHDOG_SYSFS), its ``identity`` and
  ``timeout``. ``ipmi_watchdog`` drives the BMC's timer without that class, and a BMC can
  arm its own timer with no driver at all: the first is reported as unknown, the second
  cannot be seen from the host.
* a panic with ``kernel.panic`` != 0: the kernel reboots that many seconds after a panic
  (negative: at once). A freeze becomes a panic through ``softlockup_panic``,
  ``hardlockup_panic`` (with ``nmi_watchdog``) or ``hung_task_panic``; an oops or a fatal
  machine check can panic by itself.
* a panic that boots a kdump capture kernel (``/sys/kernel/kexec_crash_loaded`` = 1), which
  saves the dump and reboots whatever ``kernel.panic`` says.

``$REPROFLEET_SYSFS`` replaces ``/sys`` and ``$REPROFLEET_PROC_SYS`` ``/proc/sys``.

Host-side module: standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

import host_debug
import pci_config

PANIC_SYSCTLS = ("panic", "softlockup_panic", "hardlockup_panic", "nmi_watchdog", "hung_task_panic",
                 "panic_on_oops", "watchdog_thresh")
SYSTEMCTL_TIMEOUT_S = 5.0
TIMESPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0,
                  "hr": 3600.0, "d": 86400.0}
TIMESPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_timespan(text: str) -> Optional[float]:
    """systemd's time span as ``systemctl show`` prints it (``0``, ``30s``, ``1min 30s``,
    ``infinity``) in seconds (pure); None for a form it does not know."""
    text = text.strip().lower()
    if text in ("", "0", "off"):
        return 0.0
    if text == "infinity":
        return float("inf")
    if re.fullmatch(r"\d+(\.\d+)?", text):  # a bare number is microseconds (USec properties)
        return float(text) / 1e6
    total, rest = 0.0, text
    for value, unit in TIMESPAN_PART.findall(text):
        if unit not in TIMESPAN_UNITS:
            return None
        total += float(value) * TIMESPAN_UNITS[unit]
        rest = rest.replace(value + unit, "", 1).replace(value + " " + unit, "", 1)
    return total if not rest.strip() else None


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def watchdog_devices(sysfs: str) -> Tuple[Optional[List[Dict[str, Any]]], bool]:
    """Each watchdog the watchdog core registered, and whether its class folder exists."""
    folder = os.path.join(sysfs, "class", "watchdog")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return [], False
    devices = []
    for name in names:
        device = os.path.join(folder, name)
        timeout = _read(os.path.join(device, "timeout"))
        devices.append({"name": name, "identity": _read(os.path.join(device, "identity")),
                        "state": _read(os.path.join(device, "state")),
                        "timeout_s": int(timeout) if timeout and timeout.isdigit() else None,
                        "nowayout": _read(os.path.join(device, "nowayout"))})
    return devices, True


def systemd_runtime_watchdog_s() -> Tuple[Optional[float], Optional[str]]:
    """systemd's hardware watchdog (``RuntimeWatchdogSec=``) in seconds, 0 when off; None
    with the reason when systemd cannot be asked."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None, "no systemctl"
    try:
        done = subprocess.run([systemctl, "show", "-p", "RuntimeWatchdogUSec", "--value"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=SYSTEMCTL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "systemctl: %s" % exc
    if done.returncode != 0:
        return None, "systemctl exit %d: %s" % (done.returncode, done.stderr.decode("utf-8", "replace").strip()[:200])
    text = done.stdout.decode("utf-8", "replace").strip()
    seconds = parse_timespan(text)
    return (seconds, None) if seconds is not None else (None, "RuntimeWatchdogUSec=%r not understood" % text)


def judge_watchdog(devices: List[Dict[str, Any]], systemd_s: Optional[float], ipmi_watchdog: bool,
                   dev_watchdog: bool) -> Tuple[Optional[bool], str]:
    """Is a hardware watchdog armed (pure)? None when the host cannot tell."""
    active = [d for d in devices if d.get("state") == "active"]
    if active:
        return True, "; ".join("%s (%s) is active, timeout %s s" % (d["name"], d.get("identity") or "?",
                                                                     d.get("timeout_s")) for d in active)
    if systemd_s:
        return True, "systemd's RuntimeWatchdogSec is %g s" % systemd_s
    if ipmi_watchdog:
        return None, "ipmi_watchdog is loaded: the BMC's watchdog timer cannot be read here"
    unknown = [d["name"] for d in devices if d.get("state") not in ("active", "inactive")]
    if unknown:
        return None, "%s report no state (a kernel without CONFIG_WATCHDOG_SYSFS?)" % ", ".join(unknown)
    if devices:
        return False, "%s present but not armed" % ", ".join("%s (%s)" % (d["name"], d.get("identity") or "?")
                                                            for d in devices)
    if dev_watchdog:
        return None, "/dev/watchdog exists without a watchdog-class device: its state cannot be read"
    return False, "no hardware watchdog device"


def panic_sysctls() -> Dict[str, Any]:
    """The sysctls that decide whether a freeze panics and a panic reboots; ``absent`` lists
    the ones this kernel does not have (it cannot panic that way)."""
    values: Dict[str, Optional[int]] = {}
    absent: List[str] = []
    for name in PANIC_SYSCTLS:
        if not os.path.exists(host_debug.sysctl_path(name)):
            values[name] = None
            absent.append(name)
            continue
        values[name] = host_debug.read_one(name)[0]
    return {"values": values, "absent": absent}


def collect(notes: List[str]) -> Dict[str, Any]:
    """The facts' ``watchdog``, ``panic_sysctls`` and ``kdump_loaded``."""
    sysfs = pci_config.sysfs_root()
    devices, _ = watchdog_devices(sysfs)
    systemd_s, why = systemd_runtime_watchdog_s()
    if why:
        notes.append("watchdog.systemd: %s" % why)
    ipmi = os.path.isdir(os.path.join(sysfs, "module", "ipmi_watchdog"))
    # /dev is the real one even where $REPROFLEET_SYSFS replaces /sys: looked at only with the real /sys
    armed, words = judge_watchdog(devices or [], systemd_s, ipmi, sysfs == "/sys" and os.path.exists("/dev/watchdog"))
    return {"watchdog": {"armed": armed, "why": words, "devices": devices, "systemd_runtime_watchdog_s": systemd_s},
            "panic_sysctls": panic_sysctls(), "kdump_loaded": kdump_loaded(sysfs)}


def kdump_loaded(sysfs: str) -> Optional[bool]:
    """Whether a panic boots a capture kernel; a kernel without kexec has no such file (False),
    a sysfs without ``kernel/`` cannot tell (None)."""
    text = _read(os.path.join(sysfs, "kernel", "kexec_crash_loaded"))
    if text is None:
        return False if os.path.isdir(os.path.join(sysfs, "kernel")) else None
    return text == "1"
