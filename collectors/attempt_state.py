"""Where an attempt lives on the host, and how to tell whether it is still alive.

Everything is under the state directory (``~/.cache/reprofleet`` unless told otherwise),
which survives reboots: after a wedge and a power cycle, `attach` must still find the
attempt and say, from what the files hold, that its supervisor died with the old boot.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Dict, List, Optional

STATE_DIR_ENV = "REPROFLEET_STATE_DIR"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
ATTEMPT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

META = "meta.json"
EVENTS = "events.jsonl"
OUTPUT = "output.log"
EXIT = "exit.json"
SUPERVISOR_PID = "supervisor.pid"
SUPERVISOR_LOG = "supervisor.log"
KILL_REQUEST = "kill.request"
WORK = "work"  # the PoC's working folder: the folder above it is the supervisor's alone

SUPERVISOR_ARG = "_supervise"  # the hidden subcommand the detached supervisor runs
ATTEMPT_ENV = "REPROFLEET_ATTEMPT"  # set in the PoC's environment: marks its processes as ours


def default_state_dir() -> str:
    return os.environ.get(STATE_DIR_ENV) or os.path.expanduser("~/.cache/reprofleet")


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def valid_env_name(name: object) -> bool:
    """An environment variable's name, as a shell would accept it."""
    return isinstance(name, str) and bool(ENV_NAME.match(name))


def valid_attempt_id(attempt_id: str) -> bool:
    """Ids become directory names: no slashes, no leading dot, bounded length."""
    return bool(ATTEMPT_ID.match(attempt_id))


def attempt_dir(state_dir: str, attempt_id: str) -> str:
    return os.path.join(state_dir, "attempts", attempt_id)


def read_boot_id(path: str = BOOT_ID_PATH) -> Optional[str]:
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def write_atomic(path: str, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: str, value: Dict[str, Any]) -> None:
    write_atomic(path, json.dumps(value, sort_keys=True, indent=1) + "\n")


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path) as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def remove_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def load_boot_baseline(path: str) -> Optional[Dict[str, Any]]:
    """What an apply saved in this boot (host settings as they were before it), or None.

    One saved in an earlier boot is removed: the reboot already put the host's own
    settings back, so writing it again could only do harm.
    """
    baseline = read_json(path)
    if baseline is not None and baseline.get("boot_id") == read_boot_id():
        return baseline
    remove_file(path)
    return None


def save_boot_baseline(path: str, fields: Dict[str, Any]) -> Dict[str, Any]:
    """Save ``fields`` with this boot's id (see load_boot_baseline); returns what was saved."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    baseline = {"boot_id": read_boot_id(), **fields}
    write_json_atomic(path, baseline)
    return baseline


def read_pid(path: str) -> Optional[int]:
    try:
        with open(path) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def pid_cmdline(pid: int) -> Optional[str]:
    """The command line of a live process, NUL separators turned into spaces."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace")


def pid_is_zombie(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def group_members(pgid: int) -> List[int]:
    """Pids whose process group is `pgid` (scanned from /proc)."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as handle:
                    fields = handle.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if len(fields) > 2 and fields[2] == str(pgid):
                members.append(int(name))
    return members


def attempt_processes(pgid: int, attempt_id: str) -> List[int]:
    """Members of `pgid` that carry this attempt's marker in their environment.

    A recorded pgid is only a number: once the PoC is gone it may name someone else's
    group. Only processes that inherited our marker are ever signalled.
    """
    if pgid <= 1:
        return []
    marker = ("%s=%s" % (ATTEMPT_ENV, attempt_id)).encode()
    owned = []
    for pid in group_members(pgid):
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            owned.append(pid)
    return owned


def supervisor_alive(directory: str, attempt_id: str, meta: Dict[str, Any]) -> bool:
    """True when this attempt's supervisor still runs in this boot.

    A pid alone is not enough: after a reboot, or long after, the pid may belong to
    another process. The boot_id recorded at start and the process's command line
    (which names the attempt) rule both out.
    """
    if meta.get("boot_id") and meta.get("boot_id") != read_boot_id():
        return False
    pid = read_pid(os.path.join(directory, SUPERVISOR_PID))
    if pid is None:
        return False
    cmdline = pid_cmdline(pid)
    if cmdline is None or SUPERVISOR_ARG not in cmdline or attempt_id not in cmdline:
        return False
    return not pid_is_zombie(pid)


def rebooted_since(meta: Dict[str, Any]) -> bool:
    """The host booted again since the attempt started (its boot_id changed)."""
    return bool(meta.get("boot_id")) and meta.get("boot_id") != read_boot_id()


def lost_reason(meta: Dict[str, Any]) -> str:
    """Why a supervisor is gone, in words the report can show."""
    if rebooted_since(meta):
        return "host rebooted (boot_id changed)"
    return "supervisor died without an exit line"


def age_s(meta: Dict[str, Any]) -> float:
    created = meta.get("created")
    return time.time() - created if isinstance(created, (int, float)) else float("inf")
