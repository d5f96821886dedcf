"""`netconsole apply|read|restore`: the kernel sends its messages over UDP to the controller.

Whatever a frozen host writes to its own disk in its last seconds is lost with the power;
the kernel's netconsole sends every message as it is printed (from the NIC driver's poll
path, so it works from a panic too), and the controller's receiver keeps it.

Configured through configfs (Documentation/networking/netconsole.rst, "Dynamic
reconfiguration"): ``/sys/kernel/config/netconsole/<target>/`` with ``dev_name``,
``local_ip``, ``remote_ip``, ``remote_port``, ``remote_mac``, ``extended`` and ``enabled``
(written last; the others cannot change while it is 1). ``modprobe netconsole`` first when
the folder is absent. The console loglevel (first field of ``kernel.printk``) is raised to
8 so that no message is dropped before it reaches the console. What was there before is
saved once per boot (``netconsole/baseline.json``, with the boot_id) and a restore undoes
exactly that: the target removed, the loglevel back, the module unloaded only if we loaded
it. A reboot undoes all of it by itself, so a baseline of an earlier boot is dropped.

``REPROFLEET_CONFIGFS`` replaces ``/sys/kernel/config`` and ``REPROFLEET_PROC_SYS``
``/proc/sys`` (the simulated fleet keeps them in directories of its own).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

import attempt_state as state
from agent_protocol import UsageError

CONFIGFS_ENV = "REPROFLEET_CONFIGFS"
PROC_SYS_ENV = "REPROFLEET_PROC_SYS"
TARGET = "reprofleet"
ALL_LEVELS = 8  # console_loglevel 8: every message (levels 0-7) reaches the consoles
BROADCAST = "ff:ff:ff:ff:ff:ff"
ATTRS = ("dev_name", "local_ip", "remote_ip", "remote_port", "remote_mac", "extended")
KNOWN = ("port", "dev", "target", "extended")


def configfs_root() -> str:
    return os.environ.get(CONFIGFS_ENV) or "/sys/kernel/config"


def module_dir() -> str:
    return os.path.join(configfs_root(), "netconsole")


def target_dir() -> str:
    return os.path.join(module_dir(), TARGET)


def printk_path() -> str:
    return os.path.join(os.environ.get(PROC_SYS_ENV) or "/proc/sys", "kernel", "printk")


def parse_wanted(text: Optional[str]) -> Dict[str, Any]:
    """``--json``: ``{"port": 6666, "dev": null, "target": null, "extended": true}``."""
    try:
        raw = json.loads(text or "{}")
    except ValueError as exc:
        raise UsageError("--json is not JSON: %s" % exc) from None
    if not isinstance(raw, dict) or set(raw) - set(KNOWN):
        raise UsageError("--json must be an object with %s" % ", ".join(KNOWN))
    port = raw.get("port", 6666)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise UsageError("port must be 1-65535, got %r" % (port,))
    return {"port": port, "dev": raw.get("dev") or None, "target": raw.get("target") or None,
            "extended": bool(raw.get("extended", True))}


# -- the host's network ----------------------------------------------------------------
def controller_address() -> Optional[str]:
    """The controller as this host sees it: the client end of our own SSH session."""
    fields = os.environ.get("SSH_CONNECTION", "").split()
    return fields[0] if fields else None


def route_to(target: str) -> Dict[str, str]:
    """``ip -o route get``: the interface (dev), our address (src) and the gateway (via) to ``target``."""
    out = _run(["ip", "-o", "route", "get", target])
    words = out.split()
    return {key: words[words.index(key) + 1] for key in ("dev", "src", "via")
            if key in words and words.index(key) + 1 < len(words)}


def address_of(dev: str) -> Optional[str]:
    words = _run(["ip", "-o", "-4", "addr", "show", "dev", dev]).split()
    return words[words.index("inet") + 1].split("/")[0] if "inet" in words else None


def neighbour_mac(ip: str, port: int, wait_s: float = 1.0) -> Optional[str]:
    """The MAC the kernel must address (the target's, or the gateway's when routed): from the
    ARP table, after one datagram to the discard port has made the kernel resolve it."""
    deadline = time.monotonic() + wait_s
    poked = False
    while True:
        mac = _arp_table().get(ip)
        if mac or time.monotonic() >= deadline:
            return mac
        if not poked:
            poked = True
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    probe.sendto(b"", (ip, 9))
            except OSError:
                pass
        time.sleep(0.05)


def _arp_table() -> Dict[str, str]:
    try:
        with open("/proc/net/arp") as handle:
            rows = handle.read().splitlines()[1:]
    except OSError:
        return {}
    table = {}
    for row in rows:
        cols = row.split()
        if len(cols) >= 4 and cols[3] != "00:00:00:00:00:00":
            table[cols[0]] = cols[3]
    return table


def _run(argv: List[str], timeout: float = 10.0) -> str:
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _module(argv: List[str]) -> Optional[str]:
    """``modprobe``/``modprobe -r``: why it failed, or None."""
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                              universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "%s: %s" % (" ".join(argv), exc)
    return None if done.returncode == 0 else "%s: %s" % (" ".join(argv), done.stderr.strip() or done.returncode)


# -- configfs and printk ---------------------------------------------------------------
def read_attr(name: str) -> Optional[str]:
    try:
        with open(os.path.join(target_dir(), name)) as handle:
            return handle.read().strip()
    except OSError:
        return None


def write_attr(name: str, value: str) -> Optional[str]:
    try:
        with open(os.path.join(target_dir(), name), "w") as handle:
            handle.write(value + "\n")
    except OSError as exc:
        return "netconsole %s = %s was refused: %s" % (name, value, exc)
    got = read_attr(name)
    if got is None or got.lower() != value.lower():
        return "netconsole %s = %s did not hold: it reads back %r" % (name, value, got)
    return None


def read_config() -> Optional[Dict[str, Optional[str]]]:
    """Our target's attributes as the kernel reads them back, or None when there is none."""
    if not os.path.isdir(target_dir()):
        return None
    return {name: read_attr(name) for name in ATTRS + ("enabled",)}


