"""Campaigns, controllers or hosts side by side: the same cells in rows, one column per side.

Each side is judged on its own by the verdict layer (its rates, intervals and verdict
sentences are exactly what ``invoke report`` would print for that side alone); this module
only lines them up. A cell missing on one side is a dash there, never a zero.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from enum import Enum, unique
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.table import Table

from reprofleet.errors import ReprofleetError
from reprofleet.records.pooling import Pool, load_pool
from reprofleet.verdicts import Judgement, Verdict, judge, natural_key, pct
from reprofleet.report.style import CSS


class CompareError(ReprofleetError):
    """Fewer than two sides to compare."""


@unique
class SideBy(str, Enum):
    PATH = "path"  # each argument is a side
    CAMPAIGN = "campaign"
    CONTROLLER = "controller"
    HOST = "host"
    GROUP = "group"  # the inventory's host groups (``--hosts INVENTORY``)


@dataclass(frozen=True)
class Side:
    label: str
    judgement: Judgement


def _subset(pool: Pool, keep: Callable[[Mapping[str, Any]], bool]) -> Pool:
    records = tuple(r for r in pool.records if keep(r))
    hosts = {r.get("host") for r in records}
    campaigns = {str(r.get("campaign")) for r in records}
    return replace(pool, records=records, stops=tuple(s for s in pool.stops if s.get("host") in hosts),
                   campaigns={k: v for k, v in pool.campaigns.items() if k in campaigns})


def _having(key: str, value: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda record: str(record.get(key)) == value


def _in_hosts(hosts: set[str]) -> Callable[[Mapping[str, Any]], bool]:
    return lambda record: str(record.get("host")) in hosts


def _path_label(path: Path, pool: Pool) -> str:
    names = sorted(pool.campaigns, key=natural_key)
    return names[0] if len(names) == 1 else str(path)


def build_sides(paths: Sequence[Path], by: SideBy, reference: str | None = None,
                groups: Mapping[str, Sequence[str]] | None = None) -> list[Side]:
    """``by=path``: one side per argument; otherwise every argument pooled, then split by that key
    (``by=group``: by the inventory's ``groups``, each group's hosts; a host may be in several)."""
    if by is SideBy.PATH:
        pools = [(path, load_pool([path])) for path in paths]
        sides = [Side(_path_label(path, pool), judge(pool, reference)) for path, pool in pools]
    elif by is SideBy.GROUP:
        if not groups:
            raise CompareError("--by group needs the inventory whose groups to compare (--hosts INVENTORY)")
        pool = load_pool(paths)
        ran = {str(r.get("host")) for r in pool.records}
        sides = [Side(f"group {name}", judge(_subset(pool, _in_hosts(set(members))), reference))
                 for name, members in sorted(groups.items(), key=lambda g: natural_key(g[0]))
                 if name not in ("all", "ungrouped") and ran & set(members)]
    else:
        pool = load_pool(paths)
        values = sorted({str(r.get(by.value)) for r in pool.records}, key=natural_key)
        sides = [Side(f"{by.value} {value}", judge(_subset(pool, _having(by.value, value)), reference))
                 for value in values]
    if len(sides) < 2:
        raise CompareError(f"need at least two sides to compare, got {len(sides)} "
                           f"({'give two or more paths' if by is SideBy.PATH else f'the records have one {by.value}'})")
    return sides


def cells_of(sides: Sequence[Side]) -> list[str]:
    """Cells in the first side's (playbook) order, then any the other sides add."""
    return list(dict.fromkeys(v.cell for side in sides for v in side.judgement.verdicts))


def _verdict(side: Side, cell: str) -> Verdict | None:
    return next((v for v in side.judgement.verdicts if v.cell == cell), None)


def rate_text(verdict: Verdict | None) -> str:
    if verdict is None:
        return "—"
    if not verdict.judged:
        return "nothing judged"
    approx = "≈" if verdict.approximate else ""
    return (f"{approx}{pct(verdict.reproductions / verdict.judged)} ({verdict.reproductions}/{verdict.judged}), "
            f"{approx}{pct(verdict.rate.low)}–{pct(verdict.rate.high)}")


def compare_table(sides: Sequence[Side]) -> Table:
    table = Table(title="side by side: rate (reproductions/judged), exact interval, verdict")
    table.add_column("cell")
    for side in sides:
        table.add_column(side.label)
    for cell in cells_of(sides):
        row = [cell]
        for side in sides:
            verdict = _verdict(side, cell)
            row.append("—" if verdict is None else f"{rate_text(verdict)}\n{verdict.kind.value}")
        table.add_row(*row)
    return table


def compare_html(sides: Sequence[Side], title: str) -> str:
    """The same table as the terminal's, with each verdict's full sentence under its rate."""
    head = "".join(f"<th>{html.escape(s.label)}</th>" for s in sides)
    rows = []
    for cell in cells_of(sides):
        tds = []
        for side in sides:
            verdict = _verdict(side, cell)
            if verdict is None:
                tds.append("<td>—</td>")
                continue
            kind = verdict.kind.value.replace(" ", "-")
            tds.append(f'<td class="v-{kind}"><b>{html.escape(rate_text(verdict))}</b><br>'
                       f"{html.escape(verdict.text)}</td>")
        rows.append(f"<tr><th scope=\"row\">{html.escape(cell)}</th>{''.join(tds)}</tr>")
    refs = "; ".join(f"{s.label}: {s.judgement.reference}" for s in sides)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}\ntd.v-reproduces b, td.v-host-specific b "
            "{ color: var(--bad); } td.v-fixed b { color: var(--good); }</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>Each side judged on its own (reference cells: {html.escape(refs)}).</p>"
            f'<table class="compare"><thead><tr><th>cell</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></body></html>\n")
