"""``lspci`` on a simulated host: the host's PCI functions from its sysfs tree (rfsim/sysfs.py).

The forms an operator types to look at a GPU: ``lspci [-D] [-n|-nn] [-d VENDOR:[DEVICE]]``.
Names come from this module's own small table (a real lspci reads pci.ids; a device it
does not know is "Device 2bb1", as here). The revision is read from the config space, as
lspci reads it: a function that no longer answers reads all ones and shows ``(rev ff)``
(pciutils/pciutils#91), while its vendor, device and class still come from the kernel's
cached sysfs values.

Host-side module: standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional, Tuple

from . import hwio, sysfs

CLASSES = {0x0300: "VGA compatible controller", 0x0302: "3D controller", 0x0403: "Audio device",
           0x0600: "Host bridge"}
VENDORS = {0x10DE: "NVIDIA Corporation", 0x1022: "Advanced Micro Devices, Inc. [AMD]"}
USAGE = "lspci: -%s: unknown option (this simulated lspci knows -D, -n, -nn, -d)"


def _hex(path: Path) -> int:
    return int(path.read_text().strip(), 16)


def _function(folder: Path) -> Tuple[str, int, int, int, int]:
    config = (folder / "config").read_bytes()
    return folder.name, _hex(folder / "vendor"), _hex(folder / "device"), _hex(folder / "class") >> 8, config[8]


def line(bdf: str, vendor: int, device: int, cls: int, rev: int, numeric: int, domains: bool) -> str:
    where = bdf if domains else bdf.split(":", 1)[1]
    if numeric == 1:
        text = f"{where} {cls:04x}: {vendor:04x}:{device:04x}"
    else:
        name = VENDORS.get(vendor, f"Device {vendor:04x}")
        kind = CLASSES.get(cls, f"Class {cls:04x}")
        text = f"{where} {kind}" + (f" [{cls:04x}]" if numeric == 2 else "") + f": {name} Device {device:04x}"
        text += f" [{vendor:04x}:{device:04x}]" if numeric == 2 else ""
    return text + (f" (rev {rev:02x})" if rev else "")


def main(argv: List[str]) -> int:
    domains, numeric = False, 0
    wanted: Optional[Tuple[str, str]] = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "-D":
            domains = True
        elif arg in ("-n", "-nn"):
            numeric = len(arg) - 1
        elif arg == "-d" and args:
            want_vendor, _, want_device = args.pop(0).partition(":")
            wanted = (want_vendor.lower(), want_device.lower())
        else:
            sys.stderr.write(USAGE % arg.lstrip("-") + "\n")
            return 2
    folder = sysfs.devices(hwio.hw_dir())
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        bdf, vendor, device, cls, rev = _function(path)
        if wanted and ((wanted[0] and int(wanted[0], 16) != vendor) or (wanted[1] and int(wanted[1], 16) != device)):
            continue
        sys.stdout.write(line(bdf, vendor, device, cls, rev, numeric, domains) + "\n")
    return 0
