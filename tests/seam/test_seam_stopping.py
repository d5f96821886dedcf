"""Stop rules through a whole campaign at the host seam, in virtual time: a cell that
reproduces at its first attempt stops on that host, the reference runs every attempt, and
``--resume`` runs nothing more of it. Moved from tests/test_fleet_stopping.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from reprofleet.campaign.run import completed_counts, make_plan
from reprofleet.clock import VirtualClock
from reprofleet.playbook import load_playbook, plan_order
from reprofleet.records import identity
from reprofleet.records.store import CampaignDir, read_records
from tests.support.seam_host import FakeHost, run_fake_campaign, seam_settings
from tests.support.fleet_campaign import write_playbook

CELLS = ("  - name: default\n"
         "  - name: lgc-2800\n    graphics_clocks: [180, 2800]\n    stop: {rule: first_reproduction}\n")
STOPPING = "lgc-2800"


def script_for(book: Path, host: str, first_outcome: str) -> tuple[str, ...]:
    """Clean everywhere except the stopping cell's first attempt on ``host`` (the plan is
    known in advance: it depends only on the playbook, its seed and the host name)."""
    playbook = load_playbook(book)
    plan = plan_order(playbook, host)
    first = next(i for i, (c, _) in enumerate(plan) if playbook.cells[c].name == STOPPING)
    return tuple(first_outcome if i == first else "clean" for i in range(len(plan)))


def events_of(directory: CampaignDir) -> list[dict[str, Any]]:
    return [json.loads(line) for line in directory.events.read_text().splitlines()]


def test_a_cell_stops_at_its_first_reproduction_and_a_resume_runs_nothing_more_of_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=CELLS)
    fakes = [FakeHost(clock, "stp-a", script=script_for(book, "stp-a", "wedge"), boot_delay_s=0.3),
             FakeHost(clock, "stp-b", script=script_for(book, "stp-b", "reboot"), boot_delay_s=0.3)]
    playbook = load_playbook(book)
    plan = make_plan(playbook, [f.host for f in fakes])
    settings = seam_settings(tmp_path, reboot_grace_s=10.0)
    first = run_fake_campaign(plan, fakes, settings, tmp_path / "reports", clock)
    directory = first[0].directory
    resumed_plan = make_plan(playbook, [f.host for f in fakes], plan.campaign_id, completed_counts(directory))
    assert any(cell.name == STOPPING for cell, _ in resumed_plan.per_host["stp-a"]), \
        "the resumed plan still holds the stopped cell's slots: the runner must skip them"
    resumed = run_fake_campaign(resumed_plan, fakes, settings, tmp_path / "reports", clock)

    records = list(read_records(directory.attempts))
    stops = [e for e in events_of(directory) if e["event"] == "stopped"]
    assert sorted((e["host"], e["cell"], e["verdict"], e["attempts"]) for e in stops) == [
        ("stp-a", STOPPING, "reproduces", 1), ("stp-b", STOPPING, "reproduces", 1)]
    assert all(e["rule"] == "first_reproduction" and e["why"] for e in stops)
    for host, reproduction in (("stp-a", "wedge"), ("stp-b", "reboot")):
        mine = [r for r in records if r["host"] == host]
        stopping_cell = [r for r in mine if r["cell"] == STOPPING]
        assert [r["outcome"] for r in stopping_cell] == [reproduction]
        assert [r["outcome"] for r in mine if r["cell"] == "default"] == ["clean", "clean"], \
            "the reference runs every attempt"
        (stop,) = [e for e in stops if e["host"] == host]
        assert max(r["ended"] for r in stopping_cell) <= stop["t"]
    reboot = next(r for r in records if r["outcome"] == "reboot")
    assert reboot["forensics"] and reboot["forensics"]["previous_boot_available"] is True, \
        "a self-reset gets the previous boot's kernel log like a wedge"

    assert all(r.records == () for r in resumed), \
        "a resume runs nothing more: the reference is done, the other cell stopped"
    assert len([e for e in events_of(directory) if e["event"] == "stopped"]) == 2, "no second stopped event"

    digest = hashlib.sha256(Path(playbook.poc.script).read_bytes()).hexdigest()
    for record in records:
        assert record["poc"] == digest
        assert record["cell_id"] == identity.cell_id(record["cell"], record["factors"], record["runtime"], digest)
    manifest = json.loads(directory.manifest.read_text())
    assert manifest["judging"] == playbook.judging.to_json() and manifest["reference"] == "default"
    assert manifest["order"] == "blocks"
    cells = {c["name"]: c for c in manifest["cells"]}
    assert cells[STOPPING]["stop"]["kind"] == "first_reproduction" and cells["default"]["stop"]["kind"] == "fixed_n"
    # the manifest lists the planned identity; a record's is resolved on its host (the image
    # digest the host pulled joins it): one image on both hosts, so one cell in the records
    stopping_ids = {r["cell_id"] for r in records if r["cell"] == STOPPING}
    assert len(stopping_ids) == 1 and identity.cell_name(stopping_ids.pop()) == STOPPING
    assert all(r["runtime"]["image_digest"] for r in records)
