"""Starting the supervisor so that nothing ties it to the SSH session that started it.

sshd keeps a session open while any process holds the write end of the session's
stdout/stderr pipes, and it may signal the session's process group when the connection
drops. So the supervisor is double-forked (it is not a child of the `run` process and
not a session leader that could acquire a terminal), has its own session, reads
/dev/null, writes a log file, and holds no other descriptor of its parent's.
"""

from __future__ import annotations

import os
import sys
from typing import List

from attempt_state import SUPERVISOR_PID, write_atomic


def close_fds_above_2(keep: int = -1) -> None:
    """Close every descriptor above 2 but `keep` (listed from /proc; a bounded range otherwise)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def redirect_stdio(stdout_path: str, stdin_fd: int = -1) -> None:
    """0 from `stdin_fd` (the secrets pipe) or /dev/null; 1 and 2 appended to `stdout_path`."""
    null = os.open(os.devnull, os.O_RDONLY) if stdin_fd < 0 else stdin_fd
    log = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in (null, log):
        if fd > 2:
            os.close(fd)


def spawn_supervisor(argv: List[str], attempt_directory: str, log_path: str, stdin_data: bytes = b"") -> int:
    """Double-fork + setsid, write supervisor.pid, exec `argv`; returns the supervisor pid.

    `stdin_data` (the attempt's secrets, a few KiB at most) is what the supervisor reads on
    its stdin: a pipe filled and closed before the fork, so no file ever holds it.

    The grandchild reports its pid through a close-on-exec pipe after supervisor.pid is
    on disk; the pipe reaches EOF only when exec succeeded, so once this returns the pid
    file names a process whose command line is the supervisor's, and `attach` can judge
    its liveness.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    stdin_fd = _filled_pipe(stdin_data) if stdin_data else -1
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:  # intermediate child: new session, fork again, leave
        try:
            os.close(read_end)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            _become_supervisor(argv, attempt_directory, log_path, write_end, stdin_fd)
        finally:
            os._exit(127)
    os.close(write_end)
    if stdin_fd >= 0:
        os.close(stdin_fd)
    os.waitpid(first, 0)
    with os.fdopen(read_end, "rb") as pipe:
        reported = pipe.read().decode("ascii", "replace").strip()
    if not reported.isdigit():
        raise OSError("supervisor did not start: %r" % reported)
    return int(reported)


def _filled_pipe(data: bytes) -> int:
    """The read end of a pipe that holds `data` and reaches EOF after it."""
    read_end, write_end = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
    finally:
        os.close(write_end)
    return read_end


def _become_supervisor(argv: List[str], directory: str, log_path: str, report_fd: int, stdin_fd: int = -1) -> None:
    """In the grandchild: record the pid, tell the parent, cut every tie, exec."""
    pid = os.getpid()
    try:
        os.chdir(directory)
        write_atomic(os.path.join(directory, SUPERVISOR_PID), "%d\n" % pid)
        os.write(report_fd, b"%d" % pid)
    except OSError as exc:
        os.write(report_fd, ("error: %s" % exc).encode())
        os._exit(127)
    redirect_stdio(log_path, stdin_fd)
    close_fds_above_2(keep=report_fd)  # report_fd is close-on-exec: exec closes it
    os.set_inheritable(report_fd, False)
    os.umask(0o022)
    os.execv(argv[0], argv)
