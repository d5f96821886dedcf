"""``invoke campaign --resume`` on the command line (in process, through Invoke's real parser):
a resume with another playbook is refused in one line with exit status 2, and nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_inprocess import run_task
from tests.support.resume_folders import first_campaign, manifest_only, tree, write_book, write_inventory


run = run_task  # the in-process front door (tests/support/cli_inprocess.py)


def test_a_resume_with_another_playbook_is_refused_with_exit_2_and_nothing_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = write_inventory(tmp_path)
    folder = first_campaign(monkeypatch, inventory, write_book(tmp_path / "a"), tmp_path / "reports")
    before = tree(folder)
    other = write_book(tmp_path / "b", cells="  - name: ref\n  - name: pl350\n    power_limit: 350\n")
    ran = manifest_only(monkeypatch)
    code, out, err = run(capsys, "campaign", "-i", str(inventory), "-p", str(other), "--resume", str(folder))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"reprofleet: error: --resume {folder}: not the experiment this campaign ran: "
                           f"playbook {other.resolve()}: sha256 ")
    assert "cells added: pl350; cells removed: lgc" in line and "nothing was run" in line
    assert not ran and tree(folder) == before


def test_resume_changed_without_resume_is_a_bad_argument(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ran = manifest_only(monkeypatch)
    code, _, err = run(capsys, "campaign", "-i", str(write_inventory(tmp_path)), "-p", str(write_book(tmp_path / "a")),
                       "--resume-changed")
    assert code == 2 and "--resume-changed goes with --resume" in err and not ran
