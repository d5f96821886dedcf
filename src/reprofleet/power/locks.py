"""Who may talk to a power device now: one lock per thing the device serialises.

Two layers, both keyed by what the *device* serialises, not by how the inventory spells
its address (``10.0.0.5`` and ``10.0.0.5:161`` are one SNMP agent; every PDU behind one
pdudaemon is its own device, since pdudaemon queues per PDU itself):

- a request lock per device: cheap PDUs drop or garble concurrent requests. A thread lock
  inside the process, plus a file lock when a lock folder is given, so a campaign and a
  by-hand ``invoke power`` never talk to one device at the same moment;
- an outlet lock (file lock only) held for a whole action, a cycle included: a manual
  ``invoke power`` on a host waits for the campaign's cycle of that host to end, and the
  other way round, instead of switching "on" in the middle of someone else's dwell.

The lock folder lives beside the reports (``reports/.power-locks``): every process that
writes those reports shares it.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from reprofleet.errors import PowerError
from reprofleet.records.private_files import make_folder, open_file

LOCK_FOLDER = ".power-locks"
_POLL_S = 0.05

_THREAD_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def thread_lock(key: str) -> threading.Lock:
    """The process-wide lock of ``key``."""
    with _GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


def lock_folder(reports: Path | str) -> Path:
    """Where the file locks of everything writing under ``reports`` live."""
    return Path(reports) / LOCK_FOLDER


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", key).strip("_")[:120] + ".lock"


@contextmanager
def file_lock(folder: Path | None, key: str, wait_s: float, what: str) -> Iterator[None]:
    """Hold an flock on ``folder/<key>.lock`` (no-op when folder is None); PowerError after ``wait_s``.

    flock belongs to the open file, so two holders in one process exclude each other too.
    """
    if folder is None:
        yield
        return
    # private, and never through a link planted in the lock folder (records/private_files.py)
    fd = open_file(make_folder(folder) / _file_name(key), os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise PowerError(f"{what}: another process held {key} for more than {wait_s:g}s") from None
                time.sleep(_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def device_lock(folder: Path | None, key: str, wait_s: float, what: str) -> Iterator[None]:
    """The request lock of one device: this process's threads, then other processes."""
    lock = thread_lock(key)
    if not lock.acquire(timeout=wait_s):
        raise PowerError(f"{what}: another command held {key} for more than {wait_s:g}s")
    try:
        with file_lock(folder, f"device-{key}", wait_s, what):
            yield
    finally:
        lock.release()


def address_key(address: str, default_scheme: str, default_ports: dict[str, int]) -> str:
    """``HTTP://10.0.0.5/`` and ``10.0.0.5:80`` -> ``10.0.0.5:80``: host and port, default port filled in."""
    text = address.strip().lower().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = default_scheme, text
    rest = rest.split("/", 1)[0]
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail.lstrip(":")
    else:
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit() or ":" in host:
            host, port = rest, ""
    if not port:
        port = str(default_ports.get(scheme, default_ports.get(default_scheme, 0)))
    return f"{host}:{port}"
