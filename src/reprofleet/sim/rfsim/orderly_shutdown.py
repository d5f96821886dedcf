"""An orderly reboot of a simulated host, as systemd does one: what it logs, and its state.

The hardware daemon (sim/hardware.py ``orderly_reboot``) writes "stopping" to ``hw/system_state``
(what ``systemctl is-system-running`` prints while the manager shuts down; the agent reads it
through ``$REPROFLEET_SYSTEM_STATE``), logs who asked and systemd-logind's words, sends SIGTERM
to every process of the host, and, once they are gone or the grace is over, logs systemd's and
systemd-shutdown's last lines and boots the host again. The wordings are the programs' own
(their sources are named in collectors/shutdown_evidence.py, which reads them back):

* a person: ``reboot requested from client PID N ('systemctl') (unit session-3.scope).``
  (systemd-logind, ``logind-shutdown.c``, v257+), then ``System is rebooting.``;
* unattended-upgrades: ``Found /var/run/reboot-required, rebooting`` (``unattended-upgrade``'s
  schedule_shutdown, with SyslogEnable on), ``The system will reboot now!`` (``logind-wall.c``),
  then ``System is rebooting.``.

Host-side module: standard library only.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from . import boots, hwio

STATE_FILE = "system_state"
SIGTERM_GRACE_S = 10.0  # systemd waits 90 s (DefaultTimeoutStopSec) before SIGKILL; a simulated host is quicker
BY = ("person", "unattended-upgrades")

Line = Tuple[str, Optional[int], str]  # identifier, pid, message

STOPPING: List[Line] = [
    ("systemd", 1, "Stopping session-3.scope - Session 3 of User root..."),
    ("systemd", 1, "Stopped target graphical.target - Graphical Interface."),
    ("systemd", 1, "Stopped target multi-user.target - Multi-User System."),
    ("systemd", 1, "Stopping ssh.service - OpenBSD Secure Shell server..."),
]
END_LINES: List[Line] = [
    ("systemd", 1, "Stopped session-3.scope - Session 3 of User root."),
    ("systemd", 1, "Finished systemd-reboot.service - System Reboot."),
    ("systemd", 1, "Reached target reboot.target - System Reboot."),
    ("systemd", 1, "Shutting down."),
    ("systemd-shutdown", 1, "Syncing filesystems and block devices."),
    ("systemd-shutdown", 1, "Sending SIGTERM to remaining processes..."),
    ("systemd-journald", 412, "Received SIGTERM from PID 1 (systemd-shutdow)."),
    ("systemd-journald", 412, "Journal stopped"),
]


def begin_lines(by: str) -> List[Line]:
    """Who asked, logind's words, and the first units stopping."""
    if by == "unattended-upgrades":
        asked: List[Line] = [
            ("unattended-upgrade", 2431, "Found /var/run/reboot-required, rebooting"),
            ("systemd-logind", 803, "The system will reboot now!"),
        ]
    else:
        asked = [("systemd-logind", 803, "reboot requested from client PID 4242 ('systemctl') (unit session-3.scope).")]
    return asked + [("systemd-logind", 803, "System is rebooting.")] + STOPPING


def log(journal: Path, lines: Sequence[Line], started: float) -> None:
    for ident, pid, message in lines:
        boots.append_journal(journal, ident, message, pid=pid, started=started)


def set_state(hw: Path, state: str) -> None:
    """What ``systemctl is-system-running`` prints on this host now."""
    tmp = hw / f".{STATE_FILE}.tmp"
    tmp.write_text(state + "\n")
    tmp.replace(hw / STATE_FILE)


def state(hw: Optional[Path] = None) -> str:
    try:
        return ((hw or hwio.hw_dir()) / STATE_FILE).read_text().strip()
    except OSError:
        return "unknown"
