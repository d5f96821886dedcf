"""Verdicts that cannot mislead: each test pins one way the old report layer misled a reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprofleet.model import Judging, Outcome
from reprofleet.records.pooling import Pool, load_pool
from reprofleet.records.store import RecordError
from reprofleet.report import render_markdown
from reprofleet.verdicts import ALL_HOSTS, VerdictKind, judge
from tests.support.verdict_records import SEED, many, pool_of, rec, verdict


def test_the_reference_is_the_playbooks_even_when_another_cell_comes_first_and_it_ran_on_one_host() -> None:
    records = many(6, "lgc-2800", "ws01", "clean") + many(6, "lgc-2800", "ws02", "clean")
    records += many(3, "default", "ws01", "wedge") + many(3, "default", "ws01", "clean")  # ws02 quarantined
    judgement = judge(pool_of(records, reference="default", cells=("default", "lgc-2800")))
    assert judgement.reference == "default"
    assert [v.cell for v in judgement.verdicts] == ["default", "lgc-2800"]  # playbook order, reference kept
    lgc = verdict(judgement, "lgc-2800")
    assert lgc.against_reference is not None and "ws01" in lgc.against_reference.method


def test_a_cell_that_errors_six_times_before_capture_cannot_be_judged_and_is_never_a_fix() -> None:
    records = many(6, "default", "ws01", "wedge") + many(6, "broken-image", "ws01", "error", phase="model_load")
    judgement = judge(pool_of(records))
    broken = verdict(judgement, "broken-image")
    assert broken.kind is VerdictKind.CANNOT_JUDGE
    assert "6 of 6 attempts excluded" in broken.text and "error before cuda_graph_capture" in broken.text
    assert "39%" not in render_markdown(judgement, records, "t")


def test_errors_after_the_phase_at_risk_count_as_non_reproductions_and_errors_in_it_never_do() -> None:
    judging = SEED
    assert judging.role(Outcome.ERROR, "cuda_graph_capture").value == "failed_at_risk"  # in it: its own column
    assert judging.role(Outcome.HANG, "ready").value == "non_reproduction"
    assert judging.role(Outcome.HANG, "kv_cache").value == "excluded"  # before it (V1) or after it (V2): not said
    assert Judging().role(Outcome.ERROR, "ready").value == "excluded"  # no phase at risk: never judged


def test_a_watchdog_reset_counts_as_a_reproduction_by_default_in_its_own_column() -> None:
    records = many(4, "default", "ws01", "reboot") + many(2, "default", "ws01", "clean")
    judgement = judge(pool_of(records, Judging()))
    ref = verdict(judgement, "default")
    assert ref.kind is VerdictKind.REPRODUCES and (ref.reproductions, ref.judged) == (4, 6)
    row = next(r for r in judgement.rows if r.host == "ws01")
    assert row.tally.outcomes["reboot"] == 4 and row.tally.outcomes["wedge"] == 0


def _campaign(folder: Path, records: list[dict[str, Any]], manifest: dict[str, Any] | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if manifest is not None:
        (folder / "campaign.json").write_text(json.dumps(manifest))
    return folder


def test_a_pooled_report_counts_what_the_campaign_counted(tmp_path: Path) -> None:
    records = many(3, "default", "ws01", "hang", campaign="c1") + many(3, "default", "ws01", "clean", campaign="c1")
    manifest = {"campaign": "c1", "reference": "default", "cells": [{"name": "default"}],
                "judging": {"reproductions": ["wedge", "hang"], "at_risk_phase": None, "max_excluded_share": 0.2}}
    folder = _campaign(tmp_path / "c1", records, manifest)
    alone = judge(load_pool([folder]))
    pooled = judge(load_pool([tmp_path]))
    assert verdict(alone, "default").reproductions == verdict(pooled, "default").reproductions == 3


def test_one_cell_name_with_two_images_is_two_rows_and_a_warning(tmp_path: Path) -> None:
    _campaign(tmp_path / "c1", many(3, "default", "ws01", "wedge", campaign="c1"), None)
    _campaign(tmp_path / "c2", many(3, "default", "ws01", "clean", campaign="c2", image="vllm/vllm-openai:v0.26.0"), None)
    judgement = judge(load_pool([tmp_path]))
    assert len(judgement.verdicts) == 2
    assert all(v.cell.startswith("default@") for v in judgement.verdicts)
    assert any("2 different contents" in w and "factors" in w for w in judgement.warnings)


def test_the_same_attempt_with_different_contents_names_both_files(tmp_path: Path) -> None:
    record = rec("default", "ws01", "wedge")
    _campaign(tmp_path / "one", [record], None)
    _campaign(tmp_path / "two", [{**record, "outcome": "clean"}], None)
    with pytest.raises(RecordError) as error:
        load_pool([tmp_path])
    assert "one/attempts.jsonl" in str(error.value) and "two/attempts.jsonl" in str(error.value)
    assert "outcome" in str(error.value)


def test_an_identical_copy_of_an_attempt_counts_once(tmp_path: Path) -> None:
    records = many(2, "default", "ws01", "wedge")
    _campaign(tmp_path / "ctl-a", records, None)
    _campaign(tmp_path / "ctl-b", records, None)
    assert verdict(judge(load_pool([tmp_path])), "default").judged == 2


def test_every_interval_says_what_it_is() -> None:
    records = many(5, "default", "ws01", "wedge") + many(1, "default", "ws01", "clean")
    records += many(12, "lgc-2800", "ws01", "clean")
    judgement = judge(pool_of(records))
    text = render_markdown(judgement, records, "t")
    assert "two-sided" in judgement.rows[0].rate.label() and "two-sided" in text
    lgc = verdict(judgement, "lgc-2800")
    assert lgc.kind is VerdictKind.LESS_OFTEN  # 0/12 against 5/6: rarer, but its rate ratio is not bounded below 0.2
    assert lgc.bound is not None and lgc.bound.sided == "upper" and "one-sided" in lgc.text


def test_the_seeds_six_clean_runs_are_clean_so_far_with_the_attempts_the_judge_needs() -> None:
    # The seed: default reproduced in fewer than 6 tries; -lgc 180,2800 ran clean 6/6.
    records = many(2, "default", "ws01", "wedge") + many(4, "default", "ws01", "clean")
    lgc = verdict(judge(pool_of(records + many(6, "lgc-2800", "ws01", "clean"))), "lgc-2800")
    assert lgc.kind is VerdictKind.CLEAN_SO_FAR and lgc.more_needed is not None
    assert f"{lgc.more_needed} more clean attempts" in lgc.text
    enough = records + many(6 + lgc.more_needed, "lgc-2800", "ws01", "clean")
    assert verdict(judge(pool_of(enough)), "lgc-2800").kind is VerdictKind.FIXED


def test_ten_borderline_cells_are_not_all_called_fixed() -> None:
    records = many(6, "default", "ws01", "wedge") + many(2, "default", "ws01", "clean")
    for i in range(10):
        records += many(5, f"c{i}", "ws01", "clean")
    judgement = judge(pool_of(records))
    raw = [verdict(judgement, f"c{i}").against_reference for i in range(10)]
    assert all(t is not None and t.p_value < 0.05 for t in raw)  # each alone looks like a fix
    assert not any(verdict(judgement, f"c{i}").kind is VerdictKind.FIXED for i in range(10))  # Holm says no


def test_hosts_are_strata_so_a_cell_run_only_on_the_quiet_host_is_not_fixed() -> None:
    # Simpson: the reference ran mostly on a host that wedges a lot, the cell only on a quiet one.
    records = many(16, "default", "loud", "wedge") + many(4, "default", "loud", "clean")
    records += many(2, "default", "quiet", "clean")
    records += many(20, "lgc-2800", "quiet", "clean")
    lgc = verdict(judge(pool_of(records)), "lgc-2800")
    assert lgc.kind is not VerdictKind.FIXED
    assert lgc.against_reference is not None and "quiet" in lgc.against_reference.method


def test_a_cell_that_reproduces_on_some_hosts_only_is_host_specific() -> None:
    records = many(8, "default", "ws1", "wedge") + many(8, "default", "ws2", "wedge") + many(8, "default", "ws10", "clean")
    judgement = judge(pool_of(records))
    ref = verdict(judgement, "default")
    assert ref.kind is VerdictKind.HOST_SPECIFIC
    assert ref.text.startswith("host-specific: reproduces on ws1, ws2, not on ws10")


def test_a_cell_whose_first_attempt_after_boot_behaves_differently_is_flagged() -> None:
    records = many(10, "default", "ws01", "wedge", attempt_in_boot=1)
    records += many(10, "default", "ws01", "clean", attempt_in_boot=3)
    split = next(s for s in verdict(judge(pool_of(records)), "default").splits if "boot" in s.what)
    assert split.yes == (10, 10) and split.no == (0, 10) and split.flagged


def test_cold_and_warm_cache_are_told_apart_by_the_recorded_manifest() -> None:
    records = many(6, "default", "ws01", "wedge", cache="e3b0c44298fc1c14")
    records += many(6, "default", "ws01", "wedge", cache="0123456789abcdef")
    split = next(s for s in verdict(judge(pool_of(records)), "default").splits if "cache" in s.what)
    assert split.yes == (6, 6) and split.no == (6, 6) and not split.flagged


def test_an_early_stop_marks_the_cell_and_its_intervals_approximate() -> None:
    records = many(6, "default", "ws01", "wedge") + many(1, "spec-1", "ws01", "wedge")
    pool = pool_of(records)
    stops = ({"event": "stopped", "host": "ws01", "cell": "spec-1", "rule": "first_reproduction",
              "why": "first reproduction at attempt 1"},)
    judgement = judge(Pool(pool.records, pool.campaigns, stops))
    spec = verdict(judgement, "spec-1")
    assert spec.approximate and "first_reproduction" in spec.stopped[0]
    assert next(r for r in judgement.rows if r.cell == "spec-1").approximate


def test_the_report_ends_with_the_verdict_table_the_terminal_prints() -> None:
    records = many(3, "default", "ws01", "wedge") + many(3, "default", "ws01", "clean")
    judgement = judge(pool_of(records))
    text = render_markdown(judgement, records, "t")
    last = text.strip().splitlines()[-1]
    assert last.startswith("| default (reference) | reproduces (3/6 on 1 host)")


def test_pooled_rows_are_there_only_for_cells_on_several_hosts_and_hosts_sort_naturally() -> None:
    records = many(2, "default", "ws10", "wedge") + many(2, "default", "ws2", "wedge")
    rows = judge(pool_of(records)).rows
    assert [r.host for r in rows] == ["ws2", "ws10", ALL_HOSTS]


def test_asking_for_a_reference_that_is_not_there_is_one_clear_error() -> None:
    from reprofleet.verdicts import ReferenceCellError

    with pytest.raises(ReferenceCellError, match="no such cell.*default"):
        judge(pool_of(many(2, "default", "ws01", "wedge")), reference="defualt")
