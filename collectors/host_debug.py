"""`host-debug apply|read|restore`: the kernel's lockup-to-panic sysctls, as a cell factor.

A freeze that the kernel's watchdogs can see (a CPU stuck in the kernel, interrupts off)
becomes a panic when ``kernel.softlockup_panic`` / ``kernel.hardlockup_panic`` are set; the
panic writes its backtrace to pstore and, with ``kernel.panic`` = N > 0, the host reboots by
itself N seconds later. That turns a silent wedge into evidence. These settings change the
host, so they are applied like a GPU policy: written, read back (a kernel that refuses a
value fails the apply), and put back afterwards.

The host's own values are saved once per boot (``host_debug/baseline.json``, with the
boot_id): a restore puts back exactly those. A reboot (a panic!) resets every sysctl to the
host's own values, so a baseline from an earlier boot is stale and is never written back.

``REPROFLEET_PROC_SYS`` replaces ``/proc/sys`` (the simulated fleet keeps its hosts'
sysctls in a directory of its own).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

import attempt_state as state
from agent_protocol import UsageError

PROC_SYS_ENV = "REPROFLEET_PROC_SYS"
# Apply order: the NMI watchdog must run before a hard lockup can panic.
SYSCTLS = ("nmi_watchdog", "softlockup_panic", "hardlockup_panic", "panic", "panic_on_oops",
           "softlockup_all_cpu_backtrace")
WHY_MISSING = {
    "hardlockup_panic": "the kernel has no hard-lockup detector (CONFIG_HARDLOCKUP_DETECTOR)",
    "nmi_watchdog": "the kernel has no NMI watchdog (CONFIG_HARDLOCKUP_DETECTOR)",
    "softlockup_panic": "the kernel has no soft-lockup detector (CONFIG_SOFTLOCKUP_DETECTOR)",
    "softlockup_all_cpu_backtrace": "the kernel has no soft-lockup detector (CONFIG_SOFTLOCKUP_DETECTOR)",
}


def proc_sys_root() -> str:
    return os.environ.get(PROC_SYS_ENV) or "/proc/sys"


def sysctl_path(name: str) -> str:
    return os.path.join(proc_sys_root(), "kernel", name)


def parse_settings(text: Optional[str]) -> Dict[str, int]:
    """The ``--json`` argument: ``{"softlockup_panic": 1, ...}``, known names, whole numbers >= 0."""
    try:
        raw = json.loads(text or "{}")
    except ValueError as exc:
        raise UsageError("--json is not JSON: %s" % exc) from None
    if not isinstance(raw, dict):
        raise UsageError("--json must be an object of kernel sysctl names (%s)" % ", ".join(SYSCTLS))
    unknown = sorted(set(raw) - set(SYSCTLS))
    if unknown:
        raise UsageError("unknown sysctls %s (known: %s)" % (unknown, ", ".join(SYSCTLS)))
    settings: Dict[str, int] = {}
    for name, value in raw.items():
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int) or value < 0:
            raise UsageError("kernel.%s must be a whole number >= 0, got %r" % (name, value))
        settings[name] = value
    return settings


def read_one(name: str) -> Tuple[Optional[int], Optional[str]]:
    """The sysctl's value, or (None, why not)."""
    path = sysctl_path(name)
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None, "kernel.%s does not exist here: %s" % (name, WHY_MISSING.get(name, "unknown to this kernel"))
    except OSError as exc:
        return None, "kernel.%s cannot be read: %s" % (name, exc)
    try:
        return int(text.split()[0]), None
    except (ValueError, IndexError):
        return None, "kernel.%s holds %r, not a number" % (name, text)


def read_all() -> Tuple[Dict[str, Optional[int]], List[str]]:
    values: Dict[str, Optional[int]] = {}
    notes: List[str] = []
    for name in SYSCTLS:
        values[name], why = read_one(name)
        if why:
            notes.append(why)
    return values, notes


