"""The fake GPU: an RTX PRO 6000 Blackwell Workstation Edition, as a JSON state file.

Two files per card in the hw directory, one writer each, so no lock is needed between them:

* ``gpu<N>.json`` - identity and the settings nvidia-smi changes (clock locks, application
  clocks, power limit, persistence). The hardware daemon resets the settings on power off,
  as a driver reload does. ``lost`` (true once the card fell off the bus) is no setting: no
  power cycle clears it (shared/REAL-LABS.md: such a GPU may need a reseat).
* ``gpu<N>.load.json`` - what the running engine does to the card (load level, phase,
  memory in use), written by the fake vLLM; stale once its pid is gone.

Host-side module: standard library only.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import hwio

NAME = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
VBIOS = "98.02.81.00.07"
DRIVER = "610.43.03"
CUDA = "13.3"
CUDA_DRIVER_VERSION = 13030  # nvmlSystemGetCudaDriverVersion: 1000 * major + 10 * minor
MEMORY_TOTAL_MIB = 97887
HOST_PROC = Path("/etc/reprofleet-sim/host-proc")  # in a container: the host's /proc (rfsim/nvidia_runtime.py)
POWER_DEFAULT_W = 600.0
POWER_MIN_W = 150.0
POWER_MAX_W = 600.0
MAX_GRAPHICS_MHZ = 3090
MIN_GRAPHICS_MHZ = 180
MAX_MEMORY_MHZ = 14001
MIN_MEMORY_MHZ = 405
SUPPORTED_MEMORY_MHZ = (14001, 810, 405)
IDLE_POWER_W = 30.0
PCIE_GEN_MAX = 5
PCIE_WIDTH = 16

SETTINGS_DEFAULTS: Dict[str, Any] = {
    "persistence": False,
    "locked_graphics": None,  # [min, max] MHz after nvidia-smi -lgc
    "locked_memory": None,  # [min, max] MHz after nvidia-smi -lmc
    "application_clocks": None,  # [mem, graphics] MHz after nvidia-smi -ac
    "power_limit_w": POWER_DEFAULT_W,
    "compute_mode": 0,
}


def identity(seed: str, index: int = 0) -> Dict[str, Any]:
    """A per-host UUID, serial and bus id, stable for a given seed."""
    digest = hashlib.sha256(f"{seed}/{index}".encode()).hexdigest()
    return {
        "index": index,
        "uuid": "GPU-" + str(uuid.UUID(digest[:32])),
        "serial": "1" + str(int(digest[32:44], 16))[:12].rjust(12, "0"),
        "pci_bus_id": f"00000000:{index + 1:02X}:00.0",
    }


def initial_state(seed: str, index: int = 0) -> Dict[str, Any]:
    state = identity(seed, index)
    state.update(SETTINGS_DEFAULTS)
    state["pcie_replay"] = 0
    state["lost"] = False
    return state


def state_path(index: int = 0, hw: Optional[Path] = None) -> Path:
    return (hw or hwio.hw_dir()) / f"gpu{index}.json"


def load_path(index: int = 0, hw: Optional[Path] = None) -> Path:
    return (hw or hwio.hw_dir()) / f"gpu{index}.load.json"


def xid_path(index: int = 0, hw: Optional[Path] = None) -> Path:
    return (hw or hwio.hw_dir()) / f"gpu{index}.xid.jsonl"


def gpu_count(hw: Optional[Path] = None) -> int:
    folder = hw or hwio.hw_dir()
    return len([p for p in folder.glob("gpu*.json") if p.stem[3:].isdigit()])


def read_state(index: int = 0, hw: Optional[Path] = None) -> Dict[str, Any]:
    state = hwio.read_json(state_path(index, hw))
    if not isinstance(state, dict):
        raise FileNotFoundError(f"no GPU {index} in {hw or hwio.hw_dir()}")
    return state


def update_settings(index: int, changes: Dict[str, Any], hw: Optional[Path] = None) -> Dict[str, Any]:
    path = state_path(index, hw)
    with hwio.locked(path):
        state = read_state(index, hw)
        state.update(changes)
        hwio.write_json(path, state)
    return state


def is_lost(index: int = 0, hw: Optional[Path] = None) -> bool:
    """Did the card fall off the bus? (It stays off through power cycles.)"""
    return bool(read_state(index, hw).get("lost"))


def reset_settings(index: int = 0, hw: Optional[Path] = None) -> None:
    """What a driver reload does: every setting back to its default; load gone."""
    update_settings(index, dict(SETTINGS_DEFAULTS), hw)
    try:
        load_path(index, hw).unlink()
    except FileNotFoundError:
        pass


def host_pid() -> int:
    """This process's pid as the host (and so the driver) numbers it: NVML names a process
    in a container by its host pid. A container of the host's dockerd has a /proc of its own;
    the nvidia runtime mounts the host's at ``HOST_PROC`` (the driver's view), where this
    process is the one whose innermost ``NSpid`` is ours and whose command line is ours.
    Elsewhere /proc is the host's and the first ``NSpid`` is the host's number."""
    if HOST_PROC.is_dir():
        found = _host_pid_of_container_process()
        if found is not None:
            return found
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return os.getpid()


def _host_pid_of_container_process() -> Optional[int]:
    own, cmdline = os.getpid(), Path("/proc/self/cmdline").read_bytes()
    for entry in HOST_PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            nspids = [line.split()[1:] for line in (entry / "status").read_text().splitlines()
                      if line.startswith("NSpid:")][0]
            if len(nspids) > 1 and int(nspids[-1]) == own and (entry / "cmdline").read_bytes() == cmdline:
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie holds no GPU context
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_load(index: int = 0, hw: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """The engine's current load on the card, or None when no live process holds it."""
    load = hwio.read_json(load_path(index, hw))
    if not isinstance(load, dict) or not pid_alive(int(load.get("pid", 0) or 0)):
        return None
    return load


def write_load(index: int, load: Dict[str, Any], hw: Optional[Path] = None) -> None:
    hwio.write_json(load_path(index, hw), load)


def graphics_ceiling(state: Dict[str, Any]) -> int:
    """Highest graphics clock the card may reach under the settings it has now."""
    ceiling = MAX_GRAPHICS_MHZ
    if state.get("locked_graphics"):
        ceiling = min(ceiling, int(state["locked_graphics"][1]))
    if state.get("application_clocks") and not state.get("locked_graphics"):
        ceiling = min(ceiling, int(state["application_clocks"][1]))
    return ceiling


def xid_events(index: int = 0, hw: Optional[Path] = None) -> List[Dict[str, Any]]:
    path = xid_path(index, hw)
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        value = hwio.read_json_line(line)
        if value is not None:
            events.append(value)
    return events
