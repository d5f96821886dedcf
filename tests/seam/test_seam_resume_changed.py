"""A resume that runs a changed cell by request (``--resume-changed``, issue 32 item A), through
the real pipeline and runner against a fake host in virtual time: the change is an event, the
changed cell runs its whole plan again under a new identity (its earlier records count for
nothing of it), and the report pools the two identities apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.campaign import pipeline
from reprofleet.campaign.run import CampaignResult
from reprofleet.clock import VirtualClock
from reprofleet.records.identity import cell_name
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.verdicts import judge
from tests.support.resume_folders import QuietView, on_fakes, request, write_book, write_inventory
from tests.support.seam_host import FakeHost


def test_a_cell_changed_on_resume_runs_afresh_under_a_new_identity_and_is_pooled_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "h1", script=("clean",) * 8)
    on_fakes(monkeypatch, [fake], clock)
    inventory, reports = write_inventory(tmp_path), tmp_path / "reports"
    first = pipeline.run_or_plan(request(inventory, write_book(tmp_path / "a"), reports), QuietView())
    assert isinstance(first, CampaignResult)
    folder = first.directory.root
    # lgc's clocks move from 2800 to 2600: another experiment under the same name
    other = write_book(tmp_path / "b", cells="  - name: ref\n  - name: lgc\n    graphics_clocks: [180, 2600]\n")
    resumed = pipeline.run_or_plan(request(inventory, other, reports, resume=folder, changed=True), QuietView())
    assert isinstance(resumed, CampaignResult)

    records = list(read_records(folder / "attempts.jsonl"))
    lgc = [r for r in records if r["cell"] == "lgc"]
    assert [r["factors"]["graphics_clocks"] for r in lgc] == [[180, 2800]] * 2 + [[180, 2600]] * 2  # its whole plan again
    assert len([r for r in records if r["cell"] == "ref"]) == 2  # ref did not change: nothing of it ran twice
    old, new = {r["cell_id"] for r in lgc[:2]}, {r["cell_id"] for r in lgc[2:]}
    assert len(old) == len(new) == 1 and old != new
    (event,) = [e for e in read_log_lines(folder / "events.jsonl") if e["event"] == "resume_changed"]
    assert event["what"] == "playbook" and event["changed"] == ["lgc"] and event["new_identity"] == ["lgc"]

    verdicts = judge(load_pool([folder])).verdicts
    lgc_verdicts = [v for v in verdicts if cell_name(v.cell_id) == "lgc"]
    assert {v.cell_id for v in lgc_verdicts} == old | new  # two verdicts, never one pooled cell
    assert {v.cell for v in lgc_verdicts} == old | new  # each shown under its identity
    assert all("0/2" in v.text for v in lgc_verdicts)  # each counts its own two attempts