def write_one(name: str, value: int) -> Optional[str]:
    """Write and read back; the reason it did not take, or None."""
    try:
        with open(sysctl_path(name), "w") as handle:
            handle.write("%d\n" % value)
    except FileNotFoundError:
        return "kernel.%s does not exist here: %s" % (name, WHY_MISSING.get(name, "unknown to this kernel"))
    except OSError as exc:  # EINVAL: the kernel refused the value; EACCES/EPERM: not root
        return "writing kernel.%s = %d was refused: %s" % (name, value, exc)
    got, why = read_one(name)
    if why:
        return why
    if got != value:
        return "kernel.%s = %d did not hold: it reads back %s" % (name, value, got)
    return None


def _baseline_path(state_dir: str) -> str:
    return os.path.join(state_dir, "host_debug", "baseline.json")


def load_baseline(state_dir: str) -> Optional[Dict[str, Any]]:
    """This boot's saved values, or None (an earlier boot's are dropped: see attempt_state)."""
    return state.load_boot_baseline(_baseline_path(state_dir))


def _drop_baseline(state_dir: str) -> None:
    state.remove_file(_baseline_path(state_dir))


def _save_baseline(state_dir: str, values: Dict[str, Optional[int]]) -> Dict[str, Any]:
    return state.save_boot_baseline(_baseline_path(state_dir),
                                    {"values": {k: v for k, v in values.items() if v is not None}})


def _write_all(targets: List[Tuple[str, int]], before: Dict[str, Optional[int]],
               errors: List[str]) -> List[Dict[str, Any]]:
    writes: List[Dict[str, Any]] = []
    for name, value in targets:
        if before.get(name) == value:
            continue
        error = write_one(name, value)
        writes.append({"name": name, "from": before.get(name), "to": value, "error": error})
        if error:
            errors.append(error)
    return writes


def _report(action: str, writes: List[Dict[str, Any]], errors: List[str], notes: List[str],
            baseline: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    values, read_notes = read_all()
    return {"k": "host_debug", "action": action, "values": values, "writes": writes,
            "baseline": (baseline or {}).get("values"), "boot_id": state.read_boot_id(),
            "ok": not errors, "errors": errors, "notes": notes + [n for n in read_notes if n not in notes]}


def apply(state_dir: str, wanted: Dict[str, int]) -> Dict[str, Any]:
    """``wanted`` in force; every sysctl it does not name goes back to this boot's baseline
    (a plain cell after a lockup-panic cell runs with the host's own settings)."""
    before, notes = read_all()
    errors = [why for why in (read_one(name)[1] for name in wanted) if why]
    if errors:  # a half-applied set would be a different cell
        return _report("apply", [], errors, notes, load_baseline(state_dir))
    baseline = load_baseline(state_dir)
    if baseline is None and wanted:
        baseline = _save_baseline(state_dir, before)
    own = (baseline or {}).get("values") or {}
    targets = [(name, wanted[name] if name in wanted else int(own[name]))
               for name in SYSCTLS if name in wanted or name in own]
    writes = _write_all(targets, before, errors)
    return _report("apply", writes, errors, notes, baseline)


def read(state_dir: str) -> Dict[str, Any]:
    return _report("read", [], [], [], load_baseline(state_dir))


def restore(state_dir: str) -> Dict[str, Any]:
    """This boot's saved values back (in reverse order: panics off before the NMI watchdog)."""
    before, notes = read_all()
    baseline = load_baseline(state_dir)
    if baseline is None:
        notes.append("nothing applied in this boot: the host's own values are in force")
        return _report("restore", [], [], notes, None)
    errors: List[str] = []
    own = baseline.get("values") or {}
    writes = _write_all([(name, int(own[name])) for name in reversed(SYSCTLS) if name in own], before, errors)
    report = _report("restore", writes, errors, notes, baseline)
    if report["ok"]:
        _drop_baseline(state_dir)
    return report


def command(state_dir: str, action: str, settings_json: Optional[str]) -> Dict[str, Any]:
    """The agent's `host-debug` subcommand: one `host_debug` line (PROTOCOL.md)."""
    if action == "apply":
        return apply(state_dir, parse_settings(settings_json))
    if settings_json is not None:
        raise UsageError("--json is for `host-debug apply` only")
    return read(state_dir) if action == "read" else restore(state_dir)
