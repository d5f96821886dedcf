"""The live view while a campaign runs, and the summary table when it ends (rich)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from reprofleet.cli.terminal_text import cell, drawn, plain, safe_print
from reprofleet.model import Outcome
from reprofleet.verdicts import Judgement, Row, natural_key, pct

if TYPE_CHECKING:
    from reprofleet.report.write import WrittenReport

DASH = "—"

OUTCOME_STYLE = {
    "clean": "green", "error": "yellow", "hang": "magenta",
    "wedge": "bold red", "reboot": "red", "power_loss": "blue", "infra": "dim",
}


OUTCOME_COLUMNS = tuple(o.value for o in Outcome)  # every outcome its own column, power_loss included
SHOWN_UP = ("wedge", "reboot", "power_loss")  # a count of these, when not 0, is coloured in the summary table

# what changes a host's plain line outside a terminal (every other field rides along)
PLAIN_FIELDS = ("status", "cell", "phase", "outcome")


class LiveProgress:
    """Per host: status, cell, attempt k of n, phase, outcome counts. Thread-safe.

    At a terminal, a live table. Elsewhere (a log, CI, ``nohup``, a pipe), where a live table
    prints nothing until the end: one plain line per change of a host's status, cell, phase
    or outcome, and a summary line every ``summary_every_s`` (a minute)."""

    def __init__(self, hosts: Iterable[str], planned: Mapping[str, int | None], console: Console | None = None,
                 *, plain: bool | None = None, summary_every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, budget: int | None = None) -> None:
        """``planned``: each host's slots; None for a search or bisection, whose slots its
        ladder chooses at run time (``budget``: its attempt budget, if it states one)."""
        self._lock = threading.Lock()
        self._budget = budget
        self._rows: dict[str, dict[str, Any]] = {h: {"status": "waiting", "done": 0} for h in hosts}
        self._planned = dict(planned)
        self._console = console or Console()
        self._plain = (not self._console.is_terminal) if plain is None else plain
        self._summary_every_s = summary_every_s
        self._clock = clock
        self._live: Live | None = None
        self._started = clock()
        self._ticker: threading.Thread | None = None
        self._done = threading.Event()

    def __call__(self, host: str, **fields: Any) -> None:
        with self._lock:
            row = self._rows.setdefault(host, {"status": "waiting", "done": 0})
            changed = [k for k in PLAIN_FIELDS if k in fields and (k == "outcome" or fields[k] != row.get(k))]
            if "outcome" in fields:
                row["done"] = row.get("done", 0) + 1
            if "stopped_early" in fields:  # a slot its cell's stop rule made unnecessary
                row["stopped"] = row.get("stopped", 0) + int(fields.pop("stopped_early"))
            row.update(fields)
            line = self._plain_line(host, row, changed) if self._plain and changed else None
        if line is not None:
            self._write(line)
        if self._live is not None:
            self._redraw()

    def _redraw(self) -> None:
        """The live table drawn again; called from the hosts' threads, so a failure to draw is
        logged and the host goes on."""
        live = self._live
        if live is not None:
            drawn("the live view could not be drawn", lambda: live.update(self.render()))

    # -- outside a terminal: plain lines -------------------------------------------------
    def _stamp(self) -> str:
        return f"[{self._clock() - self._started:,.0f} s]"

    def _plain_line(self, host: str, row: Mapping[str, Any], changed: Sequence[str]) -> str:
        parts = [f"{self._stamp()} {host}:"]
        if "outcome" in changed:
            parts.append(f"{row.get('outcome')}")
        for key in ("status", "phase"):
            if key in changed and row.get(key):
                parts.append(f"{key} {row.get(key)}")
        parts.append(f"(cell {shown(row.get('cell'))}, attempt {_attempts(row, self._planned.get(host))})")
        return " ".join(parts)

    def summary_line(self) -> str:
        """Attempts done of planned, outcomes so far, hosts by status: one line."""
        with self._lock:
            done = sum(int(r.get("done", 0)) for r in self._rows.values())
            adaptive = any(self._planned.get(h) is None for h in self._rows)
            planned = sum((self._planned.get(h) or 0) - int(r.get("stopped", 0)) for h, r in self._rows.items())
            outcomes: dict[str, int] = {}
            statuses: dict[str, int] = {}
            for row in self._rows.values():
                for outcome, n in (row.get("counts") or {}).items():
                    outcomes[outcome] = outcomes.get(outcome, 0) + int(n)
                status = str(row.get("status") or "waiting").split(":")[0]
                statuses[status] = statuses.get(status, 0) + 1
        said = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none yet"
        hosts = ", ".join(f"{v} {k}" for k, v in sorted(statuses.items()))
        of = (f" of a budget of {self._budget}" if self._budget is not None else "") if adaptive else f"/{planned}"
        return f"{self._stamp()} summary: {done}{of} attempts done; outcomes: {said}; hosts: {hosts}"

    def _write(self, line: str) -> None:
        """One plain line (its host text inert: it goes to the file as it is, never through rich);
        a log or pipe that fails costs the line, never the campaign."""
        def write() -> None:
            self._console.file.write(plain(line) + "\n")
            self._console.file.flush()

        drawn("a progress line could not be written", write)

    def _tick(self) -> None:
        while not self._done.wait(self._summary_every_s):
            self._write(self.summary_line())

    def render(self) -> Table:
        elapsed = time.monotonic() - self._started
        table = Table(title=f"reprofleet campaign — {elapsed:,.0f} s", expand=False)
        for column in ("host", "status", "cell", "attempt", "phase", "outcomes"):
            table.add_column(column)
        with self._lock:
            for host, row in sorted(self._rows.items(), key=lambda item: natural_key(item[0])):
                counts = row.get("counts") or {}
                outcomes = Text(" ").join(cell(f"{k}:{v}", OUTCOME_STYLE.get(str(k), ""))
                                          for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))
                table.add_row(
                    cell(host), cell(shown(row.get("status"))), cell(shown(row.get("cell"))),
                    cell(_attempts(row, self._planned.get(host))),
                    cell(shown(row.get("phase"))), outcomes,
                )
        return table

    def __enter__(self) -> "LiveProgress":
        if self._plain:
            self._ticker = threading.Thread(target=self._tick, name="progress-summary", daemon=True)
            self._ticker.start()
            return self
        live = Live(self.render(), console=self._console, refresh_per_second=4, transient=False)
        # a terminal that cannot draw: the campaign runs without its view
        drawn("the live view could not start", live.__enter__)
        self._live = live if live.is_started else None
        return self

    def __exit__(self, *exc: object) -> None:
        """The last summary or table; a failure to draw it is logged, never raised: what the
        campaign returns (its records, its report, its exit status) goes on past the view."""
        if self._ticker is not None:
            self._done.set()
            self._ticker.join(timeout=5)
            self._ticker = None
            self._write(self.summary_line())
        live, self._live = self._live, None
        if live is not None:
            drawn("the live view's last table could not be drawn", lambda: live.update(self.render()))
            drawn("the live view could not be closed", lambda: live.__exit__(None, None, None))


def _attempts(row: Mapping[str, Any], planned: int | None) -> str:
    """``done/n``, where n leaves out the slots that stopping early made unnecessary; a
    search's host (no plan: its ladder chooses each next level) shows what it has done."""
    if planned is None:
        return f"{row.get('done', 0)} (chosen at run time)"
    stopped = int(row.get("stopped", 0))
    text = f"{row.get('done', 0)}/{planned - stopped}"
    return f"{text} ({stopped} not needed)" if stopped else text


