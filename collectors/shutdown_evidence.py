"""Was the previous boot shut down in an orderly way, and who asked? Read from its journal.

A person's ``reboot``, unattended-upgrades' automatic reboot or the power button leave the
same trace: systemd stops every unit and says so, executes systemd-shutdown, and the kernel
restarts. A freeze, a watchdog reset or a power cut leave none of it, and a panic is never
orderly whatever else the boot says. The lines, as their programs write them (the source
named beside each pattern):

* systemd (PID 1, ``src/core``): ``Reached target reboot.target - System Reboot.`` (unit name
  and description since v251; ``Reached target Reboot.`` / ``Reached target System Reboot.``
  before), the same for poweroff, halt, kexec and shutdown.target (``units/*.target``
  descriptions), ``Shutting down.`` just before it executes systemd-shutdown, and the
  ``Stopped target ...`` lines of the stop (kept as context: they decide nothing alone);
* systemd-shutdown (``src/shutdown/shutdown.c``): ``Syncing filesystems and block devices.``,
  ``Sending SIGTERM to remaining processes...``, ``Rebooting.``, ``Powering off.`` ...;
* the kernel (``kernel/reboot.c``, ``pr_fmt`` "reboot: "): ``reboot: Restarting system``,
  ``reboot: Power down``, ``reboot: System halted`` (rarely in the journal, which stopped
  before; in pstore's console or netconsole);
* systemd-logind (``src/login/logind-dbus.c`` bus_manager_log_shutdown, ``logind-action.c``):
  ``System is rebooting.`` / ``System is powering down.`` / ``System is halting.`` /
  ``System is rebooting with kexec.`` / ``System is shutting down.``, with `` (wall message)``
  before the period when one was given.

Who asked:

* unattended-upgrades (``unattended-upgrade`` schedule_shutdown(), in the journal as
  ``unattended-upgrade: ...`` when ``Unattended-Upgrade::SyslogEnable`` is on):
  ``Found /var/run/reboot-required, rebooting``;
* systemd-logind (``logind-shutdown.c`` log_shutdown_caller, v257+):
  ``reboot requested from client PID 4242 ('systemctl') (unit session-3.scope).``; the unit
  ``apt-daily-upgrade.service`` is unattended-upgrades' own ``shutdown -r``;
* systemd-logind (``logind-button.c``): ``Power key pressed short.`` / ``Power key pressed long.``
  (``Power key pressed.`` before v250), ``Reboot key pressed short.``;
* systemd-logind (``logind-wall.c`` warn_wall): ``The system will reboot at <time>!`` /
  ``The system will reboot now!`` for a ``shutdown -r TIME``, and (``logind-dbus.c``)
  ``Creating /run/nologin, blocking further logins...`` five minutes before it.

A kernel watchdog's ``watchdog: watchdog0: watchdog did not stop!`` matches none of these:
it is printed on reboots of every kind and says nothing of who or how.

Pure but for ``journal_lines``. Host-side module: standard library only.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any, Dict, Iterable, List, Optional, Tuple

JOURNAL_TIMEOUT_S = 30.0
TAIL_ENTRIES = 3000  # the end of the previous boot: the stop sequence is its last few hundred lines
ASKERS = ("systemd-logind", "unattended-upgrade", "unattended-upgrades")
MAX_LINES = 40

ENTRY = re.compile(r"^\S+\s+\S+\s+(?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?:\s?(?P<message>.*)$")

REACHED = re.compile(r"^Reached target (?:(?:reboot|poweroff|halt|kexec|shutdown)\.target - )?"
                     r"(?:System )?(?:Reboot(?: via kexec)?|Power[- ]Off|Halt|Shutdown)\.$")
STOPPED_TARGET = re.compile(r"^Stopped target ")
KERNEL_REBOOT = re.compile(r"^reboot: (?:Restarting system|Power down|System halted)")
LOGIND_SHUTDOWN = re.compile(r"^System is (?:rebooting with kexec|rebooting|powering down|halting|shutting down)"
                             r"(?: \((?P<wall>.*)\))?\.$")
UNATTENDED = re.compile(r"^Found /(?:var/)?run/reboot-required, rebooting")
REQUESTED = re.compile(r"^(?P<what>\S+) requested from client PID (?P<pid>\d+)(?: \('(?P<comm>[^']*)'\))?"
                       r"(?: \(unit (?P<unit>[^)]+)\))?\.$")
KEY = re.compile(r"^(?P<key>Power|Reboot) key pressed(?: short| long)?\.$")
SCHEDULED = re.compile(r"The system will (?P<what>.+?) (?:at (?P<when>.+)|now)!$")
NOLOGIN = "Creating /run/nologin, blocking further logins..."
UPGRADE_UNITS = ("apt-daily-upgrade.service", "unattended-upgrades.service")
BY_UPGRADE = "unattended-upgrades (its automatic reboot after an upgrade)"


def entries(lines: Iterable[str]) -> List[Tuple[str, str, str]]:
    """(identifier, message, line) of each journal line (``-o short-iso``); a continuation line
    of a multi-line message (indented) keeps the identifier of the line before it."""
    out: List[Tuple[str, str, str]] = []
    ident = ""
    for line in lines:
        match = ENTRY.match(line)
        if match and not line[:1].isspace():
            ident = match.group("ident")
            out.append((ident, match.group("message").strip(), line))
        elif line.strip():
            out.append((ident, line.strip(), line))
    return out


def is_stop_line(ident: str, message: str) -> bool:
    """A line only an orderly shutdown writes."""
    if ident == "systemd-shutdown":
        return True
    if ident == "systemd":
        return bool(REACHED.match(message)) or message == "Shutting down."
    if ident == "systemd-logind":
        return bool(LOGIND_SHUTDOWN.match(message))
    return ident == "kernel" and bool(KERNEL_REBOOT.match(message))


def asker(ident: str, message: str) -> Optional[Tuple[int, str]]:
    """(rank, words) when the line says who asked for the shutdown; a lower rank says it better."""
    if ident.startswith("unattended-upgrade") and UNATTENDED.match(message):
        return 0, BY_UPGRADE
    if ident != "systemd-logind":
        return None
    requested = REQUESTED.match(message)
    if requested:
        unit = requested.group("unit") or ""
        if unit in UPGRADE_UNITS:
            return 0, BY_UPGRADE
        who = requested.group("comm") or "a process"
        return 1, "%s (PID %s%s) asked systemd-logind for a %s" % (
            who, requested.group("pid"), ", unit %s" % unit if unit else "", requested.group("what"))
    key = KEY.match(message)
    if key:
        return 2, "the %s key" % ("power" if key.group("key") == "Power" else "reboot")
    scheduled = SCHEDULED.search(message)
    if scheduled:
        return 3, "a %s scheduled through systemd-logind (%s)" % (scheduled.group("what"), message)
    if message == NOLOGIN:
        return 4, "a shutdown scheduled through systemd-logind"
    stopping = LOGIND_SHUTDOWN.match(message)
    if stopping and stopping.group("wall"):
        return 5, "a shutdown with the message %r" % stopping.group("wall")
    return None


def evidence(lines: Iterable[str], panicked: bool = False) -> Dict[str, Any]:
    """``{"orderly", "by", "lines"}`` of a boot's journal lines (pure). ``panicked``: the boot's
    kernel log or pstore holds a panic, and a panic is never an orderly shutdown."""
    kept: List[str] = []
    stopped = False
    best: Optional[Tuple[int, str]] = None
    for ident, message, line in entries(lines):
        stop = is_stop_line(ident, message)
        asked = asker(ident, message)
        stopped = stopped or stop
        if asked is not None and (best is None or asked[0] <= best[0]):
            best = asked
        if (stop or asked is not None or (ident == "systemd" and STOPPED_TARGET.match(message))) \
                and line not in kept:
            kept.append(line)
    orderly = stopped and not panicked
    return {"orderly": orderly, "by": best[1] if orderly and best else None, "lines": kept[-MAX_LINES:]}


def journal_lines(*selection: str, boot: str = "-1") -> Tuple[Optional[List[str]], Optional[str]]:
    """``journalctl -b BOOT -o short-iso --no-pager SELECTION`` as lines, or (None, why not)."""
    argv = ["journalctl", "-b", boot, "-o", "short-iso", "--no-pager", *selection]
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=JOURNAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "journalctl timed out after %gs" % JOURNAL_TIMEOUT_S
    except OSError as exc:
        return None, "journalctl: %s" % exc
    if result.returncode != 0:
        return None, result.stderr.decode("utf-8", "replace").strip() or "journalctl exit %d" % result.returncode
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    return [line for line in lines if line.strip() and line.strip() != "-- No entries --"], None


def previous_boot(kernel_lines: Iterable[str], panicked: bool, boot: str = "-1") -> Dict[str, Any]:
    """A boot's shutdown evidence (the previous one, or the one ``boot`` names: the boot the
    attempt ran in, which is not boot -1 when a power cycle followed a reboot): the end of its
    whole journal, what systemd-logind and unattended-upgrades said in all of it, and its
    kernel log (already read)."""
    tail, why = journal_lines("-n", str(TAIL_ENTRIES), boot=boot)
    if tail is None:
        return {"orderly": False, "by": None, "lines": [], "available": False, "reason": why}
    askers, _ = journal_lines(*[flag for ident in ASKERS for flag in ("-t", ident)], boot=boot)
    lines = (askers or []) + tail + [line for line in kernel_lines if KERNEL_REBOOT.search(line)]
    return {**evidence(lines, panicked), "available": True}
