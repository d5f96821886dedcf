"""The simulated hosts' power switches: files holding ``on`` or ``off``.

The hardware daemon of the simulated fleet reads ``<host>/hw/power``; whoever plays the
PDU writes it. Writes are atomic (write a temporary file, rename it over) so the daemon
never reads half a word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

Outlets = Mapping[str, Path]  # outlet id (as the protocol names it) -> switch file


def read_switch(path: Path) -> bool:
    """True when the switch says on; a missing or unreadable switch counts as off."""
    try:
        return path.read_text().strip().lower() == "on"
    except OSError:
        return False


def write_switch(path: Path, on: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("on\n" if on else "off\n")
    os.replace(tmp, path)


def outlets_to_json(outlets: Outlets) -> dict[str, str]:
    return {str(outlet): str(Path(path)) for outlet, path in outlets.items()}


def outlets_from_json(data: Mapping[str, str]) -> dict[str, Path]:
    return {str(outlet): Path(path) for outlet, path in data.items()}
