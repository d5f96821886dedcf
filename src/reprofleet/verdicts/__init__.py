"""Records in, conclusions out: one plain-words verdict per cell, the same everywhere.

The terminal, ``report.md`` and ``invoke report --json`` all print what :func:`judge`
returns, so a rate or a verdict can never differ between them.

    pool = load_pool([Path("reports/a"), Path("reports/b")])
    judgement = judge(pool)
    for verdict in judgement.verdicts:
        print(verdict.cell, verdict.text)

Modules: ``tally`` (records -> counts by role), ``judge`` (counts -> verdicts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from reprofleet.stats import intervals as stats
from reprofleet.errors import ReprofleetError
from reprofleet.records.identity import cell_name
from reprofleet.model import Judging
from reprofleet.records.pooling import Pool
from reprofleet.verdicts.judge import ALPHA, LEVEL, CellEvidence, Comparison, Split, Verdict, VerdictKind, fmt_p, judge_cell, pct, run_tests
from reprofleet.verdicts.tally import ALL_HOSTS, Judged, Tally, judge_records, natural_key, split_tally, tallies

__all__ = ["ALL_HOSTS", "Judgement", "ReferenceCellError", "Row", "Split", "Verdict", "VerdictKind", "judge", "fmt_p", "pct", "natural_key"]

SPLITS = (("first_in_boot", "first attempt after a boot vs later ones", "first after boot", "later"),
          ("cold_cache", "cold vs warm vLLM cache", "cold cache", "warm cache"))


class ReferenceCellError(ReprofleetError):
    """The reference cell asked for is not in the records."""


@dataclass(frozen=True)
class Row:
    """One line of a rate table: a cell on one host, or pooled over hosts."""

    cell: str
    cell_id: str
    host: str
    tally: Tally
    rate: stats.Interval
    reference: bool
    approximate: bool


@dataclass(frozen=True)
class Judgement:
    verdicts: tuple[Verdict, ...]
    rows: tuple[Row, ...]
    reference: str
    judging: Judging
    hosts: tuple[str, ...]
    attempts: int
    excluded: Mapping[str, int]
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "judging": self.judging.to_json(), "hosts": list(self.hosts),
                "attempts": self.attempts, "excluded": dict(self.excluded), "warnings": list(self.warnings),
                "verdicts": [v.to_json() for v in self.verdicts]}


def _display_names(ids: Sequence[str]) -> dict[str, str]:
    by_name: dict[str, list[str]] = {}
    for identity in ids:
        by_name.setdefault(cell_name(identity), []).append(identity)
    return {i: (cell_name(i) if len(group) == 1 else i) for group in by_name.values() for i in group}


def _identity_warnings(ids: Sequence[str], judged: Sequence[Judged]) -> list[str]:
    warnings = []
    by_name: dict[str, list[str]] = {}
    for identity in ids:
        by_name.setdefault(cell_name(identity), []).append(identity)
    for name, group in by_name.items():
        if len(group) < 2:
            continue
        samples = {i: next(j.record for j in judged if j.cell_id == i) for i in group}
        differ = sorted({k for k in ("factors", "runtime", "poc") for a in group for b in group
                         if samples[a].get(k) != samples[b].get(k)})
        warnings.append(f"cell {name!r} ran with {len(group)} different contents ({', '.join(group)}; they differ in "
                        f"{', '.join(differ) or 'content'}): shown as separate rows, never pooled")
    return warnings


def _order(ids: Sequence[str], pool: Pool) -> list[str]:
    playbook_order = pool.cell_order()
    def key(identity: str) -> tuple[Any, ...]:
        name = cell_name(identity)
        return ((playbook_order.index(name), ()) if name in playbook_order
                else (len(playbook_order), natural_key(name)), identity)
    return sorted(ids, key=key)


def _reference(ids: Sequence[str], names: Mapping[str, str], pool: Pool, asked: str | None,
               warnings: list[str]) -> str:
    wanted = [asked] if asked else pool.references()
    if len(wanted) > 1:
        warnings.append(f"the campaigns name different reference cells ({', '.join(wanted)}); using {wanted[0]}")
    for name in wanted[:1]:
        matches = [i for i in ids if cell_name(i) == name or i == name]
        if matches:
            if len(matches) > 1:
                warnings.append(f"the reference {name!r} ran with several contents; comparing with {names[matches[0]]}")
            return matches[0]
        if asked:
            known = ", ".join(sorted({cell_name(i) for i in ids}, key=natural_key))
            raise ReferenceCellError(f"--reference {asked!r}: no such cell in these records (cells: {known})")
        warnings.append(f"the reference cell {name!r} has no records; using the first cell instead")
    return ids[0]


def _stopped(pool: Pool, name: str) -> tuple[str, ...]:
    return tuple(sorted((f"{s.get('host')}: {s.get('rule')}: {s.get('why')}" for s in pool.stops
                         if s.get("cell") == name), key=natural_key))


def _splits(judged: Sequence[Judged], ids: Sequence[str]) -> dict[str, tuple[Split, ...]]:
    raw: list[tuple[str, str, str, str, Tally, Tally, float]] = []
    for identity in ids:
        for attribute, what, yes_label, no_label in SPLITS:
            pair = split_tally(judged, identity, attribute)
            if pair is not None:
                yes, no = pair
                raw.append((identity, what, yes_label, no_label, yes, no, stats.boschloo(yes.counts, no.counts)))
    adjusted = stats.holm([r[-1] for r in raw])
    out: dict[str, list[Split]] = {}
    for (identity, what, yes_label, no_label, yes, no, p), adj in zip(raw, adjusted):
        out.setdefault(identity, []).append(Split(what, yes_label, no_label, yes.counts, no.counts, p, adj))
    return {k: tuple(v) for k, v in out.items()}


def _campaign_judging(pool: Pool) -> Judging:
    """The strictest exclusion threshold of the pooled campaigns (for cells mixed across them)."""
    judgings = [info.judging for info in pool.campaigns.values()] or [Judging()]
    first = judgings[0]
    return Judging(first.reproductions, first.at_risk_phase, min(j.max_excluded_share for j in judgings))


def judge(pool: Pool, reference: str | None = None) -> Judgement:
    """Every cell's verdict, rate rows per host and pooled, and what could not be judged."""
    judged = judge_records(pool.records, pool.judging_of)
    table = tallies(judged)
    ids = _order(list(dict.fromkeys(j.cell_id for j in judged)), pool)
    hosts = tuple(sorted({j.host for j in judged}, key=natural_key))
    judging = _campaign_judging(pool)
    if not ids:
        return Judgement((), (), reference or "", judging, hosts, 0, {}, ("no records",))
    names = _display_names(ids)
    warnings = _identity_warnings(ids, judged)
    if len({i.judging for i in pool.campaigns.values()}) > 1:
        warnings.append("the pooled campaigns count outcomes differently; each record is judged by its own campaign's rules")
    ref_id = _reference(ids, names, pool, reference, warnings)
    cells = [CellEvidence(names[i], i, table[(i, ALL_HOSTS)],
                          {h: table[(i, h)] for h in hosts if (i, h) in table}, _stopped(pool, cell_name(i)))
             for i in ids]
    evidence = {c.cell_id: c for c in cells}
    ref = evidence[ref_id]
    tests = run_tests(cells, ref)
    ref_kind, ref_text, *_ = judge_cell(ref, ref, tests, judging, None)
    ref_problem = ref_text.removeprefix("cannot judge: ") if ref_kind is VerdictKind.CANNOT_JUDGE else None
    splits = _splits(judged, ids)
    verdicts = tuple(_verdict(c, ref, tests, judging, ref_problem, splits.get(c.cell_id, ())) for c in cells)
    rows = tuple(_rows(cells, ref_id))
    excluded = Counter(j.reason for j in judged if j.reason)
    return Judgement(verdicts, rows, names[ref_id], judging, hosts, len(judged), dict(excluded.most_common()),
                     tuple(warnings))


