"""The host's object store for cache snapshots (collectors/cache_store.py), through the agent's
command line as the controller runs it, and the controller's manifest (cache_sync)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprofleet.runner import cache_sync
from tests.support import paths

AGENT = paths.REPO / "collectors" / "agent.py"


def agent(state: Path, *args: str, stdin: bytes = b"") -> tuple[int, list[dict]]:
    done = subprocess.run([sys.executable, str(AGENT), "--state-dir", str(state), "cache", *args], input=stdin,
                          capture_output=True, timeout=60)
    return done.returncode, [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


@pytest.fixture
def snap(tmp_path: Path) -> cache_sync.Snapshot:
    folder = tmp_path / "seed"
    (folder / "torch_compile_cache" / "abc").mkdir(parents=True)
    (folder / "torch_compile_cache" / "abc" / "graph.py").write_text("print('graph')\n")
    (folder / "flashinfer").mkdir()
    (folder / "flashinfer" / "autotune.json").write_text('{"tile": 128}\n')
    (folder / "big.bin").write_bytes(os.urandom(3 << 20))
    (folder / "same-as-graph.py").write_text("print('graph')\n")  # one object, two files
    os.chmod(folder / "flashinfer" / "autotune.json", 0o600)
    return cache_sync.build_snapshot(folder)


def stream(snap: cache_sync.Snapshot, missing: list[str], partial: dict[str, int] | None = None) -> bytes:
    return b"".join(cache_sync.frames(snap, missing, partial or {}))


def tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_host_hashes_a_manifest_exactly_as_the_controller_names_it(tmp_path: Path, snap) -> None:
    rc, lines = agent(tmp_path / "state", "manifest", "--dest", snap.root)
    assert rc == 0 and lines[0]["snapshot"] == snap.snapshot


def test_a_pushed_snapshot_is_complete_and_an_unchanged_push_needs_nothing(tmp_path: Path, snap) -> None:
    state = tmp_path / "state"
    rc, [have] = agent(state, "have", "--snapshot", snap.snapshot)
    assert rc == 0 and have["complete"] is False and have["known"] is False
    rc, [have] = agent(state, "have", "--snapshot", snap.snapshot, "--manifest-stdin", stdin=snap.manifest_bytes())
    assert sorted(have["missing"]) == sorted(snap.objects()) and len(have["missing"]) == 3  # 4 files, 3 objects
    rc, [got] = agent(state, "receive", "--snapshot", snap.snapshot, stdin=stream(snap, have["missing"]))
    assert rc == 0 and got["complete"] and got["stored"] == 3 and got["bytes"] == snap.object_bytes
    rc, [again] = agent(state, "have", "--snapshot", snap.snapshot)
    assert again == {"k": "cache_have", "snapshot": snap.snapshot, "complete": True, "missing": [], "partial": {}}


def test_a_materialized_cache_holds_exactly_the_snapshot_and_replaces_what_was_there(tmp_path: Path, snap) -> None:
    state, dest = tmp_path / "state", tmp_path / "cache" / "seeded"
    agent(state, "have", "--snapshot", snap.snapshot, "--manifest-stdin", stdin=snap.manifest_bytes())
    agent(state, "receive", "--snapshot", snap.snapshot, stdin=stream(snap, sorted(snap.objects())))
    dest.mkdir(parents=True)
    (dest / "written-by-the-last-attempt").write_text("warm")
    rc, [built] = agent(state, "materialize", "--snapshot", snap.snapshot, "--dest", str(dest))
    assert rc == 0 and built["built"] and tree(dest) == tree(Path(snap.root))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["seeded"]  # nothing half-built left beside it
    (dest / "warm").write_text("x")
    rc, [kept] = agent(state, "materialize", "--snapshot", snap.snapshot, "--dest", str(dest), "--if-empty")
    assert kept["built"] is False and (dest / "warm").exists()


def test_nothing_is_built_from_a_half_pushed_snapshot(tmp_path: Path, snap) -> None:
    state, dest = tmp_path / "state", tmp_path / "cache"
    agent(state, "have", "--snapshot", snap.snapshot, "--manifest-stdin", stdin=snap.manifest_bytes())
    some = sorted(snap.objects())[:2]
    rc, [got] = agent(state, "receive", "--snapshot", snap.snapshot, stdin=stream(snap, some))
    assert got["complete"] is False and got["missing"] == 1
    rc, lines = agent(state, "materialize", "--snapshot", snap.snapshot, "--dest", str(dest))
    assert rc == 1 and "not complete" in lines[-1]["error"] and not dest.exists()


def test_an_interrupted_transfer_resumes_inside_the_object_it_stopped_in(tmp_path: Path, snap) -> None:
    state = tmp_path / "state"
    _, [have] = agent(state, "have", "--snapshot", snap.snapshot, "--manifest-stdin", stdin=snap.manifest_bytes())
    big = next(f.sha256 for f in snap.files if f.path == "big.bin")
    # big.bin goes last whatever its hash, so the cut below falls inside it (the objects' order
    # follows their random contents' hashes otherwise)
    whole = stream(snap, [h for h in have["missing"] if h != big] + [big])
    cut = whole[: len(whole) - (1 << 20)]  # the connection dies 1 MiB before the end (inside big.bin)
    rc, lines = agent(state, "receive", "--snapshot", snap.snapshot, stdin=cut)
    assert rc == 1 and "ended inside object" in lines[-1]["error"]
    _, [have] = agent(state, "have", "--snapshot", snap.snapshot)
    assert have["missing"] == [big] and 0 < have["partial"][big] < 3 << 20
    rest = stream(snap, have["missing"], have["partial"])
    assert len(rest) < (3 << 20)  # only what is missing travels
    rc, [got] = agent(state, "receive", "--snapshot", snap.snapshot, stdin=rest)
    assert rc == 0 and got["complete"] and got["bytes"] == (3 << 20) - have["partial"][big]


def test_a_corrupted_object_is_refused_and_never_counts(tmp_path: Path, snap) -> None:
    state = tmp_path / "state"
    _, [have] = agent(state, "have", "--snapshot", snap.snapshot, "--manifest-stdin", stdin=snap.manifest_bytes())
    body = bytearray(stream(snap, have["missing"]))
    at = body.index(b"tile")  # flip a byte inside autotune.json's bytes
    body[at] ^= 0x20
    rc, [got] = agent(state, "receive", "--snapshot", snap.snapshot, stdin=bytes(body))
    bad = next(f.sha256 for f in snap.files if f.path.endswith("autotune.json"))
    assert rc == 1 and got["refused"] == [bad] and got["complete"] is False
    assert not (state / "objects" / bad).exists()
    assert agent(state, "have", "--snapshot", snap.snapshot)[1][0]["missing"] == [bad]


def test_a_manifest_that_does_not_hash_to_its_name_or_escapes_the_folder_is_refused(tmp_path: Path, snap) -> None:
    state = tmp_path / "state"
    rc, lines = agent(state, "have", "--snapshot", "0" * 64, "--manifest-stdin", stdin=snap.manifest_bytes())
    assert rc == 1 and "does not hash" in lines[-1]["error"]
    evil = json.dumps({"files": [{"path": "../../.bashrc", "size": 1, "mode": 420, "sha256": "a" * 64}]},
                      sort_keys=True, separators=(",", ":")).encode()
    import hashlib
    rc, lines = agent(state, "have", "--snapshot", hashlib.sha256(evil).hexdigest(), "--manifest-stdin", stdin=evil)
    assert rc == 1 and "safe relative file" in lines[-1]["error"]
