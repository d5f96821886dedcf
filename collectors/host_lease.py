"""Who owns this host right now, and which attempts are still alive on it.

Two controllers must never run attempts on one GPU at once (two laptops pointed at one
lab, or a campaign resumed while the old controller still runs). A lease file in the
state directory names the controller, campaign and pid that hold the host; a campaign
takes it before its first attempt and gives it back at the end. A lease held by another
campaign is never broken silently: only ``--break`` does that, and says whose it was.

Standard library only; never imports reprofleet.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

import attempt_state as state

LEASE = "lease.json"
LOCK = "lease.lock"


@contextmanager
def host_lock(state_dir: str) -> Iterator[None]:
    """Serialise lease changes and attempt starts on this host (other agents wait)."""
    os.makedirs(state_dir, exist_ok=True)
    with open(os.path.join(state_dir, LOCK), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_lease(state_dir: str) -> Optional[Dict[str, Any]]:
    lease = state.read_json(os.path.join(state_dir, LEASE))
    if lease is not None:
        lease["age_s"] = round(time.time() - float(lease.get("renewed") or lease.get("taken") or 0), 1)
    return lease


def _owner(lease: Dict[str, Any]) -> str:
    return "%s (campaign %s, pid %s, %.0f s ago)" % (
        lease.get("controller"), lease.get("campaign"), lease.get("pid"), lease.get("age_s", 0.0))


def acquire(state_dir: str, controller: str, campaign: str, pid: int, break_lease: bool) -> Dict[str, Any]:
    """Take or renew the lease; refuse one held by another campaign unless told to break it."""
    with host_lock(state_dir):
        held = read_lease(state_dir)
        broken = None
        if held is not None and held.get("campaign") != campaign:
            if not break_lease:
                return {"k": "lease", "ok": False, "held": held,
                        "error": "host is leased to %s; pass --break-lease to take it" % _owner(held)}
            broken = held
        now = time.time()
        taken = held.get("taken", now) if held is not None and broken is None else now
        lease = {"controller": controller, "campaign": campaign, "pid": pid, "taken": taken, "renewed": now,
                 "boot_id": state.read_boot_id()}
        state.write_json_atomic(os.path.join(state_dir, LEASE), lease)
        return {"k": "lease", "ok": True, "lease": lease, "broken": broken}


def release(state_dir: str, campaign: str) -> Dict[str, Any]:
    """Give the lease back, only if this campaign holds it."""
    with host_lock(state_dir):
        held = read_lease(state_dir)
        if held is None:
            return {"k": "lease", "ok": True, "released": False}
        if held.get("campaign") != campaign:
            return {"k": "lease", "ok": False, "held": held, "error": "lease belongs to %s" % _owner(held)}
        os.unlink(os.path.join(state_dir, LEASE))
        return {"k": "lease", "ok": True, "released": True}


def attempts(state_dir: str, limit: int = 200) -> List[Dict[str, Any]]:
    """The newest attempts on this host: running, finished (exit line) or lost."""
    root = os.path.join(state_dir, "attempts")
    try:
        names = os.listdir(root)
    except OSError:
        return []
    found = []
    for name in names:
        directory = os.path.join(root, name)
        meta = state.read_json(os.path.join(directory, state.META))
        if meta is None:
            continue
        exit_line = state.read_json(os.path.join(directory, state.EXIT))
        if state.supervisor_alive(directory, name, meta):
            status = "running"
        elif exit_line is not None:
            status = "exited"
        else:
            status = "lost"
        found.append({"id": name, "status": status, "created": meta.get("created"),
                      "age_s": round(state.age_s(meta), 1), "boot_id": meta.get("boot_id"),
                      "exit": exit_line, "reason": state.lost_reason(meta) if status == "lost" else None})
    found.sort(key=lambda a: a.get("created") or 0, reverse=True)
    return found[:limit]


def running(state_dir: str) -> List[Dict[str, Any]]:
    return [a for a in attempts(state_dir) if a["status"] == "running"]
