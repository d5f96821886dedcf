"""`invoke status` and metrics.prom on campaign folders written as a controller writes them
(tests/support/synthetic_campaign.py): counts per host, the plan, the ETA, the verdicts as `invoke
report` judges them, read without writing and without the campaign's lock; the textfile in
node_exporter's format, parsed back by Prometheus's own parser."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from invoke import Program

from tests.support import synthetic_campaign as synthetic
from reprofleet.campaign.metrics import CampaignMetrics, families
from reprofleet.campaign.observe import Ended, EventWriter, Watched
from reprofleet.cli.tasks import ns
from reprofleet.records.folder_state import read_state
from reprofleet.records.pooling import load_pool
from reprofleet.records.prometheus import Family, read_heartbeat, render, sample
from reprofleet.records import store
from reprofleet.records.store import CampaignDir, CampaignLock, JsonlAppender, RecordError
from reprofleet.report.status import read_status, status_lines
from reprofleet.verdicts import judge
from tests.support.seam_host import seam_book

NOW = synthetic.T0.timestamp() + 3600


def _campaign(tmp_path: Path, attempts_per_cell: int = 10, running: bool | None = None) -> Path:
    content = synthetic.build(synthetic.Spec())
    content["manifest"].update({"attempts_per_cell": attempts_per_cell,
                                "hosts": [{"name": "ws2"}, {"name": "ws10"}]})
    folder = synthetic.write(tmp_path / "synthetic-1", content)
    if running is not None:
        state = read_state(folder)
        (folder / "metrics.prom").write_text(render(families(state, running, NOW - 12)))
    return folder


def _snapshot(folder: Path) -> dict[str, tuple[float, bytes]]:
    return {str(p): (p.stat().st_mtime, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_finished_campaign_shows_each_hosts_counts_quarantine_and_power_cycles(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, running=False)
    state = read_state(folder)
    by_host = {h.name: h for h in state.hosts}
    records = [json.loads(line) for line in (folder / "attempts.jsonl").read_text().splitlines()]
    for name, host in by_host.items():
        own = [r for r in records if r["host"] == name]
        assert host.outcomes == {o: sum(1 for r in own if r["outcome"] == o) for o in {r["outcome"] for r in own}}
        assert host.done == sum(1 for r in own if not r["reason"].startswith("not run"))
        assert host.planned == 30 and host.power_cycles == host.wedges  # one cycle per wedge in this folder
    assert by_host["ws10"].quarantined == "recovery failed" and by_host["ws2"].quarantined is None
    assert by_host["ws10"].remaining == 0 and by_host["ws2"].remaining == 30 - by_host["ws2"].done
    assert (state.done, state.planned, state.running) == (by_host["ws2"].done + by_host["ws10"].done, 60, False)


def _append_events(folder: Path, *events: dict[str, Any]) -> None:
    with open(folder / "events.jsonl", "a") as handle:
        handle.write("".join(json.dumps(e) + "\n" for e in events))


def test_a_cell_its_stop_rule_ended_leaves_nothing_to_run_and_a_resumed_host_is_no_longer_quarantined(
        tmp_path: Path) -> None:
    folder = _campaign(tmp_path)
    before = {h.name: h for h in read_state(folder).hosts}
    _append_events(folder, {"t": "2026-11-30T10:00:00.000Z", "host": "ws2", "event": "stopped", "cell": "lgc-2800"},
                   {"t": "2026-11-30T10:00:01.000Z", "host": "ws10", "event": "prepared"})
    after = {h.name: h for h in read_state(folder).hosts}
    lgc_done = sum(1 for r in store.read_records(folder / "attempts.jsonl") if r["host"] == "ws2"
                   and r["cell"] == "lgc-2800" and not r["reason"].startswith("not run"))
    assert after["ws2"].remaining == before["ws2"].remaining - (10 - lgc_done)
    assert before["ws10"].quarantined and after["ws10"].quarantined is None and after["ws10"].remaining > 0
    _append_events(folder, {"t": "2026-11-30T10:05:00.000Z", "host": "ws10", "event": "recovery",
                            "from": "booting", "to": "quarantined", "reason": "no boot within 60 s"})
    assert {h.name: h for h in read_state(folder).hosts}["ws10"].quarantined == "recovery failed: no boot within 60 s"


def test_status_verdicts_are_invoke_reports_own_and_carry_the_anytime_caveat_before_the_planned_end(
        tmp_path: Path) -> None:
    folder = _campaign(tmp_path, running=True)
    status = read_status(folder, now=NOW)
    assert [v.to_json() for v in status.verdicts] == [
        v.to_json() for v in judge(load_pool([folder], running=lambda _folder: True)).verdicts]
    assert status.anytime and all("the campaign is still running" in v.look for v in status.verdicts)
    lines = status_lines(status)
    assert lines[0] == f"campaign synthetic-1 ({folder}): running (its controller last wrote 12 s ago)"
    assert "verdicts so far (anytime-valid" in "\n".join(lines)


def test_a_campaign_at_its_planned_end_has_final_verdicts(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, attempts_per_cell=6, running=False)  # every planned slot recorded
    status = read_status(folder, now=NOW)
    assert status.verdicts and not any(v.anytime for v in status.verdicts if not v.look)


def test_the_eta_is_the_slowest_hosts_remaining_slots_at_its_own_pace(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, running=True)
    state = read_state(folder)
    ws2 = next(h for h in state.hosts if h.name == "ws2")
    records = [json.loads(line) for line in (folder / "attempts.jsonl").read_text().splitlines()
               if json.loads(line)["host"] == "ws2"]
    first = min(synthetic.datetime.fromisoformat(r["started"].replace("Z", "+00:00")) for r in records)
    last = max(synthetic.datetime.fromisoformat(r["ended"].replace("Z", "+00:00")) for r in records)
    pace = (last - first).total_seconds() / len(records)
    assert ws2.seconds_per_slot == pytest.approx(pace)
    assert state.eta_s() == pytest.approx(ws2.remaining * pace)  # ws10 is quarantined: nothing left there
    assert "ETA " in status_lines(read_status(folder, now=NOW))[1]


def test_status_reads_only_and_never_asks_the_campaigns_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _campaign(tmp_path, running=True)

    def flock(fd: int, operation: int) -> None:
        raise AssertionError("status asked the campaign's lock")

    with CampaignLock(folder):  # a controller holds the folder meanwhile
        monkeypatch.setattr(store.fcntl, "flock", flock)
        before = _snapshot(folder)
        read_status(folder, now=NOW)
        assert _snapshot(folder) == before


def test_a_folder_that_is_no_campaign_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="not a campaign folder"):
        read_state(tmp_path)


def _run(*argv: str) -> None:
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", *argv], exit=False)


def test_invoke_status_json_through_invokes_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _campaign(tmp_path, running=False)
    _run("status", str(folder), "--json")
    shown = json.loads(capsys.readouterr().out)
    assert (shown["campaign"], shown["running"], shown["planned"]) == ("synthetic-1", False, 60)
    assert [h["name"] for h in shown["hosts"]] == ["ws2", "ws10"]
    assert {v["cell"] for v in shown["verdicts"]} == {"default", "lgc-2800", "pl-350"}


def test_watch_refreshes_a_bounded_number_of_times_and_ctrl_c_leaves_with_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _campaign(tmp_path, running=True)
    _run("status", str(folder), "--json", "--watch", "--interval", "0.01", "--count", "3")
    assert len(capsys.readouterr().out.splitlines()) == 3  # a running campaign: every refresh, then the bound
    finished = _campaign(tmp_path / "other", running=False)
    _run("status", str(finished), "--json", "--watch", "--interval", "0.01", "--count", "5")
    assert len(capsys.readouterr().out.splitlines()) == 1  # not running: one look is all there is
    import time

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)
    # exit=True: a non-zero status would raise SystemExit here
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", "status", str(folder), "--watch"])
    assert capsys.readouterr().out.startswith("campaign synthetic-1")


# -- metrics.prom ---------------------------------------------------------------------------

def _parsed(text: str) -> dict[str, Any]:
    parser = pytest.importorskip("prometheus_client.parser")
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_metrics_prom_is_node_exporters_textfile_format_as_prometheus_parses_it(tmp_path: Path) -> None:
    folder = _campaign(tmp_path)
    state = read_state(folder)
    text = render(families(state, True, NOW))
    parsed = _parsed(text)
    attempts = parsed["reprofleet_attempts"]  # a counter's family drops _total
    assert attempts.type == "counter"
    assert {(s.labels["host"], s.labels["outcome"]): s.value for s in attempts.samples} == {
        (h.name, o): n for h in state.hosts for o, n in h.outcomes.items()}
    assert {s.labels["host"]: s.value for s in parsed["reprofleet_power_cycles"].samples} == {
        h.name: h.power_cycles for h in state.hosts}
    assert parsed["reprofleet_hosts_quarantined"].samples[0].value == 1
    assert parsed["reprofleet_campaign_running"].type == "gauge"
    assert parsed["reprofleet_campaign_last_update_timestamp_seconds"].samples[0].value == pytest.approx(NOW)
    assert all(line.split(" ")[1] in ("HELP", "TYPE") for line in text.splitlines() if line.startswith("#"))
    assert all(len(line.split(" ")) == 2 for line in text.splitlines() if not line.startswith("#"))  # no timestamps


def test_label_values_are_escaped_so_any_host_name_reads_back_exactly() -> None:
    odd = 'ws"7\\lab\nrack'
    text = render([Family("reprofleet_wedges_total", "Wedges.\nBy host.", "counter", (sample(2, host=odd),))])
    (family,) = _parsed(text).values()
    assert family.samples[0].labels == {"host": odd} and family.samples[0].value == 2


def test_the_controller_keeps_metrics_prom_current_and_says_running_0_at_its_end(tmp_path: Path) -> None:
    directory = CampaignDir(tmp_path / "live").create()
    (directory.root / CampaignLock.NAME).write_text("1\n")
    metrics = CampaignMetrics(interval_s=0.01, now=lambda: NOW)
    metrics.started(Watched("live", directory, seam_book(tmp_path / "book"), ()),
                    EventWriter(JsonlAppender(directory.events)))
    first = directory.root / "metrics.prom"
    assert read_heartbeat(first) is not None and read_heartbeat(first).running  # type: ignore[union-attr]
    held = open(first, encoding="utf-8")  # a scraper mid-read: it must keep seeing one whole file
    first_text = first.read_text()
    record = {"schema": 1, "attempt": "a1", "campaign": "live", "host": "ws1", "cell": "ref", "outcome": "wedge",
              "reason": "host stopped answering", "started": "2026-11-30T08:00:00.000Z",
              "ended": "2026-11-30T08:01:00.000Z"}
    directory.attempts.write_text(json.dumps(record) + "\n")
    rewritten = threading.Event()
    for _ in range(500):  # bounded: 500 looks, each at most 10 ms apart
        metrics.on_attempt_line(record)
        if 'reprofleet_wedges_total{campaign="live",host="ws1"} 1' in first.read_text():
            rewritten.set()
            break
        rewritten.wait(0.01)
    assert rewritten.is_set()
    metrics.finished(Ended())
    assert not read_heartbeat(first).running  # type: ignore[union-attr]
    assert os.fstat(held.fileno()).st_ino != first.stat().st_ino  # replaced by a rename ...
    assert held.read() == first_text  # ... never rewritten in place under a reader
    held.close()
    assert not [p for p in os.listdir(directory.root) if p.endswith(".tmp")]


def test_a_search_has_no_plan_to_count_down_and_shows_its_budget_instead(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, running=True)
    manifest = json.loads((folder / "campaign.json").read_text())
    manifest["search"] = {"kind": "search", "factor": "graphics_clocks", "cells": [], "labels": [],
                          "spec": {"levels": 3, "budget_attempts": 40}}
    (folder / "campaign.json").write_text(json.dumps(manifest))
    state = read_state(folder)
    assert state.adaptive == "search" and state.budget == 40
    assert all(h.planned is None for h in state.hosts) and state.planned is None and state.eta_s() is None
    lines = status_lines(read_status(folder, now=NOW))
    assert f"attempts {state.done} of a budget of 40 done" in lines[1]
    assert "no ETA: a search ends when its model decides or its budget of 40 attempts is spent" in lines[1]
    assert "its next level chosen at run time" in lines[2] and "/30" not in lines[2]