def read_printk() -> Optional[List[int]]:
    try:
        with open(printk_path()) as handle:
            return [int(word) for word in handle.read().split()]
    except (OSError, ValueError):
        return None


def write_printk(values: List[int]) -> Optional[str]:
    try:
        with open(printk_path(), "w") as handle:
            handle.write("\t".join(str(v) for v in values) + "\n")
    except OSError as exc:
        return "kernel.printk = %s was refused: %s" % (values, exc)
    got = read_printk()
    return None if got and got[0] == values[0] else "kernel.printk reads back %s, not %s" % (got, values)


def remove_target() -> Optional[str]:
    """Disable and remove our target. configfs removes its attributes with the folder; a plain
    directory (the simulator's) needs them removed first."""
    folder = target_dir()
    if not os.path.isdir(folder):
        return None
    if read_attr("enabled") not in (None, "0"):
        write_attr("enabled", "0")
    try:
        os.rmdir(folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            return "cannot remove %s: %s" % (folder, exc)
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)
    return None


# -- the baseline ----------------------------------------------------------------------
def _baseline_path(state_dir: str) -> str:
    return os.path.join(state_dir, "netconsole", "baseline.json")


def load_baseline(state_dir: str) -> Optional[Dict[str, Any]]:
    """This boot's saved state, or None (a reboot already undid what an earlier boot's apply did)."""
    return state.load_boot_baseline(_baseline_path(state_dir))


def _drop_baseline(state_dir: str) -> None:
    state.remove_file(_baseline_path(state_dir))


def _save_baseline(state_dir: str, loaded_module: bool, printk: Optional[List[int]]) -> Dict[str, Any]:
    return state.save_boot_baseline(_baseline_path(state_dir), {"loaded_module": loaded_module, "printk": printk})


