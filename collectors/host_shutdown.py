"""Is this host shutting down in an orderly way? The supervisor asks when its attempt ends.

A person's ``reboot``, unattended-upgrades' automatic reboot and the power button all end
the same way for an attempt: systemd stops the login session's scope, which sends SIGTERM
to every process in it (the supervisor and the PoC alike), and later systemd-shutdown sends
SIGTERM to whatever is left. That is not the bug reproducing, and it is not the controller's
``kill`` either (which writes ``kill.request`` and never signals the supervisor). The
evidence, the first one found wins:

* ``systemctl is-system-running`` prints ``stopping`` ("The manager is shutting down",
  systemctl(1)'s table of manager states);
* PID 1's name is ``systemd-shutdow`` (comm is cut at 15 characters): systemd has executed
  systemd-shutdown, which sends the final SIGTERM to every remaining process;
* systemd-logind's ``/run/systemd/shutdown/scheduled`` names a shutdown due within a minute
  (``USEC=`` microseconds since the epoch; ``MODE=`` reboot, poweroff ...), as
  ``shutdown -r TIME`` leaves it;
* ``/run/nologin`` exists: logind writes it five minutes before a scheduled shutdown
  ("Creating /run/nologin, blocking further logins..."), systemd-user-sessions.service when
  it stops during a shutdown.

On the simulated fleet ``$REPROFLEET_SYSTEM_STATE`` names a file that holds what
``systemctl is-system-running`` would print there; nothing else is asked then (the machine
that runs the fleet has its own /run and PID 1).

Host-side module: standard library only.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, Optional

STATE_ENV = "REPROFLEET_SYSTEM_STATE"
SCHEDULED = "/run/systemd/shutdown/scheduled"
NOLOGIN = "/run/nologin"
PID1_COMM = "/proc/1/comm"
SYSTEMCTL_TIMEOUT_S = 3.0
DUE_WITHIN_S = 60.0


def evidence() -> Optional[str]:
    """Words saying how this host is known to be shutting down, or None."""
    override = os.environ.get(STATE_ENV)
    if override:
        state = _read(override)
        return "the system is %s (%s)" % (state, override) if state == "stopping" else None
    checks: tuple[Callable[[], Optional[str]], ...] = (_manager_state, _pid1_is_shutdown, _scheduled_due, _nologin)
    for check in checks:
        found = check()
        if found:
            return found
    return None


def _manager_state() -> Optional[str]:
    try:
        done = subprocess.run(["systemctl", "is-system-running"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=SYSTEMCTL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    state = done.stdout.decode("utf-8", "replace").strip()
    return "systemctl is-system-running: stopping" if state == "stopping" else None


def _pid1_is_shutdown() -> Optional[str]:
    return "PID 1 is systemd-shutdown" if _read(PID1_COMM) == "systemd-shutdow" else None


def _scheduled_due(now: Optional[float] = None) -> Optional[str]:
    return scheduled_due(_read(SCHEDULED), time.time() if now is None else now)


def scheduled_due(text: Optional[str], now: float) -> Optional[str]:
    """Pure: logind's schedule file's words when its shutdown is due within a minute."""
    if not text:
        return None
    fields = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    try:
        due = int(fields.get("USEC", "")) / 1e6
    except ValueError:
        return None
    if due - now > DUE_WITHIN_S:
        return None
    return "a %s scheduled by systemd-logind is due (%s)" % (fields.get("MODE") or "shutdown", SCHEDULED)


def _nologin() -> Optional[str]:
    return "%s exists (logins are blocked for a shutdown)" % NOLOGIN if os.path.exists(NOLOGIN) else None


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as handle:
            return handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
