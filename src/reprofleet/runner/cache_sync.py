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
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

from reprofleet.remote import host_bytes
from reprofleet.remote.agent import AgentClient, agent_command, fenced_agent_command
from reprofleet.errors import AgentError, ReprofleetError
from reprofleet.model import Cell, Playbook
from reprofleet.remote.ssh import SshExec, SshTarget
from reprofleet.remote.ssh import available as ssh_available
from reprofleet.remote.transport import ExecChannel
from reprofleet.model.events import CampaignEvent

CHUNK = 1 << 20
BATCH = 1 << 20  # small objects are sent together in writes of about this size
SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_FILES = 1_000_000  # entries in one pulled manifest
MAX_FILE_BYTES = 1 << 40  # one pulled file (1 TiB)
MAX_PATH = 4096  # bytes of one entry's path (Linux's PATH_MAX); a part at most NAME_MAX
MAX_NAME = 255
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class CacheError(ReprofleetError):
    """A snapshot could not be built, pushed, verified or pulled."""


class ManifestRefused(CacheError):
    """A host's manifest names a file the controller will not write (a path that leaves the
    staging folder, a size, mode or hash of the wrong shape): the whole pull is refused."""


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
    return host_bytes.json_lines(host, out, what)


def _count(host: str, what: str, value: Any, high: int) -> int:
    """A count or offset a host sent: a whole number in [0, high], or the protocol broke."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise AgentError(host, f"{what}: not a whole number in [0, {high}]: {str(value)[:80]!r}")
    return value


def missing_objects(host: str, snap: Snapshot, have: Mapping[str, Any]) -> tuple[list[str], dict[str, int]]:
    """What a ``cache_have`` answer says the host lacks, checked against the snapshot: an
    object the snapshot does not hold, or an offset past an object's end, is refused."""
    objects = snap.objects()
    missing_raw, partial_raw = have.get("missing") or [], have.get("partial") or {}
    if not isinstance(missing_raw, list) or not isinstance(partial_raw, dict):
        raise AgentError(host, "cache have: 'missing' is not a list or 'partial' not an object")
    missing = []
    for sha in missing_raw:
        if not isinstance(sha, str) or sha not in objects:
            raise AgentError(host, f"cache have: 'missing' names an object the snapshot does not hold: {str(sha)[:80]!r}")
        missing.append(sha)
    partial = {}
    for sha, offset in partial_raw.items():
        if sha not in objects:
            raise AgentError(host, f"cache have: 'partial' names an object the snapshot does not hold: {sha[:80]!r}")
        partial[sha] = _count(host, f"cache have: partial[{sha[:12]}]", offset, objects[sha].size)
    return missing, partial


def ask_have(agent: AgentClient, snap: Snapshot) -> dict[str, Any]:
    """The host's answer for ``snap``; the manifest travels only if the host lacks it."""
    answer = agent.one(["cache", "have", "--snapshot", snap.snapshot], "cache_have", timeout=60, fenced=True)
    if answer.get("complete") or answer.get("known"):
        return answer
    command, token = fenced_agent_command(agent, ["cache", "have", "--snapshot", snap.snapshot, "--manifest-stdin"])
    channel = agent.session.exec_channel(command)
    channel.write(token + snap.manifest_bytes())
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
    missing, partial = missing_objects(agent.host, snap, have)
    command, token = fenced_agent_command(agent, ["cache", "receive", "--snapshot", snap.snapshot])
    via = "ssh" if ssh is not None and ssh_available() else "paramiko"
    channel: ExecChannel | SshExec = SshExec(ssh, command) if ssh is not None and via == "ssh" \
        else agent.session.exec_channel(command)
    try:
        if token:
            channel.write(token)  # the lease token's line, before the first frame
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
    refused = received.get("refused")
    if refused:
        shown = [str(r)[:64] for r in refused[:3]] if isinstance(refused, list) else [str(refused)[:64]]
        raise CacheError(f"{agent.host}: the host refused {len(refused) if isinstance(refused, list) else 1} object(s) "
                         f"whose bytes did not match their hash: {', '.join(shown)}")
    if not received.get("complete"):
        raise CacheError(f"{agent.host}: snapshot {snap.snapshot[:12]} still misses {received.get('missing')} object(s)")
    return PushResult(agent.host, snap.snapshot, _count(agent.host, "cache receive: stored", received.get("stored", 0),
                                                        MAX_FILES),
                      _count(agent.host, "cache receive: bytes", received.get("bytes", 0), snap.object_bytes),
                      time.monotonic() - started, False, via)


