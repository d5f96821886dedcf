"""A resume reads its campaign folder once (records/history.py): every thing it needs of
attempts.jsonl and events.jsonl from one read of each."""

from __future__ import annotations

import builtins
import io
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign import run as campaign
from reprofleet.clock import VirtualClock
from reprofleet.model import Outcome, Record
from reprofleet.records import history as history_module
from reprofleet.records.history import CampaignHistory, StartedAttempt, read_history
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender
from tests.support.seam_host import FakeHost, run_fake_campaign, seam_book, seam_settings
from tests.support.scripted_runner import book, cell


def _record(attempt: str, host: str, cell_name: str, outcome: Outcome, reason: str = "") -> Record:
    return Record(campaign="c", attempt=attempt, controller="ctl", host=host, cell=cell_name, factors={}, policy=None,
                  runtime={"kind": "python"}, cache=None, attempt_index=0, attempt_in_boot=1, cold_boot=True,
                  boot_id="b", started="s", ended="e", outcome=outcome, reason=reason)


def _folder(root: Path) -> CampaignDir:
    """Two hosts' records and events as a dead controller left them, torn last lines included."""
    directory = CampaignDir(root / "c").create()
    log = AttemptLog(directory.attempts)
    log.append_record(_record("a1", "h1", "ref", Outcome.CLEAN))
    log.append_record(_record("a2", "h1", "fix", Outcome.WEDGE))
    log.append_record(_record("a3", "h2", "ref", Outcome.INFRA, "interrupted: the campaign was stopped"))
    log.append_record(_record("a4", "h2", "ref", Outcome.INFRA, "unreachable at campaign start"))
    events = JsonlAppender(directory.events)
    for line in ({"host": "h1", "event": "prepared"},
                 {"host": "h1", "event": "runtime_resolved", "runtime": "py", "python": "3.11"},
                 {"host": "h1", "event": "attempt_started", "attempt": "a1", "cell": "ref", "index": 0},
                 {"host": "h1", "event": "attempt_started", "attempt": "a2", "cell": "fix", "index": 1},
                 {"host": "h2", "event": "attempt_started", "attempt": "a3", "cell": "gone", "index": 0},
                 {"host": "h1", "event": "stopped", "cell": "fix"},
                 {"host": "", "event": "search_done", "probes": 3},
                 {"host": "", "event": "search_done", "probes": 5},
                 {"host": "h3", "event": "a_newer_controllers_event"}):
        events.append(line)
    for path in (directory.attempts, directory.events):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write('{"schema": 1, "torn')
    return directory


def test_the_history_holds_every_thing_a_resume_needs(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    history = read_history(_folder(tmp_path))
    assert history.recorded_ids() == {"a1", "a2", "a3", "a4"}
    assert {host: [r.attempt for r in records] for host, records in history.earlier().items()} == {
        "h1": ["a1", "a2"], "h2": ["a4"]}  # an interrupted slot runs again: it counts for nothing
    assert history.completed_counts() == {("h1", "ref"): 1, ("h1", "fix"): 1, ("h2", "ref"): 1}
    assert history.started == (StartedAttempt("a1", "h1", "ref", 0), StartedAttempt("a2", "h1", "fix", 1),
                                StartedAttempt("a3", "h2", "gone", 0))
    assert list(history.started_on().items()) == [("a1", "h1"), ("a2", "h1"), ("a3", "h2")]
    assert history.started_slots(playbook) == {"a1": (playbook.cells[0], 0), "a2": (playbook.cells[1], 1)}
    assert history.seen_alive == {"h1", "h2"}
    assert history.stopped == {("h1", "fix")} and history.stopped_on("h1") == {"fix"} and history.stopped_on("h2") == set()
    assert [e["python"] for e in history.resolved_on("h1")] == ["3.11"] and history.resolved_on("h2") == []
    assert history.search_done_probes == 5  # the last one told


def test_the_history_reads_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = _folder(tmp_path)
    opened: list[str] = []
    real_open = builtins.open

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(Path(file).name)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)  # pathlib's read_text opens through io
    read_history(directory)
    assert sorted(opened) == ["attempts.jsonl", "events.jsonl"]


def test_an_empty_folder_has_an_empty_history(tmp_path: Path) -> None:
    history = read_history(CampaignDir(tmp_path / "new").create())
    assert history == CampaignHistory() and history.earlier() == {} and history.search_done_probes is None


def test_a_resumed_campaign_reads_its_folder_through_one_history(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    playbook = seam_book(tmp_path / "book", attempts=2)
    fake = FakeHost(clock, "once", script=("clean",) * 4)
    plan = campaign.make_plan(playbook, [fake.host])
    settings = seam_settings(tmp_path)
    (first,) = run_fake_campaign(plan, [fake], settings, tmp_path / "reports", clock)
    histories: list[CampaignHistory] = []

    def read_once(directory: CampaignDir) -> CampaignHistory:
        histories.append(history_module.read_history(directory))
        return histories[-1]

    def no_other_read(*args: Any) -> Any:
        raise AssertionError("run_campaign read events.jsonl beside its history")

    monkeypatch.setattr(campaign, "read_history", read_once)
    monkeypatch.setattr(campaign, "read_log_lines", no_other_read)
    resumed_plan = campaign.make_plan(playbook, [fake.host], plan.campaign_id, campaign.completed_counts(first.directory))
    (resumed,) = run_fake_campaign(resumed_plan, [fake], settings, tmp_path / "reports", clock)
    (history,) = histories
    assert history.recorded_ids() == {r.attempt for r in first.records} and len(first.records) == 2
    assert history.seen_alive == {"once"} and history.completed_counts() == {("once", "ref"): 2}
    assert resumed.records == ()  # the plan was done: the resume ran nothing again


def test_a_stop_of_a_cell_a_resume_renewed_no_longer_holds_and_one_after_the_change_does() -> None:
    stopped = {"event": "stopped", "host": "h1", "cell": "fix"}
    renewed = {"event": "resume_changed", "host": "", "what": "playbook", "new_identity": ["fix"]}
    other = {"event": "stopped", "host": "h1", "cell": "ref"}
    assert history_module.history_of((), [stopped, other, renewed]).stopped == {("h1", "ref")}
    assert history_module.history_of((), [stopped, renewed, stopped]).stopped == {("h1", "fix")}


def test_keeping_leaves_a_record_out_of_the_plan_but_never_out_of_the_recorded_ids(tmp_path: Path) -> None:
    history = read_history(_folder(tmp_path))
    kept = history.keeping(lambda record: record.cell != "fix")
    assert [r.attempt for r in kept.records] == ["a1", "a3", "a4"]
    assert kept.recorded_ids() == history.recorded_ids() == {"a1", "a2", "a3", "a4"}
    assert ("h1", "fix") not in kept.completed_counts()