def _verdict(cell: CellEvidence, ref: CellEvidence, tests: Any, judging: Judging, ref_problem: str | None,
             splits: tuple[Split, ...]) -> Verdict:
    kind, text, bound, more = judge_cell(cell, ref, tests, judging, ref_problem)
    tally = cell.pooled
    return Verdict(
        cell=cell.cell, cell_id=cell.cell_id, kind=kind, text=text, reference=cell.cell_id == ref.cell_id,
        reproductions=tally.reproductions, judged=tally.judged, excluded=tally.excluded,
        hosts=tuple(sorted((h for h, t in cell.per_host.items() if t.judged), key=natural_key)),
        hosts_reproducing=tuple(sorted((h for h, t in cell.per_host.items() if t.reproductions), key=natural_key)),
        rate=stats.rate_interval(tally.reproductions, tally.judged, LEVEL),
        against_reference=tests.fixed.get(cell.cell_id) if tally.reproductions == 0 else tests.difference.get(cell.cell_id),
        hosts_differ=tests.hosts.get(cell.cell_id), bound=bound, more_needed=more,
        stopped=cell.stopped, approximate=bool(cell.stopped), splits=splits,
    )


def _rows(cells: Sequence[CellEvidence], ref_id: str) -> list[Row]:
    rows = []
    for cell in cells:
        for host, tally in sorted(cell.per_host.items(), key=lambda item: natural_key(item[0])):
            stopped_here = any(s.startswith(f"{host}:") for s in cell.stopped)
            rows.append(Row(cell.cell, cell.cell_id, host, tally, stats.rate_interval(*tally.counts, LEVEL),
                            cell.cell_id == ref_id, stopped_here))
        if len(cell.per_host) > 1:
            rows.append(Row(cell.cell, cell.cell_id, ALL_HOSTS, cell.pooled,
                            stats.rate_interval(*cell.pooled.counts, LEVEL), cell.cell_id == ref_id, bool(cell.stopped)))
    return rows
