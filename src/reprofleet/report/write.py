"""report.md, report.html and an issue's text, and what they judged: below the command line.

:func:`campaign_report` (beside a campaign's records, when it ends) and :func:`pooled_report`
(``invoke report``: many campaigns pooled, and ``--issue``'s text) take what the command line
asked and return data: what was judged, which files were written, and, where a part failed
without costing the rest, that part's line. The command line prints the tables and the lines;
nothing here knows the terminal.

A search's result that cannot be computed costs that section, and a figure that fails to draw
costs report.html: never report.md, the records or the verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reprofleet.audit.run import Audit, audit_report, auditing, require_consistent
from reprofleet.errors import UsageError
from reprofleet.model import Outcome
from reprofleet.records.pooling import CampaignInfo, Pool, load_pool
from reprofleet.records.reader import RecordedAttempt
from reprofleet.records.store import write_atomic
from reprofleet.report.folders import Folders
from reprofleet.report.html import render_html
from reprofleet.report.issue_text import Tracker, issue_markdown
from reprofleet.report.markdown import render_markdown
from reprofleet.report.rates import rates_json
from reprofleet.report.search import SearchReport, boundary_lines, search_report
from reprofleet.verdicts import Judgement, judge


@dataclass(frozen=True)
class WrittenReport:
    """What was judged and written; ``judgement`` is None when no attempt was recorded."""

    judgement: Judgement | None
    markdown: Path | None = None  # None: nothing written (``--json``)
    html: Path | None = None  # None: not written (``html_problem`` says why) or not asked
    html_problem: str | None = None
    search: SearchReport | None = None
    search_problem: str | None = None  # why a search's result was not computed
    issue: Path | None = None
    audit: Audit | None = None  # the auditor's findings (``--audit``, or ``REPROFLEET_AUDIT=1``)

    @property
    def search_lines(self) -> list[str]:
        """A search's or bisection's answer in words, each line headed by its kind."""
        return [f"{self.search.plan.kind}: {line}" for line in boundary_lines(self.search)] if self.search else []

    def to_json(self) -> dict[str, Any]:
        """``invoke report --json``: the verdicts, each cell's rate per host and pooled, a search's result."""
        assert self.judgement is not None
        return {**self.judgement.to_json(), "rates": rates_json(self.judgement),
                **({"search": self.search.to_json()} if self.search is not None else {}),
                **({"audit": self.audit.to_json()} if self.audit is not None else {})}


def campaign_report(folder: Path, title: str) -> WrittenReport:
    """report.md and report.html beside a campaign's records (``title``: "campaign ID")."""
    pool = load_pool([folder]) if (folder / "attempts.jsonl").exists() else None
    report_path = folder / "report.md"
    if pool is None:
        write_atomic(report_path, f"# {title}\n\nNo attempt was recorded.\n")
        return WrittenReport(None, report_path)
    judgement = judge(pool)
    search, search_problem = _search(pool)
    write_atomic(report_path, render_markdown(judgement, pool.records, title.capitalize(), search))
    html, html_problem = _write_html(folder / "report.html", judgement, pool, title.capitalize(), search)
    written = WrittenReport(judgement, report_path, html, html_problem, search, search_problem)
    return _audited(written, (folder,), (), raise_on_contradiction=True) if auditing() else written


@dataclass(frozen=True)
class ReportRequest:
    """``invoke report``: what to pool, how to judge it, and where its files go."""

    sources: tuple[Path, ...]
    reproductions: str = ""  # outcomes counted instead of the campaigns' own, comma-separated as typed
    reference: str | None = None
    issue: str = ""  # also the text a bug tracker asks for: vllm or nvidia, as typed
    markdown: Path | None = None  # report.md's path; None: judge only (``--json``), write nothing
    html: Path | None = None
    audit: bool = False  # ``--audit``: re-check every claim against the raw records (WrittenReport.audit)


