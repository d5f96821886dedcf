"""Controller side of content-addressed cache snapshots (host side: collectors/cache_store.py).

A snapshot folder is described by a manifest (relative path, size, mode, sha256 of each
file); the manifest's own sha256 names the snapshot. A push asks the host what it lacks
and streams only those objects, in one SSH exec channel (``OBJ <sha> <size> <offset>``
frames): SFTP's one round trip per file is what makes many small files slow. The host
verifies every object before it counts, so an interrupted push resumes by sending only
what is missing, from where an interrupted object stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

from reprofleet.remote.agent import AgentClient
from reprofleet.errors import AgentError, ReprofleetError
from reprofleet.model import Cell, Playbook
from reprofleet.remote.ssh import SshExec, SshTarget
from reprofleet.remote.ssh import available as ssh_available
from reprofleet.remote.transport import ExecChannel
from reprofleet.model.events import CampaignEvent

CHUNK = 1 << 20
BATCH = 1 << 20  # small objects are sent together in writes of about this size


class CacheError(ReprofleetError):
    """A snapshot could not be built, pushed, verified or pulled."""


@dataclass(frozen=True)
class ManifestFile:
    path: str  # relative, '/'-separated
    size: int
    mode: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "mode": self.mode, "sha256": self.sha256}


@dataclass(frozen=True)
class Snapshot:
    """A folder on the controller, hashed: what a push sends and a record names."""

    root: str
    files: tuple[ManifestFile, ...]

    def manifest_bytes(self) -> bytes:
        """The canonical manifest; the host hashes the same bytes (cache_store.canonical)."""
        body = {"files": [f.to_json() for f in self.files]}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @property
    def snapshot(self) -> str:
        return hashlib.sha256(self.manifest_bytes()).hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def objects(self) -> dict[str, ManifestFile]:
        """One file per distinct object (two identical files are one object)."""
        out: dict[str, ManifestFile] = {}
        for entry in self.files:
            out.setdefault(entry.sha256, entry)
        return out

    @property
    def object_bytes(self) -> int:
        return sum(f.size for f in self.objects().values())


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_snapshot(folder: str | Path) -> Snapshot:
    """Hash every regular file under ``folder``; a symlink or device is refused, not followed."""
    root = Path(folder)
    if not root.is_dir():
        raise CacheError(f"no such cache folder: {root}")
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise CacheError(f"{path} is not a regular file: a snapshot holds bytes, not links or devices")
        if path.is_file():
            info = path.stat()
            files.append(ManifestFile(path.relative_to(root).as_posix(), info.st_size, info.st_mode & 0o777,
                                      file_sha256(path)))
    return Snapshot(str(root), tuple(sorted(files, key=lambda f: f.path)))


def agent_command(agent: AgentClient, args: list[str]) -> str:
    """The shell command that runs one agent subcommand (as AgentClient does)."""
    return (f"{shlex.quote(agent.python)} \"$HOME\"/{agent.bundle.remote_dir}/agent.py "
            + " ".join(shlex.quote(a) for a in args))


@dataclass(frozen=True)
class PushResult:
    """What one push did on one host."""

    host: str
    snapshot: str
    sent_objects: int
    sent_bytes: int
    seconds: float
    already_there: bool
    via: str = ""  # "ssh" (the system binary) or "paramiko": how the objects travelled


def _lines(host: str, out: bytes, what: str) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
    except ValueError as exc:
        raise AgentError(host, f"{what}: output is not JSON lines: {out[:200]!r}") from exc


def ask_have(agent: AgentClient, snap: Snapshot) -> dict[str, Any]:
    """The host's answer for ``snap``; the manifest travels only if the host lacks it."""
    answer = agent.one(["cache", "have", "--snapshot", snap.snapshot], "cache_have", timeout=60)
    if answer.get("complete") or answer.get("known"):
        return answer
    channel = agent.session.exec_channel(agent_command(agent, ["cache", "have", "--snapshot", snap.snapshot,
                                                               "--manifest-stdin"]))
    channel.write(snap.manifest_bytes())
    status, out, err = channel.finish(timeout=120)
    for line in _lines(agent.host, out, "cache have"):
        if line.get("k") == "error":
            raise CacheError(f"{agent.host}: cache have: {line.get('error')}")
        if line.get("k") == "cache_have":
            return line
    raise AgentError(agent.host, f"cache have: exit {status}: {err.decode('utf-8', 'replace').strip()}")


def frames(snap: Snapshot, missing: Iterable[str], partial: Mapping[str, int]) -> Iterable[bytes]:
    """The receive stream for ``missing`` objects, small ones batched into ~1 MiB writes."""
    objects = snap.objects()
    buffer = bytearray()
    for sha in missing:
        entry = objects[sha]
        offset = int(partial.get(sha, 0))
        buffer += b"OBJ %s %d %d\n" % (sha.encode(), entry.size, offset)
        with open(Path(snap.root) / entry.path, "rb") as handle:
            handle.seek(offset)
            left = entry.size - offset
            while left > 0:
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    raise CacheError(f"{entry.path} shrank while it was being pushed")
                buffer += chunk
                left -= len(chunk)
                if len(buffer) >= BATCH:
                    yield bytes(buffer)
                    buffer.clear()
    buffer += b"END\n"
    yield bytes(buffer)


