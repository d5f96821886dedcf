"""invoke compare: campaigns, controllers or hosts side by side, each judged by the verdict layer as a report of its
own, its claims Holm-adjusted across every side (tests/unit/test_compare_family.py pins the adjustment and the interaction)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from reprofleet.records.pooling import load_pool
from reprofleet.report.compare import CompareError, SideBy, build_sides, compare_html, compare_table, rate_text
from reprofleet.verdicts import judge

from tests.support.paths import REPO as ROOT
from tests.support.synthetic_campaign import Spec, build, write


@pytest.fixture(scope="module")
def two_campaigns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cmp")
    before = write(root / "before", build(Spec(campaign="before", seed=1)))
    after = write(root / "after", build(Spec(campaign="after", seed=2, wedge_rate={"default": 0.5, "pl-350": 0.0},
                                             cells=("default", "pl-350", "lgc-2800"))))
    return before, after


def _text(table: object) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_each_campaign_is_a_column_with_the_rate_and_verdict_it_has_alone(two_campaigns: tuple[Path, Path]) -> None:
    before, after = two_campaigns
    sides = build_sides([before, after], SideBy.PATH)
    assert [s.label for s in sides.sides] == ["before", "after"]
    alone = judge(load_pool([after]))
    verdict = next(v for v in alone.verdicts if v.cell == "pl-350")
    text = _text(compare_table(sides))
    assert rate_text(verdict) in text and verdict.kind.value in text
    rows = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│") and line.split("│")[1].strip()]
    assert rows == ["default", "lgc-2800", "pl-350"]  # the first campaign's playbook order


def test_controllers_and_hosts_become_sides_of_one_pool(two_campaigns: tuple[Path, Path]) -> None:
    sides = build_sides(list(two_campaigns), SideBy.CONTROLLER).sides
    assert [s.label for s in sides] == ["controller ctl-a", "controller ctl-b"]
    assert all(s.judgement.hosts == (h,) for s, h in zip(sides, ("ws2", "ws10")))
    hosts = build_sides(list(two_campaigns), SideBy.HOST).sides
    assert [s.label for s in hosts] == ["host ws2", "host ws10"]  # natural order


def test_a_cell_missing_on_one_side_is_a_dash_never_a_zero(tmp_path: Path, two_campaigns: tuple[Path, Path]) -> None:
    only_default = write(tmp_path / "small", build(Spec(campaign="small", cells=("default",))))
    sides = build_sides([two_campaigns[0], only_default], SideBy.PATH)
    line = next(l for l in _text(compare_table(sides)).splitlines() if "lgc-2800" in l)
    assert line.split("│")[3].strip() == "—"


def test_one_side_is_refused_with_a_reason(two_campaigns: tuple[Path, Path]) -> None:
    with pytest.raises(CompareError, match="at least two sides"):
        build_sides([two_campaigns[0]], SideBy.PATH)


def test_the_html_comparison_carries_each_sides_full_sentence(two_campaigns: tuple[Path, Path]) -> None:
    sides = build_sides(list(two_campaigns), SideBy.PATH)
    page = compare_html(sides, "cmp")
    for side in sides.sides:
        for verdict in side.judgement.verdicts:
            assert verdict.text.replace("'", "&#x27;") in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_invoke_compare_takes_paths_as_words(tmp_path: Path, two_campaigns: tuple[Path, Path]) -> None:
    out = tmp_path / "cmp.html"
    done = subprocess.run([sys.executable, "-m", "reprofleet", "compare", *map(str, two_campaigns), "--html", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "before" in done.stdout and "after" in done.stdout and out.exists()
    refused = subprocess.run([sys.executable, "-m", "reprofleet", "compare", str(two_campaigns[0]), "--by", "cell"],
                             cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert refused.returncode == 2 and "--by takes path, campaign, controller, host, group, not 'cell'" in refused.stderr


def test_inventory_groups_are_sides_and_a_group_without_records_is_left_out(two_campaigns: tuple[Path, Path]) -> None:
    groups = {"all": ("ws2", "ws10", "ws99"), "ungrouped": (), "rack10": ("ws10",), "rack2": ("ws2",),
              "spare": ("ws99",)}
    sides = build_sides(list(two_campaigns), SideBy.GROUP, groups=groups).sides
    assert [s.label for s in sides] == ["group rack2", "group rack10"]
    assert [s.judgement.hosts for s in sides] == [("ws2",), ("ws10",)]
    with pytest.raises(CompareError, match="--hosts INVENTORY"):
        build_sides(list(two_campaigns), SideBy.GROUP)
