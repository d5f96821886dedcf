"""A simulated host's ``/sys`` as its tools read it: the PCI bus, the watchdog class, kexec.

The hardware daemon writes the tree into ``hw/sys/`` at every power-on (the host's agent
reads it through ``REPROFLEET_SYSFS``, its ``lspci`` directly), the way a real kernel builds
sysfs at boot:

* ``bus/pci/devices/<domain:bus:dev.fn>/``: ``vendor``, ``device``, ``class``, ``revision``,
  ``subsystem_vendor``, ``subsystem_device`` (what the kernel read at enumeration: cached,
  they do not change later) and ``config`` (the device's configuration space, read live on
  a real host). A GPU that fell off the bus is still enumerated from the kernel's cache, but
  its config space reads all ones (PCI: a function that does not answer returns 0xffff for
  every read), which ``lspci`` shows as ``rev ff`` and "Unknown header type 7f"
  (pciutils/pciutils#91; lyulyul/shine-cluster#172 shows it on a multi-GPU server). Every
  function of the card goes: the audio function beside the GPU too.
* ``class/watchdog/``: empty, or ``watchdog0`` (an Intel TCO timer, as common on x86 boards)
  in state ``active`` when the host has an armed hardware watchdog.
* ``kernel/kexec_crash_loaded``: 0 (no kdump capture kernel loaded), 1 where the host's kdump-tools loads one.

The identities are this simulation's own: an RTX PRO 6000 Blackwell Workstation Edition (a
VGA-class card with an HD-audio function) behind an AMD host bridge.

Host-side module: standard library only.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import gpu

# (function suffix, vendor, device, class, revision, subsystem vendor, subsystem device)
HOST_BRIDGE = ("0000:00:00.0", 0x1022, 0x14D8, 0x060000, 0x00, 0x1022, 0x14D8)
CARD_FUNCTIONS = ((0, 0x10DE, 0x2BB1, 0x030000, 0xA1, 0x10DE, 0x204B),  # the GPU (nvml's pciDeviceId)
                  (1, 0x10DE, 0x22E8, 0x040300, 0xA1, 0x10DE, 0x204B))  # its HD-audio function
COMMAND = 0x0407  # I/O, memory, bus master; INTx off (MSI in use)
STATUS = 0x0010  # a capability list follows
CONFIG_BYTES = 256
WATCHDOG = {"identity": "iTCO_wdt", "state": "active", "timeout": "30", "nowayout": "0", "status": "0x8000"}


def root(hw: Path) -> Path:
    return hw / "sys"


def devices(hw: Path) -> Path:
    return root(hw) / "bus" / "pci" / "devices"


def config_space(vendor: int, device: int, cls: int, revision: int, sub_vendor: int, sub_device: int,
                 multifunction: bool) -> bytes:
    """A type-0 header of a function that answers (the rest of the 256 bytes zero)."""
    header = struct.pack("<HHHHB3sBBBB", vendor, device, COMMAND, STATUS, revision, cls.to_bytes(3, "little"),
                         0, 0, 0x80 if multifunction else 0x00, 0)
    header += bytes(0x2C - len(header)) + struct.pack("<HH", sub_vendor, sub_device)
    return header + bytes(CONFIG_BYTES - len(header))


def card_bdfs(index: int, hw: Optional[Path] = None) -> List[str]:
    """The sysfs names of card ``index``'s functions, from its bus id (``00000000:01:00.0``)."""
    bus = str(gpu.read_state(index, hw)["pci_bus_id"])
    domain, number, slot = bus.split(":")
    base = f"{int(domain, 16):04x}:{number.lower()}:{slot.split('.')[0].lower()}"
    return [f"{base}.{function[0]}" for function in CARD_FUNCTIONS]


def _write_function(folder: Path, ident: Tuple[int, int, int, int, int, int], multifunction: bool,
                    answers: bool) -> None:
    vendor, device, cls, revision, sub_vendor, sub_device = ident
    folder.mkdir(parents=True, exist_ok=True)
    cached: Dict[str, str] = {"vendor": f"0x{vendor:04x}", "device": f"0x{device:04x}", "class": f"0x{cls:06x}",
                              "revision": f"0x{revision:02x}", "subsystem_vendor": f"0x{sub_vendor:04x}",
                              "subsystem_device": f"0x{sub_device:04x}"}
    for name, value in cached.items():
        (folder / name).write_text(value + "\n")
    config = config_space(vendor, device, cls, revision, sub_vendor, sub_device, multifunction)
    (folder / "config").write_bytes(config if answers else b"\xff" * CONFIG_BYTES)


def write_boot(hw: Path, hardware_watchdog: bool, kdump_loaded: bool = False) -> None:
    """The tree a boot starts with: every card as its GPU state says (answering, or off the
    bus), the host bridge, the watchdog class, kexec."""
    tree = root(hw)
    if tree.exists():
        shutil.rmtree(tree)
    _write_function(devices(hw) / HOST_BRIDGE[0], HOST_BRIDGE[1:], False, True)
    for index in range(gpu.gpu_count(hw)):
        mark_card(hw, index)
    watchdogs = tree / "class" / "watchdog"
    watchdogs.mkdir(parents=True)
    if hardware_watchdog:
        (watchdogs / "watchdog0").mkdir()
        for name, value in WATCHDOG.items():
            (watchdogs / "watchdog0" / name).write_text(value + "\n")
    (tree / "kernel").mkdir()
    (tree / "kernel" / "kexec_crash_loaded").write_text("1\n" if kdump_loaded else "0\n")


def mark_card(hw: Path, index: int) -> None:
    """Card ``index``'s functions, answering or (its state says ``lost``) reading all ones."""
    answers = not gpu.read_state(index, hw).get("lost")
    for bdf, function in zip(card_bdfs(index, hw), CARD_FUNCTIONS):
        _write_function(devices(hw) / bdf, function[1:], True, answers)