def push(agent: AgentClient, snap: Snapshot, ssh: SshTarget | None = None) -> PushResult:
    """Make ``snap`` complete on the host: one round trip when it already is. The objects
    travel through the system ``ssh`` when ``ssh`` says how to reach the host (measured
    faster: see ssh_exec), else through the session's own paramiko channel."""
    started = time.monotonic()
    have = ask_have(agent, snap)
    if have.get("complete"):
        return PushResult(agent.host, snap.snapshot, 0, 0, time.monotonic() - started, True)
    missing = [str(s) for s in have.get("missing") or []]
    partial = {str(k): int(v) for k, v in (have.get("partial") or {}).items()}
    command = agent_command(agent, ["cache", "receive", "--snapshot", snap.snapshot])
    via = "ssh" if ssh is not None and ssh_available() else "paramiko"
    channel: ExecChannel | SshExec = SshExec(ssh, command) if ssh is not None and via == "ssh" \
        else agent.session.exec_channel(command)
    try:
        for block in frames(snap, missing, partial):
            channel.write(block)
    except OSError as exc:  # the controller's own file went away under the push
        channel.close()
        raise CacheError(f"cannot read the snapshot {snap.root}: {exc}") from exc
    except BaseException:
        channel.close()  # what the host has verified so far stays: the next push resumes
        raise
    status, out, err = channel.finish(timeout=600)
    received = next((line for line in _lines(agent.host, out, "cache receive") if line.get("k") == "cache_received"),
                    None)
    errors = [str(line.get("error")) for line in _lines(agent.host, out, "cache receive") if line.get("k") == "error"]
    if received is None or errors:
        raise CacheError(f"{agent.host}: cache receive failed (exit {status}): "
                         f"{'; '.join(errors) or err.decode('utf-8', 'replace').strip()}")
    if received.get("refused"):
        raise CacheError(f"{agent.host}: the host refused {len(received['refused'])} object(s) whose bytes did not "
                         f"match their hash: {', '.join(received['refused'][:3])}")
    if not received.get("complete"):
        raise CacheError(f"{agent.host}: snapshot {snap.snapshot[:12]} still misses {received.get('missing')} object(s)")
    return PushResult(agent.host, snap.snapshot, int(received.get("stored", 0)), int(received.get("bytes", 0)),
                      time.monotonic() - started, False, via)


def materialize(agent: AgentClient, snapshot: str, dest: str, *, if_empty: bool = False) -> dict[str, Any]:
    """Build ``dest`` on the host from a complete snapshot (verified, renamed into place)."""
    args = ["cache", "materialize", "--snapshot", snapshot, "--dest", dest] + (["--if-empty"] if if_empty else [])
    try:
        return agent.one(args, "cache_materialized", timeout=600)
    except AgentError as exc:
        raise CacheError(f"cannot build the cache {dest} from snapshot {snapshot[:12]}: {exc}") from exc


def _read_frame_header(stream: BinaryIO, host: str) -> tuple[str, int] | None:
    line = stream.readline(256)
    fields = line.decode("ascii", "replace").split()
    if fields == ["END"]:
        return None
    if len(fields) != 4 or fields[0] != "OBJ":
        raise CacheError(f"{host}: the pulled stream broke: {line[:80]!r}")
    return fields[1], int(fields[2])


def pull(agent: AgentClient, remote_folder: str, dest: Path) -> Snapshot:
    """A host's folder as a new snapshot folder ``dest`` on the controller, every file
    verified against the host's manifest; ``dest`` appears only once it is whole."""
    if dest.exists():
        raise CacheError(f"{dest} already exists: pull under a new name")
    building = dest.with_name(f".{dest.name}.pulling-{os.getpid()}")
    channel = agent.session.exec_channel(agent_command(agent, ["cache", "send", "--dest", remote_folder]))
    head = json.loads(channel.stdout.readline() or b"{}")
    if head.get("k") != "cache_manifest":
        _, _, err = channel.finish(timeout=30)
        raise CacheError(f"{agent.host}: cannot read {remote_folder}: {head.get('error') or err.decode().strip()}")
    files = [ManifestFile(str(f["path"]), int(f["size"]), int(f["mode"]), str(f["sha256"]))
             for f in head["manifest"]["files"]]
    try:
        for entry in files:
            _pull_one(channel.stdout, agent.host, building, entry)
        if _read_frame_header(channel.stdout, agent.host) is not None:
            raise CacheError(f"{agent.host}: more objects than the manifest named")
        channel.finish(timeout=60)
        snap = build_snapshot(building)
        if snap.snapshot != head["snapshot"]:
            raise CacheError(f"{agent.host}: the pulled folder hashes to {snap.snapshot[:12]}, "
                             f"the host said {str(head['snapshot'])[:12]}")
        os.rename(building, dest)
    except BaseException:
        channel.close()
        _remove_tree(building)
        raise
    (dest.parent / f"{dest.name}.manifest.json").write_bytes(snap.manifest_bytes())
    return Snapshot(str(dest), snap.files)


