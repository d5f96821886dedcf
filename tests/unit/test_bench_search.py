"""bench/search.py keeps honest books: its truths are what its docstring says, its goals can
fail, and RESULTS.md names the code it measured (the bench itself is never run here)."""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from reprofleet.campaign import search_sim
from tests.support.paths import REPO as ROOT

BENCH = ROOT / "bench" / "search.py"
REFRESH = "nice -n 19 .venv/bin/python bench/search.py --results bench/RESULTS.md"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_search", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_search"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_search_truths_rise_from_zero_at_the_onset_with_a_small_false_wedge_floor() -> None:
    for scenario in ("alike", "strata"):
        for seed in range(20):
            world = bench.search_world(scenario, random.Random(seed))
            for host, curve in world.curves.items():
                onset = world.onsets[host]
                assert all(0.005 <= p <= 0.01 for p in curve[:onset + 1])
                assert all(p >= 0.14 for p in curve[onset + 1:])  # above the onset is failing the target
                assert list(curve) == sorted(curve)
            if scenario == "alike":
                assert len(set(world.onsets.values())) == 1 and world.groups == ()
            else:
                assert dict(world.groups) == {h: h for h in bench.HOSTS}


def test_version_lists_have_one_change_point_and_bad_rates_in_the_flaky_band() -> None:
    for seed in range(20):
        clean = bench.bisect_truth("no false wedges", random.Random(seed))
        first_good = next(v for v, p in enumerate(clean) if p < 0.2)
        assert 1 <= first_good <= bench.VERSIONS - 1
        assert all(0.2 <= p <= 0.6 for p in clean[:first_good]) and set(clean[first_good:]) == {0.0}
        noisy = bench.bisect_truth("false wedges", random.Random(seed))
        assert len(set(noisy[first_good:])) == 1 and 0.005 <= noisy[-1] <= 0.01


def _figures(attempts: float, meets: float, within: float = 1.0) -> search_sim.MethodFigures:
    return search_sim.MethodFigures("x", attempts, attempts, 1.0, 1.0, meets, within)


def test_the_goals_fail_when_the_numbers_miss_them() -> None:
    good = bench.SearchOutcome(_figures(100, 0.97), _figures(400, 1.0), _figures(100, 1.0), 0.01, 1.0, 0)
    assert all(ok for _, ok, _ in bench.search_goals("s", good, 0.05))
    bad = bench.SearchOutcome(_figures(300, 0.90, 0.8), _figures(400, 1.0), _figures(100, 1.0), 0.08, 1.0, 0)
    assert not any(ok for _, ok, _ in bench.search_goals("s", bad, 0.05))
    beaten = bench.BisectOutcome(_figures(120, 0.96), _figures(100, 0.96), 12, True, 60.0)
    assert [ok for _, ok, _ in bench.bisect_goals("b", beaten)] == [True, False]
    unmatched = bench.BisectOutcome(_figures(120, 0.93), _figures(100, 0.80), 40, False, 60.0)
    goals = bench.bisect_goals("b", unmatched)
    assert [ok for _, ok, _ in goals] == [False, True] and "no N <=" in goals[1][2]


def test_results_md_names_the_search_code_that_the_files_hold_now() -> None:
    section = re.search(r"<!-- search -->(.*?)<!-- /search -->", (ROOT / "bench" / "RESULTS.md").read_text(), re.DOTALL)
    assert section is not None, f"bench/RESULTS.md has no search section; write it: {REFRESH}"
    recorded = re.search(r"code sha256 ([0-9a-f]{16}) of the search modules and bench", section.group(1))
    assert recorded is not None, f"the search section records no code hash; refresh it: {REFRESH}"
    assert recorded.group(1) == bench.code_hash(), (
        f"bench/RESULTS.md's search section was made with other code ({recorded.group(1)}, now "
        f"{bench.code_hash()}); refresh it: {REFRESH}")


def test_the_code_hash_changes_with_any_measured_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in bench.CODE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    before = bench.code_hash()
    for name in bench.CODE:
        target = tmp_path / name
        original = target.read_bytes()
        target.write_bytes(original + b"\n")
        assert bench.code_hash() != before, name
        target.write_bytes(original)
    assert bench.code_hash() == before
