"""Campaigns, controllers or hosts side by side: the same cells in rows, one column per side.

Each side is judged by the verdict layer as a report of its own, with one difference: "fixed
on one host of eight" is a claim about eight comparisons, so the raw p-values of every other
side join each of its Holm families (``judge(beside=...)``), and every claim (fixed,
reproduces less often, host-specific, the fleet's mix) is adjusted across sides x cells with
the judge's own code. Each sentence says across how many, and a claim that held on its side
alone but not after adjustment says so. Where sides are hosts or groups, the interaction test
(:mod:`reprofleet.stats.interaction`) asks whether a cell's effect differs between them, and
a pooled column shows what ``invoke report`` says of all of them, with that caveat where it
does. A cell missing on one side is a dash there, never a zero.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from enum import Enum, unique
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from reprofleet.errors import ReprofleetError
from reprofleet.inventory import load_inventory
from reprofleet.records.pooling import Pool, load_pool
from reprofleet.records.host_text import inert
from reprofleet.records.reader import RecordedAttempt
from reprofleet.records.store import write_atomic
from reprofleet.stats.intervals import holm
from reprofleet.stats.interaction import Interaction, interaction
from reprofleet.stats.ratio import Stratum
from reprofleet.verdicts import ALPHA, Beside, Judgement, Verdict, VerdictKind, fmt_p, judge, natural_key, pct
from reprofleet.report.style import CSS

CLAIMS = (VerdictKind.FIXED, VerdictKind.LESS_OFTEN, VerdictKind.HOST_SPECIFIC)  # kinds that rest on a test


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
    judgement: Judgement  # adjusted across every side's comparisons; its sentences say so
    alone: Judgement | None = None  # this side as ``invoke report`` judges it on its own

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "judgement": self.judgement.to_json(),
                "alone": self.alone.to_json() if self.alone else None}


@dataclass(frozen=True)
class Effect:
    """Whether one cell's effect (against the reference) differs between the sides."""

    cell: str
    test: Interaction
    p_adjusted: float | None  # Holm across the cells tested
    text: str

    @property
    def differs(self) -> bool:
        return self.p_adjusted is not None and self.p_adjusted < ALPHA

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "p_value": self.test.p_value, "method": self.test.method,
                "tested": list(self.test.tested), "left_out": [{"side": s, "why": w} for s, w in self.test.left_out],
                "p_adjusted": self.p_adjusted, "differs": self.differs, "text": self.text}


@dataclass(frozen=True)
class SideBySide:
    by: SideBy
    sides: tuple[Side, ...]
    comparisons: int  # cell-against-reference comparisons, every side's: the size of each Holm family
    cells: int  # cells compared on at least one side
    host_pairs: int = 0  # "is X rarer than R" pairs of the host claims, every side's
    hosts_differ: int = 0  # hosts-differ tests, every side's
    pooled: Side | None = None  # --by host / group: every side's records as one report
    effects: tuple[Effect, ...] = ()  # --by host / group: one per cell compared on two sides or more

    def family_words(self) -> str:
        """ "Holm-adjusted across 8 sides x 3 cells (22 comparisons)" """
        full = self.comparisons == len(self.sides) * self.cells
        count = "" if full else f" ({self.comparisons} comparison{'s' if self.comparisons != 1 else ''})"
        return f"Holm-adjusted across {len(self.sides)} sides x {self.cells} cell{'s' if self.cells != 1 else ''}{count}"

    def to_json(self) -> dict[str, Any]:
        """``invoke compare --json`` (docs/schema/compare.schema.json): every side's verdicts as
        ``invoke report --json`` gives them, adjusted across the whole comparison."""
        return {"by": self.by.value, "family": self.family_words(), "comparisons": self.comparisons,
                "cells": self.cells, "host_pairs": self.host_pairs, "hosts_differ": self.hosts_differ,
                "sides": [s.to_json() for s in self.sides], "pooled": self.pooled.to_json() if self.pooled else None,
                "effects": [e.to_json() for e in self.effects]}


# The record field each kind of side is split on (path and group sides are not a record's).
SIDE_OF: Mapping[SideBy, Callable[[RecordedAttempt], str]] = {
    SideBy.CAMPAIGN: lambda record: record.campaign, SideBy.CONTROLLER: lambda record: record.controller,
    SideBy.HOST: lambda record: record.host}


def _subset(pool: Pool, keep: Callable[[RecordedAttempt], bool]) -> Pool:
    records = tuple(r for r in pool.records if keep(r))
    hosts = {r.host for r in records}
    campaigns = {r.campaign for r in records}
    return replace(pool, records=records, stops=tuple(s for s in pool.stops if s.get("host") in hosts),
                   campaigns={k: v for k, v in pool.campaigns.items() if k in campaigns})