def materialize(agent: AgentClient, snapshot: str, dest: str, *, if_empty: bool = False) -> dict[str, Any]:
    """Build ``dest`` on the host from a complete snapshot (verified, renamed into place)."""
    args = ["cache", "materialize", "--snapshot", snapshot, "--dest", dest] + (["--if-empty"] if if_empty else [])
    try:
        return agent.one(args, "cache_materialized", timeout=600, fenced=True)
    except AgentError as exc:
        raise CacheError(f"cannot build the cache {dest} from snapshot {snapshot[:12]}: {exc}") from exc


def _read_frame_header(stream: BinaryIO, host: str) -> tuple[str, int] | None:
    line = host_bytes.read_line(host, stream, "cache send: a frame header", 256)
    fields = line.decode("ascii", "replace").split()
    if fields == ["END"]:
        return None
    if len(fields) != 4 or fields[0] != "OBJ" or not fields[2].isdigit() or len(fields[2]) > 15:
        raise CacheError(f"{host}: the pulled stream broke: {line[:80]!r}")
    return fields[1], int(fields[2])


def _refuse(host: str, index: int, entry: Any, field: str, problem: str) -> ManifestRefused:
    path = entry.get("path") if isinstance(entry, dict) else None
    named = f" ({str(path)[:120]!r})" if path is not None else ""
    return ManifestRefused(f"{host}: cache pull refused: manifest entry {index}{named}: {field}: {problem}")


def checked_entry(host: str, index: int, entry: Any, staging: Path) -> ManifestFile:
    """One entry of a host's manifest, as the controller will write it, or ManifestRefused
    naming the host, the entry and the field. ``staging`` is the folder the file goes
    under: the path must be relative, hold no ``..``, ``.`` or empty part, and stay under
    ``staging`` once resolved; the mode is permission bits only (a host's own manifest
    masks them, so a setuid, setgid or sticky bit is a crafted one), and is masked again
    where it is applied."""
    if not isinstance(entry, dict):
        raise _refuse(host, index, entry, "(entry)", f"not an object: {str(entry)[:80]!r}")
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        raise _refuse(host, index, entry, "path", "not a non-empty string")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH or "\x00" in path:
        raise _refuse(host, index, entry, "path", f"longer than {MAX_PATH} bytes or holds a NUL")
    if path.startswith("/"):
        raise _refuse(host, index, entry, "path", "absolute (a pulled file lives under the snapshot folder)")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise _refuse(host, index, entry, "path", "has an empty, '.' or '..' part")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME for part in parts):
        raise _refuse(host, index, entry, "path", f"a part is longer than {MAX_NAME} bytes")
    root = staging.resolve()
    if not (root / path).resolve().is_relative_to(root):
        raise _refuse(host, index, entry, "path", "leaves the snapshot folder once resolved")
    size, mode, sha = entry.get("size"), entry.get("mode"), entry.get("sha256")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_FILE_BYTES:
        raise _refuse(host, index, entry, "size", f"not a whole number in [0, {MAX_FILE_BYTES}]: {str(size)[:40]!r}")
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        shown = oct(mode) if isinstance(mode, int) and not isinstance(mode, bool) else repr(mode)[:40]
        raise _refuse(host, index, entry, "mode", f"not permission bits in [0, 0o777] (no setuid, setgid or sticky): "
                                                  f"{shown}")
    if not isinstance(sha, str) or not SHA256.match(sha):
        raise _refuse(host, index, entry, "sha256", f"not 64 lowercase hex digits: {str(sha)[:80]!r}")
    return ManifestFile(path, size, mode, sha)


def checked_manifest(host: str, head: Mapping[str, Any], staging: Path) -> tuple[str, tuple[ManifestFile, ...]]:
    """The snapshot hash and every entry of a ``cache_manifest`` line, all checked before a
    byte is written; two entries of one path, or a file that is another's folder, refuse it."""
    snapshot, manifest = head.get("snapshot"), head.get("manifest")
    if not isinstance(snapshot, str) or not SHA256.match(snapshot):
        raise ManifestRefused(f"{host}: cache pull refused: snapshot: not 64 lowercase hex digits: "
                              f"{str(snapshot)[:80]!r}")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or len(files) > MAX_FILES:
        raise ManifestRefused(f"{host}: cache pull refused: manifest.files: not a list of at most {MAX_FILES} entries")
    entries = tuple(checked_entry(host, index, entry, staging) for index, entry in enumerate(files))
    paths = {entry.path for entry in entries}
    for index, entry in enumerate(entries):
        folders = ["/".join(entry.path.split("/")[:n]) for n in range(1, entry.path.count("/") + 1)]
        if any(folder in paths for folder in folders):
            raise _refuse(host, index, files[index], "path", "is under another entry's file")
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.path in seen:
            raise _refuse(host, index, files[index], "path", "named twice")
        seen.add(entry.path)
    return snapshot, entries


