"""report.html: self-contained, the verdicts of report.md, every wedge's last minute, the machines compared."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reprofleet.records.pooling import load_pool
from reprofleet.report import render_html, render_markdown
from reprofleet.report.freeze import MAX_POINTS, load_trace
from reprofleet.verdicts import judge

from tests.support.paths import REPO as ROOT
from tests.support.report_text import markdown_verdicts
from tests.support.synthetic_campaign import Spec, build, write


def _render(*folders: Path) -> tuple[str, str]:
    pool = load_pool(list(folders))
    judgement = judge(pool)
    return render_markdown(judgement, pool.records, "t"), render_html(judgement, pool, "t")


class _Tables(HTMLParser):
    """Rows of the table with id ``verdict-table``, and every src/href/url the page names."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self.tags: set[str] = set()
        self._in_table = self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href", "action", "poster")]
        if tag == "table" and ("id", "verdict-table") in attrs:
            self._in_table = True
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag == "td":
            self._in_cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        if tag == "td":
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.rows[-1][-1] += data


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("c") / "synthetic-1", build(Spec()))


@pytest.fixture(scope="module")
def rendered(campaign: Path) -> tuple[str, str]:
    return _render(campaign)


def test_the_verdict_table_comes_first_and_says_what_report_md_says(rendered: tuple[str, str]) -> None:
    markdown, page = rendered
    parser = _Tables()
    parser.feed(page)
    rows = [r for r in parser.rows if r]  # the header row has no <td>
    assert rows == markdown_verdicts(markdown)
    assert len(rows) == 3
    assert page.index('id="verdict-table"') < page.index("<svg")


def test_the_page_fetches_nothing_and_needs_no_script(rendered: tuple[str, str]) -> None:
    page = rendered[1]
    parser = _Tables()
    parser.feed(page)
    assert "script" not in parser.tags and "link" not in parser.tags and "img" not in parser.tags
    assert all(link.startswith("#") for link in parser.links), [l for l in parser.links if not l.startswith("#")]
    assert not re.search(r"url\((?!#)|@import|@font-face", page)  # url(#clip) only: a figure's own clip paths
    assert "@media print" in page


def test_every_wedge_gets_its_last_minute_with_phases_and_log_lines(campaign: Path, rendered: tuple[str, str]) -> None:
    page = rendered[1]
    wedges = [r for r in load_pool([campaign]).records if r["outcome"] == "wedge"]
    assert wedges
    for record in wedges:
        block = page.split(f'id="freeze-{record["attempt"]}"', 1)[1].split("</article>", 1)[0]
        assert "<svg" in block and "vLLM phase" in block
        assert "started" in block and "GPU has fallen off the bus" in block  # the tagged kernel line
        assert record["last_log_line"] in block


def test_a_freeze_trace_keeps_the_last_minute_thinned_and_ending_at_the_silence(campaign: Path) -> None:
    record = next(r for r in load_pool([campaign]).records if r["outcome"] == "wedge")
    trace = load_trace(record, campaign / record["stream"])
    clock = trace.series[0]
    assert len(clock.times) <= MAX_POINTS and clock.times[0] >= -60.0
    assert -0.2 <= clock.times[-1] <= 0.0  # the last sample, 0.1 s before the kernel's last line
    assert trace.phases and trace.phases[-1].end == 0.0


def test_a_missing_stream_is_a_note_not_a_crash(tmp_path: Path) -> None:
    folder = write(tmp_path / "c", build(Spec()))
    wedge = next(r for r in load_pool([folder]).records if r["outcome"] == "wedge")
    (folder / wedge["stream"]).unlink()
    page = _render(folder)[1]
    block = page.split(f'id="freeze-{wedge["attempt"]}"', 1)[1].split("</article>", 1)[0]
    assert "no stream file for this attempt" in block and "<svg" not in block


def test_hosts_in_natural_order_and_their_differences_highlighted(rendered: tuple[str, str]) -> None:
    page = rendered[1]
    facts = page.split('<table class="facts">', 1)[1].split("</table>", 1)[0]
    assert facts.index("<th>ws2</th>") < facts.index("<th>ws10</th>")
    assert '<tr class="differs"><th scope="row">VBIOS ≠</th><td>98.02.81.00.07</td><td>98.02.81.00.08</td>' in facts
    assert '<tr><th scope="row">driver</th>' in facts  # the same everywhere: not highlighted
    assert "The hosts differ in: <b>VBIOS, journal persistent</b>" in page