def _having(by: SideBy, value: str) -> Callable[[RecordedAttempt], bool]:
    return lambda record: SIDE_OF[by](record) == value


def _in_hosts(hosts: set[str]) -> Callable[[RecordedAttempt], bool]:
    return lambda record: record.host in hosts


def _path_label(path: Path, pool: Pool) -> str:
    names = sorted(pool.campaigns, key=natural_key)
    return names[0] if len(names) == 1 else str(path)


def split_pool(pool: Pool, by: SideBy, groups: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, Pool]]:
    """One pool split into sides by a record key, or by the inventory's ``groups`` (a host may be in several)."""
    if by is SideBy.PATH:
        raise ValueError("sides by path come from the paths, not from one pool")
    if by is SideBy.GROUP:
        if not groups:
            raise CompareError("--by group needs the inventory whose groups to compare (--hosts INVENTORY)")
        ran = {r.host for r in pool.records}
        return [(f"group {name}", _subset(pool, _in_hosts(set(members))))
                for name, members in sorted(groups.items(), key=lambda g: natural_key(g[0]))
                if name not in ("all", "ungrouped") and ran & set(members)]
    values = sorted({SIDE_OF[by](r) for r in pool.records}, key=natural_key)
    return [(f"{by.value} {value}", _subset(pool, _having(by, value))) for value in values]


def build_sides(paths: Sequence[Path], by: SideBy, reference: str | None = None,
                groups: Mapping[str, Sequence[str]] | None = None) -> SideBySide:
    """``by=path``: one side per argument; otherwise every argument pooled, then split by that key
    (``by=group``: by the inventory's ``groups``, each group's hosts)."""
    whole = None
    if by is SideBy.PATH:
        pools = [(_path_label(path, pool), pool) for path, pool in ((p, load_pool([p])) for p in paths)]
    else:
        whole = load_pool(paths)
        pools = split_pool(whole, by, groups)
        hosts = {r.host for _, side in pools for r in side.records}
        whole = _subset(whole, _in_hosts(hosts))
    if len(pools) < 2:
        raise CompareError(f"need at least two sides to compare, got {len(pools)} "
                           f"({'give two or more paths' if by is SideBy.PATH else f'the records have one {by.value}'})")
    return side_by_side(pools, by, reference, whole)


def side_by_side(pools: Sequence[tuple[str, Pool]], by: SideBy, reference: str | None = None,
                 whole: Pool | None = None) -> SideBySide:
    """Every side judged with the others' comparisons in its Holm families; for hosts and groups,
    the interaction test per cell and ``whole`` (every side's records) as one report."""
    alone = [judge(pool, reference) for _, pool in pools]
    sides = []
    for index, ((label, pool), own) in enumerate(zip(pools, alone)):
        beside = Beside()
        for other in alone[:index] + alone[index + 1:]:
            beside = beside.plus(other.family)
        sides.append(Side(label, judge(pool, reference, beside) if beside != Beside() else own, own))
    compared = {v.cell for s in alone for v in s.verdicts if v.against_reference is not None}
    result = SideBySide(by, tuple(sides), sum(len(s.family.below) for s in alone), len(compared),
                        sum(len(s.family.host_pairs) for s in alone), sum(len(s.family.hosts_differ) for s in alone))
    result = replace(result, sides=tuple(_with_family_words(s, result) for s in sides))
    if by not in (SideBy.HOST, SideBy.GROUP) or whole is None:
        return result
    effects = _effects(result)
    pooled = judge(whole, reference)
    differ = {e.cell: e for e in effects if e.differs}
    pooled = replace(pooled, verdicts=tuple(
        replace(v, text=f"{v.text}; {differ[v.cell].text}: this pooled claim is an average over sides whose effects "
                        "differ") if v.cell in differ else v for v in pooled.verdicts))
    label = f"all {len(pools)} {_noun(by)} pooled (judged as one report)"
    return replace(result, pooled=Side(label, pooled, pooled), effects=effects)


def _noun(by: SideBy) -> str:
    return "hosts" if by is SideBy.HOST else "groups" if by is SideBy.GROUP else "sides"


def _kind_words(verdict: Verdict) -> str:
    """A verdict's claim and the p-values it rests on, as this side alone reads."""
    comparison = verdict.against_reference
    if comparison is None:
        return f"{verdict.kind.value!r}"
    fixed = (f", ratio below {comparison.fixed_ratio:g}: {fmt_p(comparison.p_fixed_adjusted)}"
             if verdict.kind is VerdictKind.FIXED and comparison.p_fixed_adjusted is not None else "")
    return f"{verdict.kind.value!r} (rarer: {fmt_p(comparison.p_adjusted)}{fixed})"


