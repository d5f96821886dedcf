"""`attach` and `kill`: the SSH-side view of an attempt the supervisor owns.

`attach` prints stored lines from a seq on, follows the file as it grows, and beats a
heartbeat so the controller can tell "host alive, PoC quiet" from "host gone". It ends
after the `exit` line, or with a synthesized `exit` (`lost: true`) when the supervisor
is gone without writing one: the host rebooted under it, or it was killed.

With the attempt's key (``--key-stdin``) only an exit line that carries its MAC ends the
stream: a PoC that appends an ``exit`` line of its own to events.jsonl cannot end it early.
Every stored line still goes out as it is (the controller verifies and counts), but for one
too long to be any line the supervisor writes, which goes out as a short unsigned stand-in.

`kill` decides from the supervisor's liveness alone, never from exit.json or an exit line
(files the PoC could write).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, List, Optional, Tuple

import attempt_mac
import attempt_state as state
import containers
from agent_protocol import UsageError, dumps, emit, emit_raw, event
from event_log import EventTail, parse_line
from supervisor import KILL_GRACE_S, STUCK_AFTER_KILL_S

POLL_S = 0.05  # how often a follower looks for new lines
LIVENESS_EVERY_S = 0.5
START_GRACE_S = 15.0  # a brand-new attempt may not have supervisor.pid yet
OVERRUN_MARGIN_S = 120.0  # the supervisor stops itself long before this
MAX_STORED_LINE = 512 * 1024  # the supervisor's longest line (a 64 KiB log line, escaped) is far shorter


def open_attempt(state_dir: str, attempt_id: str) -> Tuple[str, Dict[str, Any]]:
    """The attempt's directory and meta, or a usage error for an unknown id."""
    if not state.valid_attempt_id(attempt_id):
        raise UsageError("invalid attempt id %r" % attempt_id)
    directory = state.attempt_dir(state_dir, attempt_id)
    meta = state.read_json(os.path.join(directory, state.META))
    if meta is None:
        raise UsageError("unknown attempt id %r" % attempt_id)
    return directory, meta


def _alive(directory: str, attempt_id: str, meta: Dict[str, Any]) -> bool:
    if state.supervisor_alive(directory, attempt_id, meta):
        return True
    starting = not os.path.exists(os.path.join(directory, state.SUPERVISOR_PID))
    return starting and state.age_s(meta) < START_GRACE_S and meta.get("boot_id") == state.read_boot_id()


def _is_exit(raw: bytes, signer: Optional[attempt_mac.Signer] = None) -> bool:
    """An exit line (one the attempt's supervisor signed, when the key is known)."""
    if b'"k":"exit"' not in raw:
        return False
    line = parse_line(raw)
    return line is not None and line.get("k") == "exit" and (signer is None or signer.authentic(line))


def _emit_all(lines: List[bytes], signer: Optional[attempt_mac.Signer] = None) -> bool:
    """Print stored lines; True once the (authentic) exit line went out."""
    for raw in lines:
        if signer is not None and signer.key is not None and len(raw) > MAX_STORED_LINE:
            emit_raw(dumps(event("notice", what="unreadable_line", detail="%d bytes" % len(raw))).encode())
            continue
        emit_raw(raw)
        if _is_exit(raw, signer):
            return True
    return False


def lost_exit(meta: Dict[str, Any], seq: int, reason: str) -> Dict[str, Any]:
    created = meta.get("created")
    duration = round(time.time() - created, 3) if isinstance(created, (int, float)) else None
    return event(
        "exit", seq=seq, rc=None, signal=None, timed_out=False, killed=False, lost=True,
        duration_s=duration, reason=reason, rebooted=state.rebooted_since(meta),
    )


def attach(state_dir: str, attempt_id: str, start_seq: int, hb_s: float, key: Optional[bytes] = None) -> None:
    """Follow an attempt's events from `start_seq` until its exit line (bounded in time)."""
    directory, meta = open_attempt(state_dir, attempt_id)
    signer = attempt_mac.Signer(key)
    tail = EventTail(os.path.join(directory, state.EVENTS), start_seq)
    hb_every = max(0.05, hb_s * 0.75)  # beat early: scheduling jitter must not exceed --hb
    budget = float(meta.get("created", time.time())) + float(meta.get("timeout", 0)) - time.time()
    give_up = time.monotonic() + max(budget, 0.0) + OVERRUN_MARGIN_S
    last_hb = next_check = 0.0
    while True:
        lines = tail.read_new()
        if _emit_all(lines, signer):
            return
        now = time.monotonic()
        if now - last_hb >= hb_every:
            emit(event("hb", seq=tail.position))
            last_hb = now
        if not lines and now >= next_check:
            next_check = now + LIVENESS_EVERY_S
            if not _alive(directory, attempt_id, meta) or now > give_up:
                _finish_lost(tail, meta, "supervisor overran its deadline" if now > give_up else None, signer)
                return
        if not lines:
            time.sleep(max(0.0, min(POLL_S, last_hb + hb_every - time.monotonic())))


