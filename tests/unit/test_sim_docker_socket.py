"""docker.socket of a simulated host (sim/rfsim/docker_socket.py): the socket exists and takes
connections before the daemon runs, and the daemon gets it as systemd passes sockets
(sd_listen_fds(3): descriptor 3, LISTEN_FDS=1, LISTEN_PID its own pid). The "daemon" here is a
small Python program that checks exactly that, accepts the connection that waited, and answers."""

from __future__ import annotations

import os
import socket
import stat
import sys
import textwrap
import time
from pathlib import Path

from reprofleet.sim.rfsim import docker_socket

DAEMON = textwrap.dedent("""\
    import os, socket, sys, time
    time.sleep(float(sys.argv[1]))  # a daemon that takes a while to start
    assert os.environ["LISTEN_PID"] == str(os.getpid()) and os.environ["LISTEN_FDS"] == "1", os.environ
    server = socket.socket(fileno=3)
    conn, _ = server.accept()
    conn.sendall(b"pid=%d sid=%d" % (os.getpid(), os.getsid(0)))
    conn.close()
""")


def test_a_client_that_comes_before_the_daemon_waits_in_the_backlog_and_is_answered_by_it(tmp_path: Path) -> None:
    daemon = tmp_path / "daemon.py"
    daemon.write_text(DAEMON)
    path = str(tmp_path / "docker.sock")
    sock = docker_socket.listen(path, "")
    assert stat.S_ISSOCK(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o660
    pid = docker_socket.start(sock, [sys.executable, str(daemon), "0.5"])
    sock.close()  # the parent (boot.sh's step) lets go of it at once: the daemon holds it now
    began = time.monotonic()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(20)
    client.connect(path)  # in the backlog: connected before the daemon runs
    answer = client.recv(100).decode()
    client.close()
    assert time.monotonic() - began >= 0.4  # answered by the daemon once it was up, not refused
    assert answer.startswith(f"pid={pid} ")  # LISTEN_PID was the daemon's own pid (exec kept the fork's)
    assert answer.endswith(f"sid={pid}")  # a session of its own: not sshd's child
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_the_command_line_is_socket_group_and_the_daemon_after_a_double_dash() -> None:
    assert docker_socket.parse(["/run/d.sock", "lab", "--", "/usr/sbin/dockerd", "-H", "fd://"]) == (
        "/run/d.sock", "lab", ["/usr/sbin/dockerd", "-H", "fd://"])
    try:
        docker_socket.parse(["/run/d.sock", "--", "/usr/sbin/dockerd"])
    except SystemExit as exc:
        assert "usage" in str(exc)
    else:
        raise AssertionError("a missing group was accepted")
