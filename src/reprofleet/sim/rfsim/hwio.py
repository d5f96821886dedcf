"""How a simulated host's fake tools reach its "hardware": files in the hw directory.

On a simulated host the directory is /etc/reprofleet-sim/hw (bind-mounted from the fleet
directory); tests point ``RFSIM_ETC`` / ``RFSIM_HW`` at a temporary directory instead.
Writers replace files atomically (tmp + rename) so that a reader never sees half a state.

Host-side module: standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional


def etc_dir() -> Path:
    return Path(os.environ.get("RFSIM_ETC", "/etc/reprofleet-sim"))


def hw_dir() -> Path:
    return Path(os.environ.get("RFSIM_HW", str(etc_dir() / "hw")))


def host_config() -> Dict[str, Any]:
    """The host's simulation parameters (SimHostSpec.host_config()); {} when absent."""
    try:
        return dict(json.loads((etc_dir() / "host.json").read_text()))
    except (OSError, ValueError):
        return {}


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    os.replace(tmp, path)


def append_jsonl(path: Path, value: Dict[str, Any]) -> None:
    with open(path, "a") as out:
        out.write(json.dumps(value, sort_keys=True) + "\n")
        out.flush()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock for read-modify-write of a state file (lock file beside it)."""
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def request(kind: str, hw: Optional[Path] = None, **data: Any) -> Path:
    """Ask the hardware daemon for something (wedge, reboot, stall); it deletes the file."""
    folder = (hw or hw_dir()) / "requests"
    folder.mkdir(parents=True, exist_ok=True)
    body = {"pid": os.getpid(), **data, "kind": kind, "t": time.time()}  # a given pid: the host's number
    path = folder / f"{time.time_ns()}-{os.getpid()}-{kind}.json"
    write_json(path, body)
    return path


def next_counter(path: Path) -> int:
    """Increment a counter kept on disk (survives reboots); return the value before."""
    with locked(path):
        value = int((read_json(path, {}) or {}).get("count", 0))
        write_json(path, {"count": value + 1})
    return value


def read_json_line(line: str) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
