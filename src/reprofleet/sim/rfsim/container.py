"""Second stage of the fake ``docker run``: the container's PID 1, started by the shim
(rfsim.docker_shim) as the first process of a new PID namespace. It takes a private mount
and UTS namespace of its own, builds the container's root, applies the bind mounts, chroots
and execs - keeping its PID - the entrypoint, or with ``--init`` the init (rfsim.docker_init,
tini's part), so that the entrypoint or the init *is* PID 1, with the kernel's rules for it:
a signal it has no handler for is dropped, except SIGKILL from the host.

The root is a tmpfs with the host's system directories bind-mounted recursively (so the
host's fake tools, fake vLLM, kernel log, boot_id and /proc are there, as a GPU container
sees the host's driver) and an empty /root and /tmp of its own, like an image's.

    python3 -m rfsim.container <container folder>/config.json      (run by the shim)

Host-side module: standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

PRIVATE = {"root", "tmp", "lost+found", "boot", "media", "mnt"}
CLONE_NEWNS, CLONE_NEWUTS = 0x00020000, 0x04000000
INIT = Path(__file__).resolve().with_name("docker_init.py")  # under /usr: inside the container's root too


def own_namespaces() -> None:
    """A mount and UTS namespace of this process's own, its mounts private (nothing leaks
    back to the host), as ``unshare --mount --uts --propagation private`` would give."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWNS|CLONE_NEWUTS): {os.strerror(errno)}")
    _mount("--make-rprivate", "/")


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


def entry_argv(plan: Dict[str, Any]) -> List[str]:
    """What PID 1 execs: the entrypoint and command, behind the init with ``--init``."""
    command = list(plan["argv"])
    return [sys.executable, "-I", str(INIT), "--", *command] if plan.get("init") else command


def main(argv: List[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    plan, container_id = config["plan"], str(config["id"])
    root = Path(f"/tmp/.rfsim-ctr-{container_id[:12]}")  # nosec B108  # inside the host's private /tmp, mounted in the container's own mount namespace
    try:
        own_namespaces()
        build_root(root)
        for mount in plan["mounts"]:
            apply_mount(root, mount)
        socket.sethostname(container_id[:12])
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"docker: Error response from daemon: failed to create task for container: {exc}\n")
        return 125
    os.chroot(root)
    os.chdir(plan.get("workdir") or "/")
    command = entry_argv(plan)
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
