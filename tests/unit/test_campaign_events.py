"""The names in events.jsonl are a file format: one enum holds them, writers pass members,
readers compare members, and the bytes written are the names users and reports already read."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from reprofleet.campaign import run as campaign
from reprofleet.model import CampaignEvent, event_of
from reprofleet.records.store import CampaignDir, JsonlAppender
from reprofleet.report import timeline
from tests.support.scripted_runner import book, cell, context
from tests.support import paths

SRC = paths.REPO / "src" / "reprofleet"

# The names as users' files hold them: a change here is a change of the events.jsonl format.
WRITTEN_NAMES = {
    "torn_line_cut", "prepared", "unreachable_at_start", "switched_on_at_start", "power_lost", "facts_changed", "lease_broken",
    "lease_release_failed", "orphan_killed", "runtime_resolved", "cache_pushed", "policy_applied",
    "policy_restored", "policy_restore_failed", "host_debug_applied", "host_debug_restored",
    "host_debug_restore_failed", "netconsole_applied", "netconsole_failed", "netconsole_restored",
    "netconsole_restore_failed", "attempt_started", "stopped", "quarantined", "unreachable", "reboot", "wedge",
    "suspect", "probe", "clear", "guard", "silence_hold", "silence_release", "cut_by_neighbour", "reattach_failed", "controller_network_suspect",
    "controller_network_back", "icmp_unavailable", "recovery", "power_retry", "needs_person", "warning", "not_ready", "fenced", "attempt_resumed",
    "policy_changed", "start_refused", "attempt_killed",  # issue 17
    "boot_awaited",  # issue 32: a silent host at the start waits for its boot, or another holder, first
    "power_on_at_exit",  # issue 32: a second Ctrl-C switches on what this controller left off
    "self_reset_grace",  # issue 18
    "notify_failed",  # issue 21: a notification that could not be sent
    "search_probe", "search_done",  # issue 23: a search's choices and its result
    "resume_changed",  # issue 32: a resume that runs a changed playbook, PoC or inventory, by request
    "slurm_taken", "slurm_jobs_waiting", "slurm_jobs_ended", "slurm_down", "slurm_given_back",
    "slurm_error",  # issue 37: a Slurm node taken, its jobs waited for, down on a wedge, given back
}


def _controller_sources() -> list[Path]:
    """The controller's modules (the simulated fleet logs its own hardware events, not these)."""
    return [p for p in SRC.rglob("*.py") if "sim" not in p.relative_to(SRC).parts]


def _event_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``<x>.event(host, what, ...)`` and the watchdog's ``<x>._event(what, ...)``."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr in ("event", "_event")]


def _what(call: ast.Call) -> ast.expr | None:
    position = 0 if isinstance(call.func, ast.Attribute) and call.func.attr == "_event" else 1
    return call.args[position] if len(call.args) > position else None


def test_the_enum_values_are_exactly_the_names_written_today() -> None:
    assert {e.value for e in CampaignEvent} == WRITTEN_NAMES


def test_no_controller_module_writes_or_compares_an_event_name_as_a_string() -> None:
    offenders = []
    for path in _controller_sources():
        tree = ast.parse(path.read_text(), str(path))
        for call in _event_calls(tree):
            what = _what(call)
            if isinstance(what, ast.Constant) and isinstance(what.value, str):
                offenders.append(f"{path.relative_to(SRC)}:{call.lineno}: {what.value!r}")
        for node in ast.walk(tree):  # e.get("event") == "stopped", the reader's old habit
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in WRITTEN_NAMES
                                                     for c in [node.left, *node.comparators]) \
                    and "event" in ast.unparse(node):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_every_member_named_in_the_controller_exists_and_every_member_is_written_somewhere() -> None:
    named: set[str] = set()
    for path in _controller_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "CampaignEvent" and node.attr.isupper():
                named.add(node.attr)
    assert named <= set(CampaignEvent.__members__), named - set(CampaignEvent.__members__)
    assert set(CampaignEvent.__members__) <= named, "a member no module writes"


def test_an_event_line_is_written_with_the_name_as_a_plain_string(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0))
    ctx = context(playbook, tmp_path)
    ctx.event("ws01", CampaignEvent.STOPPED, slot=2, cell="ref")
    raw = ctx.directory.events.read_text()
    line = json.loads(raw)
    assert line["event"] == "stopped" and type(line["event"]) is str
    assert '"event": "stopped"' in raw and sorted(line) == ["cell", "event", "host", "slot", "t"]


def test_a_line_reads_back_as_its_member_and_an_unknown_name_as_none() -> None:
    assert event_of({"event": "wedge"}) is CampaignEvent.WEDGE
    assert event_of({"event": "a_newer_controllers_event"}) is None
    assert event_of({}) is None and event_of({"event": 3}) is None


def test_resume_reads_stopped_cells_and_started_slots_through_the_enum(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    directory = CampaignDir(tmp_path / "c").create()
    log = JsonlAppender(directory.events)
    log.append({"host": "h1", "event": "stopped", "cell": "fix"})
    log.append({"host": "h1", "event": "attempt_started", "attempt": "a1", "cell": "ref", "index": 3})
    log.append({"host": "h1", "event": "stopped_by_a_newer_controller", "cell": "ref"})
    assert campaign.stopped_cells(directory) == {("h1", "fix")}
    assert campaign.started_slots(directory, playbook) == {"a1": (playbook.cells[0], 3)}


def test_the_timeline_reads_pauses_and_quarantines_by_member() -> None:
    events = [{"t": "2026-01-01T00:00:00.000Z", "host": "h1", "event": "controller_network_suspect"},
              {"t": "2026-01-01T00:01:00.000Z", "host": "h1", "event": "controller_network_back"},
              {"t": "2026-01-01T00:02:00.000Z", "host": "h1", "event": "quarantined", "reason": "x"}]
    built = timeline.build_timeline([], [], events)
    assert [(p.host, (p.end - p.start).total_seconds()) for p in built.pauses] == [("h1", 60.0)]
    assert [(m.host, m.what) for m in built.quarantines] == [("h1", "quarantined")]
