"""``invoke report``, ``compare``, ``status`` and ``export``: flags in, one call to ``report/``, the
terminal or JSON out. Nothing here reads records or writes a file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from invoke import Context, task

from reprofleet.cli.args import RestTask, path_words
from reprofleet.cli.config import reports
from reprofleet.cli.exits import BadArgument, ExitStatus, handled
from reprofleet.cli.output import console, json_document
from reprofleet.cli.terminal_text import cell, plain, safe_print


def _sources(c: Any, paths: list[str] | None) -> list[Path]:
    """Positional PATHs and ``--paths`` (repeatable, or comma-separated as before); default: reports/."""
    return path_words(paths) or [reports(c)]


def _report_outputs(c: Any, out: str) -> tuple[Path, Path]:
    """``--out FILE.md`` (report.html beside it) or ``--out FOLDER``; default: reports/pooled/."""
    target = Path(out) if out else reports(c) / "pooled"
    if target.suffix == ".md":
        return target, target.with_suffix(".html")
    return target / "report.md", target / "report.html"


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "campaign folders or attempts.jsonl files: invoke report PATH [PATH ...] (also --paths A,B; "
                     "default: every campaign under reports/)",
            "reproductions": "override the campaigns' own reproductions (comma-separated outcomes)",
            "reference": "compare every cell with this one (default: the campaigns' reference)",
            "json": "print the verdicts, and each cell's rate per host and pooled (rates), as JSON "
                    "(docs/schema/report.schema.json)",
            "out": "a folder for report.md and report.html, or FILE.md (report.html beside it); default reports/pooled",
            "issue": "also write the text a bug report asks for: vllm (collect-env, reproducer, results) or nvidia "
                     "(system, steps, how often, logs), as issue-vllm.md / issue-nvidia.md beside report.md",
            "audit": "re-check every claim against the raw records with code that does not import the judge: one "
                     "line per contradiction, naming its claim (exit 1 when there is one)"})
@handled
def report(c: Context, paths: list[str] | None = None, reproductions: str = "", reference: str = "",
           json_: bool = False, out: str = "", issue: str = "", audit: bool = False) -> ExitStatus:
    """Pool records from many campaigns and controllers: report.md and report.html, one verdict per cell."""
    # lazy: report.write loads matplotlib and scipy: about 1 s that `invoke --list` never pays
    from reprofleet.report.write import ReportRequest, pooled_report

    markdown, html = (None, None) if json_ else _report_outputs(c, out)
    written = pooled_report(ReportRequest(tuple(_sources(c, paths)), reproductions, reference or None, issue,
                                          markdown, html, audit))
    audited = ExitStatus.OK if written.audit is None or written.audit.ok else ExitStatus.ERROR
    if json_:
        json_document(written.to_json())
        return audited
    assert written.judgement is not None
    # lazy: cli.progress loads the verdicts and scipy (0.86 s alone; report.write loaded them by now)
    from reprofleet.cli.progress import print_report

    terminal = console()
    print_report(terminal, written, f"{written.judgement.attempts} attempts pooled")
    safe_print(terminal, cell(f"report:  {written.markdown}"))
    if written.html:
        safe_print(terminal, cell(f"html:    {written.html}"))
    if written.issue is not None:
        safe_print(terminal, cell(f"issue:   {written.issue}"))
    for line in written.audit.lines() if written.audit is not None else []:
        print(plain(line), file=sys.stderr if audited else sys.stdout)  # a claim may quote a host's reason
    return audited


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "two or more campaign folders or attempts files: invoke compare A B [C ...]",
            "by": "sides: path (each argument, default), campaign, controller, host or group (all arguments pooled, "
                  "then split; group: the --hosts inventory's groups)",
            "hosts": "Ansible inventory whose host groups are the sides (with --by group)",
            "reference": "compare every cell with this one on each side (default: the campaigns' reference)",
            "html": "also write the comparison as an HTML file here",
            "json": "print the comparison as one JSON document (docs/schema/compare.schema.json)"})
@handled
def compare(c: Context, paths: list[str] | None = None, by: str = "path", hosts: str = "", reference: str = "",
            html: str = "", json_: bool = False) -> ExitStatus:
    """Campaigns, controllers or hosts side by side: the same cells, each side's rate and verdict, every claim
    Holm-adjusted across sides x cells; by host or group, whether each cell's effect differs between them."""
    # lazy: report.compare judges with the verdicts (scipy) and draws with rich: 0.65 s that `invoke --list` never pays
    from reprofleet.report import compare as sides

    try:
        side_by = sides.SideBy(by)
    except ValueError:
        raise BadArgument(f"--by takes {', '.join(s.value for s in sides.SideBy)}, not {by!r}") from None
    sources = path_words(paths)
    if not sources:
        raise BadArgument("what to compare? invoke compare A B [C ...] (campaign folders or attempts files)")
    side_by_side = sides.compare_sides(sides.CompareRequest(tuple(sources), side_by, reference or None, hosts or None,
                                                            Path(html) if html else None))
    if json_:
        json_document(side_by_side.to_json())
    else:
        safe_print(console(), sides.compare_table(side_by_side))
    if html:
        print(f"html:    {html}", file=sys.stderr if json_ else sys.stdout)
    return ExitStatus.OK