def summary_table(judgement: Judgement, title: str) -> Table:
    """Per cell and host: judged attempts, each outcome, excluded, the rate with its exact interval."""
    label = judgement.rows[0].rate.label() if judgement.rows else "95% two-sided exact"
    table = Table(title=title)
    for column in ("cell", "host", "judged", *OUTCOME_COLUMNS, "at risk",
                   "excluded", "runs again", "repro rate", f"{label} CI"):
        table.add_column(column, justify="left" if column in ("cell", "host") else "right")
    for row in judgement.rows:
        table.add_row(*_row(row))
    return table


def verdict_table(judgement: Judgement) -> Table:
    """One plain-words verdict per cell: the same lines as report.md and ``invoke report --json``."""
    table = Table(title=f"verdicts (reference: {judgement.reference})")
    table.add_column("cell")
    table.add_column("verdict")
    for verdict in judgement.verdicts:
        style = VERDICT_STYLE.get(verdict.kind.value, "")
        name = f"{verdict.cell} (reference)" if verdict.reference else verdict.cell
        # a stop is in the sentence ("stopped by RULE after n"), never its claim; a reason it quotes is a host's
        table.add_row(cell(name), cell(verdict.text, style))
    for warning in judgement.warnings:
        table.add_row(cell("note", "yellow"), cell(warning, "yellow"))
    return table