# -- the actions -----------------------------------------------------------------------
def _report(action: str, errors: List[str], notes: List[str], baseline: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    return {"k": "netconsole", "action": action, "ok": not errors, "errors": errors, "notes": notes,
            "config": read_config(), "printk": read_printk(), "module_dir": os.path.isdir(module_dir()),
            "baseline": baseline, "boot_id": state.read_boot_id()}


def plan(wanted: Dict[str, Any], notes: List[str]) -> Tuple[Dict[str, str], List[str]]:
    """The attribute values to write, or the reasons there are none."""
    target = wanted["target"] or controller_address()
    if not target:
        return {}, ["no target: the inventory gives none and SSH_CONNECTION is not set"]
    route = route_to(target)
    dev = wanted["dev"] or route.get("dev")
    if not dev:
        return {}, ["no interface routes to %s (ip route get)" % target]
    local_ip = route.get("src") if dev == route.get("dev") else address_of(dev)
    if not local_ip:
        return {}, ["%s has no IPv4 address" % dev]
    mac = neighbour_mac(route.get("via") or target, int(wanted["port"]))
    if not mac:
        notes.append("no ARP entry for %s: sending to the broadcast MAC" % (route.get("via") or target))
    return {"dev_name": dev, "local_ip": local_ip, "remote_ip": target, "remote_port": str(wanted["port"]),
            "remote_mac": mac or BROADCAST, "extended": "1" if wanted["extended"] else "0"}, []


def apply(state_dir: str, wanted: Dict[str, Any]) -> Dict[str, Any]:
    notes: List[str] = []
    values, errors = plan(wanted, notes)
    baseline = load_baseline(state_dir)
    if errors:
        return _report("apply", errors, notes, baseline)
    loaded = False
    if not os.path.isdir(module_dir()):
        why = _module(["modprobe", "netconsole"])
        if why or not os.path.isdir(module_dir()):
            return _report("apply", [why or "modprobe netconsole made no %s (CONFIG_NETCONSOLE_DYNAMIC?)"
                                     % module_dir()], notes, baseline)
        loaded = True
    if baseline is None:
        baseline = _save_baseline(state_dir, loaded, read_printk())
    if os.path.isdir(target_dir()) and read_attr("enabled") not in (None, "0"):
        write_attr("enabled", "0")  # the others cannot change while enabled
    os.makedirs(target_dir(), exist_ok=True)
    for name in ATTRS:
        why = write_attr(name, values[name])
        if why:
            errors.append(why)
    if not errors:
        why = write_attr("enabled", "1")
        if why:
            errors.append(why)
    printk = read_printk()
    if printk and printk[0] < ALL_LEVELS:
        why = write_printk([ALL_LEVELS] + printk[1:])
        if why:
            errors.append(why)
    elif printk is None:
        notes.append("kernel.printk cannot be read: messages below the console loglevel may be dropped")
    return _report("apply", errors, notes, baseline)


def restore(state_dir: str) -> Dict[str, Any]:
    """Our target gone, the loglevel back, the module unloaded if we loaded it."""
    notes: List[str] = []
    errors: List[str] = []
    baseline = load_baseline(state_dir)
    why = remove_target()  # also a target an earlier, killed campaign left in this boot
    if why:
        errors.append(why)
    if baseline is None:
        notes.append("nothing applied in this boot")
        return _report("restore", errors, notes, None)
    saved = baseline.get("printk")
    if saved and read_printk() != saved:
        why = write_printk([int(v) for v in saved])
        if why:
            errors.append(why)
    if baseline.get("loaded_module") and not errors:
        why = _module(["modprobe", "-r", "netconsole"])
        if why:
            errors.append(why)
    report = _report("restore", errors, notes, baseline)
    if report["ok"]:
        _drop_baseline(state_dir)
    return report


def command(state_dir: str, action: str, wanted_json: Optional[str]) -> Dict[str, Any]:
    """The agent's `netconsole` subcommand: one `netconsole` line (PROTOCOL.md)."""
    if action == "apply":
        return apply(state_dir, parse_wanted(wanted_json))
    if wanted_json is not None:
        raise UsageError("--json is for `netconsole apply` only")
    return _report("read", [], [], load_baseline(state_dir)) if action == "read" else restore(state_dir)
