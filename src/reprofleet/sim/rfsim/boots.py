"""Boots of a simulated host: boot_id and kernel log of every boot, in ``hw/boots/``.

The hardware daemon starts a boot record on power on (a fresh boot_id file that is
bind-mounted over /proc/sys/kernel/random/boot_id and a fresh kernel log file bind-mounted
over /dev/kmsg) and closes it on power off. The fake ``journalctl`` reads previous boots
from here, as the real one reads a persistent journal.

Kernel log lines use the /dev/kmsg record format ``pri,seq,usec,flags;message``. What
userspace logs (systemd, systemd-logind, unattended-upgrades during an orderly shutdown) is
in ``<index>.journal``, one JSON object a line: ``usec`` (since the boot began), ``ident``,
``pid``, ``message``; ``journalctl`` without ``-k`` shows both, in time order.

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import gpu, hwio

KERN_ERR = 3
KERN_WARNING = 4
KERN_INFO = 6
KERNEL_RELEASE = "7.0.0-28-generic"


@dataclass(frozen=True)
class Boot:
    index: int
    boot_id: str
    hostname: str
    started: float
    ended: Optional[float] = None

    @property
    def kmsg_name(self) -> str:
        return f"{self.index}.kmsg"

    @property
    def boot_id_name(self) -> str:
        return f"{self.index}.boot_id"

    @property
    def journal_name(self) -> str:
        return f"{self.index}.journal"


def index_path(boots_dir: Path) -> Path:
    return boots_dir / "index.json"


def all_boots(boots_dir: Path) -> List[Boot]:
    data = hwio.read_json(index_path(boots_dir), {}) or {}
    return [Boot(**entry) for entry in data.get("boots", [])]


def _save(boots_dir: Path, boots: List[Boot]) -> None:
    hwio.write_json(index_path(boots_dir), {"boots": [asdict(b) for b in boots]})


def current(boots_dir: Path) -> Optional[Boot]:
    boots = all_boots(boots_dir)
    return boots[-1] if boots and boots[-1].ended is None else None


def new_boot(boots_dir: Path, hostname: str, now: Optional[float] = None) -> Boot:
    """Open a boot record: boot_id file, kernel log with the first lines of a boot."""
    boots_dir.mkdir(parents=True, exist_ok=True)
    now = time.time() if now is None else now
    boots = all_boots(boots_dir)
    boot = Boot(len(boots) + 1, str(uuid.uuid4()), hostname, now)
    (boots_dir / boot.boot_id_name).write_text(boot.boot_id + "\n")
    kmsg = boots_dir / boot.kmsg_name
    kmsg.write_text("")
    (boots_dir / boot.journal_name).write_text("")
    for offset, level, message in boot_lines(hostname):
        append_kmsg(kmsg, message, level=level, usec=int(offset * 1e6))
    _save(boots_dir, boots + [boot])
    return boot


def end_current(boots_dir: Path, now: Optional[float] = None) -> Optional[Boot]:
    boots = all_boots(boots_dir)
    if not boots or boots[-1].ended is not None:
        return None
    ended = Boot(**dict(asdict(boots[-1]), ended=time.time() if now is None else now))
    _save(boots_dir, boots[:-1] + [ended])
    return ended


def boot_lines(hostname: str) -> List[Tuple[float, int, str]]:
    """(seconds since boot, level, message): what a kernel prints that we care about."""
    return [
        (0.0, KERN_INFO, f"Linux version {KERNEL_RELEASE} (buildd@lcy02-amd64-080) "
         "(x86_64-linux-gnu-gcc-15 (Ubuntu 15.2.0-4ubuntu4) 15.2.0) #28-Ubuntu SMP PREEMPT_DYNAMIC"),
        (0.0, KERN_INFO, f"Command line: BOOT_IMAGE=/boot/vmlinuz-{KERNEL_RELEASE} ro quiet splash"),
        (0.0, KERN_INFO, "DMI: ASUS System Product Name/ROG STRIX X870E-E GAMING WIFI, BIOS 1402"),
        (2.1, KERN_WARNING, "nvidia: module license 'NVIDIA' taints kernel."),
        (2.2, KERN_INFO, "nvidia-nvlink: Nvlink Core is being initialized, major device number 236"),
        (2.3, KERN_INFO, f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {gpu.DRIVER}  "
         "Release Build  (dvs-builder@U22-I3-AE18-09-2)"),
        (2.6, KERN_INFO, f"nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for "
         f"x86_64  {gpu.DRIVER}  Release Build  (dvs-builder@U22-I3-AE18-09-2)"),
        (2.8, KERN_INFO, "[drm] Initialized nvidia-drm 0.0.0 for 0000:01:00.0 on minor 1"),
        (4.0, KERN_INFO, f"systemd[1]: Set hostname to <{hostname}>."),
    ]


def append_kmsg(path: Path, message: str, *, level: int = KERN_INFO, usec: Optional[int] = None,
                started: Optional[float] = None) -> None:
    """Append one record; ``usec`` defaults to the time since ``started``."""
    if usec is None:
        usec = int(max(0.0, time.time() - (started or time.time())) * 1e6)
    seq = sum(1 for _ in open(path)) if path.exists() else 0
    with open(path, "a") as out:
        out.write(f"{level},{seq},{usec},-;{message}\n")


def append_journal(path: Path, ident: str, message: str, *, pid: Optional[int] = None,
                   started: Optional[float] = None) -> None:
    """Append one userspace journal entry, stamped with the time since ``started``."""
    usec = int(max(0.0, time.time() - (started or time.time())) * 1e6)
    with open(path, "a") as out:
        out.write(json.dumps({"usec": usec, "ident": ident, "pid": pid, "message": message}) + "\n")


def read_journal(path: Path) -> List[Dict[str, Any]]:
    """A boot's userspace entries (none for a boot recorded before they were kept)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("message"), str):
            entries.append(entry)
    return entries


def parse_kmsg(text: str) -> List[Dict[str, Any]]:
    records = []
    for line in text.splitlines():
        head, sep, message = line.partition(";")
        parts = head.split(",")
        if not sep or len(parts) < 3:
            continue
        try:
            records.append({"level": int(parts[0]) & 7, "seq": int(parts[1]),
                            "usec": int(parts[2]), "message": message})
        except ValueError:
            continue
    return records


def xid_message(xid: int, pid: int, name: str, bus: str = "0000:01:00") -> str:
    texts = {79: "GPU has fallen off the bus.", 109: "Ctx switch timeout.", 119: "Timeout after 45s of "
             "waiting for RPC response from GPU0 GSP!", 154: "GPU recovery action changed from 0x0 "
             "(None) to 0x2 (Node Reboot Required)"}
    return f"NVRM: Xid (PCI:{bus}): {xid}, pid={pid}, name={name}, {texts.get(xid, 'Graphics Exception')}"
