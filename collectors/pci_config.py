"""What the PCI bus says of the host's NVIDIA functions: what `lspci` shows, read from sysfs.

A GPU that has fallen off the bus no longer answers configuration reads: the root port
returns all ones, so its vendor id reads 0xffff and ``lspci`` prints it as ``rev ff``
(with "Unknown header type 7f": pciutils/pciutils#91 describes the all-ones config space;
operators read ``rev ff`` as "the GPU is down", e.g. lyulyul/shine-cluster#172). The kernel
keeps what it read at enumeration in sysfs (``vendor``, ``device``, ``class``, ``revision``):
those cached values do not change when the device stops answering, so they name the
function but prove nothing. ``config`` is read from the device on every read: it is the
live evidence, and it is what ``lspci`` itself reads. An unprivileged reader gets the first
64 bytes, which hold everything needed here.

A GPU that did not answer at all during this boot's enumeration is not in sysfs: its
absence (at the bus id NVML reported before the wedge) is the evidence then.

Sysfs first (no pciutils needed, no subprocess); ``lspci -D -n -d 10de:`` only where sysfs
has no PCI tree (a container). ``$REPROFLEET_SYSFS`` replaces ``/sys`` (the simulated
fleet's hosts keep their bus in ``/etc/reprofleet-sim/hw/sys``).

Host-side module: standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

SYSFS_ENV = "REPROFLEET_SYSFS"
NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # base class: VGA (0300) and 3D controllers (0302) are both GPUs
ALL_ONES_VENDOR = 0xFFFF  # what a read of a function that does not answer returns
CONFIG_READ_BYTES = 64
LSPCI_TIMEOUT_S = 10.0
LSPCI_LINE = re.compile(
    r"^(?P<bdf>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<cls>[0-9a-fA-F]{4}):\s+"
    r"(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})(?:\s+\(rev (?P<rev>[0-9a-fA-F]{2})\))?")


def sysfs_root() -> str:
    return os.environ.get(SYSFS_ENV) or "/sys"


def sysfs_name(bus_id: str) -> Optional[str]:
    """NVML's bus id (``00000000:01:00.0``, an 8-digit domain) as sysfs names it (``0000:01:00.0``)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return None
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return None
    return "%04x:%s:%s" % (domain, parts[1], parts[2])


def parse_header(data: bytes) -> Optional[Dict[str, Any]]:
    """Vendor, device, revision and class from the first bytes of a config space (pure).

    ``answers`` is false when the vendor id reads all ones: the function did not respond.
    None when fewer than 12 bytes were read.
    """
    if len(data) < 12:
        return None
    vendor = data[0] | data[1] << 8
    return {"vendor": vendor, "device": data[2] | data[3] << 8, "revision": data[8],
            "class": data[9] | data[10] << 8 | data[11] << 16, "answers": vendor != ALL_ONES_VENDOR}


def parse_lspci(text: str) -> List[Dict[str, Any]]:
    """``lspci -D -n -d 10de:`` lines as functions; ``rev ff`` means it did not answer (pure)."""
    functions = []
    for line in text.splitlines():
        match = LSPCI_LINE.match(line.strip())
        if not match:
            continue
        rev = match.group("rev")
        functions.append({"bdf": sysfs_name(match.group("bdf")) or match.group("bdf").lower(),
                          "vendor": int(match.group("vendor"), 16), "device": int(match.group("device"), 16),
                          "class": int(match.group("cls"), 16) << 8, "revision": None if rev is None else int(rev, 16),
                          "answers": rev is None or rev.lower() != "ff", "source": "lspci"})
    return functions


def _read_hex(path: str) -> Optional[int]:
    try:
        with open(path) as handle:
            return int(handle.read().strip(), 16)
    except (OSError, ValueError):
        return None


def _function(folder: str, name: str) -> Dict[str, Any]:
    """One NVIDIA function: its cached identity and what its config space says now."""
    entry: Dict[str, Any] = {"bdf": name, "vendor": _read_hex(os.path.join(folder, "vendor")),
                             "device": _read_hex(os.path.join(folder, "device")),
                             "class": _read_hex(os.path.join(folder, "class")), "source": "sysfs"}
    try:
        with open(os.path.join(folder, "config"), "rb") as handle:
            header = parse_header(handle.read(CONFIG_READ_BYTES))
    except OSError as exc:
        entry.update(answers=None, error="config: %s" % exc)
        return entry
    if header is None:
        entry.update(answers=None, error="config: fewer than 12 bytes")
        return entry
    entry.update(revision=header["revision"], answers=header["answers"], config_vendor=header["vendor"])
    return entry


def nvidia_functions() -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Every NVIDIA function on the bus (GPUs and their audio/USB functions), and the source
    read; None with the reason when neither sysfs nor lspci can be read."""
    devices = os.path.join(sysfs_root(), "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(devices))
    except OSError as exc:
        found, why = _lspci()
        return found, why if found is not None else "no %s (%s) and %s" % (devices, exc.strerror, why)
    functions = []
    for name in names:
        folder = os.path.join(devices, name)
        if _read_hex(os.path.join(folder, "vendor")) == NVIDIA_VENDOR:
            functions.append(_function(folder, name))
    return functions, "sysfs"


def _lspci() -> Tuple[Optional[List[Dict[str, Any]]], str]:
    lspci = shutil.which("lspci")
    if lspci is None:
        return None, "no lspci"
    try:
        done = subprocess.run([lspci, "-D", "-n", "-d", "10de:"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=LSPCI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "lspci: %s" % exc
    if done.returncode != 0:
        return None, "lspci exit %d: %s" % (done.returncode, done.stderr.decode("utf-8", "replace").strip()[:200])
    return parse_lspci(done.stdout.decode("utf-8", "replace")), "lspci"


def is_gpu(function: Dict[str, Any]) -> bool:
    cls = function.get("class")
    return isinstance(cls, int) and cls >> 16 == DISPLAY_CLASS
