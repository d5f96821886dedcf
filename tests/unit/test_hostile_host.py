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
from reprofleet.errors import AgentError, ReprofleetError
from reprofleet.model import Host
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
