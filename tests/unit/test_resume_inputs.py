"""A resume is the same experiment (issue 32 item A): ``--resume`` runs the playbook its folder
keeps, and refuses, in one line and before anything is created or asked, a folder that is not a
campaign's and a playbook, PoC or inventory that differs from what the campaign ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprofleet.campaign import pipeline
from reprofleet.campaign.resume import ResumeRefused
from reprofleet.campaign.run import CampaignResult
from reprofleet.cli.exits import ExitStatus, exit_status_for
from reprofleet.records.manifest import read_inputs, sha256_hex
from tests.support.resume_folders import (QuietView, first_campaign, manifest_only, request, tree, write_book,
                                          write_inventory)


def _refused(req: pipeline.CampaignRequest) -> str:
    with pytest.raises(ResumeRefused) as refused:
        pipeline.run_or_plan(req, QuietView())
    assert exit_status_for(refused.value) is ExitStatus.BAD_INPUT
    (line,) = str(refused.value).splitlines()
    return line


def test_a_new_campaign_keeps_the_playbooks_text_and_the_digests_of_its_poc_and_inventory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book, inventory = write_book(tmp_path / "book"), write_inventory(tmp_path)
    folder = first_campaign(monkeypatch, inventory, book, tmp_path / "reports")
    stored = read_inputs(folder / "campaign.json")
    assert stored is not None
    assert stored.playbook.text == book.read_text() and stored.playbook.sha256 == sha256_hex(book.read_text())
    assert stored.playbook.path == str(book.resolve())
    assert stored.poc.sha256 == sha256_hex((book.parent / "poc.py").read_bytes())
    assert stored.inventory.path == str(inventory) and set(stored.inventory.hosts) == {"h1"}


def test_a_resume_of_a_folder_that_does_not_exist_is_refused_and_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = manifest_only(monkeypatch)
    typo = tmp_path / "reports" / "resume-test-2026-typo"
    line = _refused(request(write_inventory(tmp_path), write_book(tmp_path / "book"), tmp_path / "reports",
                            resume=typo))
    assert line.startswith(f"--resume {typo}: no such campaign folder")
    assert not ran and not (tmp_path / "reports").exists()


def test_a_resume_of_a_folder_without_campaign_json_is_refused_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = manifest_only(monkeypatch)
    folder = tmp_path / "reports" / "not-a-campaign"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("someone's notes\n")
    line = _refused(request(write_inventory(tmp_path), write_book(tmp_path / "book"), tmp_path / "reports",
                            resume=folder))
    assert line == f"--resume {folder}: not a campaign folder (no campaign.json); nothing was run or created"
    assert not ran and tree(folder) == {"notes.txt": b"someone's notes\n"}


def test_a_resume_with_another_playbook_is_refused_naming_the_cells_added_removed_and_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = write_inventory(tmp_path)
    folder = first_campaign(monkeypatch, inventory, write_book(tmp_path / "a"), tmp_path / "reports")
    before = tree(folder)
    other = write_book(tmp_path / "b", attempts=3, cells="  - name: ref\n  - name: lgc\n    graphics_clocks: [180, 2600]\n"
                                                        "  - name: pl350\n    power_limit: 350\n")
    ran = manifest_only(monkeypatch)
    line = _refused(request(inventory, other, tmp_path / "reports", resume=folder))
    stored = sha256_hex((tmp_path / "a" / "book.yml").read_text())[:12]
    assert f"playbook {other.resolve()}: sha256 {stored} stored, {sha256_hex(other.read_text())[:12]} now" in line
    assert "cells added: pl350" in line and "cells changed: lgc" in line and "settings changed: attempts" in line
    assert "nothing was run; resume without --playbook to run the stored copy, or pass --resume-changed" in line
    assert not ran and tree(folder) == before


def test_a_resume_whose_poc_changed_is_refused_naming_the_poc_file_and_its_digests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory, book = write_inventory(tmp_path), write_book(tmp_path / "book")
    folder = first_campaign(monkeypatch, inventory, book, tmp_path / "reports")
    poc = book.parent / "poc.py"
    was = sha256_hex(poc.read_bytes())
    poc.write_text("print('a fixed reproducer')\n")  # the same path, other bytes
    ran = manifest_only(monkeypatch)
    line = _refused(request(inventory, None, tmp_path / "reports", resume=folder))
    assert f"poc {poc.resolve()}: sha256 {was[:12]} stored, {sha256_hex(poc.read_bytes())[:12]} now" in line
    assert "every cell would run under a new identity" in line and "pass --resume-changed" in line
    assert "playbook" not in line.split(": not the experiment")[1].split(";")[0]  # the playbook itself is the same
    assert not ran


def test_a_resume_with_a_changed_inventory_is_refused_naming_the_hosts_added_removed_and_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = write_inventory(tmp_path, {"h1": "192.0.2.10", "h2": "192.0.2.11"})
    folder = first_campaign(monkeypatch, inventory, write_book(tmp_path / "book"), tmp_path / "reports")
    write_inventory(tmp_path, {"h1": "192.0.2.99", "h3": "192.0.2.12"})  # DHCP moved h1; h2 left, h3 came
    ran = manifest_only(monkeypatch)
    line = _refused(request(inventory, None, tmp_path / "reports", resume=folder))
    assert f"inventory {inventory}: sha256 " in line
    assert "hosts added: h3" in line and "hosts removed: h2" in line and "hosts changed: h1" in line
    assert not ran


def test_a_resume_runs_the_stored_copy_not_the_playbook_file_as_it_reads_now(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory, book = write_inventory(tmp_path), write_book(tmp_path / "book")
    folder = first_campaign(monkeypatch, inventory, book, tmp_path / "reports")
    write_book(tmp_path / "book", attempts=9, cells="  - name: other\n")  # edited in place after the first run
    ran = manifest_only(monkeypatch)
    result = pipeline.run_or_plan(request(inventory, None, tmp_path / "reports", resume=folder), QuietView())
    assert isinstance(result, CampaignResult)
    (plan,) = ran
    assert [c.name for c in plan.playbook.cells] == ["ref", "lgc"] and plan.playbook.attempts == 2
    assert plan.playbook.path == str(book.resolve()) and plan.changes == ()


def test_a_resume_of_a_folder_written_before_the_stored_copy_runs_as_before_and_warns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory, book = write_inventory(tmp_path), write_book(tmp_path / "book")
    folder = first_campaign(monkeypatch, inventory, book, tmp_path / "reports")
    manifest = json.loads((folder / "campaign.json").read_text())
    del manifest["inputs"]  # as an older controller wrote it
    (folder / "campaign.json").write_text(json.dumps(manifest))
    ran, view = manifest_only(monkeypatch), QuietView()
    pipeline.run_or_plan(request(inventory, book, tmp_path / "reports", resume=folder), view)
    assert len(ran) == 1
    (warning,) = view.warnings
    assert "no stored copy of the playbook" in warning and f"{book.resolve()} could not be checked" in warning


def test_resume_changed_runs_the_other_playbook_and_the_plan_carries_what_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = write_inventory(tmp_path)
    folder = first_campaign(monkeypatch, inventory, write_book(tmp_path / "a"), tmp_path / "reports")
    other = write_book(tmp_path / "b", cells="  - name: ref\n  - name: lgc\n    graphics_clocks: [180, 2600]\n")
    ran = manifest_only(monkeypatch)
    pipeline.run_or_plan(request(inventory, other, tmp_path / "reports", resume=folder, changed=True), QuietView())
    (plan,) = ran
    (change,) = plan.changes
    assert (change.what, change.changed, change.new_identity) == ("playbook", ("lgc",), ("lgc",))
    manifest = json.loads((folder / "campaign.json").read_text())
    assert manifest["inputs"]["playbook"]["text"] == other.read_text()  # the next plain resume runs the change
    lgc = [c for c in manifest["cells"] if c["name"] == "lgc"]
    assert len({c["cell_id"] for c in lgc}) == 2 and [c.get("superseded", False) for c in lgc] == [False, True]
    assert manifest["changes"][0]["changes"][0]["changed"] == ["lgc"]


def test_resume_changed_is_refused_while_a_started_attempt_of_a_renewed_cell_is_not_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = write_inventory(tmp_path)
    folder = first_campaign(monkeypatch, inventory, write_book(tmp_path / "a"), tmp_path / "reports")
    (folder / "events.jsonl").write_text(json.dumps({"t": "2026-01-01T00:00:00Z", "host": "h1", "event": "attempt_started",
                                                     "attempt": "a-dead", "cell": "lgc", "index": 0}) + "\n")
    other = write_book(tmp_path / "b", cells="  - name: ref\n  - name: lgc\n    graphics_clocks: [180, 2600]\n")
    ran = manifest_only(monkeypatch)
    line = _refused(request(inventory, other, tmp_path / "reports", resume=folder, changed=True))
    assert "attempts a controller started of lgc are not recorded yet" in line
    assert "resume once without --resume-changed (it records them), then with it" in line and not ran


def test_a_superseded_cell_of_the_manifest_plans_no_slots(tmp_path: Path) -> None:
    from reprofleet.records.pooling import read_manifest

    manifest = tmp_path / "campaign.json"
    manifest.write_text(json.dumps({
        "campaign": "c", "attempts_per_cell": 4, "hosts": [{"name": "h1"}],
        "cells": [{"name": "lgc", "cell_id": "lgc@new", "stop": {"kind": "fixed_n"}},
                  {"name": "lgc", "cell_id": "lgc@old", "superseded": True,
                   "stop": {"kind": "sprt", "p0": 0.3, "p1": 0.03}}]}))
    info = read_manifest(manifest, running=lambda _folder: False)
    assert info is not None and info.plan is not None and info.plan.of("lgc") == 4
