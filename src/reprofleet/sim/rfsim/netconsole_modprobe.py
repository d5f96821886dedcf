"""``modprobe [-r] netconsole`` on a simulated host: loading it makes
``$REPROFLEET_CONFIGFS/netconsole`` appear; unloading removes it, refused while a target
exists (as the kernel refuses to unload a module in use). Other modules: not found.

Standard library only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List


def main(argv: List[str]) -> int:
    remove = "-r" in argv or "--remove" in argv
    names = [a for a in argv if not a.startswith("-")]
    if names != ["netconsole"]:
        sys.stderr.write(f"modprobe: FATAL: Module {' '.join(names) or '?'} not found in directory "
                         "/lib/modules/7.0.0-28-generic\n")
        return 1
    folder = Path(os.environ.get("REPROFLEET_CONFIGFS") or "/sys/kernel/config") / "netconsole"
    if not remove:
        folder.mkdir(parents=True, exist_ok=True)
        return 0
    if folder.is_dir() and any(folder.iterdir()):
        sys.stderr.write("modprobe: FATAL: Module netconsole is in use.\n")
        return 1
    if folder.is_dir():
        folder.rmdir()
    return 0