@task(positional=["folder"],
      help={"folder": "a campaign folder, reports/<campaign-id> (running or finished; read only, its lock untouched)",
            "json": "print the state and the verdicts so far as JSON (with --watch: one JSON line per refresh; "
                    "docs/schema/status.schema.json)",
            "watch": "refresh until the campaign is no longer running (Ctrl-C leaves, exit 0)",
            "interval": "seconds between refreshes with --watch (default 5)",
            "count": "at most this many refreshes with --watch (default 720)"})
@handled
def status(c: Context, folder: str, json_: bool = False, watch: bool = False, interval: str = "5",
           count: str = "720") -> ExitStatus:
    """Where a campaign stands: hosts, attempts done of planned, wedges, quarantines, ETA, verdicts so far."""
    # lazy: report.status judges the records so far (scipy): 0.62 s that `invoke --list` never pays
    from reprofleet.report.status import read_status, status_lines

    if not Path(folder).is_dir():
        raise BadArgument(f"{folder}: no such campaign folder (invoke status reports/<campaign-id>)")
    try:
        every, times = float(interval), int(count)
    except ValueError:
        raise BadArgument(f"--interval takes seconds and --count a number, not {interval!r} and {count!r}") from None
    if every <= 0 or times < 1:
        raise BadArgument("--interval must be more than 0 and --count at least 1")
    clear = watch and not json_ and sys.stdout.isatty()
    try:
        for turn in range(times if watch else 1):
            current = read_status(Path(folder))
            text = json.dumps(current.to_json(), default=str, indent=None if watch else 2)
            shown = text if json_ else "\n".join(plain(line) for line in status_lines(current))  # reasons: a host's
            print(("\033[H\033[2J" if clear else "") + shown,
                  flush=True)
            if not current.state.running or turn == times - 1:
                break
            time.sleep(every)
    except KeyboardInterrupt:
        pass  # leaving a watch is not a failure
    return ExitStatus.OK


@task(klass=RestTask, iterable=["paths"],
      help={"paths": "campaign folders or attempts.jsonl files: invoke export PATH [PATH ...] (default: every "
                     "campaign under reports/)",
            "format": "csv (default), parquet (pip install 'reprofleet[export]') or jsonl",
            "out": "the file to write (default: stdout; parquet needs a file)",
            "json": "with --out: print what was written as one JSON document (docs/schema/export.schema.json)"})
@handled
def export(c: Context, paths: list[str] | None = None, format_: str = "csv", out: str = "",
           json_: bool = False) -> ExitStatus:
    """One row per attempt, amendments folded, with each attempt's role: CSV, Parquet or JSON lines."""
    # lazy: the records pooled with their judging rules load scipy: 0.61 s that `invoke --list` never pays
    from reprofleet.report.export import ExportFormat, ExportRequest, export_rows

    try:
        kind = ExportFormat(format_)
    except ValueError:
        raise BadArgument(f"--format takes {', '.join(f.value for f in ExportFormat)}, not {format_!r}") from None
    if json_ and not out:
        raise BadArgument("--json says what export wrote, and stdout would carry the rows: give --out FILE")
    exported = export_rows(ExportRequest(tuple(_sources(c, paths)), kind, Path(out) if out else None))
    if exported.text is not None:
        sys.stdout.write(exported.text)
    if out:
        print(f"{exported.attempts} attempts -> {out}", file=sys.stderr)
    if json_ and exported.exported is not None:
        json_document(exported.exported.to_json())
    return ExitStatus.OK
