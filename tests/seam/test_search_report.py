"""A search's result in report.md, report.html and ``report --json``, from the campaign folder alone.

The folder comes from a real (seam) campaign run on the search runner's fake host
(tests/support/search_campaign.py); the model is the toy ladder of tests/support/search_fakes.py, put at the seam the report
shares with the runner (``LadderPlan.ladder``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from invoke import Program

from reprofleet.cli.tasks import ns
from reprofleet.clock import VirtualClock
from reprofleet.playbook.ladder import LadderPlan
from reprofleet.records.pooling import load_pool
from reprofleet.report.html import render_html
from reprofleet.report.markdown import render_markdown
from reprofleet.report.search import search_report
from reprofleet.verdicts import judge
from tests.support.search_fakes import ScriptedBisect, StepLadder
from tests.support.search_campaign import LEVELS, ClockHost, run_search, search_book


@pytest.fixture
def searched(tmp_path: Path) -> Path:
    clock = VirtualClock()
    result = run_search(search_book(tmp_path / "book"), tmp_path, ClockHost(clock), StepLadder(len(LEVELS)), clock)
    return result.directory.root


def test_report_md_says_the_boundary_and_the_level_above_with_its_evidence(searched: Path) -> None:
    pool = load_pool([searched])
    search = search_report(pool, [searched], ladder_for=lambda plan: StepLadder(len(plan.cells)))
    assert search is not None
    text = render_markdown(judge(pool), pool.records, "t", search)
    assert ("hosts h1: highest clean level meeting ε=0.1, δ=0.1: 2600 MHz (Pr(P>ε)=0.03); "
            "above it 2800 MHz: 1/1 reproduced; 7 attempts, 1 power cycles; decided") in text
    verdicts = text[text.index("## Verdicts"):]
    assert "| search boundary | hosts h1: highest clean level" in verdicts
    assert "| 2600 MHz | 2 | 0 |" in text  # the evidence per level
    assert "does not claim the level never wedges" in text
    assert "anytime-valid, as this is not the planned end: a search chose how often each level ran" in text


def test_report_html_has_the_ladder_and_posterior_figures(searched: Path) -> None:
    pool = load_pool([searched])
    search = search_report(pool, [searched], ladder_for=lambda plan: StepLadder(len(plan.cells)))
    page = render_html(judge(pool), pool, "t", search)
    assert 'aria-label="search ladder"' in page and 'aria-label="search posterior per level"' in page
    assert '<section id="search"><h2>Boundary search</h2>' in page
    assert page == render_html(judge(pool), pool, "t", search)  # same records, same bytes


def test_a_pool_without_a_ladder_has_no_search_section(tmp_path: Path) -> None:
    from tests.support.fleet_campaign import write_playbook  # noqa: F401  (a plain campaign folder is enough: none)

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.json").write_text(json.dumps({"campaign": "c", "judging": None}))
    assert search_report(load_pool([]), [tmp_path / "c"]) is None


def test_report_json_carries_the_result_through_invokes_parser(searched: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(LadderPlan, "ladder", lambda plan: StepLadder(len(plan.cells)))
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(
        ["reprofleet", "report", str(searched), "--json"], exit=False)
    out = json.loads(capsys.readouterr().out)
    assert out["search"]["kind"] == "search" and out["search"]["levels"][2] == "2600 MHz"
    assert out["search"]["result"][0]["boundary"] == 2
    assert out["search"]["lines"][0].startswith("hosts h1: highest clean level")


def test_a_bisection_says_first_good_and_last_bad_with_the_posterior(tmp_path: Path) -> None:
    from reprofleet.playbook.ladder import ladder_json, ladder_plan
    from reprofleet.model import BisectBlock
    from reprofleet.report.search import SearchReport, boundary_lines, markdown_section

    block = BisectBlock("vars.vllm", ("0.24.0", "0.25.1", "0.26.0", "0.27.0"),
                        tuple(f"bisect-vllm-{v}" for v in ("0.24.0", "0.25.1", "0.26.0", "0.27.0")))
    plan = ladder_plan(block, ["h1"])
    assert ladder_json(plan)["spec"]["bad_first"] is True
    fake = ScriptedBisect([0, 3, 1, 2], first_good=2)
    report = SearchReport("c", plan, fake.results([]), ())
    assert boundary_lines(report)[0].startswith("first good: 0.26.0 (posterior 0.97), last bad: 0.25.1")
    assert any("| 0.26.0 |" in line for line in markdown_section(report))
    assert ("It assumes a bad version reproduces at least 0.2 of the time (`bisect.min_rate`): the first good is called "
            "good after 14 clean runs, which a version at that rate passes at most 0.05 of the time") in "\n".join(
        markdown_section(report))


def test_a_model_that_fails_costs_the_search_section_not_the_report(searched: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def broken(plan: Any) -> Any:
        raise ImportError("stats.boundary is not there yet")

    monkeypatch.setattr(LadderPlan, "ladder", broken)
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(
        ["reprofleet", "report", str(searched), "--out", str(searched / "out.md")], exit=False)
    assert "search result not computed: ImportError" in capsys.readouterr().out
    assert (searched / "out.md").exists()