def _pull_one(stream: BinaryIO, host: str, building: Path, entry: ManifestFile) -> None:
    header = _read_frame_header(stream, host)
    if header is None or header != (entry.sha256, entry.size):
        raise CacheError(f"{host}: expected {entry.path}, the stream said {header}")
    target = building / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, left = hashlib.sha256(), entry.size
    with open(target, "wb") as out:
        while left > 0:
            chunk = stream.read(min(CHUNK, left))
            if not chunk:
                raise CacheError(f"{host}: the stream ended inside {entry.path}")
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    if digest.hexdigest() != entry.sha256:
        raise CacheError(f"{host}: {entry.path} arrived with the wrong hash")
    os.chmod(target, entry.mode)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# -- a campaign's use of snapshots ---------------------------------------------------------
def modes(playbook: Playbook) -> set[str]:
    """The cache modes the playbook's cells run under."""
    return {playbook.poc.mode(cell) for cell in playbook.cells}


def seeded_snapshot(playbook: Playbook) -> Snapshot | None:
    """cache_source hashed once per campaign, when a cell runs ``seeded``."""
    if "seeded" not in modes(playbook) or playbook.poc.cache_source is None:
        return None
    return build_snapshot(playbook.poc.cache_source)


def push_for_campaign(ctx: Any, agent: AgentClient) -> str | None:
    """Prepare: the campaign's snapshot complete on this host (an event says what travelled)."""
    snap: Snapshot | None = ctx.cache_snapshot
    if snap is None:
        return None
    host = agent.session.host
    known_hosts = Path(host.vars.get("reprofleet_known_hosts") or ctx.settings.transport.known_hosts).expanduser()
    result = push(agent, snap, SshTarget(host, known_hosts, ctx.settings.transport.connect_timeout))
    ctx.event(agent.host, CampaignEvent.CACHE_PUSHED, snapshot=snap.snapshot, objects=result.sent_objects,
              bytes=result.sent_bytes, seconds=round(result.seconds, 3), already_there=result.already_there,
              via=result.via or None)
    return snap.snapshot


def seed_attempt(ctx: Any, agent: AgentClient, cell: Cell, cache_dir: str) -> str | None:
    """Before a seeded attempt: ``cache_dir`` rebuilt from the snapshot; its hash, for the record."""
    snap: Snapshot | None = ctx.cache_snapshot
    if ctx.playbook.poc.mode(cell) != "seeded" or snap is None:
        return None
    materialize(agent, snap.snapshot, cache_dir)
    return snap.snapshot


# -- the dry run ---------------------------------------------------------------------------
def _folder_size(folder: str) -> tuple[int, int]:
    """(files, bytes) under ``folder``, from a walk (the dry run hashes nothing)."""
    files = [p for p in Path(folder).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def transfer_lines(playbook: Playbook, per_host: Mapping[str, Any], bundle_files: int, bundle_bytes: int,
                   poc_bytes: int) -> list[str]:
    """Per host, what a campaign would push, run and pull back. The dry run contacts no
    host, so a push is "up to": a host that already holds an object is not sent it again."""
    used = modes(playbook)
    pushes = [f"agent {bundle_files} files/{bundle_bytes} B", f"PoC 1 file/{poc_bytes} B"]
    source = playbook.poc.cache_source
    if source is not None:
        files, size = _folder_size(source)
        if used - {"seeded"}:
            pushes.append(f"starting cache (one tar.gz of {files} files/{size} B) for "
                          f"{'/'.join(sorted(used - {'seeded'}))} cells")
        if "seeded" in used:
            pushes.append(f"seeded snapshot up to {files} files/{size} B (only objects the host lacks), "
                          f"rebuilt on the host before each seeded attempt")
    lines = [f"cache modes: {', '.join(sorted(used))}", "per host:"]
    for host, slots in per_host.items():
        counts = {cell.name: sum(1 for c, _ in slots if c.name == cell.name) for cell in playbook.cells}
        run = ", ".join(f"{cell.name} x{counts[cell.name]} ({playbook.poc.mode(cell)})"
                        for cell in playbook.cells if counts[cell.name])
        lines += [f"  {host}: push up to {'; '.join(pushes)}",
                  f"  {host}: run {len(slots)} attempts: {run or 'nothing'}",
                  f"  {host}: pull its facts and one event stream per attempt ({len(slots)}); "
                  "boot forensics after a wedge or reboot"]
    return lines