def pull(agent: AgentClient, remote_folder: str, dest: Path) -> Snapshot:
    """A host's folder as a new snapshot folder ``dest`` on the controller, every file
    verified against the host's manifest; ``dest`` appears only once it is whole.

    Nothing the host sends is trusted: the manifest is read with a bound and every entry
    checked (checked_manifest) before anything is written; each file is created with
    O_EXCL|O_NOFOLLOW inside a staging folder this call made; any refusal or failure
    removes the staging folder, so nothing is left on the controller's disk."""
    if dest.exists() or dest.is_symlink():
        raise CacheError(f"{dest} already exists: pull under a new name")
    building = dest.with_name(f".{dest.name}.pulling-{os.getpid()}")
    channel = agent.session.exec_channel(agent_command(agent, ["cache", "send", "--dest", remote_folder]))
    try:
        raw = host_bytes.read_line(agent.host, channel.stdout, "cache send: the manifest line",
                                   host_bytes.MAX_MANIFEST_BYTES)
        head = host_bytes.parse_object(agent.host, raw or b"{}", "cache send: the manifest line",
                                       host_bytes.MAX_MANIFEST_BYTES)
        if head.get("k") != "cache_manifest":
            _, _, err = channel.finish(timeout=30)
            said = head.get("error") or host_bytes.decode(agent.host, err, "cache send: stderr",
                                                          host_bytes.MAX_REPLY_BYTES).strip()
            raise CacheError(f"{agent.host}: cannot read {remote_folder}: {str(said)[:500]}")
        snapshot, files = checked_manifest(agent.host, head, building)
    except BaseException:
        channel.close()
        raise
    try:
        building.mkdir()  # ours alone: a folder already there (a link, a stale pull) is refused
        for entry in files:
            _pull_one(channel.stdout, agent.host, building, entry)
        if _read_frame_header(channel.stdout, agent.host) is not None:
            raise CacheError(f"{agent.host}: more objects than the manifest named")
        channel.finish(timeout=60)
        try:
            snap = build_snapshot(building)
        except OSError as exc:
            raise CacheError(f"{agent.host}: cannot read back the pulled folder: {exc}") from exc
        if snap.snapshot != snapshot:
            raise CacheError(f"{agent.host}: the pulled folder hashes to {snap.snapshot[:12]}, "
                             f"the host said {snapshot[:12]}")
        os.rename(building, dest)
    except FileExistsError as exc:
        channel.close()
        if exc.filename != str(building):
            _remove_tree(building)
        raise CacheError(f"{agent.host}: cannot pull into {building}: {exc.strerror}") from exc
    except OSError as exc:
        channel.close()
        _remove_tree(building)
        raise CacheError(f"{agent.host}: cannot write the pulled folder {building}: {exc}") from exc
    except BaseException:
        channel.close()
        _remove_tree(building)
        raise
    (dest.parent / f"{dest.name}.manifest.json").write_bytes(snap.manifest_bytes())
    return Snapshot(str(dest), snap.files)


def _pull_one(stream: BinaryIO, host: str, building: Path, entry: ManifestFile) -> None:
    header = _read_frame_header(stream, host)
    if header is None or header != (entry.sha256, entry.size):
        raise CacheError(f"{host}: expected {entry.path}, the stream said {str(header)[:120]}")
    target = building / entry.path
    for folder in reversed(target.relative_to(building).parents[:-1]):
        try:
            os.mkdir(building / folder, 0o755)  # every folder ours: an existing one must be a real folder
        except FileExistsError:
            if (building / folder).is_symlink() or not (building / folder).is_dir():
                raise CacheError(f"{host}: {folder} is not a folder in the pulled snapshot") from None
    digest, left = hashlib.sha256(), entry.size
    fd = os.open(target, _WRITE_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as out:
        while left > 0:
            chunk = stream.read(min(CHUNK, left))
            if not chunk:
                raise CacheError(f"{host}: the stream ended inside {entry.path}")
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
        if digest.hexdigest() != entry.sha256:
            raise CacheError(f"{host}: {entry.path} arrived with the wrong hash")
        os.fchmod(out.fileno(), entry.mode & 0o777)  # permission bits only, whatever reached here


def _remove_tree(path: Path) -> None:
    if path.is_symlink():
        return  # never ours: a link is not followed, and not removed either
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
