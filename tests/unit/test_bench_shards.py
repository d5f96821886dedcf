"""bench/shards.py runs the shard as its job does and keeps honest books: the shard's plan
comes from its folder alone (bench/scale_controller.py ``--run-shard``), imports are told from
the campaign's own CPU-seconds, and its section of RESULTS.md is replaced, never added twice.

No fleet: these pin the bench's bookkeeping on folders and runs written by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.bench_modules import load_bench
from tests.support.resume_folders import write_book, write_inventory



_load = load_bench


def test_the_bench_runs_a_shard_from_its_folder_alone_as_its_job_would(tmp_path: Path) -> None:
    shards, controller = _load("shards"), _load("scale_controller")
    names = [f"sh{i}" for i in range(6)]
    inventory = write_inventory(tmp_path / "inv", {n: f"192.0.2.{10 + i}" for i, n in enumerate(names)})
    folder = shards.write_shards(tmp_path / "reports", inventory, write_book(tmp_path / "book"), names, 3)
    plan, hosts = controller.shard_plan(folder / "shard-2")
    assert [h.name for h in hosts] == ["sh1", "sh4"] and plan.shard.index == 2 and plan.shard.count == 3
    assert plan.campaign_id == "shards-bench-campaign" and set(plan.per_host) == {"sh1", "sh4"}


def _measured(cpu: float, imports: float, hosts: int) -> dict[str, Any]:
    return {"hosts": hosts, "records": hosts * 4, "not_clean": 0, "cpu_s": cpu, "imports_cpu_s": imports,
            "startup_cpu_s": 0.5, "maxrss_mb": 150.0, "wall_s": 30.0, "threads_peak": 10}


def test_the_section_sets_imports_apart_and_is_replaced_in_place(tmp_path: Path) -> None:
    shards = _load("shards")
    run = {"shards": 2, "per_shard": 4, "attempts_per_host": 4, "sleep_s": 1.0, "sample_hz": 10.0, "commit": "abc1234",
           "date": "2026-12-07", "command": "bench/shards.py --shards 2 --per-shard 4",
           "whole": _measured(6.0, 2.0, 8), "shard": _measured(4.0, 2.0, 4)}
    text = shards.markdown([run])
    assert "| one for all 8 hosts | 8 | 32 | 0 | 6.00 | 2.00 | 4.00 |" in text
    assert "(50% of its campaign CPU-seconds, imports left out)" in text
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other -->\nkept\n<!-- /other -->\n")
    shards.write_section(results, text)
    shards.write_section(results, text)
    body = results.read_text()
    assert body.count(shards.MARK[0]) == 1 and "kept" in body
