"""The init ``docker run --init`` puts at the container's PID 1 (docker ships tini for it).

PID 1 of a PID namespace gets only the signals it has a handler for, so a program run as
PID 1 that never installed one ignores the SIGTERM docker proxies to it. This init is PID 1
instead: it starts the command as its child (in a process group of its own), takes every
signal it can (blocked, then waited for with sigtimedwait, as tini does) and passes it on to
the child, reaps every zombie in the container, and when the child ends exits with its exit
status, or 128 + the number of the signal that killed it. A command that cannot be started
is 127 (not found) or 126 (not executable).

    python3 -I docker_init.py -- CMD ARG...       (exec'd by rfsim.container, as PID 1)

It runs inside the container's root by its path, so it imports nothing of rfsim.
Host-side module: standard library only.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Iterable, List, Optional, Set

# Never forwarded: the synchronous faults are the init's own; the terminal stops it ignores.
NOT_FORWARDED = {signal.SIGFPE, signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGTRAP,
                 signal.SIGSYS, signal.SIGTTIN, signal.SIGTTOU, signal.SIGKILL, signal.SIGSTOP}
WAIT_S = 1.0


def forwarded_signals() -> Set[signal.Signals]:
    return {s for s in signal.valid_signals() if isinstance(s, signal.Signals) and s not in NOT_FORWARDED}


def exit_status(status: int) -> int:
    """A wait status as a shell (and tini) reports it: the code, or 128 + the signal."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def spawn(argv: List[str], mask: Iterable[int]) -> int:
    pid = os.fork()
    if pid != 0:
        return pid
    try:  # the child: its own group, the signal mask and dispositions a fresh process has
        os.setpgid(0, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"[FATAL tini (2)] exec {argv[0]} failed: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(127 if exc.errno == errno.ENOENT else 126 if exc.errno == errno.EACCES else 1)
    os._exit(1)  # not reached


def reap(child: int) -> Optional[int]:
    """Collect every exited process; the child's exit status once it is among them."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == child:
            code = exit_status(status)


def main(argv: List[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write("[FATAL tini (1)] no command given: docker-init -- CMD ARG...\n")
        return 1
    signals = forwarded_signals()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    child = spawn(argv, before)
    while True:
        info = signal.sigtimedwait(signals, WAIT_S)
        if info is not None and info.si_signo != signal.SIGCHLD:
            try:
                os.kill(child, info.si_signo)
            except ProcessLookupError:
                pass
        code = reap(child)
        if code is not None:
            return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