def _finish_lost(tail: EventTail, meta: Dict[str, Any], reason: Optional[str],
                 signer: Optional[attempt_mac.Signer] = None) -> None:
    """The supervisor is gone: print what it left, then an exit it never wrote (signed by
    ``emit`` with this process's key, when it has one)."""
    for _ in range(1000):  # bounded: drain what was written just before it died
        lines = tail.read_new()
        if _emit_all(lines, signer):
            return
        if not lines:
            break
    emit(lost_exit(meta, tail.position, reason or state.lost_reason(meta)))


def kill(state_dir: str, attempt_id: str) -> Dict[str, Any]:
    """Stop a running attempt; the supervisor records `killed: true`. An attempt that has a
    container has it killed by docker too, even with its supervisor dead (the container
    outlives the docker client), and so has an unknown id some running container is labelled
    with (its folder is gone, the container is not)."""
    try:
        directory, meta = open_attempt(state_dir, attempt_id)
    except UsageError:
        labelled = _labelled_containers(attempt_id)
        if not labelled:
            raise
        return _killed(attempt_id, False, [containers.kill(name) for name in labelled])
    if state.supervisor_alive(directory, attempt_id, meta):
        state.write_atomic(os.path.join(directory, state.KILL_REQUEST), "%f\n" % time.time())
        grace = float(meta.get("kill_grace_s", KILL_GRACE_S))
        ended = _wait_for_supervisor_end(directory, attempt_id, meta,
                                         grace + STUCK_AFTER_KILL_S + 5.0 + containers.KILL_TIMEOUT_S)
        exit_line = state.read_json(os.path.join(directory, state.EXIT)) or {}  # only what docker did: words
        stopped: List[Dict[str, Any]] = []
        if ended and "container" in exit_line:  # the supervisor stopped it: say what it found
            stopped = [{k: exit_line[k] for k in ("container", "container_killed", "container_error") if k in exit_line}]
        # and stop it ourselves too: a supervisor that had already ended its attempt (exit.json
        # written, process not yet gone) tried docker kill before a container came back or
        # while docker failed; killing a gone container is a harmless "not killed"
        return _killed(attempt_id, True, stopped + _stop_containers(meta, attempt_id))
    was_running = _kill_orphaned_poc(directory, attempt_id, meta)
    return _killed(attempt_id, was_running, _stop_containers(meta, attempt_id))


def _labelled_containers(attempt_id: str) -> List[str]:
    found, _ = containers.running_by_label()
    return [c["container"] for c in found if c["id"] == attempt_id]


def _stop_containers(meta: Dict[str, Any], attempt_id: str) -> List[Dict[str, Any]]:
    """docker kill of the attempt's container, and of any other running one labelled with it."""
    names = [str(meta["container"])] if meta.get("container") else []
    names += [n for n in _labelled_containers(attempt_id) if n not in names] if names else []
    return [containers.kill(name) for name in names]


def _killed(attempt_id: str, was_running: bool, stopped: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The `killed` line; with a container, whether docker killed one still running
    (was_running too: the container was the attempt, still on the GPU)."""
    reply: Dict[str, Any] = {"k": "killed", "id": attempt_id, "was_running": was_running}
    if stopped:
        killed = any(s.get("container_killed") for s in stopped)
        reply.update(container=stopped[0].get("container"), container_killed=killed,
                     was_running=was_running or killed)
        errors = [s["container_error"] for s in stopped if s.get("container_error")]
        if errors:
            reply["container_error"] = "; ".join(errors)
    return reply


def _wait_for_supervisor_end(directory: str, attempt_id: str, meta: Dict[str, Any], timeout_s: float) -> bool:
    """Until the supervisor is gone (it writes exit.json, then exits); exit.json alone proves
    nothing, the PoC could have written it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not state.supervisor_alive(directory, attempt_id, meta):
            return True
        time.sleep(0.05)
    return False


def _kill_orphaned_poc(directory: str, attempt_id: str, meta: Dict[str, Any]) -> bool:
    """No supervisor (it was killed): stop the PoC's group ourselves, same boot only."""
    if meta.get("boot_id") != state.read_boot_id():
        return False
    tail = EventTail(os.path.join(directory, state.EVENTS))
    starts = [parse_line(raw) for raw in tail.read_new(max_bytes=1 << 30) if b'"k":"start"' in raw]
    pgid = next((s.get("pgid") for s in starts if s and s.get("k") == "start"), None)
    if not isinstance(pgid, int) or not state.attempt_processes(pgid, attempt_id):
        return False
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + float(meta.get("kill_grace_s", KILL_GRACE_S))
    while time.monotonic() < deadline and state.attempt_processes(pgid, attempt_id):
        time.sleep(0.05)
    if state.attempt_processes(pgid, attempt_id):
        os.killpg(pgid, signal.SIGKILL)
    return True
