"""`invoke export` and `report --json`'s rates: one row per attempt with its amendments
folded (CSV, Parquet, JSON lines), and the README's own fold snippets (jq, pandas) giving
the same rows; a line that is not JSON names its file and line."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from invoke import Program

from tests.support import synthetic_campaign as synthetic
from reprofleet.cli.tasks import ns
from reprofleet.records.export import ExportError, folded, write_csv, write_jsonl, write_parquet
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import RecordError, read_records
from tests.support import paths

README = paths.REPO / "README.md"


def _campaign(tmp_path: Path) -> Path:
    """The synthetic campaign with every wedge amended as recovery amends it (forensics; the
    first wedge turned out to be a reboot), so attempts.jsonl has more lines than attempts."""
    folder = synthetic.write(tmp_path / "synthetic-1", synthetic.build(synthetic.Spec()))
    lines = (folder / "attempts.jsonl").read_text().splitlines()
    wedges = [json.loads(line)["attempt"] for line in lines if json.loads(line)["outcome"] == "wedge"]
    amendments = [{"schema": 1, "amends": a, "amended": "2026-11-30T09:00:00.000Z", "forensics": {"xid": [79]}}
                  for a in wedges]
    amendments[0]["outcome"] = "reboot"
    with open(folder / "attempts.jsonl", "a") as handle:
        handle.write("".join(json.dumps(a) + "\n" for a in amendments))
    return folder


def _line_count(folder: Path) -> int:
    return len((folder / "attempts.jsonl").read_text().splitlines())


def test_csv_has_one_row_per_attempt_with_its_amendments_folded(tmp_path: Path) -> None:
    folder = _campaign(tmp_path)
    rows = folded(load_pool([folder]))
    text = io.StringIO()
    write_csv(rows, text)
    table = list(csv.DictReader(io.StringIO(text.getvalue())))
    records = {r["attempt"]: r for r in read_records(folder / "attempts.jsonl")}
    assert len(table) == len(records) < _line_count(folder)
    assert list(table[0])[:6] == ["campaign", "attempt", "controller", "host", "cell", "cell_id"]
    by_id = {row["attempt"]: row for row in table}
    amended = [a for a, r in records.items() if r.get("amended")]
    assert amended and all(by_id[a]["amended"] == "True" and json.loads(by_id[a]["forensics"]) == {"xid": [79]}
                           for a in amended)
    assert [by_id[a]["outcome"] for a in amended].count("reboot") == 1
    # the manifest counts wedges only: the amended reboot is excluded, with its reason
    assert {row["role"] for row in table} == {"reproduction", "non_reproduction", "not_run", "excluded"}
    assert [row["outcome"] for row in table if row["role"] == "excluded"] == ["reboot"]
    assert all(row["role"] == "not_run" for row in table if row["reason"].startswith("not run"))
    assert float(by_id[amended[0]]["duration_s"]) == 49.0  # 45 s of stream and 4 s to the end


def test_pandas_reads_the_csv_as_one_row_per_attempt(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    folder = _campaign(tmp_path)
    text = io.StringIO()
    write_csv(folded(load_pool([folder])), text)
    frame = pandas.read_csv(io.StringIO(text.getvalue()))
    assert len(frame) == len(list(read_records(folder / "attempts.jsonl")))
    assert frame["attempt"].is_unique and frame["attempt_index"].dtype.kind == "i"


def test_two_copies_of_a_folder_export_each_attempt_once(tmp_path: Path) -> None:
    folder = _campaign(tmp_path)
    copy = shutil.copytree(folder, tmp_path / "ctl2" / folder.name)
    assert len(folded(load_pool([folder, copy]))) == len(folded(load_pool([folder])))


def test_jsonl_is_each_folded_record_whole(tmp_path: Path) -> None:
    import jsonlines

    folder = _campaign(tmp_path)
    text = io.StringIO()
    write_jsonl(folded(load_pool([folder])), text)
    exported = list(jsonlines.Reader(io.StringIO(text.getvalue())))
    records = {r["attempt"]: r for r in read_records(folder / "attempts.jsonl")}
    assert len(exported) == len(records)
    for row in exported:
        assert {k: v for k, v in row.items() if k not in ("role", "role_reason", "duration_s", "amended")} == \
            {k: v for k, v in records[row["attempt"]].items() if k != "amended"}


def test_parquet_keeps_the_columns_types_and_nested_fields_as_json(tmp_path: Path) -> None:
    parquet = pytest.importorskip("pyarrow.parquet")
    folder = _campaign(tmp_path)
    rows = folded(load_pool([folder]))
    write_parquet(rows, tmp_path / "attempts.parquet")
    table = parquet.read_table(tmp_path / "attempts.parquet")
    assert table.num_rows == len(rows)
    types = {field.name: str(field.type) for field in table.schema}
    assert (types["attempt_index"], types["cold_boot"], types["detect_latency_s"], types["factors"]) == (
        "int64", "bool", "double", "string")
    first = table.to_pylist()[0]
    assert json.loads(first["factors"]) == rows[0]["factors"] and first["attempt"] == rows[0]["attempt"]


def test_parquet_without_pyarrow_is_one_line_saying_what_to_install(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ExportError, match=r"^--format parquet needs pyarrow: pip install 'reprofleet\[export\]'$"):
        write_parquet([], tmp_path / "x.parquet")


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text('{"schema": 1, "attempt": "a"}\n\n{"schema": 1, oops}\n{"schema": 1, "attempt": "b"}\n')
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}:3: not JSON: "):
        list(read_records(path))
    path.write_text('{"schema": 1, "attempt": "a"}\n{"schema": 1, "att')  # a torn tail is skipped
    assert [r["attempt"] for r in read_records(path)] == ["a"]


# -- the task, and the README's snippets -----------------------------------------------------

def _run(*argv: str) -> None:
    Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", *argv], exit=False)


def test_invoke_export_through_invokes_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _campaign(tmp_path)
    _run("export", str(folder), "--format", "jsonl")
    assert len(capsys.readouterr().out.splitlines()) == len(list(read_records(folder / "attempts.jsonl")))
    _run("export", str(folder), "--out", str(tmp_path / "a.csv"))
    assert "attempts -> " in capsys.readouterr().err and (tmp_path / "a.csv").read_text().startswith("campaign,")
    for wrong in (["--format", "xml"], ["--format", "parquet"]):
        with pytest.raises(SystemExit) as caught:  # exit=True: the exit status reaches sys.exit
            Program(namespace=ns, name="reprofleet", binary="reprofleet").run(["reprofleet", "export", str(folder),
                                                                               *wrong])
        assert caught.value.code == 2


def test_report_json_carries_each_cells_rate_on_every_host_and_pooled(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = _campaign(tmp_path)
    _run("report", str(folder), "--json")
    rates = json.loads(capsys.readouterr().out)["rates"]
    records = list(read_records(folder / "attempts.jsonl"))
    for entry in rates:
        own = [r for r in records if r["cell"] == entry["cell"] and entry["host"] in (None, r["host"])]
        wedges = sum(1 for r in own if r["outcome"] in ("wedge", "reboot"))  # the manifest counts wedge only
        assert entry["reproductions"] == sum(1 for r in own if r["outcome"] == "wedge") <= wedges
        assert entry["judged"] == sum(1 for r in own if r["outcome"] in ("wedge", "clean"))
        assert entry["interval"]["low"] <= (entry["rate"] or 0) <= entry["interval"]["high"]
    assert {e["host"] for e in rates} == {"ws2", "ws10", None}


def _readme_block(starts: str) -> str:
    """The README's indented code block whose first line starts with ``starts``."""
    lines = README.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("    " + starts))
    block = []
    for line in lines[first:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip()


def _exported_ids(folder: Path) -> list[dict[str, Any]]:
    return sorted(({"attempt": r["attempt"], "outcome": r["outcome"], "forensics": r["forensics"]}
                   for r in read_records(folder / "attempts.jsonl")), key=lambda r: r["attempt"])


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_readmes_jq_fold_gives_one_row_per_attempt(tmp_path: Path) -> None:
    folder = _campaign(tmp_path)
    command = _readme_block("jq -sc ")
    shutil.copy(folder / "attempts.jsonl", tmp_path / "attempts.jsonl")
    subprocess.run(command, shell=True, cwd=tmp_path, check=True, timeout=60)
    rows = [json.loads(line) for line in (tmp_path / "folded.jsonl").read_text().splitlines()]
    assert sorted(({"attempt": r["attempt"], "outcome": r["outcome"], "forensics": r["forensics"]} for r in rows),
                  key=lambda r: r["attempt"]) == _exported_ids(folder)


def test_the_readmes_pandas_fold_gives_one_row_per_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    folder = _campaign(tmp_path)
    shutil.copy(folder / "attempts.jsonl", tmp_path / "attempts.jsonl")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(_readme_block("import json, pandas"), scope)  # noqa: S102 - the README's own snippet
    frame = scope["attempts"]
    assert len(frame) == len(_exported_ids(folder)) and frame["attempt"].is_unique
    assert sorted(frame.loc[frame["amended"] == True, "attempt"]) == sorted(  # noqa: E712 - a pandas mask
        r["attempt"] for r in read_records(folder / "attempts.jsonl") if r.get("amended"))
