"""The simulated hosts' NVIDIA container runtime and hook, after NVIDIA's container-toolkit
documents (a runtime that wraps runc; the environment variables that ask it for GPUs).

``nvidia-container-runtime`` is a shim in front of ``runc``: for ``create`` it reads the
bundle's OCI ``config.json`` and, when the container's environment asks for GPUs
(``NVIDIA_VISIBLE_DEVICES``: indices, ``all``; ``none``, ``void``, empty or unset ask for
none and leave the container as runc would run it), edits the spec before runc sees it; every
other command passes through unchanged. The real one adds the driver's device nodes, libraries
and binaries; a simulated GPU is files, so it adds bind mounts of those files:

* the host's hardware folder (``/etc/reprofleet-sim/hw``: the card's state, the requests the
  fake engine sends, the boot record), read-write, as a device node is;
* the host's configuration (``host.json``, its wedge model) and ``nvidia-smi``, read-only,
  as the toolkit mounts the driver's utilities;
* the host's /proc, read-only, at ``/etc/reprofleet-sim/host-proc``: a real driver names a
  container's process by its host pid (NVML), which the fake one finds there.

Docker 20.10's ``--gpus`` registers only when ``nvidia-container-runtime-hook`` is on dockerd's
PATH and adds it as a prestart hook with ``NVIDIA_VISIBLE_DEVICES`` set; this runtime has done
the hook's work in the spec, so it drops that hook. The hook itself, run by plain runc (a
container started with ``--runtime runc --gpus``), refuses with one line, as a GPU that cannot be
given to the container must not be silently missing.

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

RUNC = "/usr/sbin/runc"
HOOK = "nvidia-container-runtime-hook"
HOST_ETC = "/etc/reprofleet-sim"
NO_GPU = ("", "none", "void")
GPU_FILES = (  # (host path, container path, read-only)
    (f"{HOST_ETC}/hw", f"{HOST_ETC}/hw", False),
    (f"{HOST_ETC}/host.json", f"{HOST_ETC}/host.json", True),
    ("/usr/local/bin/nvidia-smi", "/usr/bin/nvidia-smi", True),
    ("/proc", f"{HOST_ETC}/host-proc", True),  # the driver's view of the host's processes (gpu.host_pid)
)


def visible_devices(spec: Dict[str, Any]) -> Optional[str]:
    """The container's ``NVIDIA_VISIBLE_DEVICES`` (the last one set), or None."""
    found = None
    for entry in (spec.get("process") or {}).get("env") or []:
        name, sep, value = str(entry).partition("=")
        if sep and name == "NVIDIA_VISIBLE_DEVICES":
            found = value
    return found


def with_gpu(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The spec with the simulated GPU's files mounted (when the container asks for a GPU)
    and docker's prestart hook for the toolkit dropped (its work is done here)."""
    devices = visible_devices(spec)
    if devices is None or devices.strip().lower() in NO_GPU:
        return spec
    out = dict(spec)
    mounts: List[Dict[str, Any]] = list(spec.get("mounts") or [])
    present = {m.get("destination") for m in mounts}
    for source, target, readonly in GPU_FILES:
        if target not in present and os.path.exists(source):
            options = ["rbind", "nosuid", "nodev"] + (["ro"] if readonly else ["rw"])
            mounts.append({"destination": target, "type": "bind", "source": source, "options": options})
    out["mounts"] = mounts
    hooks = dict(spec.get("hooks") or {})
    if hooks.get("prestart"):
        hooks["prestart"] = [h for h in hooks["prestart"] if os.path.basename(str(h.get("path", ""))) != HOOK]
        out["hooks"] = hooks
    return out


def bundle_of(argv: List[str]) -> Optional[Path]:
    """The ``--bundle`` of a ``create`` command line (runc's own flags may come first)."""
    if "create" not in argv:
        return None
    rest = argv[argv.index("create") + 1:]
    for index, arg in enumerate(rest):
        if arg in ("--bundle", "-b") and index + 1 < len(rest):
            return Path(rest[index + 1])
        if arg.startswith("--bundle="):
            return Path(arg.split("=", 1)[1])
    return Path(".")  # runc's default: the current directory


def runtime_main(argv: List[str]) -> int:
    bundle = bundle_of(argv)
    if bundle is not None:
        config = bundle / "config.json"
        spec = json.loads(config.read_text())
        edited = with_gpu(spec)
        if edited is not spec:
            tmp = config.with_name(".config.json.nvidia")
            tmp.write_text(json.dumps(edited))
            os.replace(tmp, config)
    os.execv(RUNC, [RUNC, *argv])
    return 127  # not reached


def hook_main(argv: List[str]) -> int:
    print(f"{HOOK}: this host gives GPUs to containers through the nvidia runtime (docker info: Runtimes); "
          "run the container with it (it is the default runtime)", file=sys.stderr)
    return 1
