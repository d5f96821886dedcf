"""The shell commands `invoke facts --bug-report` runs on a host, with the parser of the one
whose output is data (campaign/bug_report.py decides what to do with their results).

``nvidia-bug-report.sh`` ships with the driver (Debian: /usr/lib/nvidia/current/ in
nvidia-driver-bin), refuses to run unless root, and writes its archive into the folder it is
run from; so it is found on a search path that includes the sbin folders and Debian's folder,
and run in a fresh temporary folder, as root or through ``sudo -n``, ended by the host's own
``timeout``. Every path is shell-quoted: a host's ``$TMPDIR`` and the script's path are the
host's words.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

SCRIPT = "nvidia-bug-report.sh"
SEARCH = "$PATH:/usr/sbin:/sbin:/usr/local/sbin:/usr/lib/nvidia/current:/usr/lib/nvidia"
PROBE = f'id -u; id -un; PATH="{SEARCH}" command -v {SCRIPT} || true'
MAKE_FOLDER = 'mktemp -d "${TMPDIR:-/tmp}/reprofleet-bug-report.XXXXXX"'  # mktemp(1)'s template: six X
KILL_AFTER_S = 10  # `timeout -k`: a script that ignores TERM is killed this long after

__all__ = ["KILL_AFTER_S", "MAKE_FOLDER", "PROBE", "Probe", "SCRIPT", "list_folder", "parse_probe", "remove_folder",
           "run_script"]


@dataclass(frozen=True)
class Probe:
    """Who the login is and where the script is (None: not on this host)."""

    root: bool
    user: str
    script: str | None


def parse_probe(stdout: str) -> Probe:
    """:data:`PROBE`'s three lines: uid, user name, the script's path (absent: empty)."""
    lines = [line.strip() for line in stdout.splitlines()]
    uid, user, script = (lines + ["", "", ""])[:3]
    return Probe(root=uid == "0", user=user or "USER", script=script if script.startswith("/") else None)


def run_script(folder: str, probe: Probe, timeout_s: float) -> str:
    """The script in ``folder``, as root or through ``sudo -n``, ended by the host after ``timeout_s``."""
    assert probe.script is not None
    script = shlex.quote(probe.script)
    as_root = script if probe.root else f"sudo -n {script}"
    return f"cd {shlex.quote(folder)} && timeout -k {KILL_AFTER_S} {max(1, round(timeout_s))} {as_root} </dev/null"


def list_folder(folder: str) -> str:
    return f"ls -1 {shlex.quote(folder)}"


def remove_folder(folder: str) -> str:
    return f"rm -rf {shlex.quote(folder)}"