def print_report(console: Console, written: "WrittenReport", title: str, *, apart: bool = False) -> None:
    """A written report on the terminal: the summary (titled ``title``) and verdict tables, a
    search's lines, and the line of a part that failed without costing the rest; ``apart``: a
    blank line first (a campaign's live table ends just above)."""
    assert written.judgement is not None
    if written.search_problem:
        safe_print(console, cell(written.search_problem, "yellow"))
    if apart:
        safe_print(console)
    safe_print(console, summary_table(written.judgement, title))
    safe_print(console, verdict_table(written.judgement))
    for line in written.search_lines:
        safe_print(console, cell(line))
    if written.html_problem:
        safe_print(console, cell(written.html_problem, "yellow"))


VERDICT_STYLE = {"reproduces": "bold red", "reproduces less often": "red", "host-specific": "red", "fixed": "green",
                 "cannot judge": "yellow"}


def _row(row: Row) -> list[str | Text]:
    tally = row.tally
    approx = "≈" if row.approximate else ""
    mix = " mix" if row.mix else ""
    rate = "—" if tally.judged == 0 else f"{approx}{pct(tally.reproductions / tally.judged)} ({tally.reproductions}/{tally.judged}){mix}"
    ci = "—" if tally.judged == 0 else f"{approx}{pct(row.rate.low)}–{pct(row.rate.high)}"
    cells: list[str | Text] = [cell(f"{row.cell} (ref)" if row.reference else row.cell), cell(row.host),
                               str(tally.judged)]
    for outcome in OUTCOME_COLUMNS:
        value = tally.outcomes.get(outcome, 0)
        style = OUTCOME_STYLE[outcome] if value and outcome in SHOWN_UP else ""
        cells.append(f"[{style}]{value}[/]" if style else str(value))
    return cells + [str(tally.at_risk), str(tally.excluded), str(tally.not_run), rate, ci]


def shown(value: Any, unit: str = "") -> str:
    """A value for a table cell: a dash when it is missing (never ``None`` or ``None W``)."""
    if value is None or value == "":
        return DASH
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value) if value else DASH
    return f"{value}{unit}"


def pair(first: Any, second: Any) -> str:
    """``a / b`` with a dash for each missing side, or one dash when both are missing."""
    if first in (None, "") and second in (None, ""):
        return DASH
    return f"{shown(first)} / {shown(second)}"


def host_table(title: str, columns: Sequence[str], results: Mapping[str, Any],
               row: Callable[[Any], Sequence[str | Text]]) -> Table:
    """One row per host (``ws2`` before ``ws10``); a host that failed gets dashes and its error in a column of
    its own, never inside a data column. A ``str`` from ``row`` is a host's value (drawn as text, never as
    markup); a styled value comes as a :class:`~rich.text.Text`."""
    table = Table(title=title)
    for column in ("host", *columns, "error"):
        table.add_column(column)
    for name, value in sorted(results.items(), key=lambda item: natural_key(item[0])):
        if isinstance(value, BaseException):
            table.add_row(cell(name), *(DASH for _ in columns), cell(value, "red"))
        else:
            table.add_row(cell(name), *(v if isinstance(v, Text) else cell(v) for v in row(value)), "")
    return table