def pooled_report(request: ReportRequest) -> WrittenReport:
    """Pool the records, judge them and, with ``markdown``, write report.md, report.html and the issue's text."""
    try:
        tracker = Tracker(request.issue) if request.issue else None
    except ValueError:
        raise UsageError(f"--issue takes {' or '.join(t.value for t in Tracker)}, not {request.issue!r}") from None
    pool = _counting(load_pool(request.sources), request.reproductions)
    judgement = judge(pool, request.reference)
    search, search_problem = _search(pool)
    if request.markdown is None:
        return _audit_asked(WrittenReport(judgement, search=search, search_problem=search_problem), request)
    html_path = request.html or request.markdown.with_suffix(".html")
    request.markdown.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(request.markdown, render_markdown(judgement, pool.records, "reprofleet report", search))
    html, html_problem = _write_html(html_path, judgement, pool, "reprofleet report", search)
    issue = None
    if tracker is not None:
        issue = request.markdown.with_name(f"issue-{tracker.value}.md")
        write_atomic(issue, issue_markdown(tracker, judgement, pool.records, Folders.of(pool).facts(_freezes_first(pool)),
                                           html_path.name))
    return _audit_asked(WrittenReport(judgement, request.markdown, html, html_problem, search, search_problem, issue),
                        request)


def _audit_asked(written: WrittenReport, request: ReportRequest) -> WrittenReport:
    """``--audit`` returns the auditor's findings for the command line to print; ``REPROFLEET_AUDIT=1``
    (the test suite) raises on the first report a contradiction is found in."""
    if not (request.audit or auditing()):
        return written
    counted = tuple(o.strip() for o in request.reproductions.split(",") if o.strip())
    return _audited(written, request.sources, counted, raise_on_contradiction=not request.audit)


def _audited(written: WrittenReport, sources: tuple[Path, ...], reproductions: tuple[str, ...],
             raise_on_contradiction: bool) -> WrittenReport:
    """The report with the auditor's findings: its claims (as ``--json`` prints them) against
    the records under ``sources``, read by code that does not import the judge."""
    if written.judgement is None:
        return written
    audit = audit_report(written.to_json(), sources, reproductions)
    if raise_on_contradiction:  # the test suite's check: the report it wrote stays as --json prints it
        require_consistent(audit, str(written.markdown or "the report"))
        return written
    return replace(written, audit=audit)


def _freezes_first(pool: Pool) -> tuple[RecordedAttempt, ...]:
    """The records whose facts the issue's host table shows: a host's freezes where it froze (the
    facts each wedge ran under, never a driver installed after them), else all its records."""
    frozen = {r.host for r in pool.records if r.outcome in ("wedge", "reboot")}
    return tuple(r for r in pool.records if r.host not in frozen or r.outcome in ("wedge", "reboot"))


def _counting(pool: Pool, reproductions: str) -> Pool:
    """The pool judged with ``reproductions`` counted instead of each campaign's own (none: as is)."""
    if not reproductions:
        return pool
    try:
        counted = tuple(Outcome(o.strip()) for o in reproductions.split(",") if o.strip())
    except ValueError as exc:
        raise UsageError(f"--reproductions: {exc}") from None
    return replace(pool, campaigns={k: replace(v, judging=replace(v.judging, reproductions=counted),
                                               caveat=_override_caveat(v, counted))
                                    for k, v in pool.campaigns.items()})


def _override_caveat(info: CampaignInfo, counted: tuple[Outcome, ...]) -> str:
    """A campaign without campaign.json judged with --reproductions: its verdicts say so."""
    if info.source:
        return str(info.caveat)
    return (f"campaign {info.campaign} has no campaign.json: judged with --reproductions "
            f"{','.join(o.value for o in counted)} and no phase at risk")


def _search(pool: Pool) -> tuple[SearchReport | None, str | None]:
    """A search's or bisection's result from the pool's folders; a model that fails costs this
    section, never the report (its line says why)."""
    try:
        return search_report(pool, Folders.of(pool).roots), None
    except Exception as exc:  # noqa: BLE001 - the verdicts and records stand without it
        return None, f"search result not computed: {type(exc).__name__}: {exc}"


def _write_html(path: Path, judgement: Judgement, pool: Pool, title: str,
                search: SearchReport | None) -> tuple[Path | None, str | None]:
    """report.html; a figure that fails to draw costs the HTML file, never report.md or the records."""
    try:
        write_atomic(path, render_html(judgement, pool, title, search))
    except Exception as exc:  # noqa: BLE001 - a plotting bug must not lose a campaign's summary
        return None, f"report.html not written: {type(exc).__name__}: {exc}"
    return path, None
