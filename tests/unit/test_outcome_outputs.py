"""Every outcome reaches every output (issue 32, acceptance): a ``power_loss`` has its own
column or count in report.md, report.html, the terminal's summary, ``invoke report --json``,
``invoke status --json`` and ``invoke export`` (CSV, JSONL, Parquet, and its ``--json``); the
schemas list every outcome where they count or name outcomes; an orderly reboot's record, as
the runner writes it (``infra``, reason code ``host_shutdown``) and as the judge reads an older
one (a ``reboot`` whose forensics show systemd's stop sequence), leaves each output with its
reason; the README's outcome table and its verdicts section name them.

The campaign is the synthetic one (tests/support/synthetic_campaign.py) with five of
``pl-350``'s records on ws2 turned into what this is about, and reboots counted as
reproductions (so only the orderly-reboot rule keeps them out of the rate).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft202012Validator
from rich.console import Console

from reprofleet.cli.progress import OUTCOME_COLUMNS, OUTCOME_STYLE, summary_table
from reprofleet.model import Outcome, ReasonCode
from reprofleet.records.export import folded, write_csv, write_jsonl, write_parquet
from reprofleet.records.pooling import load_pool
from reprofleet.report import render_html, render_markdown
from reprofleet.report.html import rate_table
from reprofleet.report.markdown import OUTCOMES as MARKDOWN_OUTCOMES
from reprofleet.report.plots import OUTCOME_ORDER
from reprofleet.verdicts import judge
from tests.support import synthetic_campaign as synthetic
from tests.support.cli_inprocess import run_task
from tests.support.paths import REPO

EVERY = [o.value for o in Outcome]
SCHEMAS = REPO / "docs" / "schema"
UPGRADE = "unattended-upgrades (its automatic reboot after an upgrade)"
LOST = ("1 (tasmota) read off before this controller switched anything: the host lost power (a plug's own "
        "timer, an overload trip, a switch by someone else, or its power supply)")
SHUT = ReasonCode.HOST_SHUTDOWN.words(f"{UPGRADE} (was reboot)")
STOP_LINE = "[ 8123.4] systemd-shutdown[1]: Syncing filesystems and block devices."
CHANGED: dict[str, dict[str, Any]] = {
    "synthetic-1-ws2-pl-350-1": {"outcome": "power_loss", "reason": LOST, "detect_latency_s": None},
    # the agent read the journal of the boot the attempt ran in: an upgrade's reboot
    "synthetic-1-ws2-pl-350-2": {"outcome": "reboot", "forensics": {"shutdown": {
        "orderly": True, "by": UPGRADE, "lines": ["systemd-shutdown[1]: Syncing filesystems and block devices."]}}},
    # a record written before the agent read the journal: only the kernel log's tail
    "synthetic-1-ws2-pl-350-3": {"outcome": "reboot", "forensics": {"tail": [STOP_LINE], "findings": []}},
    # what the runner writes now when it sees the orderly shutdown itself
    "synthetic-1-ws2-pl-350-4": {"outcome": "infra", "reason": SHUT},
    # a panic anywhere in the evidence is never orderly: still a reproduction
    "synthetic-1-ws2-pl-350-5": {"outcome": "reboot", "forensics": {
        "tail": ["Kernel panic - not syncing: hung_task: blocked tasks", STOP_LINE], "findings": []}},
    "synthetic-1-ws10-pl-350-1": {"forged_lines": 3},
}
POWER_LOSS_WHY = "power_loss: the host lost power by something other than this controller"
ORDERLY_WHY = f"orderly reboot ({UPGRADE}): not a reproduction"
OLDER_WHY = "orderly reboot (who asked is not in the journal; the kernel log ends with"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    content = synthetic.build(synthetic.Spec())
    for record in content["records"]:
        record.update(CHANGED.get(record["attempt"], {}))
    content["manifest"]["judging"]["reproductions"] = ["wedge", "reboot"]
    return synthetic.write(tmp_path / "synthetic-1", content)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, _ = run_task(capsys, *argv)
    return code, out


def valid(task: str, document: dict[str, Any]) -> dict[str, Any]:
    validator = Draft202012Validator(json.loads((SCHEMAS / f"{task}.schema.json").read_text()))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert not errors, f"{task}: {errors[:5]}"
    return document


# -- the schemas and the model list the same outcomes ----------------------------------------

def _nodes(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        yield where, node
        for key, sub in node.items():
            yield from _nodes(sub, f"{where}/{key}")
    elif isinstance(node, list):
        for index, sub in enumerate(node):
            yield from _nodes(sub, f"{where}/{index}")


def test_every_schema_that_counts_or_names_outcomes_lists_every_outcome_power_loss_included() -> None:
    import runpy

    assert list(runpy.run_path(str(SCHEMAS / "generate.py"))["OUTCOMES"]) == EVERY  # in the model's order
    found: dict[str, list[str]] = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        for where, node in _nodes(json.loads(path.read_text())):
            props = node.get("properties")
            if not isinstance(props, dict):
                continue
            if "outcomes" in props:  # counts by outcome: every outcome its own, required key
                counts = props["outcomes"]
                assert list(counts["properties"]) == EVERY and counts["required"] == EVERY, f"{path.name}{where}"
                found.setdefault(path.name, []).append("outcomes")
            if "reproductions" in props and props["reproductions"].get("type") == "array":
                assert props["reproductions"]["items"]["enum"] == EVERY, f"{path.name}{where}"
                found.setdefault(path.name, []).append("reproductions")
    assert {name: sorted(set(kinds)) for name, kinds in found.items()} == {
        "report.schema.json": ["outcomes", "reproductions"], "status.schema.json": ["outcomes", "reproductions"],
        "export.schema.json": ["outcomes"], "campaign.schema.json": ["reproductions"],
        "compare.schema.json": ["reproductions"], "demo.schema.json": ["reproductions"]}


def test_every_table_and_figure_has_a_column_and_a_colour_for_every_outcome() -> None:
    assert list(MARKDOWN_OUTCOMES) == list(OUTCOME_COLUMNS) == list(OUTCOME_ORDER) == EVERY
    assert set(OUTCOME_STYLE) == set(EVERY)


# -- invoke export ----------------------------------------------------------------------------

def test_export_rows_carry_power_loss_and_each_orderly_reboot_with_its_role_and_why(
        folder: Path, tmp_path: Path) -> None:
    rows = {row["attempt"]: row for row in folded(load_pool([folder]))}
    text = io.StringIO()
    write_csv(list(rows.values()), text)
    table = {row["attempt"]: row for row in csv.DictReader(io.StringIO(text.getvalue()))}
    text = io.StringIO()
    write_jsonl(list(rows.values()), text)
    lines = {row["attempt"]: row for row in map(json.loads, text.getvalue().splitlines())}
    parquet = pytest.importorskip("pyarrow.parquet")
    write_parquet(list(rows.values()), tmp_path / "a.parquet")
    read = parquet.read_table(tmp_path / "a.parquet")
    columns = {row["attempt"]: row for row in read.to_pylist()}
    for form in (table, lines, columns):
        said = {a: (form[a]["outcome"], form[a]["role"], form[a]["role_reason"]) for a in CHANGED}
        assert said["synthetic-1-ws2-pl-350-1"][:2] == ("power_loss", "excluded")
        assert said["synthetic-1-ws2-pl-350-1"][2].startswith(POWER_LOSS_WHY)
        assert said["synthetic-1-ws2-pl-350-2"] == ("reboot", "excluded", ORDERLY_WHY)
        assert said["synthetic-1-ws2-pl-350-3"][:2] == ("reboot", "excluded")
        assert said["synthetic-1-ws2-pl-350-3"][2].startswith(OLDER_WHY)
        assert said["synthetic-1-ws2-pl-350-4"] == ("infra", "not_run", SHUT[:100])  # runs again
        assert said["synthetic-1-ws2-pl-350-5"] == ("reboot", "reproduction", "")  # the panic
        assert form["synthetic-1-ws2-pl-350-1"]["reason"] == LOST
        assert form["synthetic-1-ws2-pl-350-4"]["reason"] == SHUT
    assert lines["synthetic-1-ws10-pl-350-1"]["forged_lines"] == 3  # JSONL: the record whole, as it was written
    assert table["synthetic-1-ws10-pl-350-1"]["forged_lines"] == "3"
    assert str(read.schema.field("forged_lines").type) == "int64" and columns["synthetic-1-ws10-pl-350-1"]["forged_lines"] == 3


def test_export_json_counts_the_rows_written_by_outcome(folder: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "export", str(folder), "--out", str(tmp_path / "a.csv"), "-j")
    document = valid("export", json.loads(out))
    records = [json.loads(line) for line in (folder / "attempts.jsonl").read_text().splitlines()]
    assert code == 0 and list(document["outcomes"]) == EVERY
    assert document["outcomes"] == {o: sum(1 for r in records if r["outcome"] == o) for o in EVERY}
    assert document["outcomes"]["power_loss"] == 1 and "role_reason" in document["columns_leading"]


# -- invoke report --json, invoke status --json ----------------------------------------------

def test_report_json_gives_power_loss_its_own_count_and_names_every_reason(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "report", str(folder), "-j")
    document = valid("report", json.loads(out))
    assert code == 0 and all(list(entry["outcomes"]) == EVERY for entry in document["rates"])
    rate = {(e["cell"], e["host"]): e for e in document["rates"]}
    mine, pooled, other = rate[("pl-350", "ws2")], rate[("pl-350", None)], rate[("pl-350", "ws10")]
    assert (mine["outcomes"]["power_loss"], pooled["outcomes"]["power_loss"], other["outcomes"]["power_loss"]) == (1, 1, 0)
    # the panic's reboot is a reproduction; the two orderly reboots and the power loss are out
    assert mine["outcomes"]["reboot"] == 3 and mine["reproductions"] == 1 and mine["excluded"] == 3
    assert mine["not_run"] == 2  # "not run: ssh refused", and the orderly shutdown the runner saw
    excluded = document["excluded"]
    assert excluded[ORDERLY_WHY] == 1
    assert sum(n for why, n in excluded.items() if why.startswith(POWER_LOSS_WHY)) == 1
    assert sum(n for why, n in excluded.items() if why.startswith(OLDER_WHY)) == 1
    assert document["not_run"][SHUT[:100]] == 1
    assert document["judging"]["reproductions"] == ["wedge", "reboot"]


def test_status_json_counts_every_outcome_for_every_host(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "status", str(folder), "-j")
    document = valid("status", json.loads(out))
    hosts = {h["name"]: h["outcomes"] for h in document["hosts"]}
    assert code == 0 and all(list(counts) == EVERY for counts in hosts.values())
    assert (hosts["ws2"]["power_loss"], hosts["ws10"]["power_loss"]) == (1, 0)


# -- report.md, report.html and the terminal -------------------------------------------------

def _column(header: list[str], rows: list[list[str]], cell: str, host: str, name: str) -> str:
    (row,) = [r for r in rows if r[0] == cell and r[1] == host]
    return row[header.index(name)]


def test_report_md_html_and_the_terminal_give_power_loss_its_column_and_list_each_reason(folder: Path) -> None:
    pool = load_pool([folder])
    judgement = judge(pool)
    markdown = render_markdown(judgement, pool.records, "t")
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines() if line.startswith("| ")]
    header = next(r for r in lines if r[:3] == ["cell", "host", "judged"])
    assert header[3:3 + len(EVERY)] == EVERY
    assert _column(header, lines, "pl-350", "ws2", "power_loss") == "1"
    assert _column(header, lines, "pl-350", "**(all)**", "power_loss") == "1"
    assert _column(header, lines, "pl-350", "ws10", "power_loss") == "0"
    assert re.search(rf"^- 1× `{re.escape(POWER_LOSS_WHY)}", markdown, re.M)  # reasons: in code spans
    assert f"- 1× `{ORDERLY_WHY}`" in markdown and f"- 1× `{SHUT[:100]}`" in markdown

    html = rate_table(judgement)
    head = re.findall(r"<th>([^<]*)</th>", html.split("</thead>")[0])
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in html.split("<tr")[2:]]
    assert head[3:3 + len(EVERY)] == EVERY and _column(head, rows, "pl-350", "ws2", "power_loss") == "1"
    assert 'class="n o-power_loss">1<' in html
    page = render_html(judgement, pool, "t")
    assert "power_loss: the host lost power" in page and "orderly reboot (unattended-upgrades" in page
    assert "the host was shut down in an orderly way during the attempt" in page

    console = Console(record=True, width=400, color_system=None)
    console.print(summary_table(judgement, "summary"))
    text = console.export_text()
    grid = [[c.strip() for c in re.split(r"[│┃]", line)[1:-1]] for line in text.splitlines() if "│" in line or "┃" in line]
    head = next(r for r in grid if r[:3] == ["cell", "host", "judged"])
    assert head[3:3 + len(EVERY)] == EVERY and _column(head, grid, "pl-350", "ws2", "power_loss") == "1"


# -- the README -----------------------------------------------------------------------------

def test_the_readmes_outcome_table_and_verdicts_name_power_loss_and_the_orderly_reboot_rule() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("\n| outcome | what happened |"):]
    table = table[:table.index("\n\n")]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == EVERY
    verdicts = readme[readme.index("\n## Verdicts\n"):readme.index("\n## Finding the boundary")]
    assert "`power_loss`" in verdicts and "An orderly reboot is not a" in verdicts
    assert "orderly reboot (WHO): not a reproduction" in verdicts and "forensics.shutdown" in verdicts
    assert "`forged_lines`" in readme[:readme.index("\n## What a host needs\n")]