def test_hand_commands_show_the_gpu_settings_env_and_docker_line(rendered: tuple[str, str]) -> None:
    page = rendered[1]
    commands = page.split('id="commands"', 1)[1].split("</section>", 1)[0]
    assert "sudo nvidia-smi -i 0 -lgc 180,2800" in commands and "sudo nvidia-smi -i 0 -rgc" in commands
    assert "sudo nvidia-smi -i 0 -pl 350" in commands
    assert "--gpus device=0 --ipc host --env CUTE_DSL_ARCH=sm_120a" in commands
    assert "vllm/vllm-openai:v0.25.1 /poc.py --gpu-memory-utilization 0.87 --spec-tokens 9" in commands


def test_what_could_not_be_judged_is_listed_with_reasons(rendered: tuple[str, str]) -> None:
    section = rendered[1].split('id="not-judged"', 1)[1].split("</section>", 1)[0]
    assert "not run: ssh refused" in section


def test_two_controllers_overlapping_folders_give_the_report_of_one_merged_folder(tmp_path: Path) -> None:
    content = build(Spec())
    by = {r["attempt"]: r["controller"] for r in content["records"]}
    overlap = {a for i, a in enumerate(sorted(by)) if i % 4 == 0}
    a = write(tmp_path / "ctl-a" / "synthetic-1", content, attempts={k for k, v in by.items() if v == "ctl-a"} | overlap,
              hosts={"ws2"})
    b = write(tmp_path / "ctl-b" / "synthetic-1", content, attempts={k for k, v in by.items() if v == "ctl-b"} | overlap,
              hosts={"ws10"})
    merged = write(tmp_path / "merged" / "synthetic-1", content)
    assert _render(a, b) == _render(merged)
    assert _render(b, a) == _render(merged)


def test_wedge_figures_go_round_robin_over_cell_and_host_until_the_budget_is_spent(tmp_path: Path) -> None:
    """The mechanism that keeps report.html under 5 MB (its size for a 1000-attempt campaign full
    of wedges is measured in bench/report_size.py, bench/RESULTS.md): every (cell, host) pair gets
    its first figure before any pair gets a second, and drawing stops once the budget is spent;
    every wedge keeps its block, drawn or not."""
    from reprofleet.report.folders import Folders
    from reprofleet.report.freeze import draw_within_budget, drawable, points_for

    spec = Spec(hosts={"ws1": "ctl-a", "ws2": "ctl-a"}, attempts=6, seconds=60.0,
                wedge_rate={"default": 0.6, "lgc-2800": 0.05, "pl-350": 0.4})
    pool = load_pool([write(tmp_path / "c", build(spec))])
    folders = Folders.of(pool)
    freezes = sorted((r for r in pool.records if r["outcome"] in ("wedge", "reboot")), key=lambda r: (str(r["started"]), r["attempt"]))
    traces = [load_trace(r, folders.stream(r), points_for(len(freezes))) for r in freezes]
    every = draw_within_budget(traces, budget=10**12)
    assert set(every) == {t.attempt for t in traces if drawable(t)} and len(every) >= 6
    pairs: dict[tuple[str, str], str] = {}
    for trace in sorted((t for t in traces if drawable(t)), key=lambda t: (t.cell, t.host)):
        pairs.setdefault((trace.cell, trace.host), trace.attempt)  # each pair's first wedge
    first_round = sum(len(every[a]) for a in pairs.values())
    assert len(pairs) < len(every)  # some pair wedged more than once: a second round exists
    drawn = draw_within_budget(traces, budget=first_round - 1)
    assert set(drawn) == set(pairs.values())  # one figure per pair, then the budget is spent
    page = render_html(judge(pool), pool, "small")
    assert page.count('class="freeze"') == len(freezes)


def test_invoke_report_takes_paths_as_words_and_writes_both_files(tmp_path: Path) -> None:
    content = build(Spec())
    first = write(tmp_path / "a" / "synthetic-1", content, attempts={r["attempt"] for r in content["records"][:20]})
    second = write(tmp_path / "b" / "synthetic-1", content)
    done = subprocess.run([sys.executable, "-m", "reprofleet", "report", str(first), str(second), "--out",
                           str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "report.html").exists()
    assert f"html:    {tmp_path / 'out' / 'report.html'}" in done.stdout
    assert (tmp_path / "out" / "report.md").read_text() == _render(second)[0].replace("# t\n", "# reprofleet report\n", 1)


def test_a_campaign_that_recorded_nothing_still_gets_a_page_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "attempts.jsonl").write_text("")
    page = _render(tmp_path / "c")[1]
    assert "No attempt wedged or rebooted its host." in page and "no judged attempts" in page
    assert "No host facts were recorded" in page
