"""docker.socket of a simulated host: the daemon's socket made at boot, before sshd, and the
daemon started beside it, as systemd does on a Debian host with ``docker.io`` installed.

Debian's package enables two units: ``docker.socket`` (``ListenStream=/run/docker.sock``,
``SocketMode=0660``, ``SocketGroup=docker``; in ``sockets.target``, so the socket exists early
in the boot) and ``docker.service`` (``ExecStart=/usr/sbin/dockerd -H fd://``, in
``multi-user.target`` beside ``ssh.service``, neither waiting for the other). A login can
therefore arrive before the daemon is up, and a ``docker`` command it runs then does not fail:
its connection waits in the socket's backlog until dockerd accepts it. This module gives the
simulated host the same: it binds and listens on the socket, then forks; the child starts a new
session and executes dockerd with the listening socket as file descriptor 3 and
``LISTEN_FDS=1``, ``LISTEN_PID=<its own pid>`` (sd_listen_fds(3): the protocol systemd passes
sockets by, which ``dockerd -H fd://`` reads); the parent returns at once, so boot.sh goes on
to become sshd.

Usage (boot.sh): ``python3 -m rfsim.docker_socket SOCKET GROUP -- DOCKERD [ARGS...]``, GROUP
empty for root only. Host-side module: standard library only.
"""

from __future__ import annotations

import grp
import os
import socket
import sys
from typing import List, Sequence

SD_LISTEN_FDS_START = 3  # sd_listen_fds(3): passed sockets begin at this descriptor
SOCKET_MODE = 0o660  # docker.socket's SocketMode


def listen(path: str, group: str) -> socket.socket:
    """The daemon's socket, bound and listening, owned root:GROUP with docker.socket's mode."""
    try:
        os.unlink(path)  # /run is a tmpfs on a real host: nothing of the last boot is left there
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, SOCKET_MODE)
    os.chown(path, 0, grp.getgrnam(group).gr_gid if group else 0)
    sock.listen(socket.SOMAXCONN)
    return sock


def activation_env(pid: int) -> dict:
    """What systemd sets for a socket-activated service with one socket."""
    return {**os.environ, "LISTEN_FDS": "1", "LISTEN_PID": str(pid), "LISTEN_FDNAMES": "docker.socket"}


def start(sock: socket.socket, command: Sequence[str]) -> int:
    """Fork; the child becomes the daemon with the socket as descriptor 3. Returns the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()  # a service: not in the session of the shell that becomes sshd
        os.dup2(sock.fileno(), SD_LISTEN_FDS_START)
        os.set_inheritable(SD_LISTEN_FDS_START, True)
        os.execve(command[0], list(command), activation_env(os.getpid()))
    except OSError as exc:
        sys.stderr.write("docker_socket: cannot start %s: %s\n" % (command[0], exc))
    os._exit(127)


def parse(argv: Sequence[str]) -> tuple:
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit("usage: python3 -m rfsim.docker_socket SOCKET GROUP -- DOCKERD [ARGS...]")
    return argv[0], argv[1], list(argv[3:])


def main(argv: List[str]) -> int:
    path, group, command = parse(argv)
    start(listen(path, group), command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