def _with_family_words(side: Side, result: SideBySide) -> Side:
    """Every sentence that rests on a test says across how many comparisons it was adjusted, and
    a claim that held on this side alone but not after that adjustment says so."""
    family = result.family_words()
    verdicts = []
    for verdict in side.judgement.verdicts:
        clauses = []
        if verdict.against_reference is not None:
            clauses.append(family)
        if verdict.kind is VerdictKind.HOST_SPECIFIC or verdict.hosts_differ is not None:
            clauses.append(f"host pairs Holm-adjusted across every side's {result.host_pairs}, hosts-differ tests "
                           f"across every side's {result.hosts_differ}")
        changed = _changed_words(side, verdict)
        if changed:
            clauses.append(changed)
        verdicts.append(replace(verdict, text="; ".join([verdict.text, *clauses])) if clauses else verdict)
    return replace(side, judgement=replace(side.judgement, verdicts=tuple(verdicts)))


def _alone(side: Side, verdict: Verdict) -> Verdict | None:
    if side.alone is None:
        return None
    return next((v for v in side.alone.verdicts if v.cell_id == verdict.cell_id), None)


def _changed_words(side: Side, verdict: Verdict) -> str:
    """ "on this side alone it would read 'fixed' (rarer: p = 0.004, ...); not after ..." or nothing."""
    before = _alone(side, verdict)
    if before is None or before.kind is verdict.kind or before.kind not in CLAIMS:
        return ""
    own = "host pairs" if before.kind is VerdictKind.HOST_SPECIFIC else "cells"
    return (f"on this side alone it would read {_kind_words(before)}, Holm-adjusted across this side's {own} "
            f"only; not after adjusting across every side")


def _effects(result: SideBySide) -> tuple[Effect, ...]:
    """The interaction test per cell, Holm-adjusted across the cells tested."""
    noun = _noun(result.by)
    tests: list[tuple[str, Interaction, tuple[tuple[str, str], ...], str]] = []
    for cell in cells_of(result.sides):
        if any(v.reference for s in result.sides for v in s.judgement.verdicts if v.cell == cell):
            continue
        sides: dict[str, tuple[Stratum, ...]] = {}
        missing: list[tuple[str, str]] = []
        interim = False
        for side in result.sides:
            verdict = _verdict(side, cell)
            comparison = verdict.against_reference if verdict is not None else None
            if comparison is None:
                missing.append((side.label, "did not run there" if verdict is None else "no host ran both cells"))
                continue
            sides[side.label] = comparison.strata
            interim = interim or comparison.anytime
        if len(sides) + len(missing) < 2 or not sides:
            continue
        shared = _shared_hosts(result.sides, cell)
        test = interaction(sides) if not shared else Interaction(
            None, f"the groups share hosts ({shared}), so their tables are not independent", tuple(sides), ())
        note = "; a fixed-n test at a look before the planned end" if interim else ""
        tests.append((cell, test, tuple(missing), note))
    adjusted = iter(holm([t.p_value for _, t, _, _ in tests if t.p_value is not None]))
    tested = sum(1 for _, t, _, _ in tests if t.p_value is not None)
    out = []
    for cell, test, absent, note in tests:
        p = next(adjusted) if test.p_value is not None else None
        out.append(Effect(cell, test, p, _effect_words(test, p, tested, absent, noun) + note))
    return tuple(out)


def _shared_hosts(sides: Sequence[Side], cell: str) -> str:
    """Hosts that two sides compare the cell on (inventory groups may overlap)."""
    seen: dict[str, str] = {}
    shared = []
    for side in sides:
        verdict = _verdict(side, cell)
        for host in (verdict.compared_hosts if verdict is not None else ()):
            if host in seen:
                shared.append(f"{host} in {seen[host]} and {side.label}")
            seen.setdefault(host, side.label)
    return ", ".join(shared)


def _effect_words(test: Interaction, p: float | None, tested: int, missing: Sequence[tuple[str, str]],
                  noun: str) -> str:
    left = [*missing, *test.left_out]
    out = ("; left out: " + ", ".join(f"{side} ({why})" for side, why in left)) if left else ""
    if test.p_value is None or p is None:
        return f"not tested whether the effect differs between {noun}: {test.method}{out}"
    holm_words = f", Holm-adjusted across {tested} cells" if tested > 1 else ""
    n = len(test.tested)
    if p < ALPHA:
        return f"the effect differs between {noun} ({fmt_p(p)}, {test.method}{holm_words}; {n} sides){out}"
    return f"no evidence the effect differs between {noun} ({fmt_p(p)}, {n} sides; {test.method}{holm_words}){out}"


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


def _columns(result: SideBySide) -> list[Side]:
    return [*result.sides, *([result.pooled] if result.pooled is not None else [])]


