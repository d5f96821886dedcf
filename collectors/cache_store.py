"""Host side of content-addressed cache snapshots: ``agent.py cache have|receive|materialize``.

A snapshot is a manifest (relative path, size, mode, sha256 of every file) whose own hash
names it. The host keeps one object store under its state root, ``objects/<sha256>``, so a
file that two snapshots share, or that an earlier push already brought, is never sent
again. Why each step is careful:

* an object is written under ``objects/.incoming/<sha256>.part``, hashed as it arrives and
  renamed into the store only when its size and hash match: a partial or corrupted object
  never counts. A ``.part`` left by an interrupted transfer is resumed from its length.
* a snapshot is ``complete`` only once every object of its manifest is in the store
  (``snapshots/<hash>.complete``, written atomically): an unchanged re-push is one question.
* a cache folder is built beside its destination, every byte re-hashed while it is
  copied (no hardlinks: the PoC writes into its cache), and renamed into place: nothing
  runs on a half-built cache.

Standard library only; never imports reprofleet.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple

from agent_protocol import AgentFailure, UsageError

CHUNK = 1 << 20
SHA256 = re.compile(r"^[0-9a-f]{64}$")
HEADER_LIMIT = 256  # bytes of one object header line on the receive stream


class CacheRefused(AgentFailure):
    """An object or a manifest failed verification on the host; nothing of it was kept."""


def canonical(manifest: Dict[str, Any]) -> bytes:
    """The bytes a manifest's hash is taken over (the controller hashes the same bytes)."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")


def manifest_hash(manifest: Dict[str, Any]) -> str:
    return hashlib.sha256(canonical(manifest)).hexdigest()


def _root(state_dir: str, *parts: str) -> str:
    path = os.path.join(state_dir, *parts)
    os.makedirs(path, exist_ok=True)
    return path


def objects_dir(state_dir: str) -> str:
    return _root(state_dir, "objects")


def snapshots_dir(state_dir: str) -> str:
    return _root(state_dir, "snapshots")


def incoming_dir(state_dir: str) -> str:
    return _root(state_dir, "objects", ".incoming")


