"""The live view while a campaign runs, and the summary table when it ends (rich)."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Mapping, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .model import Outcome
from .stats import CellSummary, summarize

OUTCOME_STYLE = {
    "clean": "green", "error": "yellow", "hang": "magenta",
    "wedge": "bold red", "reboot": "red", "infra": "dim",
}


class LiveProgress:
    """Per host: status, cell, attempt k of n, phase, outcome counts. Thread-safe."""

    def __init__(self, hosts: Iterable[str], planned: Mapping[str, int], console: Console | None = None) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {h: {"status": "waiting", "done": 0} for h in hosts}
        self._planned = dict(planned)
        self._console = console or Console()
        self._live: Live | None = None
        self._started = time.monotonic()

    def __call__(self, host: str, **fields: Any) -> None:
        with self._lock:
            row = self._rows.setdefault(host, {"status": "waiting", "done": 0})
            if "outcome" in fields:
                row["done"] = row.get("done", 0) + 1
            row.update(fields)
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> Table:
        elapsed = time.monotonic() - self._started
        table = Table(title=f"reprofleet campaign — {elapsed:,.0f} s", expand=False)
        for column in ("host", "status", "cell", "attempt", "phase", "outcomes"):
            table.add_column(column)
        with self._lock:
            for host, row in sorted(self._rows.items()):
                counts = row.get("counts") or {}
                outcomes = " ".join(
                    f"[{OUTCOME_STYLE.get(k, '')}]{k}:{v}[/]" for k, v in sorted(counts.items())
                )
                table.add_row(
                    host, str(row.get("status", "")), str(row.get("cell", "")),
                    f"{row.get('done', 0)}/{self._planned.get(host, 0)}",
                    str(row.get("phase", "")), outcomes,
                )
        return table

    def __enter__(self) -> "LiveProgress":
        self._live = Live(self.render(), console=self._console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.__exit__(None, None, None)
            self._live = None


def summary_table(records: Sequence[Mapping[str, Any]], reproductions: tuple[Outcome, ...], title: str) -> Table:
    """Per cell and host: attempts, each outcome, reproduction rate with its exact 95% CI."""
    table = Table(title=title)
    for column in ("cell", "host", "judged", "clean", "error", "hang", "wedge", "reboot", "infra",
                   "repro rate", "95% CI"):
        table.add_column(column, justify="left" if column in ("cell", "host") else "right")
    for summary in summarize(records, reproductions):
        table.add_row(*_row(summary))
    return table


def _row(summary: CellSummary) -> list[str]:
    counts = summary.counts
    rate = "—" if summary.judged == 0 else f"{summary.rate:.0%} ({summary.reproductions}/{summary.judged})"
    ci = "—" if summary.judged == 0 else f"{summary.ci_low:.0%}–{summary.ci_high:.0%}"
    cells = [summary.cell, summary.host, str(summary.judged)]
    for outcome in ("clean", "error", "hang", "wedge", "reboot", "infra"):
        value = counts.get(outcome, 0)
        style = OUTCOME_STYLE[outcome] if value and outcome in ("wedge", "reboot") else ""
        cells.append(f"[{style}]{value}[/]" if style else str(value))
    return cells + [rate, ci]