def _kind_cell(side: Side, cell: str) -> str:
    verdict = _verdict(side, cell)
    if verdict is None:
        return "—"
    before = _alone(side, verdict)
    changed = f" (alone: {before.kind.value})" if before is not None and before.kind is not verdict.kind else ""
    return f"{rate_text(verdict)}\n{verdict.kind.value}{changed}"


def _effect_of(result: SideBySide, cell: str) -> Effect | None:
    return next((e for e in result.effects if e.cell == cell), None)


def _effect_short(effect: Effect | None) -> str:
    if effect is None or effect.p_adjusted is None:
        return "—" if effect is None else "not tested"
    return f"{'differs' if effect.differs else 'no evidence'} ({fmt_p(effect.p_adjusted)}, {len(effect.test.tested)} sides)"


def compare_table(result: SideBySide) -> Group:
    """The table, titled with the adjustment, then the interaction sentences and the claims it changed."""
    # cells, sides (hosts, groups, paths) and reasons are drawn as text: never parsed as rich markup
    table = Table(title="side by side: rate (reproductions/judged), exact interval, verdict")
    table.add_column("cell")
    for side in _columns(result):
        table.add_column(Text(inert(side.label)))
    if result.effects:
        table.add_column(f"effect differs between {_noun(result.by)}?")
    for cell in cells_of(result.sides):
        row = [cell] + [_kind_cell(side, cell) for side in _columns(result)]
        row += [_effect_short(_effect_of(result, cell))] if result.effects else []
        table.add_row(*(Text(inert(value, keep_lines=True)) for value in row))
    lines = [f"{e.cell}: {e.text}" for e in result.effects]
    for side in result.sides:
        for verdict in side.judgement.verdicts:
            before = _alone(side, verdict)
            if before is not None and before.kind is not verdict.kind:
                lines.append(f"{side.label}, {verdict.cell}: {verdict.kind.value} after adjusting across every side; "
                             f"on this side alone {_kind_words(before)}")
    return Group(Text(inert(_header(result))), table, *(Text(inert(line)) for line in lines))


def _header(result: SideBySide) -> str:
    """ "8 sides, 24 comparisons with the reference: every claim Holm-adjusted across 8 sides x 3 cells" """
    pooled = ("; the pooled column is every side's records judged as one report, Holm across its own cells"
              if result.pooled is not None else "")
    return (f"{len(result.sides)} sides, {result.comparisons} comparison{'s' if result.comparisons != 1 else ''} with "
            f"the reference: every claim (fixed, reproduces less often, host-specific) "
            f"{result.family_words()}{pooled}")


def compare_html(result: SideBySide, title: str) -> str:
    """The same table as the terminal's, with each verdict's full sentence under its rate."""
    columns = _columns(result)
    head = "".join(f"<th>{html.escape(s.label)}</th>" for s in columns)
    if result.effects:
        head += f"<th>effect differs between {_noun(result.by)}?</th>"
    rows = []
    for cell in cells_of(result.sides):
        tds = []
        for side in columns:
            verdict = _verdict(side, cell)
            if verdict is None:
                tds.append("<td>—</td>")
                continue
            kind = verdict.kind.value.replace(" ", "-")
            tds.append(f'<td class="v-{kind}"><b>{html.escape(rate_text(verdict))}</b><br>'
                       f"{html.escape(verdict.text)}</td>")
        if result.effects:
            effect = _effect_of(result, cell)
            tds.append(f"<td>{html.escape(effect.text if effect is not None else '—')}</td>")
        rows.append(f"<tr><th scope=\"row\">{html.escape(cell)}</th>{''.join(tds)}</tr>")
    refs = "; ".join(f"{s.label}: {s.judgement.reference}" for s in result.sides)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}\ntd.v-reproduces b, td.v-host-specific b "
            "{ color: var(--bad); } td.v-fixed b { color: var(--good); }</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>Each side judged as a report, its claims "
            f"{html.escape(result.family_words())} (reference cells: {html.escape(refs)}).</p>"
            f'<table class="compare"><thead><tr><th>cell</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></body></html>\n")


# -- invoke compare ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareRequest:
    """``invoke compare``: the paths, how they are split into sides, and an HTML file if asked."""

    sources: tuple[Path, ...]
    by: SideBy
    reference: str | None = None
    inventory: str | None = None  # whose groups are the sides (``--by group``)
    html: Path | None = None


def compare_sides(request: CompareRequest) -> SideBySide:
    """The sides judged beside each other, written as HTML too when asked."""
    groups = load_inventory(request.inventory).groups if request.inventory else None
    side_by_side = build_sides(list(request.sources), request.by, request.reference, groups)
    if request.html is not None:
        write_atomic(request.html, compare_html(side_by_side, "reprofleet comparison"))
    return side_by_side
