"""The simulated docker daemon's records: one folder per container, kept on the host.

A real container belongs to the daemon (containerd and its shim), not to the ``docker run``
client that asked for it: it outlives the client, and ``docker ps`` / ``docker kill`` reach
it from any shell. So each container is a folder under ``/var/tmp/rfsim-docker/containers/``
(per simulated host, survives the client and reboots, as /var/lib/docker does):

    containers/<64-hex id>/config.json   id, name, image, labels, command, the run's plan,
                                         created, the host's boot_id, remove (--rm), init
    containers/<id>/state.json           status created|running|exited, pid (the container's
                                         PID 1, host numbering) and its start time, the
                                         shim's pid and start time, exit_code, times
    containers/<id>/container.log        stdout and stderr, framed as docker's stdcopy
                                         (8-byte header: stream 1|2, 0, 0, 0, big-endian size)
    removed/<id>/                        a --rm container after its end: its name is free, and
                                         the attached client still reads its exit code there

A container is running only while its PID 1 lives, judged by pid, start time and boot_id
(a pid alone may name another process; a record from an earlier boot is dead). The daemon's
housekeeping (every command that reads the records) ends what died without its shim
noticing: exit code 255, and a ``--rm`` container is removed, as dockerd does on restart.
``RFSIM_DOCKER_ROOT`` moves the whole store (unit tests).

Host-side module: standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

ROOT_ENV = "RFSIM_DOCKER_ROOT"
CONFIG, STATE, LOG = "config.json", "state.json", "container.log"
SHIM_LOG = "shim.log"
FILES = (CONFIG, STATE, LOG, SHIM_LOG)
LOST_EXIT = 255  # what dockerd records for a container whose end it never saw
START_GRACE_S = 30.0  # a created container whose shim never came up is given up after this
REMOVED_KEPT_S = 600.0  # removed/<id> stays this long for a client still attached
BOOT_ID = "/proc/sys/kernel/random/boot_id"
ADJECTIVES = ("brave", "eager", "gifted", "jolly", "keen", "lucid", "nifty", "quirky", "serene", "vibrant")
SURNAMES = ("curie", "darwin", "euler", "hopper", "lovelace", "noether", "pascal", "ritchie", "turing", "wozniak")


class DaemonError(Exception):
    """What the daemon answers instead of doing it ('Error response from daemon: ...')."""


def root() -> Path:
    return Path(os.environ.get(ROOT_ENV, "/var/tmp/rfsim-docker"))  # nosec B108  # the simulated daemon's records, in the host's private /var/tmp


def boot_id() -> str:
    try:
        return Path(BOOT_ID).read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
    None when there is no such process or it is a zombie (a zombie holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(pid: Any, started: Any) -> bool:
    """The same process as recorded: same pid and same start time, not a zombie."""
    return isinstance(pid, int) and pid > 0 and started is not None and start_time(pid) == started


def _read(path: Path) -> Dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_json(path: Path, value: Dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    os.replace(tmp, path)


@contextmanager
def daemon_lock() -> Iterator[None]:
    """One writer at a time: name checks, creation, removal, housekeeping."""
    folder = root()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "daemon.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass
class Container:
    directory: Path
    config: Dict[str, Any]
    state: Dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.config["id"])

    @property
    def name(self) -> str:
        return str(self.config.get("name", ""))

    @property
    def labels(self) -> Dict[str, str]:
        return dict(self.config.get("labels") or {})

    @property
    def status(self) -> str:
        return str(self.state.get("status", "created"))

    @property
    def same_boot(self) -> bool:
        return self.config.get("boot_id") == boot_id()

    @property
    def running(self) -> bool:
        return (self.status == "running" and self.same_boot
                and alive(self.state.get("pid"), self.state.get("pid_start")))

    @property
    def shim_alive(self) -> bool:
        return self.same_boot and alive(self.state.get("shim_pid"), self.state.get("shim_start"))

    def save_state(self, **changes: Any) -> None:
        self.state.update(changes)
        write_json(self.directory / STATE, self.state)


def load(directory: Path) -> Optional[Container]:
    config = _read(directory / CONFIG)
    if not config.get("id"):
        return None
    return Container(directory, config, _read(directory / STATE))


def containers_dir() -> Path:
    return root() / "containers"


def removed_dir() -> Path:
    return root() / "removed"


def all_containers() -> List[Container]:
    """Every record the daemon holds (not removed), newest first."""
    try:
        entries = sorted(containers_dir().iterdir())
    except OSError:
        return []
    found = [c for c in map(load, entries) if c is not None]
    return sorted(found, key=lambda c: float(c.config.get("created", 0.0)), reverse=True)


def locate(container_id: str) -> Optional[Container]:
    """A container by its full id, also once --rm moved it to removed/."""
    for folder in (containers_dir(), removed_dir()):
        found = load(folder / container_id)
        if found is not None:
            return found
    return None


def find(ref: str) -> Container:
    """By name, full id or unique id prefix, as docker resolves a reference."""
    everything = all_containers()
    for container in everything:
        if ref in (container.id, container.name, "/" + container.name):
            return container
    matches = [c for c in everything if len(ref) >= 1 and c.id.startswith(ref.lower())]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise DaemonError(f"multiple IDs found with provided prefix: {ref}")
    raise DaemonError(f"No such container: {ref}")


def _remove_folder(directory: Path) -> None:
    """Only the files a record has, then the folder: never a recursive delete."""
    for name in FILES:
        try:
            (directory / name).unlink()
        except FileNotFoundError:
            pass
    for leftover in directory.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        pass


def remove(container: Container) -> None:
    """``--rm`` after the end: the name is free at once; the record waits in removed/ for a
    client still attached to read the exit code (call under daemon_lock)."""
    removed_dir().mkdir(parents=True, exist_ok=True)
    target = removed_dir() / container.id
    try:
        os.replace(container.directory, target)
    except OSError:
        _remove_folder(container.directory)
        return
    container.directory = target


def housekeeping(now: Optional[float] = None) -> None:
    """End what died unseen (its shim gone too, or an earlier boot), drop old removed/
    records. Call under daemon_lock."""
    now = time.time() if now is None else now
    for container in all_containers():
        if container.status == "exited":
            continue
        starting = container.status == "created" and container.same_boot and (
            container.shim_alive or now - float(container.config.get("created", 0.0)) < START_GRACE_S)
        if starting or container.shim_alive or container.running:
            continue
        container.save_state(status="exited", exit_code=LOST_EXIT, finished=now,
                             error="the container's end was not seen (host rebooted or its shim died)")
        if container.config.get("remove"):
            remove(container)
    try:
        old = [p for p in removed_dir().iterdir() if now - p.stat().st_mtime > REMOVED_KEPT_S]
    except OSError:
        old = []
    for folder in old:
        _remove_folder(folder)


def new_name(taken: List[str]) -> str:
    """docker's kind of generated name, adjective_surname, not yet in use."""
    for _ in range(100):
        name = f"{secrets.choice(ADJECTIVES)}_{secrets.choice(SURNAMES)}"
        if name not in taken:
            return name
    return f"{secrets.choice(ADJECTIVES)}_{secrets.choice(SURNAMES)}{secrets.randbelow(10000)}"


def conflict_message(name: str, holder: str) -> str:
    return (f"Conflict. The container name \"/{name}\" is already in use by container \"{holder}\". "
            "You have to remove (or rename) that container to be able to reuse that name.")


def create(config: Dict[str, Any]) -> Container:
    """A new record (status created), or DaemonError when its name is taken. ``config``
    gets its name (when it has none), id (idem), created time and boot_id here."""
    with daemon_lock():
        housekeeping()
        existing = all_containers()
        name = config.get("name") or new_name([c.name for c in existing])
        holder = next((c for c in existing if c.name == name), None)
        if holder is not None:
            raise DaemonError(conflict_message(name, holder.id))
        container_id = str(config.get("id") or secrets.token_hex(32))
        directory = containers_dir() / container_id
        directory.mkdir(parents=True)
        full = dict(config, id=container_id, name=name, created=time.time(), boot_id=boot_id())
        write_json(directory / CONFIG, full)
        container = Container(directory, full, {"status": "created"})
        container.save_state()
        (directory / LOG).touch()
        return container
