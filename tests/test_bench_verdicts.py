"""bench/verdicts.py keeps honest books: the truth it draws is the truth it checks against.

These pin the bench's own bookkeeping on a few campaigns, not the verdict layer's goals.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from argparse import Namespace
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reprofleet.stats import intervals as stats
from reprofleet.model import Role, StopKind, StopRule
from reprofleet.verdicts import Verdict, VerdictKind

BENCH = Path(__file__).resolve().parent.parent / "bench" / "verdicts.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verdicts", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_verdicts"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def _cells(campaigns: int = 20) -> list[tuple[Any, Any, list[dict[str, Any]]]]:
    """(campaign, cell truth, that cell's records) over the first ``campaigns`` campaigns."""
    out = []
    for index in range(campaigns):
        campaign, rng = bench.draw_campaign(7, index)
        records = bench.draw_records(campaign, rng)
        for cell in campaign.cells:
            out.append((campaign, cell, [r for r in records if r["cell"] == cell.name]))
    return out


def _verdict(kind: VerdictKind, hosts: tuple[str, ...] = ("ws01", "ws02"), reproducing: tuple[str, ...] = ()) -> Verdict:
    return Verdict(cell="cell01", cell_id="cell01@x", kind=kind, text=kind.value, reference=False, reproductions=len(reproducing),
                   judged=10, excluded=0, hosts=hosts, hosts_reproducing=reproducing, rate=stats.rate_interval(0, 10))


def _campaign(reference: float, *cells: Any) -> Any:
    ref = bench.CellTruth("default", "reference", (reference, reference), 0.0)
    return bench.Campaign(0, "sim", ("ws01", "ws02"), 10, (ref, *cells))


def test_the_same_seed_draws_the_same_campaign_and_records_and_another_seed_does_not() -> None:
    first, rng = bench.draw_campaign(3, 5)
    again, rng_again = bench.draw_campaign(3, 5)
    assert first == again and bench.draw_records(first, rng) == bench.draw_records(again, rng_again)
    assert bench.draw_campaign(4, 5)[0] != first


def test_a_cell_whose_true_rate_is_zero_never_has_a_reproduction_record() -> None:
    zero = [records for _, cell, records in _cells() if not cell.reproduces]
    assert len(zero) > 20
    assert not any(r["outcome"] in ("wedge", "reboot") for records in zero for r in records)


def test_every_record_gets_the_role_its_outcome_was_drawn_for_under_the_seeds_judging() -> None:
    roles: Counter[tuple[str, Role]] = Counter()
    for _, _, records in _cells(10):
        for r in records:
            role = bench.JUDGING.role(r["outcome"], r["last_phase"])
            roles[(r["outcome"], role)] += 1
            if r["outcome"] in ("wedge", "reboot"):
                assert role is Role.REPRODUCTION and r["last_phase"] == "cuda_graph_capture"
            elif r["outcome"] == "clean":
                assert role is Role.NON_REPRODUCTION
    # errors and hangs land on both sides of the phase at risk, so both roles are exercised
    assert roles[("error", Role.EXCLUDED)] and roles[("error", Role.NON_REPRODUCTION)]
    assert roles[("hang", Role.EXCLUDED)] and roles[("reboot", Role.REPRODUCTION)]


def test_broken_cells_are_the_ones_whose_expected_exclusions_pass_the_threshold_and_their_records_show_it() -> None:
    cells = _cells()
    broken = [(cell, records) for _, cell, records in cells if cell.broken]
    working = [(cell, records) for _, cell, records in cells if not cell.broken]
    assert broken and all(cell.scenario.startswith("broken") for cell, _ in broken)
    assert not any(cell.scenario.startswith("broken") for cell, _ in working)

    def excluded_share(group: list[tuple[Any, list[dict[str, Any]]]]) -> float:
        records = [r for _, rs in group for r in rs]
        return sum(bench.JUDGING.role(r["outcome"], r["last_phase"]) is Role.EXCLUDED for r in records) / len(records)

    assert excluded_share(broken) > 0.5 and excluded_share(working) < 0.1


def test_a_host_specific_cell_reproduces_on_some_hosts_only_and_the_reference_on_all() -> None:
    for campaign, cell, records in _cells():
        if cell.scenario == "host-specific":
            assert 0 < sum(r > 0 for r in cell.rates) < len(campaign.hosts)
            quiet = {h for h, r in zip(campaign.hosts, cell.rates) if r == 0}
            assert not any(r["outcome"] in ("wedge", "reboot") for r in records if r["host"] in quiet)
        if cell is campaign.reference:
            assert len(set(cell.rates)) == 1


def test_fixed_on_a_cell_that_still_reproduces_at_half_the_rate_is_wrong_strictly_and_right_loosely() -> None:
    half = bench.CellTruth("cell01", "half the reference", (0.15, 0.15), 0.0)
    assert bench.check(_verdict(VerdictKind.FIXED), half, _campaign(0.3, half)) == (False, True)
    fixed = bench.CellTruth("cell01", "fixed", (0.0, 0.0), 0.0)
    assert bench.check(_verdict(VerdictKind.FIXED), fixed, _campaign(0.3, fixed)) == (True, True)
    assert bench.check(_verdict(VerdictKind.REPRODUCES, reproducing=("ws01",)), half, _campaign(0.3, half))[0]


def test_host_specific_is_wrong_when_it_names_a_host_clean_that_truly_reproduces() -> None:
    only_first = bench.CellTruth("cell01", "host-specific", (0.3, 0.0), 0.0)
    both = bench.CellTruth("cell01", "same as reference", (0.3, 0.3), 0.0)
    claim = _verdict(VerdictKind.HOST_SPECIFIC, reproducing=("ws01",))
    assert bench.check(claim, only_first, _campaign(0.3, only_first))[0]
    assert not bench.check(claim, both, _campaign(0.3, both))[0]


def test_cannot_judge_no_difference_and_clean_so_far_agree_only_with_their_own_truth() -> None:
    broken = bench.CellTruth("cell01", "broken", (0.0, 0.0), 0.8)
    working = bench.CellTruth("cell01", "fixed", (0.0, 0.0), 0.02)
    assert bench.check(_verdict(VerdictKind.CANNOT_JUDGE), broken, _campaign(0.3, broken))[0]
    assert not bench.check(_verdict(VerdictKind.CANNOT_JUDGE), working, _campaign(0.3, working))[0]
    assert bench.check(_verdict(VerdictKind.NO_DIFFERENCE), working, _campaign(0.0, working))[0]
    assert not bench.check(_verdict(VerdictKind.NO_DIFFERENCE), working, _campaign(0.3, working))[0]
    half = bench.CellTruth("cell01", "half the reference", (0.15, 0.15), 0.0)
    assert bench.check(_verdict(VerdictKind.CLEAN_SO_FAR), working, _campaign(0.3, working))[0]
    assert not bench.check(_verdict(VerdictKind.CLEAN_SO_FAR), half, _campaign(0.3, half))[0]


def test_a_tiny_run_judges_every_cell_once_and_its_tables_count_them_all(tmp_path: Path) -> None:
    results = bench.run_campaigns(seed=1, campaigns=4, jobs=1)
    expected = sum(len(bench.draw_campaign(1, i)[0].cells) for i in range(4))
    assert len(results) == expected
    summary = bench.summarize(results)
    assert summary.verdicts == expected and 0 <= summary.agree <= summary.loose_agree <= 1
    truly_reproducing = [r for r in results if r.truth.startswith("reproduces") and not r.scenario.startswith("reference")]
    assert truly_reproducing and summary.reproducing == len(truly_reproducing)  # the false-"fixed" denominator
    table = bench.confusion(results, "truth")
    assert sum(int(line.split("|")[-3]) for line in table[2:]) == expected
    sprt = [bench.simulate_sprt(0.5, 0.05, runs=20, seed=1)]
    body = bench.report(Namespace(campaigns=4, jobs=1, sprt_runs=20), results, sprt, 1.0, ["x 1%"])
    target = tmp_path / "RESULTS.md"
    target.write_text("# Benchmark results\n\n<!-- detect -->\nkeep me\n<!-- /detect -->\n")
    bench.rewrite_section(target, "verdicts", "Verdicts", "\n".join(body))
    text = target.read_text()
    assert "keep me" in text and "<!-- verdicts -->" in text and "verdicts that agree with the truth" in text


def test_an_sprt_sequence_that_always_reproduces_stops_early_as_reproducing() -> None:
    rule = StopRule(StopKind.SPRT, p0=0.3, p1=0.03, alpha=0.05, beta=0.2)
    attempts, verdict = bench.run_sequence(rule, 1.0, 42, random.Random(0))
    assert verdict == "reproduces" and attempts < 14


def test_an_sprt_sequence_never_claims_fixed_without_the_references_counts() -> None:
    # issue 19: the playbook's p0 is a guess; the bench's sequences run without a reference
    rule = StopRule(StopKind.SPRT, p0=0.3, p1=0.03, alpha=0.05, beta=0.2)
    attempts, verdict = bench.run_sequence(rule, 0.0, 42, random.Random(0))
    assert verdict is None and attempts == 42


def test_the_exact_walks_claims_and_what_is_left_at_the_cap_add_up_to_one() -> None:
    from reprofleet.stats import stop_rules as stopping

    rule = StopRule(StopKind.SPRT, p0=0.5, p1=0.05, alpha=0.05, beta=0.2)
    test, cap = stopping.sprt_of(rule), stopping.max_attempts(rule, 0)
    for p in (0.5, 0.05):
        fixed, reproduces = (bench.exact_claim(test, p, cap, claim) for claim in ("fixed", "reproduces"))
        assert 0.999 < fixed + reproduces <= 1.0 + 1e-12
    assert bench.exact_claim(test, 0.5, cap, "fixed") < 0.06  # near alpha, as Wald's boundaries promise
