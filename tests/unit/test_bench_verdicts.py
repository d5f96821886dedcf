"""bench/verdicts.py keeps honest books: the truth it draws is the truth it checks claims
against, its scenarios put into the records what their names say, its naive engine has no
statistics, its goals can fail, and RESULTS.md names the judging code it ran."""

from __future__ import annotations

import importlib.util
import io
import random
import re
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reprofleet.campaign import simulate
from reprofleet.model import Role
from reprofleet.stats import intervals as stats
from reprofleet.verdicts import Verdict, VerdictKind
from tests.support.paths import REPO as ROOT

BENCH = ROOT / "bench" / "verdicts.py"
REFRESH = "nice -n 19 .venv/bin/python bench/verdicts.py --results bench/RESULTS.md"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verdicts", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_verdicts"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()
BOOK = replace(bench.SEED, attempts=9)


def _scenario(prefix: str) -> Any:
    return next(s for s in bench.SCENARIOS if s.name.startswith(prefix))


def _drawn(prefix: str, seed: int = 1) -> tuple[Any, Any, simulate.Campaign]:
    scenario = _scenario(prefix)
    rng = random.Random(seed)
    design = scenario.design(BOOK)
    world = bench.world(scenario, design.playbook, rng)
    return design, world, simulate.draw(design, world.truth, rng)


def _verdict(kind: VerdictKind, text: str = "", cell: str = "lgc-2800") -> Verdict:
    return Verdict(cell=cell, cell_id=f"{cell}@x", kind=kind, text=text or kind.value, reference=False,
                   reproductions=0, judged=10, excluded=0, hosts=bench.HOSTS, hosts_reproducing=(),
                   rate=stats.rate_interval(0, 10))


def test_the_naive_engine_calls_any_cell_without_a_wedge_or_reboot_fixed_and_tests_nothing() -> None:
    def record(outcome: str) -> dict[str, str]:
        return {"cell": "c", "outcome": outcome}
    assert bench.naive([record("clean"), record("error")], "c") is VerdictKind.FIXED
    assert bench.naive([record("clean")] * 100 + [record("reboot")], "c") is VerdictKind.REPRODUCES
    assert bench.naive([record("infra")], "c") is VerdictKind.CANNOT_JUDGE


def test_the_truth_has_hosts_that_differ_and_cells_with_the_ratios_their_names_say() -> None:
    _, world, _ = _drawn("plain")
    assert len(set(world.factors)) == 4 and all(0.5 <= f <= 1.5 for f in world.factors)
    kinds = list(world.kinds.values())
    assert kinds.count("fixed") == 3 and kinds.count("a tenth") == 2 and kinds.count("a third") == 2
    for cell, kind in world.kinds.items():
        for host in bench.HOSTS:
            reference = world.rate("default", host)
            expected = 0.0 if kind == "host-specific" and host in ("ws03", "ws04") else bench.RATIO[kind] * reference
            assert world.rate(cell, host) == pytest.approx(expected)
    assert world.truth[("lgc-2800", "ws01")].caught_short == 0.10  # the bug caught short, in every scenario


def test_a_truly_fixed_cell_never_has_a_wedge_or_reboot_and_the_bug_also_shows_as_errors_in_capture() -> None:
    _, world, campaign = _drawn("errors and hangs in capture")
    fixed = {c for c, k in world.kinds.items() if k == "fixed"}
    assert not any(r["outcome"] in ("wedge", "reboot") for r in campaign.records if r["cell"] in fixed)
    roles = [BOOK.judging.role(r["outcome"], r["last_phase"], None, r.get("reason")) for r in campaign.records
             if r["cell"] not in fixed]
    assert roles.count(Role.FAILED_AT_RISK) > 5


def test_disjoint_coverage_leaves_no_host_that_ran_both_a_cell_and_the_reference() -> None:
    _, _, campaign = _drawn("disjoint")
    ran = {(r["cell"], r["host"]) for r in campaign.records}
    for host in bench.HOSTS:
        assert not (("default", host) in ran and ("lgc-2800", host) in ran)


def test_the_split_reference_runs_as_two_identities_and_a_missing_manifest_is_judged_without_one() -> None:
    design, _, campaign = _drawn("reference split")
    assert len({r["cell_id"] for r in campaign.records if r["cell"] == "default"}) == 2
    design, _, campaign = _drawn("missing manifest")
    assert not design.manifest
    assert all("has no campaign.json" in v.text for v in simulate.judge_campaign(design, campaign).verdicts)


def test_the_quarantine_and_resume_scenarios_leave_never_run_and_re_run_slots() -> None:
    for prefix in ("a quarantined host", "resumes"):
        _, _, campaign = _drawn(prefix)
        assert any(r.get("reason", "").startswith("not run") for r in campaign.records), prefix
    _, _, campaign = _drawn("resumes")
    assert any(r.get("reason", "").startswith("interrupted") for r in campaign.records)


@pytest.mark.parametrize(("kind", "truth", "right"), [
    (VerdictKind.FIXED, "fixed", True), (VerdictKind.FIXED, "a tenth", False), (VerdictKind.FIXED, "same", False),
    (VerdictKind.LESS_OFTEN, "a third", True), (VerdictKind.LESS_OFTEN, "same", False),
    (VerdictKind.CLEAN_SO_FAR, "a tenth", False), (VerdictKind.REPRODUCES, "fixed", False),
    (VerdictKind.CANNOT_JUDGE, "same", None)])
