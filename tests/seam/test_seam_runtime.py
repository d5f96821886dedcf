"""Runtime truth decided at the host seam, in virtual time: a docker tag that moves to
another image mid-campaign stops that cell on that host, with both digests. Moved from
tests/fleet/test_fleet_runtime.py (pulling, venv building and the interpreter's real versions stay
on the fleet)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprofleet.campaign.run import make_plan
from reprofleet.clock import VirtualClock
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from tests.support.seam_host import FakeHost, run_fake_campaign, seam_settings
from tests.support.fleet_campaign import write_playbook

TAG = "vllm/vllm-openai:v0.25.1"
VENV_CELL = ("  - name: venv\n    runtime: {kind: venv, vllm: '0.26.0', find_links: /etc/reprofleet-sim/wheelhouse, "
             "no_index: true}\n")
CELLS = "  - name: docker\n  - name: python\n    runtime: {kind: python}\n" + VENV_CELL
OLD, NEW = "sha256:img-1", "sha256:img-2"


def test_a_tag_that_moves_mid_campaign_stops_that_cell_on_that_host_with_both_digests(tmp_path: Path) -> None:
    clock = VirtualClock()
    fakes = [FakeHost(clock, "rt-a", script=("clean",) * 40, image=OLD),
             FakeHost(clock, "rt-b", script=("clean",) * 40, image=OLD)]
    book = write_playbook(tmp_path / "book", attempts=2, attempt_timeout=30, cells=CELLS, extra="order: interleaved\n")
    last_cell: dict[str, str] = {}

    def move_tag_after_first_docker_record(name: str, **fields: Any) -> None:
        """Runs in rt-a's runner, between its first docker record and its next slot."""
        if "cell" in fields:
            last_cell[name] = str(fields["cell"])
        if name == "rt-a" and "outcome" in fields and last_cell.get(name) == "docker":
            fakes[0].image = NEW  # the tag now names a rebuilt image

    plan = make_plan(load_playbook(book), [f.host for f in fakes])
    results = run_fake_campaign(plan, fakes, seam_settings(tmp_path), tmp_path / "reports", clock,
                                move_tag_after_first_docker_record)
    records = list(read_records(results[0].directory.attempts))
    events = read_log_lines(results[0].directory.events)
    on_a = [r["cell"] for r in records if r["host"] == "rt-a"]
    assert on_a.count("docker") == 1 and on_a.count("python") == 2 and on_a.count("venv") == 2
    assert [r["cell"] for r in records if r["host"] == "rt-b"].count("docker") == 2
    stops = [e for e in events if e["event"] == "stopped"]
    assert len(stops) == 1
    stop = stops[0]
    old_digest, new_digest = "vllm/vllm-openai@sha256:digest-1", "vllm/vllm-openai@sha256:digest-2"
    assert (stop["host"], stop["cell"], stop["rule"], stop["tag"]) == ("rt-a", "docker", "runtime_moved", TAG)
    assert stop["old_digest"] == old_digest and stop["new_digest"] == new_digest
    assert stop["old_id"] == OLD and stop["new_id"] == NEW
    assert TAG in stop["why"] and new_digest in stop["why"]
    assert all(r["runtime"]["image_digest"] == old_digest for r in records if r["cell"] == "docker")
