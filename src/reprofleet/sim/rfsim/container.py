"""Second stage of the fake ``docker run``: inside a fresh mount + UTS namespace, build the
container's root, apply the bind mounts, chroot, and exec the entrypoint (same PID, so the
docker process waits for - and signals - the entrypoint itself).

The root is a tmpfs with the host's system directories bind-mounted recursively (so the
host's fake tools, fake vLLM, kernel log and boot_id are there, as a GPU container sees the
host's driver) and an empty /root and /tmp of its own, like an image's.

    python3 -m rfsim.container '<json plan>'      (run by docker_cli under unshare)

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

PRIVATE = {"root", "tmp", "lost+found", "boot", "media", "mnt"}


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, timeout=10)


def build_root(root: Path) -> None:
    root.mkdir(mode=0o755, exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=755", "rfsim-container", str(root))
    for entry in sorted(Path("/").iterdir()):
        target = root / entry.name
        if entry.is_symlink():
            target.symlink_to(os.readlink(entry))
        elif entry.name in PRIVATE:
            target.mkdir(mode=0o1777 if entry.name == "tmp" else 0o700)
        elif entry.is_dir():
            target.mkdir()
            _mount("--rbind", str(entry), str(target))


def apply_mount(root: Path, mount: Dict[str, Any]) -> None:
    source, target = Path(mount["source"]), root / str(mount["target"]).lstrip("/")
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    _mount("--bind", str(source), str(target))
    if mount.get("readonly"):
        _mount("-o", "remount,bind,ro", str(target))


def main(argv: List[str]) -> int:
    plan = json.loads(argv[0])
    root = Path(f"/tmp/.rfsim-ctr-{plan['id'][:12]}")
    try:
        build_root(root)
        for mount in plan["mounts"]:
            apply_mount(root, mount)
        socket.sethostname(plan["id"][:12])
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"docker: Error response from daemon: failed to create task for container: {exc}\n")
        return 125
    os.chroot(root)
    os.chdir(plan.get("workdir") or "/")
    command = plan["argv"]
    try:
        os.execvpe(command[0], command, plan["env"])
    except OSError:
        sys.stderr.write(
            f"docker: Error response from daemon: failed to create task for container: exec: "
            f"\"{command[0]}\": executable file not found in $PATH: unknown.\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
