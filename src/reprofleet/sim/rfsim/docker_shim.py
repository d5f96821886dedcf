"""The simulated containerd shim: runs one container, owned by nobody's client.

``docker run`` starts it detached (double fork, a session of its own, stdio on files), so
neither a signal to the client's process group nor the client's death reaches it, as with
containerd-shim on a real host. It unshares a PID namespace and starts rfsim.container as
the first process in it (PID 1 of the container; rfsim.container adds the mount and UTS
namespaces, the root and the bind mounts, then execs the entrypoint or the ``--init``
init), copies the container's stdout and stderr into ``container.log`` framed as docker's
stdcopy, and when PID 1 ends writes the exit code (128 + N for a signal, as docker reports
it) and removes a ``--rm`` container.

    python3 -m rfsim.docker_shim <container folder>      (run by rfsim.docker_run)

Host-side module: standard library only.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from . import docker_state

CLONE_NEWPID = 0x20000000
STDOUT, STDERR = 1, 2
RC_START_FAILED = 125  # docker run's code when the daemon could not start the container


def frame(stream: int, data: bytes) -> bytes:
    """docker's stdcopy framing: stream byte, three zero bytes, big-endian payload size."""
    return struct.pack(">BxxxI", stream, len(data)) + data


def unshare_pid() -> None:
    """The next child is PID 1 of a new PID namespace (the shim itself stays in the host's);
    the shim waits for that child itself, so it sees the real wait status, signals included."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWPID) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWPID): {os.strerror(errno)}")


def rootfs_of(container_id: str) -> Path:
    """Where rfsim.container mounts the container's root (in its own mount namespace)."""
    return Path(f"/tmp/.rfsim-ctr-{container_id[:12]}")  # nosec B108  # the path rfsim.container mounts, in the host's private /tmp


def copy_output(proc: "subprocess.Popen[bytes]", log_fd: int) -> None:
    """Until both of the container's streams close (PID 1's end closes them: the kernel
    kills the rest of its namespace with it)."""
    streams: Dict[int, int] = {proc.stdout.fileno(): STDOUT, proc.stderr.fileno(): STDERR}  # type: ignore[union-attr]
    while streams:
        ready, _, _ = select.select(list(streams), [], [])
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if not data:
                del streams[fd]
                continue
            os.write(log_fd, frame(streams[fd], data))


def run(container: docker_state.Container) -> int:
    log_fd = os.open(container.directory / docker_state.LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        unshare_pid()
        proc = subprocess.Popen(
            [sys.executable, "-m", "rfsim.container", str(container.directory / docker_state.CONFIG)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
    except OSError as exc:
        message = f"docker: Error response from daemon: failed to create task for container: {exc}: unknown.\n"
        os.write(log_fd, frame(STDERR, message.encode()))
        return _finish(container, RC_START_FAILED, error=str(exc))
    container.save_state(status="running", pid=proc.pid, pid_start=docker_state.start_time(proc.pid),
                         started=time.time())
    copy_output(proc, log_fd)
    status = proc.wait()
    os.close(log_fd)
    return _finish(container, status if status >= 0 else 128 - status)


def _finish(container: docker_state.Container, exit_code: int, error: str = "") -> int:
    container.save_state(status="exited", exit_code=exit_code, finished=time.time(), **({"error": error} if error else {}))
    try:
        rootfs_of(container.id).rmdir()  # only a mount point in the container's namespace, empty here
    except OSError:
        pass
    if container.config.get("remove"):
        with docker_state.daemon_lock():
            docker_state.remove(container)
    return 0


def main(argv: List[str]) -> int:
    for signum in (signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    container = docker_state.load(Path(argv[0]))
    if container is None:
        sys.stderr.write(f"shim: no container record in {argv[0]}\n")
        return 2
    container.save_state(shim_pid=os.getpid(), shim_start=docker_state.start_time(os.getpid()))
    return run(container)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