@contextmanager
def store_lock(state_dir: str) -> Iterator[None]:
    """One writer of the store at a time (two controllers pushing the same snapshot)."""
    with open(os.path.join(objects_dir(state_dir), ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_manifest(manifest: Any, snapshot: str) -> List[Dict[str, Any]]:
    """The manifest's files, after checking that it hashes to ``snapshot`` and is sane."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise CacheRefused("a manifest is {\"files\": [...]}")
    if manifest_hash(manifest) != snapshot:
        raise CacheRefused("the manifest does not hash to %s" % snapshot)
    for entry in manifest["files"]:
        path = str(entry.get("path", ""))
        if (not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/"))
                or not SHA256.match(str(entry.get("sha256", ""))) or int(entry.get("size", -1)) < 0):
            raise CacheRefused("a manifest entry is not a safe relative file: %r" % (entry,))
    return list(manifest["files"])


def _valid_snapshot(snapshot: str) -> str:
    if not SHA256.match(snapshot):
        raise UsageError("--snapshot wants a sha256 (64 hex digits), got %r" % snapshot)
    return snapshot


def _manifest_path(state_dir: str, snapshot: str) -> str:
    return os.path.join(snapshots_dir(state_dir), snapshot + ".json")


def _complete_path(state_dir: str, snapshot: str) -> str:
    return os.path.join(snapshots_dir(state_dir), snapshot + ".complete")


def _write_atomic(path: str, content: bytes) -> None:
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as out:
        out.write(content)  # no fsync: both files are verified when read (a hash, a re-hash of every object)
    os.replace(tmp, path)


def load_manifest(state_dir: str, snapshot: str) -> List[Dict[str, Any]]:
    try:
        with open(_manifest_path(state_dir, snapshot), "rb") as handle:
            return check_manifest(json.loads(handle.read()), snapshot)
    except (OSError, ValueError):
        raise CacheRefused("snapshot %s is not on this host (push it first)" % snapshot) from None


def is_complete(state_dir: str, snapshot: str) -> bool:
    return os.path.exists(_complete_path(state_dir, snapshot))


def _missing(state_dir: str, files: List[Dict[str, Any]]) -> List[str]:
    objects = objects_dir(state_dir)
    wanted = sorted({str(f["sha256"]) for f in files})
    return [sha for sha in wanted if not os.path.exists(os.path.join(objects, sha))]


def _mark_if_complete(state_dir: str, snapshot: str, files: List[Dict[str, Any]]) -> bool:
    if _missing(state_dir, files):
        return False
    # No sync here: materialize re-hashes every byte, and a bad object found then takes the
    # marker with it (the next push sends it again) - cheaper than an fsync per small file.
    _write_atomic(_complete_path(state_dir, snapshot), b"%d\n" % int(time.time()))
    return True


def have(state_dir: str, snapshot: str, manifest_source: Optional[BinaryIO]) -> Dict[str, Any]:
    """Whether ``snapshot`` is complete here; given its manifest, which objects are missing
    and how far each interrupted one got (``partial``: sha256 -> bytes already here)."""
    _valid_snapshot(snapshot)
    if is_complete(state_dir, snapshot):
        return {"k": "cache_have", "snapshot": snapshot, "complete": True, "missing": [], "partial": {}}
    if manifest_source is None:
        known = os.path.exists(_manifest_path(state_dir, snapshot))
        files = load_manifest(state_dir, snapshot) if known else None
    else:
        raw = manifest_source.read()
        try:
            files = check_manifest(json.loads(raw), snapshot)
        except ValueError:
            raise CacheRefused("the manifest is not JSON") from None
        _write_atomic(_manifest_path(state_dir, snapshot), raw)
    if files is None:
        return {"k": "cache_have", "snapshot": snapshot, "complete": False, "known": False}
    with store_lock(state_dir):
        if _mark_if_complete(state_dir, snapshot, files):
            return {"k": "cache_have", "snapshot": snapshot, "complete": True, "missing": [], "partial": {}}
        missing = _missing(state_dir, files)
    incoming = incoming_dir(state_dir)
    partial = {}
    for sha in missing:
        try:
            partial[sha] = os.path.getsize(os.path.join(incoming, sha + ".part"))
        except OSError:
            continue
    return {"k": "cache_have", "snapshot": snapshot, "complete": False, "known": True, "missing": missing,
            "partial": partial}


def _read_header(stream: BinaryIO) -> Optional[Tuple[str, int, int]]:
    """``OBJ <sha256> <size> <offset>`` -> (sha, size, offset); ``END`` -> None."""
    line = stream.readline(HEADER_LIMIT)
    if not line:
        raise CacheRefused("the stream ended without END (the transfer was interrupted)")
    fields = line.decode("ascii", "replace").split()
    if fields == ["END"]:
        return None
    if len(fields) != 4 or fields[0] != "OBJ" or not SHA256.match(fields[1]):
        raise CacheRefused("not an object header: %r" % line[:80])
    size, offset = int(fields[2]), int(fields[3])
    if size < 0 or not 0 <= offset <= size:
        raise CacheRefused("object %s: bad size %d or offset %d" % (fields[1], size, offset))
    return fields[1], size, offset


def _receive_one(stream: BinaryIO, incoming: str, objects: str, sha: str, size: int, offset: int) -> bool:
    """Append one object's bytes to its ``.part``; rename it into the store if it verifies.

    The part is hashed from its first byte (what an interrupted transfer left included);
    an object that does not hash to its name is deleted and reported, never stored.
    """
    part = os.path.join(incoming, sha + ".part")
    digest = hashlib.sha256()
    if offset:  # resume: the bytes already here are hashed first, then the rest appended
        here = os.path.getsize(part) if os.path.exists(part) else 0
        if here != offset:
            raise CacheRefused("object %s: resume at %d, but %d bytes are here" % (sha, offset, here))
    with open(part, "r+b" if offset else "wb") as out:
        while offset:
            chunk = out.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
        left = size - offset
        while left > 0:
            chunk = stream.read(min(CHUNK, left))
            if not chunk:
                raise CacheRefused("the stream ended inside object %s (%d bytes short)" % (sha, left))
            out.write(chunk)
            digest.update(chunk)
            left -= len(chunk)
    if digest.hexdigest() != sha:
        os.unlink(part)
        return False
    os.replace(part, os.path.join(objects, sha))
    return True


def receive(state_dir: str, snapshot: str, stream: BinaryIO) -> Dict[str, Any]:
    """Objects from ``stream`` into the store, each verified; then the snapshot marked
    complete if nothing is missing. A refused object is named in ``refused``."""
    _valid_snapshot(snapshot)
    files = load_manifest(state_dir, snapshot)
    wanted = {str(f["sha256"]) for f in files}
    incoming, objects = incoming_dir(state_dir), objects_dir(state_dir)
    stored, received, refused = 0, 0, []
    with store_lock(state_dir):
        while True:
            header = _read_header(stream)
            if header is None:
                break
            sha, size, offset = header
            if sha not in wanted:
                raise CacheRefused("object %s is not in snapshot %s" % (sha, snapshot))
            if _receive_one(stream, incoming, objects, sha, size, offset):
                stored += 1
                received += size - offset
            else:
                refused.append(sha)
        complete = _mark_if_complete(state_dir, snapshot, files)
    return {"k": "cache_received", "snapshot": snapshot, "stored": stored, "bytes": received,
            "refused": refused, "complete": complete, "missing": len(_missing(state_dir, files))}


def _copy_verified(source: str, target: str, sha: str, mode: int) -> None:
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as out:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha:
        os.unlink(source)  # the store's copy went bad: the next push sends it again
        raise CacheRefused("stored object %s no longer matches its hash (removed; push again)" % sha)
    os.chmod(target, mode & 0o7777)


def materialize(state_dir: str, snapshot: str, dest: str, if_empty: bool = False) -> Dict[str, Any]:
    """A cache folder at ``dest`` holding exactly the snapshot, built beside it and renamed in.

    Whatever ``dest`` held is replaced (seeded mode starts every attempt from the same
    bytes); with ``if_empty`` a folder that already has entries is left as it is.
    """
    _valid_snapshot(snapshot)
    if not is_complete(state_dir, snapshot):
        raise CacheRefused("snapshot %s is not complete on this host: nothing is built on a half-pushed cache"
                           % snapshot)
    dest = os.path.abspath(dest)
    if if_empty and os.path.isdir(dest) and os.listdir(dest):
        return {"k": "cache_materialized", "snapshot": snapshot, "dest": dest, "built": False}
    files = load_manifest(state_dir, snapshot)
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    building = os.path.join(parent, ".%s.building-%d" % (os.path.basename(dest), os.getpid()))
    shutil.rmtree(building, ignore_errors=True)
    os.mkdir(building)
    objects = objects_dir(state_dir)
    total = 0
    try:
        for entry in files:
            target = os.path.join(building, str(entry["path"]))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                _copy_verified(os.path.join(objects, str(entry["sha256"])), target, str(entry["sha256"]),
                               int(entry.get("mode", 0o644)))
            except (CacheRefused, OSError):
                os.unlink(_complete_path(state_dir, snapshot))  # no longer complete: the next push repairs it
                raise
            total += int(entry["size"])
        _replace_dir(building, dest)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return {"k": "cache_materialized", "snapshot": snapshot, "dest": dest, "built": True,
            "files": len(files), "bytes": total}


def _replace_dir(building: str, dest: str) -> None:
    """``dest`` becomes ``building``; the old folder is moved aside first and then removed."""
    old = None
    if os.path.lexists(dest):
        old = "%s.old-%d" % (dest, os.getpid())
        os.rename(dest, old)
    os.rename(building, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def folder_manifest(folder: str) -> Dict[str, Any]:
    """The manifest of a folder's regular files (``cache pull`` harvests a host's cache by it).

    A symlink or a special file is refused: a snapshot holds bytes, not pointers elsewhere.
    """
    root = os.path.abspath(folder)
    if not os.path.isdir(root):
        raise CacheRefused("no such folder: %s" % root)
    files = []
    for current, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            path = os.path.join(current, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if not os.path.isfile(path) or os.path.islink(path):
                raise CacheRefused("%s is not a regular file (symlinks and devices are not cached)" % rel)
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(CHUNK), b""):
                    digest.update(chunk)
            files.append({"path": rel, "size": info.st_size, "mode": info.st_mode & 0o777,
                          "sha256": digest.hexdigest()})
    files.sort(key=lambda f: f["path"])
    return {"files": files}


def send(folder: str, manifest: Dict[str, Any], out: BinaryIO) -> None:
    """The files of ``manifest`` as ``OBJ`` frames, each re-hashed as it is read (a file that
    changed since the manifest was taken stops the transfer instead of sending wrong bytes)."""
    for entry in manifest["files"]:
        path = os.path.join(folder, entry["path"])
        out.write(b"OBJ %s %d 0\n" % (entry["sha256"].encode(), entry["size"]))
        digest, left = hashlib.sha256(), int(entry["size"])
        with open(path, "rb") as handle:
            while left > 0:
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    break
                digest.update(chunk)
                out.write(chunk)
                left -= len(chunk)
        if left or digest.hexdigest() != entry["sha256"]:
            raise CacheRefused("%s changed while it was being sent" % entry["path"])
    out.write(b"END\n")
    out.flush()


def command(args: Any) -> Dict[str, Any]:
    """One ``cache`` subcommand, as agent.py dispatches it."""
    if args.action in ("have", "receive", "materialize"):
        _valid_snapshot(args.snapshot or "")
    if args.action == "have":
        return have(args.state_dir, args.snapshot, sys.stdin.buffer if args.manifest_stdin else None)
    if args.action == "receive":
        return receive(args.state_dir, args.snapshot, sys.stdin.buffer)
    if not args.dest:
        raise UsageError("cache %s needs --dest" % args.action)
    if args.action == "manifest":
        manifest = folder_manifest(args.dest)
        return {"k": "cache_manifest", "snapshot": manifest_hash(manifest), "manifest": manifest}
    if args.action == "send":
        manifest = folder_manifest(args.dest)  # first line: the manifest; then its objects
        sys.stdout.buffer.write(canonical({"k": "cache_manifest", "snapshot": manifest_hash(manifest),
                                           "manifest": manifest}) + b"\n")
        send(os.path.abspath(args.dest), manifest, sys.stdout.buffer)
        return {}
    return materialize(args.state_dir, args.snapshot, args.dest, args.if_empty)
