"""What a claim covers: the host stack and GPU settings each attempt ran under, and the
campaigns its two sides came from (issue 33 items 3, 4 and 8).

Each test pins one way the report misled: wedges under driver 610 pooled with clean runs
under 612, a default cell run under its owner's clock lock pooled with true defaults, and a
cell from another campaign called "fixed" at the planned-end level against a reference a
month older, another image and another PoC, with no word of it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from reprofleet.records.pooling import CampaignInfo, Plan, Pool, load_pool
from reprofleet.verdicts import VerdictKind, judge
from tests.support.verdict_records import SEED, many, pool_of

OLD = {"kernel": "6.8.0-45", "driver": "610.43", "cuda": "13.0", "vbios": "96.00.99"}
NEW = {**OLD, "driver": "612.10"}
DEFAULTS = {"graphics_clocks": [345, 1980], "graphics_clocks_freqs": [345, 1980], "memory_clocks": [2619, 2619],
            "memory_clocks_freqs": [2619, 2619], "max_clocks_mhz": {"graphics": 1980, "memory": 2619},
            "power_limit_w": 700.0, "default_power_limit_w": 700.0, "persistence": True}
LOCKED = {**DEFAULTS, "graphics_clocks": [1410, 1410], "graphics_clocks_freqs": [1410, 1410]}


def _by_cell(judgement: Any) -> dict[str, Any]:
    return {v.cell: v for v in judgement.verdicts}


# -- item 4: the host stack is part of what ran ------------------------------------------

def test_wedges_under_one_driver_are_never_pooled_with_clean_runs_under_the_next() -> None:
    records = many(6, "default", "ws01", "wedge", stack=OLD) + many(6, "default", "ws01", "clean", stack=NEW)
    judgement = judge(pool_of(records))
    cells = _by_cell(judgement)
    assert len(cells) == 2, cells.keys()
    old = next(v for c, v in cells.items() if "driver 610.43" in c)
    new = next(v for c, v in cells.items() if "driver 612.10" in c)
    assert (old.reproductions, old.judged) == (6, 6) and (new.reproductions, new.judged) == (0, 6)
    assert "CUDA" not in old.cell  # only what differs between the strata names them
    assert any("the host stack it ran under" in w for w in judgement.warnings)


def test_records_without_a_stack_read_as_before_one_stratum_with_the_plain_identity() -> None:
    records = many(3, "default", "ws01", "wedge") + many(3, "default", "ws01", "clean")
    judgement = judge(pool_of(records))
    assert [v.cell for v in judgement.verdicts] == ["default"]
    assert judgement.verdicts[0].cell_id.count("~") == 0 and judgement.verdicts[0].judged == 6


def test_older_records_of_unknown_stack_are_a_stratum_of_their_own_beside_known_ones() -> None:
    records = many(3, "default", "ws01", "wedge") + many(3, "default", "ws01", "clean", stack=NEW)
    cells = _by_cell(judge(pool_of(records)))
    assert any(c.endswith("host stack unknown") for c in cells), cells.keys()
    assert any("driver 612.10" in c for c in cells), cells.keys()


def _campaign_with_facts(folder: Path, facts: dict[str, Any], records: list[dict[str, Any]]) -> str:
    body = json.dumps(facts, sort_keys=True, default=str)
    digest = hashlib.sha256(body.encode()).hexdigest()
    (folder / "facts" / "by-hash").mkdir(parents=True, exist_ok=True)
    (folder / "facts" / "by-hash" / f"{digest}.json").write_text(body + "\n")
    with (folder / "attempts.jsonl").open("a") as out:
        out.writelines(json.dumps({**r, "facts": digest}) + "\n" for r in records)
    return digest


def test_a_pooled_folder_reads_each_records_stack_from_the_facts_snapshot_its_hash_names(tmp_path: Path) -> None:
    facts = {"kernel": "6.8.0-45", "driver_version": "610.43", "cuda_driver_version": "13.0",
             "gpus": [{"index": 0, "vbios": "96.00.99"}]}
    _campaign_with_facts(tmp_path, facts, many(3, "default", "ws01", "wedge"))
    _campaign_with_facts(tmp_path, {**facts, "driver_version": "612.10"}, many(3, "default", "ws01", "clean"))
    pool = load_pool([tmp_path])
    assert {r.stack["driver"] for r in pool.records} == {"610.43", "612.10"}
    assert {r.stack["vbios"] for r in pool.records} == {"96.00.99"}
    assert len(judge(pool).verdicts) == 2


# -- item 8: the settings read back are evidence -----------------------------------------

def test_a_default_cell_under_a_clock_lock_its_owner_left_is_its_own_stratum_and_never_the_reference() -> None:
    records = many(8, "default", "ws01", "wedge", policy=DEFAULTS) + many(8, "default", "ws02", "clean", policy=LOCKED)
    records += many(8, "fix", "ws01", "clean", policy=DEFAULTS) + many(8, "fix", "ws02", "clean", policy=DEFAULTS)
    judgement = judge(pool_of(records, reference="default", cells=("default", "fix")))
    cells = _by_cell(judgement)
    locked = next(v for c, v in cells.items() if "read back" in c)
    assert "graphics_clocks locked at 1410–1410 MHz" in locked.cell and locked.hosts == ("ws02",)
    plain = cells["default@" + locked.cell_id.split("@", 1)[1].split("~", 1)[0]]
    assert plain.hosts == ("ws01",) and plain.judged == 8
    fix = next(v for c, v in cells.items() if c.startswith("fix"))
    assert fix.compared_hosts == ("ws01",)  # the locked default is no reference for ws02
    assert "not compared on ws02" in fix.text
    assert any("GPU settings read back" in w for w in judgement.warnings)


def test_a_planned_setting_that_read_back_otherwise_names_what_the_card_reported() -> None:
    asked = {"graphics_clocks": [1410, 1410]}
    records = many(4, "lgc", "ws01", "clean", policy=LOCKED, factors={"cell": "lgc", **asked})
    records += many(4, "lgc", "ws01", "clean", policy=DEFAULTS, factors={"cell": "lgc", **asked})
    cells = _by_cell(judge(pool_of(records, reference="lgc")))
    assert any("graphics_clocks read back 345–1980 MHz, planned 1410–1410" in c for c in cells), cells.keys()
    assert any("~" not in c for c in cells)  # the attempts that read back as planned keep the plain identity


# -- item 3: comparisons across campaigns say so -----------------------------------------

def _planned(records: list[dict[str, Any]], order: str = "interleaved") -> Pool:
    campaigns = {c: CampaignInfo(c, SEED, "default", ("default", "fix"), plan=Plan(10, ("ws01", "ws02")), order=order)
                 for c in {r["campaign"] for r in records}}
    return Pool(tuple(records), campaigns)


def _sides(cell_campaign: str, cell_day: str, cell_extra: dict[str, Any]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for host in ("ws01", "ws02"):
        records += many(10, "default", host, "wedge", campaign="c1", started=f"2026-10-01T0{host[-1]}:00:00Z",
                        poc="a" * 64, runtime={"kind": "docker", "label": "v", "image_digest": "sha256:" + "1" * 64})
        records += many(10, "fix", host, "clean", campaign=cell_campaign, started=f"{cell_day}T0{host[-1]}:30:00Z",
                        **{"poc": "a" * 64, "runtime": {"kind": "docker", "label": "v", "image_digest": "sha256:" + "1" * 64},
                           **cell_extra})
    return records


def test_within_one_planned_campaign_the_comparison_is_fixed_n_and_names_no_other_campaign() -> None:
    fix = _by_cell(judge(_planned(_sides("c1", "2026-10-01", {}))))["fix"]
    assert fix.kind is VerdictKind.FIXED and not fix.anytime
    assert "campaign" not in fix.text and "differ in" not in fix.text


def test_a_cell_from_another_campaign_is_judged_anytime_valid_and_names_what_differs() -> None:
    other = {"poc": "b" * 64, "runtime": {"kind": "docker", "label": "v", "image_digest": "sha256:" + "2" * 64}}
    fix = _by_cell(judge(_planned(_sides("c2", "2026-11-01", other))))["fix"]
    assert fix.anytime, fix.text
    assert "compared across campaigns: the cell ran in c2 (2026-11-01), the reference in c1 (2026-10-01)" in fix.text
    assert "image digest 222222222222 for the cell, 111111111111 for the reference" in fix.text
    assert "PoC digest bbbbbbbbbbbb for the cell, aaaaaaaaaaaa for the reference" in fix.text
    assert "a gap of 31 days between the sides" in fix.text


def test_the_driver_each_side_ran_under_is_named_when_it_differs() -> None:
    records = [{**r, "stack": OLD if r["cell"] == "default" else NEW} for r in _sides("c1", "2026-10-01", {})]
    fix = _by_cell(judge(_planned(records)))["fix"]
    assert "driver 612.10 for the cell, 610.43 for the reference" in fix.text


def test_a_sequential_campaign_says_its_sides_ran_in_separate_blocks_of_time() -> None:
    fix = _by_cell(judge(_planned(_sides("c1", "2026-10-01", {}), order="sequential")))["fix"]
    assert "order: sequential" in fix.text


# -- the texts name what each wedge ran under ---------------------------------------------

def test_the_nvidia_issue_text_shows_the_driver_the_wedges_ran_under_not_the_one_installed_after(tmp_path: Path) -> None:
    from reprofleet.report.write import ReportRequest, pooled_report

    facts = {"kernel": "6.8.0-45", "driver_version": "610.43", "cuda_driver_version": "13.0",
             "gpus": [{"index": 0, "vbios": "96.00.99", "name": "H200"}]}
    folder = tmp_path / "c1"
    folder.mkdir()
    wedges = many(3, "default", "ws01", "wedge", started="2026-10-01T01:00:00Z")
    _campaign_with_facts(folder, facts, wedges)
    later = {**facts, "driver_version": "612.10"}
    _campaign_with_facts(folder, later, many(3, "default", "ws01", "clean", started="2026-10-02T01:00:00Z"))
    (folder / "facts" / "ws01.json").write_text(json.dumps(later, sort_keys=True) + "\n")  # the host as it is now
    written = pooled_report(ReportRequest((folder,), issue="nvidia", markdown=tmp_path / "out" / "report.md"))
    assert written.issue is not None
    text = written.issue.read_text()
    system = text.split("## What happens", 1)[0]
    assert "610.43" in system.split("Each host's facts", 1)[1] and "612.10" not in system.split("Each host's facts", 1)[1]
    assert "ws01: driver 610.43, CUDA 13.0, kernel 6.8.0-45, VBIOS 96.00.99: 3 attempts, 3 froze" in text
    freezes = text.split("## Freeze timelines", 1)[1].split("## Logs", 1)[0]
    assert freezes.count("under driver 610.43") == 3 and "612.10" not in freezes


def test_report_md_shows_the_settings_read_back_and_the_stack_per_cell_and_host() -> None:
    from reprofleet.report import render_markdown

    records = many(4, "default", "ws01", "wedge", policy=DEFAULTS, stack=OLD)
    records += many(4, "default", "ws02", "clean", policy=LOCKED, stack=OLD)
    pool = pool_of(records)
    text = render_markdown(judge(pool), pool.records, "t")
    table = text.split("## What each cell ran under, per host", 1)[1]
    ws02 = next(line for line in table.splitlines() if "`ws02`" in line)
    assert "graphics 1410–1410 MHz" in ws02 and "graphics_clocks locked at 1410–1410 MHz" in ws02
    ws01 = next(line for line in table.splitlines() if "`ws01`" in line)
    assert "as planned" in ws01 and "driver 610.43, CUDA 13.0" in ws01 and "| 4 | 4 |" in ws01


def test_report_html_shows_the_same_table_of_what_each_cell_ran_under() -> None:
    from reprofleet.report import render_html

    records = many(4, "default", "ws02", "clean", policy=LOCKED, stack=OLD)
    pool = pool_of(records)
    page = render_html(judge(pool), pool, "t")
    assert "What each cell ran under, per host" in page
    assert "graphics_clocks locked at 1410–1410 MHz" in page and "driver 610.43, CUDA 13.0" in page


def test_invoke_compare_says_so_on_every_side_and_in_the_pooled_column_when_the_sides_span_campaigns() -> None:
    from reprofleet.report.compare import SideBy, side_by_side, split_pool

    other = {"poc": "b" * 64}
    pool = _planned(_sides("c2", "2026-11-01", other))
    result = side_by_side(split_pool(pool, SideBy.HOST), SideBy.HOST, "default", pool)
    texts = [next(v for v in side.judgement.verdicts if v.cell == "fix").text
             for side in (*result.sides, result.pooled) if side is not None]
    assert len(texts) == 3
    assert all("compared across campaigns" in t and "PoC digest bbbbbbbbbbbb" in t for t in texts), texts
