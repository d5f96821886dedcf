"""Verdicts that claim exactly what the data shows (issue 19, items 1-8): each example the
issue lists, as the corrected verdict. Each test names the rule it pins."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from reprofleet.model import Classified, EarlyReproductions, Judging, Phase, Role, phase_note
from reprofleet.records.pooling import CampaignInfo, Plan, Pool, load_pool
from reprofleet.records.store import CampaignLock
from reprofleet.report import render_markdown
from reprofleet.verdicts import ALL_HOSTS, VerdictKind, judge

from tests.support.verdict_records import SEED, many, pool_of, verdict

V2_AFTER_CAPTURE = ["engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache"]
V1_BEFORE_CAPTURE = ["engine_init", "model_load", "torch_compile", "kv_cache"]


def planned_pool(records: list[dict[str, Any]], attempts: int, hosts: tuple[str, ...], *, running: bool = False,
                 stops: tuple[dict[str, Any], ...] = (), judging: Judging = SEED) -> Pool:
    """A campaign that records its plan: ``attempts`` per cell on each of ``hosts``."""
    info = CampaignInfo("c1", judging, "default", ("default", "x"), plan=Plan(attempts, hosts), running=running)
    return Pool(tuple(records), {"c1": info}, stops)


def ref_and_cell(ref: int, ref_n: int, cell: int, cell_n: int, host: str = "ws01", **kw: Any) -> list[dict[str, Any]]:
    return (many(ref, "default", host, "wedge", **kw) + many(ref_n - ref, "default", host, "clean", **kw)
            + many(cell, "x", host, "wedge", **kw) + many(cell_n - cell, "x", host, "clean", **kw))


# -- 1. a comparison only where it is one ---------------------------------------------------------

def test_a_cell_on_host_b_is_never_fixed_against_a_reference_that_ran_only_on_host_a() -> None:
    records = many(16, "default", "A", "wedge") + many(4, "default", "A", "clean") + many(20, "x", "B", "clean")
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.CANNOT_JUDGE
    assert x.text.startswith("cannot judge: no host ran both x and default")
    assert x.against_reference is None and x.compared_hosts == ()


def test_a_cell_is_compared_only_on_the_hosts_that_ran_the_reference_and_says_which_were_left_out() -> None:
    records = ref_and_cell(18, 36, 0, 36, "ws01") + many(30, "x", "ws02", "clean")
    x = verdict(judge(pool_of(records)), "x")
    assert x.compared_hosts == ("ws01",)
    assert "not compared on ws02 (30 attempts; no judged default attempt there)" in x.text
    assert "(0/36;" in x.text  # the rate bound: the 36 compared attempts, not 66


def test_a_reference_split_into_two_identities_is_never_fixed_against_itself_and_each_host_uses_its_own() -> None:
    records = many(16, "default", "ws01", "wedge") + many(4, "default", "ws01", "clean")
    records += many(20, "default", "ws02", "clean", image="vllm/vllm-openai:v0.25.1-other-digest")
    records += many(20, "x", "ws01", "clean") + many(20, "x", "ws02", "clean")
    judgement = judge(pool_of(records))
    references = [v for v in judgement.verdicts if v.reference]
    assert len(references) == 2 and not any(v.kind is VerdictKind.FIXED for v in references)
    copy = next(v for v in references if v.reproductions == 0)
    assert "not compared with its other copies" in copy.text
    x = verdict(judgement, "x")
    assert x.against_reference is not None and x.compared_hosts == ("ws01", "ws02")
    assert "the reference ran as default@" in x.text and " on ws01" in x.text and " on ws02" in x.text


# -- 2. outcome roles by phase, both ways -------------------------------------------------------------

def test_eight_errors_and_hangs_in_capture_against_a_reference_at_six_of_eight_are_not_a_fix() -> None:
    records = many(6, "default", "ws01", "wedge") + many(2, "default", "ws01", "clean")
    records += many(4, "x", "ws01", "error", phase="cuda_graph_capture") + many(4, "x", "ws01", "hang",
                                                                                phase="cuda_graph_capture")
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.CANNOT_JUDGE and x.at_risk == 8 and x.judged == 0
    assert "8 errors/hangs in capture are never counted as clean" in x.text


def test_errors_in_capture_whose_worst_case_is_not_fixed_keep_a_clean_cell_from_fixed_and_say_so() -> None:
    """Issue 33 item 2: "fixed" holds in the worst case or is not claimed (was: fixed, worst case aside)."""
    records = ref_and_cell(18, 36, 0, 34) + many(2, "x", "ws01", "error", phase="cuda_graph_capture")
    records += many(1, "x", "ws01", "error", phase="model_load")
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.LESS_OFTEN
    assert "fixed only if none of the attempts at risk was a reproduction" in x.text
    assert "34 clean, 2 errors/hangs in capture, 1 excluded: 1× error before cuda_graph_capture" in x.text
    assert x.worst_case is not None and x.worst_case in x.text
    assert x.worst_case.startswith("worst case, had the 2 errors/hangs in capture been reproductions: reproduces")


def test_an_error_after_the_profiles_capture_but_before_the_real_one_is_never_counted_as_clean() -> None:
    """The V2 runner (and the V1 runner's memory profile) capture before KV sizing, and the real
    capture comes after the warm-ups: only an error after *that* one got through capture."""
    judging = SEED
    assert judging.role("error", "kv_cache", V2_AFTER_CAPTURE).value == "excluded"
    assert judging.role("error", "kv_cache", V1_BEFORE_CAPTURE).value == "excluded"
    assert judging.role("error", "kv_cache").value == "excluded"
    assert judging.role("error", "ready", V2_AFTER_CAPTURE + ["attention_warmup", "cuda_graph_capture", "ready"]
                        ).value == "non_reproduction"
    assert judging.role("hang", "cuda_graph_capture", V2_AFTER_CAPTURE[:4]).value == "failed_at_risk"
    assert judging.role("hang", "cuda_graph_capture", V2_AFTER_CAPTURE + ["cuda_graph_capture"]).value == "failed_at_risk"
    assert "fit no engine start's order" in judging.exclusion_reason("error", "kv_cache", ["ready", "kv_cache"])
    records = ref_and_cell(6, 8, 0, 0) + many(8, "x", "ws01", "error", phase="kv_cache", phases=V2_AFTER_CAPTURE)
    x = verdict(judge(pool_of(records)), "x")
    assert (x.judged, x.excluded, x.at_risk) == (0, 8, 0)


SEED_0251 = ["engine_init", "model_load", "torch_compile", "cuda_graph_capture", "kv_cache", "flashinfer_autotune",
             "attention_warmup", "kernel_warmup"]  # the seed's last line: "Skipping CuTeDSL warmup ..."


def test_a_stop_after_kernel_warmup_with_capture_next_is_judged_as_in_capture_in_every_cell() -> None:
    """0.25.1 prints nothing between the CuTeDSL line and capture's bar; 0.26.0 prints "Torch profiler
    disabled for CUDA graph capture" first. The same moment is judged the same: a wedge there is a
    reproduction not flagged early, an error or hang there never clean, with the note saying why."""
    judging = SEED
    v0260_started = SEED_0251 + ["cuda_graph_capture"]
    for phases in (SEED_0251, v0260_started):
        assert judging.classify("wedge", phases[-1], phases) == Classified(Role.REPRODUCTION)
        assert judging.role("hang", phases[-1], phases) is Role.FAILED_AT_RISK
    assert "after kernel warmup; capture starts next" in judging.exclusion_reason("error", "kernel_warmup", SEED_0251)
    assert phase_note("kernel_warmup", SEED_0251) == "after kernel warmup; capture starts next"
    assert phase_note("attention_warmup", SEED_0251[:-1]) == ""
    records = many(4, "x", "ws01", "wedge", phase="kernel_warmup", phases=SEED_0251)
    x = verdict(judge(pool_of(ref_and_cell(6, 8, 0, 0) + records)), "x")
    assert (x.reproductions, x.early) == (4, 0)


def test_a_reproduction_before_the_phase_at_risk_is_flagged_or_excluded_as_the_playbook_says() -> None:
    records = many(3, "default", "ws01", "wedge", phase="model_load") + many(3, "default", "ws01", "clean")
    counted = verdict(judge(pool_of(records)), "default")
    assert counted.kind is VerdictKind.REPRODUCES and counted.early == 3
    assert "3 of the reproductions came before capture" in counted.text
    strict = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE, early_reproductions=EarlyReproductions.EXCLUDE)
    excluded = verdict(judge(pool_of(records, strict)), "default")
    assert excluded.reproductions == 0 and excluded.excluded == 3
    assert "wedge before cuda_graph_capture" in excluded.text


# -- 3. no silent defaults -------------------------------------------------------------------------------

def test_a_folder_without_its_manifest_counts_reboots_and_says_so_in_every_verdict(tmp_path: Path) -> None:
    folder = tmp_path / "c1"
    folder.mkdir()
    records = many(10, "default", "ws01", "wedge") + many(10, "default", "ws01", "clean")
    records += many(2, "x", "ws01", "reboot") + many(18, "x", "ws01", "clean")
    (folder / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    judgement = judge(load_pool([folder]))
    x = verdict(judgement, "x")
    assert x.kind is not VerdictKind.FIXED and x.reproductions == 2
    assert all("has no campaign.json" in v.text and "wedge, reboot" in v.text for v in judgement.verdicts)


# -- 4. "fixed" means fixed: an effect size --------------------------------------------------------------

def test_three_clean_against_ten_of_ten_is_rarer_but_not_fixed_and_prints_its_ratio_bound() -> None:
    x = verdict(judge(pool_of(ref_and_cell(10, 10, 0, 3))), "x")
    assert x.kind is VerdictKind.LESS_OFTEN and x.kind is not VerdictKind.FIXED
    assert x.text.startswith("reproduces less often than default, if at all: 0/3 against 10/10 on ws01, rate ratio ≤ ")
    assert x.against_reference is not None and x.against_reference.ratio_upper is not None
    assert x.against_reference.ratio_upper > 0.2


def test_seven_clean_against_thirty_of_a_hundred_is_not_fixed_and_no_claim_is_printed_as_p_005() -> None:
    x = verdict(judge(pool_of(ref_and_cell(30, 100, 0, 7))), "x")
    assert x.kind is not VerdictKind.FIXED
    assert "p = 0.05," not in x.text and "p = 0.05)" not in x.text


def test_a_clean_cell_with_36_attempts_against_a_reference_at_half_is_fixed_with_its_ratio_bound() -> None:
    x = verdict(judge(pool_of(ref_and_cell(18, 36, 0, 36))), "x")
    assert x.kind is VerdictKind.FIXED
    assert x.against_reference is not None and x.against_reference.ratio_upper is not None
    assert f"rate ratio ≤ {x.against_reference.ratio_upper:.2g} (below 0.2" in x.text


def test_a_cell_that_still_reproduces_but_much_less_often_is_its_own_kind() -> None:
    x = verdict(judge(pool_of(ref_and_cell(30, 40, 2, 40))), "x")
    assert x.kind is VerdictKind.LESS_OFTEN and x.reproductions == 2
    assert x.text.startswith("reproduces less often than default: 2/40 against 30/40 on ws01, rate ratio ≤ ")


def test_the_fixed_ratio_is_the_playbooks() -> None:
    records = ref_and_cell(18, 36, 0, 36)
    strict = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE, fixed_ratio=0.1)
    x = verdict(judge(pool_of(records, strict)), "x")
    assert x.kind is VerdictKind.LESS_OFTEN and "that needs a ratio below 0.1" in x.text


def test_the_rate_bound_is_per_host_when_the_compared_hosts_reference_rates_differ() -> None:
    records = ref_and_cell(18, 20, 0, 20, "ws01") + ref_and_cell(1, 20, 0, 20, "ws02")
    x = verdict(judge(pool_of(records)), "x")
    assert "below " in x.text and " on ws01 (0/20)" in x.text and " on ws02 (0/20)" in x.text
    assert "the hosts' reference rates differ, so per host" in x.text


# -- 5. valid under peeking -------------------------------------------------------------------------------

def test_a_look_at_a_running_campaign_is_anytime_valid_and_the_same_records_at_the_planned_end_are_not() -> None:
    records = ref_and_cell(18, 36, 0, 36)
    live = verdict(judge(planned_pool(records, 36, ("ws01",), running=True)), "x")
    assert live.anytime and "anytime-valid" in live.text and "the campaign is still running" in live.text
    assert live.kind is not VerdictKind.FIXED  # 0/36 against 18/36: not enough for a look at any time
    done = verdict(judge(planned_pool(records, 36, ("ws01",))), "x")
    assert not done.anytime and done.kind is VerdictKind.FIXED and "anytime" not in done.text


def test_a_campaign_short_of_its_plan_or_past_it_is_judged_anytime_valid() -> None:
    records = ref_and_cell(18, 36, 0, 36)
    short = verdict(judge(planned_pool(records, 40, ("ws01",))), "x")
    assert short.anytime and "36 of 40 planned attempts on ws01 so far" in short.text
    extended = verdict(judge(planned_pool(records, 30, ("ws01",))), "x")
    assert extended.anytime and "extended: 36 attempts on ws01, 30 planned" in extended.text


def test_a_cell_stopped_early_says_by_which_rule_after_how_many_and_never_the_rules_claim() -> None:
    records = ref_and_cell(18, 36, 0, 1)
    stops = ({"event": "stopped", "host": "ws01", "cell": "x", "rule": "sprt", "verdict": "fixed",
              "why": "SPRT: fixed (LLR 2.94 >= 2.77)", "attempts": 1},)
    x = verdict(judge(planned_pool(records, 36, ("ws01",), stops=stops)), "x")
    assert "stopped by sprt after 1 attempt on ws01" in x.text
    assert "SPRT" not in x.text and "LLR" not in x.text and x.kind is not VerdictKind.FIXED
    assert x.anytime and x.stopped == ("stopped by sprt after 1 attempt on ws01",)


def test_a_campaign_whose_lock_a_controller_holds_is_read_as_running(tmp_path: Path) -> None:
    folder = tmp_path / "c1"
    folder.mkdir()
    manifest = {"campaign": "c1", "reference": "default", "cells": [{"name": "default"}, {"name": "x"}],
                "attempts_per_cell": 36, "hosts": [{"name": "ws01"}],
                "judging": SEED.to_json()}
    (folder / "campaign.json").write_text(json.dumps(manifest))
    (folder / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ref_and_cell(18, 36, 0, 36)))
    with CampaignLock(folder):
        assert load_pool([folder]).campaigns["c1"].running
        assert verdict(judge(load_pool([folder])), "x").anytime
    assert not load_pool([folder]).campaigns["c1"].running
    assert verdict(judge(load_pool([folder])), "x").kind is VerdictKind.FIXED


# -- 6. advice that leads to a verdict ---------------------------------------------------------------------

@pytest.mark.parametrize("ref, ref_n, clean", [(2, 6, 6), (10, 10, 3), (9, 24, 12)])
def test_n_more_clean_attempts_is_exactly_what_makes_the_judge_say_fixed(ref: int, ref_n: int, clean: int) -> None:
    x = verdict(judge(pool_of(ref_and_cell(ref, ref_n, 0, clean))), "x")
    assert x.kind in (VerdictKind.CLEAN_SO_FAR, VerdictKind.LESS_OFTEN) and x.more_needed is not None
    assert f"{x.more_needed} more clean attempt" in x.text
    more = verdict(judge(pool_of(ref_and_cell(ref, ref_n, 0, clean + x.more_needed))), "x")
    fewer = verdict(judge(pool_of(ref_and_cell(ref, ref_n, 0, clean + x.more_needed - 1))), "x")
    assert more.kind is VerdictKind.FIXED and fewer.kind is not VerdictKind.FIXED


def test_advice_past_a_campaigns_planned_end_inverts_the_anytime_valid_rule() -> None:
    x = verdict(judge(planned_pool(ref_and_cell(10, 10, 0, 10), 10, ("ws01",))), "x")
    assert x.more_needed is not None and "anytime-valid rule" in x.text
    total = 10 + x.more_needed
    more = verdict(judge(planned_pool(ref_and_cell(10, 10, 0, total), 10, ("ws01",))), "x")
    fewer = verdict(judge(planned_pool(ref_and_cell(10, 10, 0, total - 1), 10, ("ws01",))), "x")
    assert more.kind is VerdictKind.FIXED and more.anytime and fewer.kind is not VerdictKind.FIXED


def test_advice_counts_the_holm_rank_the_cell_would_reach() -> None:
    alone = verdict(judge(pool_of(ref_and_cell(10, 10, 0, 3))), "x")
    records = ref_and_cell(10, 10, 0, 3)
    for i in range(4):
        records += many(3, f"y{i}", "ws01", "clean")
    crowded = verdict(judge(pool_of(records)), "x")
    assert crowded.more_needed is not None and alone.more_needed is not None
    assert crowded.more_needed > alone.more_needed


def test_no_number_is_printed_where_the_reference_never_reproduced_on_the_cells_hosts() -> None:
    records = many(10, "default", "ws01", "clean") + many(8, "default", "ws02", "wedge") + many(2, "default", "ws02",
                                                                                                 "clean")
    records += many(10, "x", "ws01", "clean")
    x = verdict(judge(pool_of(records)), "x")
    assert x.more_needed is None and x.kind is VerdictKind.NO_DIFFERENCE
    assert "cannot be shown on these hosts: the reference never reproduced there" in x.text
    assert "more clean attempts" not in x.text


# -- 7. host claims that are tested --------------------------------------------------------------------------

def test_a_host_with_one_clean_attempt_is_clean_so_far_never_not_on() -> None:
    records = many(8, "default", "ws1", "wedge") + many(8, "default", "ws2", "wedge") + many(1, "default", "ws3", "clean")
    ref = verdict(judge(pool_of(records)), "default")
    assert ref.kind is VerdictKind.REPRODUCES and "not on" not in ref.text
    assert "clean so far on ws3 (1 attempt)" in ref.text


def test_not_on_a_host_needs_its_bound_below_every_reproducing_hosts_lower_bound() -> None:
    # ws3 0/6 is rarer than ws1 6/10 (Boschloo p = 0.011), but its upper bound 39% is above ws1's lower 30%
    records = many(6, "default", "ws1", "wedge") + many(4, "default", "ws1", "clean") + many(6, "default", "ws3", "clean")
    ref = verdict(judge(pool_of(records)), "default")
    assert ref.kind is VerdictKind.REPRODUCES and "not on ws3" not in ref.text
    assert "clean so far on ws3 (6 attempts)" in ref.text
    shown = many(8, "default", "ws1", "wedge") + many(6, "default", "ws3", "clean")  # 39% under 69%: shown
    assert "not on ws3" in verdict(judge(pool_of(shown)), "default").text


def test_not_on_a_host_needs_its_pairwise_test_against_every_reproducing_host() -> None:
    # ws3 0/8 against ws2's 2/8 is nothing (p = 0.23): not shown "not on ws3", though ws1 is 8/8
    records = many(8, "default", "ws1", "wedge") + many(2, "default", "ws2", "wedge") + many(6, "default", "ws2", "clean")
    records += many(8, "default", "ws3", "clean")
    ref = verdict(judge(pool_of(records)), "default")
    assert "not on ws3" not in ref.text and "clean so far on ws3 (8 attempts)" in ref.text


def test_not_on_a_host_needs_every_pairwise_test_to_hold_after_holm() -> None:
    # 0/6 on wsX against ws00's 8/8 holds (p = 7e-5); against each of 24 hosts at 6/8 (p = 0.0027 each),
    # Holm over the 25 pairs leaves 0.065: the bounds alone (39% under 40%) are not a test
    records = many(8, "default", "ws00", "wedge") + many(6, "default", "wsX", "clean")
    for i in range(1, 25):
        records += many(6, "default", f"ws{i:02d}", "wedge") + many(2, "default", f"ws{i:02d}", "clean")
    ref = verdict(judge(pool_of(records)), "default")
    assert "not on wsX" not in ref.text and "clean so far on wsX (6 attempts)" in ref.text


def test_hosts_shown_to_differ_label_the_pooled_rate_as_this_fleets_mix() -> None:
    records = many(8, "default", "ws1", "wedge") + many(8, "default", "ws2", "wedge") + many(8, "default", "ws10", "clean")
    judgement = judge(pool_of(records))
    ref = verdict(judgement, "default")
    assert ref.kind is VerdictKind.HOST_SPECIFIC and "this fleet's mix" in ref.text
    assert next(r for r in judgement.rows if r.host == ALL_HOSTS).mix
    assert "(this fleet's mix)" in render_markdown(judgement, records, "t")


# -- 8. facts before shares ---------------------------------------------------------------------------------

def test_a_quarantined_host_makes_no_cell_unjudgeable_and_its_slots_are_listed_apart() -> None:
    records = many(13, "default", "ws01", "wedge") + many(7, "default", "ws01", "clean")
    records += many(18, "x", "ws01", "clean") + many(2, "x", "ws01", "wedge")
    for cell in ("default", "x"):
        records += many(20, cell, "ws02", "infra", reason="not run: ws02 was quarantined (recovery failed)",
                        phase=None)
    judgement = judge(pool_of(records))
    ref, x = verdict(judgement, "default"), verdict(judgement, "x")
    assert ref.kind is VerdictKind.REPRODUCES and x.kind is not VerdictKind.CANNOT_JUDGE
    assert ref.not_run == 20 and ref.excluded == 0 and "20 slots not run yet, in no rate or share" in ref.text
    assert judgement.not_run and "Slots not run" in render_markdown(judgement, records, "t")


def test_resumed_slots_count_for_nothing() -> None:
    records = ref_and_cell(18, 36, 0, 36)
    records += many(5, "x", "ws01", "infra", reason="interrupted: the campaign was stopped", phase=None)
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.FIXED and x.excluded == 0 and x.not_run == 5


def test_reproductions_outrank_an_excluded_share() -> None:
    records = many(3, "default", "ws01", "wedge") + many(7, "default", "ws01", "error", phase="model_load")
    ref = verdict(judge(pool_of(records)), "default")
    assert ref.kind is VerdictKind.REPRODUCES
    assert "7 of 10 attempts excluded" in ref.text and "the reproductions are not" in ref.text


def test_infra_that_could_not_be_judged_still_counts_in_the_excluded_share() -> None:
    records = ref_and_cell(6, 8, 0, 4) + many(4, "x", "ws01", "infra", reason="cannot push the agent", phase=None)
    x = verdict(judge(pool_of(records)), "x")
    assert x.kind is VerdictKind.CANNOT_JUDGE and "4 of 8 attempts excluded" in x.text


def test_the_json_carries_every_new_number() -> None:
    data = judge(pool_of(ref_and_cell(18, 36, 0, 36))).to_json()
    x = next(v for v in data["verdicts"] if v["cell"] == "x")
    assert x["against_reference"]["ratio_upper"] is not None and not math.isinf(x["against_reference"]["ratio_upper"])
    assert x["compared_hosts"] == ["ws01"] and x["anytime"] is False and data["judging"]["fixed_ratio"] == 0.2


def test_a_folder_without_its_manifest_compares_with_default_not_the_first_name_and_says_so(tmp_path: Path) -> None:
    """Was: the alphabetically first cell became the reference in silence (the bench's
    missing-manifest scenario judged every cell against cuda-launch-blocking)."""
    folder = tmp_path / "c1"
    folder.mkdir()
    records = many(10, "default", "ws01", "wedge") + many(10, "default", "ws01", "clean")
    records += many(20, "aa-first", "ws01", "clean") + many(20, "x", "ws01", "clean")
    (folder / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    judgement = judge(load_pool([folder]))
    assert judgement.reference == "default"
    assert any("names its reference cell" in w and "'default'" in w and "--reference" in w
               for w in judgement.warnings)
