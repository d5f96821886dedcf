"""Who owns this host right now, and which attempts are still alive on it.

Two controllers must never run attempts on one GPU at once (two laptops pointed at one
lab, or a campaign resumed on another machine while the old controller, suspended, still
lives). A lease file in the state directory names the controller, campaign and pid that
hold the host, with a random token per controller run and a TTL; a controller takes it
before its first attempt, renews it with every attempt and gives it back at the end. A
live lease under another token is never broken silently: only ``--break`` does that, and
says whose it was. Every call that changes the host (``run``, ``kill``, ``policy``,
``host-debug`` and ``netconsole`` apply|restore, ``cache`` have|receive|materialize, ``runtime``
image|venv) carries the caller's token and is refused with a stale one (fencing: the controller
whose lease was taken over can no longer touch the host); a by-hand call without a token is
refused on a leased host unless it says ``--ignore-lease``. The token travels on stdin, never on
a command line, and the lease file is readable by its owner only (0600 in a 0700 folder): the
token is what fences, so another user of the host must not be able to read it.

Standard library only; never imports reprofleet.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

import attempt_state as state

LEASE = "lease.json"
LOCK = "lease.lock"


def private_dir(state_dir: str) -> None:
    """The state folder, made or narrowed to 0700: it holds the lease's token."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    if os.stat(state_dir).st_mode & 0o077:
        os.chmod(state_dir, 0o700)


def write_private_json(path: str, value: Dict[str, Any]) -> None:
    """``value`` as JSON in a 0600 file, replaced atomically (never through a planted link)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    state.remove_file(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(value, sort_keys=True, indent=1) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


@contextmanager
def host_lock(state_dir: str) -> Iterator[None]:
    """Serialise lease changes and attempt starts on this host (other agents wait)."""
    private_dir(state_dir)
    with open(os.path.join(state_dir, LOCK), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_lease(state_dir: str) -> Optional[Dict[str, Any]]:
    """The lease file as written (with its token) plus its ``age_s`` since the last renewal."""
    lease = state.read_json(os.path.join(state_dir, LEASE))
    if lease is not None:
        lease["age_s"] = round(time.time() - float(lease.get("renewed") or lease.get("taken") or 0), 1)
    return lease


DEFAULT_TTL_S = 3600.0  # a lease not renewed this long fences no one (the controller that held it is gone)


class LeaseRefused(Exception):
    """A call carried no token, or a stale one, while another controller holds the lease.

    ``code`` is ``leased`` (a by-hand call on a leased host: pass --ignore-lease to act anyway)
    or ``fenced`` (a controller whose lease was taken over: it must stop, never act again).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _owner(lease: Dict[str, Any]) -> str:
    return "%s (campaign %s, pid %s, renewed %.0f s ago)" % (
        lease.get("controller"), lease.get("campaign"), lease.get("pid"), lease.get("age_s", 0.0))


def expired(lease: Dict[str, Any]) -> bool:
    """A lease whose holder stopped renewing it for its TTL (or one without a token, written by
    an agent before fencing existed) holds nothing."""
    if not lease.get("token"):
        return True
    return float(lease.get("age_s", 0.0)) > float(lease.get("ttl_s") or DEFAULT_TTL_S)


def expires_in(lease: Dict[str, Any]) -> float:
    return max(0.0, float(lease.get("ttl_s") or DEFAULT_TTL_S) - float(lease.get("age_s", 0.0)))


def acquire(state_dir: str, controller: str, campaign: str, pid: int, break_lease: bool,
            token: str, ttl_s: float = DEFAULT_TTL_S) -> Dict[str, Any]:
    """Take or renew the lease. One held under another token is refused while it is live,
    whatever its campaign (a second controller of the same campaign too), unless told to break it."""
    with host_lock(state_dir):
        held = read_lease(state_dir)
        broken = None
        if held is not None and held.get("token") != token:
            if not expired(held) and not break_lease:
                return {"k": "lease", "ok": False, "held": public(held),
                        "error": "host is leased to %s; it expires in %.0f s unless renewed; pass --break-lease "
                                 "to take it" % (_owner(held), expires_in(held))}
            broken = dict(public(held), expired=expired(held))
        now = time.time()
        taken = held.get("taken", now) if held is not None and broken is None else now
        lease = {"controller": controller, "campaign": campaign, "pid": pid, "taken": taken, "renewed": now,
                 "ttl_s": float(ttl_s), "token": token, "boot_id": state.read_boot_id()}
        write_private_json(os.path.join(state_dir, LEASE), lease)
        return {"k": "lease", "ok": True, "lease": public(lease), "broken": broken}


def public(lease: Dict[str, Any]) -> Dict[str, Any]:
    """A lease as other callers may see it: the token is the holder's secret (it fences)."""
    return {k: v for k, v in lease.items() if k != "token"}


def check(state_dir: str, token: Optional[str], ignore_lease: bool = False, renew: bool = False) -> None:
    """Raise LeaseRefused unless this call may act on the GPU.

    A caller with a token (a campaign's controller) must hold the lease under it, expired or
    not (nobody took it): a lease broken by another controller, or given back by it since,
    fences this one for good, so it never runs a slot the other may have run. A by-hand
    caller (no token) may act when no live lease is held, or when it said --ignore-lease.
    Callers hold ``host_lock`` when the check and the action must be one step.
    """
    held = read_lease(state_dir)
    if token:
        if held is not None and held.get("token") == token:
            if renew:
                held = dict(held, renewed=time.time())
                held.pop("age_s", None)
                write_private_json(os.path.join(state_dir, LEASE), held)
            return
        if held is None:
            raise LeaseRefused("fenced", "this controller's lease on this host was broken and given back by "
                                         "another controller: it must not act on this host any more")
        raise LeaseRefused("fenced", "this controller's lease was taken over by %s: it must not act on this "
                                     "host any more" % _owner(held))
    if held is None or expired(held):
        return
    if not ignore_lease:
        raise LeaseRefused("leased", "host is leased to %s (expires in %.0f s unless renewed): pass "
                                     "--ignore-lease to act anyway" % (_owner(held), expires_in(held)))


def release(state_dir: str, token: str) -> Dict[str, Any]:
    """Give the lease back, only if this caller's token holds it."""
    with host_lock(state_dir):
        held = read_lease(state_dir)
        if held is None:
            return {"k": "lease", "ok": True, "released": False}
        if held.get("token") != token:
            return {"k": "lease", "ok": False, "held": public(held), "error": "lease belongs to %s" % _owner(held)}
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