def test_a_claim_is_right_only_when_its_truth_holds(kind: VerdictKind, truth: str, right: bool | None) -> None:
    _, world, _ = _drawn("plain")
    cell = next(c for c, k in world.kinds.items() if k == truth)
    assert bench.claim_true(_verdict(kind, cell=cell), truth, world) is right


def test_host_specific_is_right_only_when_every_host_it_names_not_on_has_rate_zero() -> None:
    _, world, _ = _drawn("plain")
    cell = next(c for c, k in world.kinds.items() if k == "host-specific")
    text = "host-specific: reproduces on {}, not on {} (ws: 0/9, ...)"
    assert bench.claim_true(_verdict(VerdictKind.HOST_SPECIFIC, text.format("ws01", "ws03, ws04"), cell),
                            "host-specific", world)
    assert not bench.claim_true(_verdict(VerdictKind.HOST_SPECIFIC, text.format("ws01", "ws02, ws03"), cell),
                                "host-specific", world)


def _tallies(real_false: int, naive_false: int, real_power: int) -> dict[str, Any]:
    out = {}
    for s in bench.SCENARIOS:
        t = bench.Tallies()
        for engine, false, power in (("real", real_false, real_power), ("naive", naive_false, 100)):
            for truth in bench.RATIO:
                t.seen[(engine, truth)] = 100
                t.fixed[(engine, truth)] = power if truth == "fixed" else false
        out[s.name] = t
    return out


def test_the_goals_fail_when_the_numbers_do_and_the_naive_goal_needs_a_difference() -> None:
    met = {g: (real, naive) for g, real, naive, _ in bench.goals(_tallies(2, 40, 95))}
    assert [v for v in met.values()] == [(True, False), (True, True), (True, False), (True, False)]
    worse = {g: real for g, real, _, _ in bench.goals(_tallies(6, 6, 80))}
    assert list(worse.values()) == [False, False, False, False]  # no goal met, so the naive one has none to fail
    alike = {g: real for g, real, _, _ in bench.goals(_tallies(2, 2, 95))}
    assert list(alike.values()) == [True, True, True, False]  # a naive engine as good as the real one: the bench fails


def test_a_quick_run_prints_every_goal_and_table_in_seconds() -> None:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with redirect_stdout(out), redirect_stderr(err):
        assert bench.main(["--quick"]) == 0
    assert time.monotonic() - started < 60  # < 10 s of one core; the shared VM gets a fraction of one
    text = out.getvalue()
    assert len(re.findall(r"^\| .* \| (PASS|FAIL) \| (PASS|FAIL) \|", text, re.M)) == 4
    assert all(s.name in text for s in bench.SCENARIOS)
    assert "P(fixed | cell = reference)" in text and "| fixed |" in text


def test_results_md_names_the_judging_code_that_the_files_hold_now() -> None:
    section = re.search(r"<!-- verdicts -->(.*?)<!-- /verdicts -->", (ROOT / "bench" / "RESULTS.md").read_text(), re.S)
    assert section is not None, "bench/RESULTS.md has no verdicts section"
    recorded = re.search(r"code sha256 ([0-9a-f]{16}) of src/reprofleet/verdicts \+ stats", section.group(1))
    assert recorded is not None, f"the verdicts section records no code hash; refresh it: {REFRESH}"
    assert recorded.group(1) == bench.code_hash(), (
        f"bench/RESULTS.md's verdicts section was made with other judging code ({recorded.group(1)}, now "
        f"{bench.code_hash()}); refresh it: {REFRESH}")


def _copy_tree(tmp_path: Path) -> None:
    for folder in (*bench.CODE, "src/reprofleet/campaign", "src/reprofleet/model", "src/reprofleet/playbook",
                   "src/reprofleet/records"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for path in (ROOT / folder).glob("*.py"):
            (tmp_path / folder / path.name).write_bytes(path.read_bytes())
    for path in ("bench/verdicts.py", "src/reprofleet/__init__.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes((ROOT / path).read_bytes())


def test_the_code_hash_changes_with_any_judging_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_tree(tmp_path)
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    before = bench.code_hash()
    assert before == bench.code_hash()
    target = tmp_path / "src" / "reprofleet" / "stats" / "comparison.py"
    target.write_text(target.read_text() + "\nX = 1\n")
    assert bench.code_hash() != before


def test_a_stats_module_the_bench_never_imports_and_a_docstring_leave_the_hash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_tree(tmp_path)
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    before = bench.code_hash()
    (tmp_path / "src" / "reprofleet" / "stats" / "boundary_new.py").write_text("X = 1\n")
    init = tmp_path / "src" / "reprofleet" / "stats" / "__init__.py"
    init.write_text(init.read_text().replace('"""Pure numbers', '"""Pure numbers, and a boundary_new module,', 1))
    assert bench.code_hash() == before
    init.write_text(init.read_text() + "\nfrom reprofleet.stats import boundary_new  # noqa\n")
    assert bench.code_hash() != before  # once the package imports it, the bench runs it
