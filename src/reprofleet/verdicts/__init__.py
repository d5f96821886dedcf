"""Records in, conclusions out: one plain-words verdict per cell, the same everywhere.

The terminal, ``report.md`` and ``invoke report --json`` all print what :func:`judge`
returns, so a rate or a verdict can never differ between them.

    pool = load_pool([Path("reports/a"), Path("reports/b")])
    judgement = judge(pool)
    for verdict in judgement.verdicts:
        print(verdict.cell, verdict.text)

A bench judges synthetic records without files: ``Pool(records, {name: CampaignInfo(name,
Judging(...), "default", cells, plan=Plan(attempts, hosts))})``; with ``plan`` the look is
the planned end when every planned slot ran (fixed-n), without it the records are taken as
the whole design; ``running=True`` or a ``stops`` event makes every look anytime-valid.

Modules: ``tally`` (records -> counts by role), ``looks`` (is this the planned end?),
``pairing`` (the hosts a cell is compared on, and the reference identity there), ``sides`` (what
else differs between a cell and its reference: campaigns, dates, image, PoC, driver, order),
``families`` (Holm across a report's cells, and the sides ``invoke compare`` judges beside it), ``host_claims`` (tested "not on X"),
``advice`` (clean attempts that would conclude, the worst case), ``words`` (the pieces of
a sentence), ``judge`` (evidence -> verdicts), ``verdict`` (what reports print).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from reprofleet.errors import ReprofleetError
from reprofleet.model import Judging, Role
from reprofleet.records.identity import DEPARTED, cell_name, departed, stratum_of
from reprofleet.records.pooling import Pool
from reprofleet.stats import intervals as stats
from reprofleet.stats.comparison import weigh
from reprofleet.verdicts import host_claims
from reprofleet.verdicts.families import ALPHA, LEVEL, Beside, Families
from reprofleet.verdicts.judge import CellFacts, Compared, Comparison, Context, VerdictKind, judge_cell
from reprofleet.verdicts.looks import Look, Looks
from reprofleet.verdicts.pairing import pair
from reprofleet.verdicts.sides import sides
from reprofleet.verdicts.tally import ALL_HOSTS, Judged, Tally, judge_records, natural_key, split_tally, tallies
from reprofleet.verdicts.verdict import Split, Verdict
from reprofleet.verdicts.words import fmt_p, pct

__all__ = ["ALL_HOSTS", "ALPHA", "LEVEL", "Beside", "Comparison", "Judgement", "ReferenceCellError", "Row", "Split", "Verdict",
           "VerdictKind", "judge", "fmt_p", "pct", "natural_key"]

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
    approximate: bool  # a look before the planned end: the exact interval is not valid under peeking
    mix: bool = False  # a pooled row over hosts that differ: this fleet's mix, not one rate


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
    not_run: Mapping[str, int] = field(default_factory=dict)  # slots that run again, by reason
    family: Beside = field(default_factory=Beside)  # this report's raw p-values, by Holm family
    beside: Beside = field(default_factory=Beside)  # those judged beside it, in the same families

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "judging": self.judging.to_json(), "hosts": list(self.hosts),
                "attempts": self.attempts, "excluded": dict(self.excluded), "not_run": dict(self.not_run),
                "warnings": list(self.warnings), "verdicts": [v.to_json() for v in self.verdicts]}


def _display_names(ids: Sequence[str]) -> dict[str, str]:
    by_name: dict[str, list[str]] = {}
    for identity in ids:
        by_name.setdefault(cell_name(identity), []).append(identity)
    return {i: (cell_name(i) if len(group) == 1 else i) for group in by_name.values() for i in group}


def _identity_warnings(ids: Sequence[str], judged: Sequence[Judged], reference: str) -> list[str]:
    warnings = []
    by_name: dict[str, list[str]] = {}
    for identity in ids:
        by_name.setdefault(cell_name(identity), []).append(identity)
    for name, group in by_name.items():
        if len(group) < 2:
            continue
        samples = {i: next(j.record for j in judged if j.cell_id == i) for i in group}
        differ = sorted({k for a in group for b in group for k in samples[a].differs_from(samples[b])})
        differ += _stratum_words(group)
        role = ("; each host is compared with the reference identity that ran there, never one copy with another"
                if name == reference else "")
        warnings.append(f"cell {name!r} ran with {len(group)} different contents ({', '.join(group)}; they differ in "
                        f"{', '.join(differ) or 'content'}): shown as separate rows, never pooled{role}")
    return warnings


def _stratum_words(group: Sequence[str]) -> list[str]:
    """What strata of one identity differ in (``Pool.strata``): the host stack, the settings read back."""
    labels = [stratum_of(i) for i in group]
    out = ["the host stack it ran under"] if any(label and not label.startswith(DEPARTED) for label in labels) else []
    if any(departed(i) for i in group):
        out.append("the GPU settings read back (other than planned)")
    return out


def _order(ids: Sequence[str], pool: Pool) -> list[str]:
    playbook_order = pool.cell_order()

    def key(identity: str) -> tuple[Any, ...]:
        name = cell_name(identity)
        return ((playbook_order.index(name), ()) if name in playbook_order
                else (len(playbook_order), natural_key(name)), identity)
    return sorted(ids, key=key)


def _reference(ids: Sequence[str], pool: Pool, asked: str | None, warnings: list[str]) -> tuple[str, ...]:
    """Every identity of the reference cell (the first is the one its name is shown for)."""
    wanted = [asked] if asked else pool.references()
    if len(wanted) > 1:
        warnings.append(f"the campaigns name different reference cells ({', '.join(wanted)}); using {wanted[0]}")
    for name in wanted[:1]:
        matches = [i for i in ids if i == name] or [i for i in ids if cell_name(i) == name]
        if matches:
            return tuple(matches)
        if asked:
            known = ", ".join(sorted({cell_name(i) for i in ids}, key=natural_key))
            raise ReferenceCellError(f"--reference {asked!r}: no such cell in these records (cells: {known})")
        warnings.append(f"the reference cell {name!r} has no records; using the first cell instead")
    fallback = next((i for i in ids if cell_name(i) == "default"), ids[0])
    if not wanted:  # no campaign.json names one: say which cell every comparison is with
        warnings.append(f"no campaign of these records names its reference cell (no campaign.json): every cell is "
                        f"compared with {cell_name(fallback)!r}; pass --reference CELL to choose")
    return tuple(i for i in ids if cell_name(i) == cell_name(fallback))


def _stopped(pool: Pool, name: str, judged: Sequence[Judged]) -> tuple[str, ...]:
    """A stop as a verdict says it: the rule and how far the cell got, never the rule's claim."""
    out = []
    for stop in pool.stops:
        if stop.get("cell") != name:
            continue
        host = str(stop.get("host"))
        ran = stop.get("attempts")
        if not isinstance(ran, int):
            ran = sum(1 for j in judged if j.host == host and cell_name(j.cell_id) == name and j.role is not Role.NOT_RUN)
        out.append(f"stopped by {stop.get('rule')} after {ran} attempt{'s' if ran != 1 else ''} on {host}")
    return tuple(sorted(set(out), key=natural_key))


def _splits(judged: Sequence[Judged], ids: Sequence[str]) -> dict[str, tuple[Split, ...]]:
    raw: list[tuple[str, str, str, str, Tally, Tally, float]] = []
    for identity in ids:
        for attribute, what, yes_label, no_label in SPLITS:
            pair_ = split_tally(judged, identity, attribute)
            if pair_ is not None:
                yes, no = pair_
                raw.append((identity, what, yes_label, no_label, yes, no, stats.boschloo(yes.counts, no.counts)))
    adjusted = stats.holm([r[-1] for r in raw])
    out: dict[str, list[Split]] = {}
    for (identity, what, yes_label, no_label, yes, no, p), adj in zip(raw, adjusted):
        out.setdefault(identity, []).append(Split(what, yes_label, no_label, yes.counts, no.counts, p, adj))
    return {k: tuple(v) for k, v in out.items()}


def _campaign_judging(pool: Pool) -> Judging:
    """The strictest thresholds of the pooled campaigns (for cells mixed across them)."""
    judgings = [info.judging for info in pool.campaigns.values()] or [Judging()]
    first = judgings[0]
    return Judging(first.reproductions, first.at_risk_phase, min(j.max_excluded_share for j in judgings),
                   min(j.fixed_ratio for j in judgings), first.early_reproductions)


def _split(identity: str, ids: Sequence[str]) -> tuple[str, ...]:
    """A cell whose name ran with several contents: this row is one of them, never their pool."""
    same = [i for i in ids if cell_name(i) == cell_name(identity)]
    if len(same) < 2:
        return ()
    return (f"{cell_name(identity)} ran with {len(same)} different contents; this row is {identity} alone",)


def _caveats(pool: Pool, campaigns: set[str]) -> tuple[str, ...]:
    infos = [pool.campaigns[c] for c in sorted(campaigns, key=natural_key) if c in pool.campaigns]
    out = [i.caveat for i in infos if i.caveat]
    if len({i.judging for i in infos}) > 1:
        out.append("its campaigns count outcomes differently; each record is judged by its own campaign's rules")
    return tuple(out)


def judge(pool: Pool, reference: str | None = None, beside: Beside = Beside()) -> Judgement:
    """Every cell's verdict, rate rows per host and pooled, and what could not be judged.

    ``beside``: the raw p-values of comparisons judged beside this report (``invoke compare``'s
    other sides); they join its Holm families, so every claim is adjusted across all of them."""
    judged = judge_records(pool.records, pool.judging_of, pool.strata())
    table = tallies(judged)
    ids = _order(list(dict.fromkeys(j.cell_id for j in judged)), pool)
    hosts = tuple(sorted({j.host for j in judged}, key=natural_key))
    judging = _campaign_judging(pool)
    if not ids:
        return Judgement((), (), reference or "", judging, hosts, 0, {}, ("no records",))
    names = _display_names(ids)
    warnings: list[str] = []
    ref_ids = _reference(ids, pool, reference, warnings)
    warnings = _identity_warnings(ids, judged, cell_name(ref_ids[0])) + warnings
    if len({i.judging for i in pool.campaigns.values()}) > 1:
        warnings.append("the pooled campaigns count outcomes differently; each record is judged by its own campaign's rules")
    looks = Looks(pool, judged)
    campaigns_of: dict[str, set[str]] = {}
    for item in judged:
        campaigns_of.setdefault(item.cell_id, set()).add(item.campaign)
    report_caveats = tuple(w for w in warnings if w.startswith("the campaigns name different reference cells"))
    cells = [CellFacts(names[i], i, table[(i, ALL_HOSTS)], {h: table[(i, h)] for h in hosts if (i, h) in table},
                       i in ref_ids, looks.of(cell_name(i)), _stopped(pool, cell_name(i), judged),
                       _caveats(pool, campaigns_of[i]) + _split(i, ids) + report_caveats) for i in ids]
    compared = _compare(cells, ref_ids, hosts, table, looks, judging, (judged, pool))
    families = Families({i: c.evidence.p_below for i, c in compared.items() if c.evidence},
                        {i: c.evidence.p_fixed for i, c in compared.items() if c.evidence}, beside)
    claims = host_claims.claims({c.cell_id: c.per_host for c in cells if c.pooled.reproductions},
                                {c.cell_id: not c.look.final for c in cells}, (beside.host_pairs, beside.hosts_differ))
    family = Beside(tuple(families.below.values()), tuple(families.fixed.values()),
                    tuple(p for c in claims.values() for p in c.pairs_raw),
                    tuple(c.differ_raw for c in claims.values() if c.differ_raw is not None))
    context = Context(judging, table, families, cell_name(ref_ids[0]), tuple(ref_ids))
    splits = _splits(judged, ids)
    verdicts = tuple(_verdict(c, compared.get(c.cell_id), claims.get(c.cell_id), context, splits.get(c.cell_id, ()))
                     for c in cells)
    excluded = Counter(j.reason for j in judged if j.role is Role.EXCLUDED)
    not_run = Counter(j.reason for j in judged if j.role is Role.NOT_RUN)
    return Judgement(verdicts, tuple(_rows(cells, claims)), names[ref_ids[0]], judging, hosts,
                     sum(1 for j in judged if j.role is not Role.NOT_RUN), dict(excluded.most_common()),
                     tuple(warnings), dict(not_run.most_common()), family, beside)


def _compare(cells: Sequence[CellFacts], ref_ids: Sequence[str], hosts: Sequence[str],
             table: Mapping[tuple[str, str], Tally], looks: Looks, judging: Judging,
             records: tuple[Sequence[Judged], Pool]) -> dict[str, Compared]:
    """Every non-reference cell against the reference on the hosts that ran both. Sides that
    ran in different campaigns are never at a planned end (``sides``): anytime-valid, and said."""
    out = {}
    reference = cell_name(ref_ids[0])
    for cell in cells:
        if cell.reference:
            continue
        pairing = pair(cell.cell_id, list(ref_ids), hosts, table)
        if not pairing.hosts:
            out[cell.cell_id] = Compared(pairing, cell.look, None)
            continue
        between = sides(pairing, *records)
        look = looks.of(cell_name(cell.cell_id), pairing.hosts).joined(looks.of(reference, pairing.hosts))
        if between.across:
            look = Look(False, (between.across,)).joined(look)
        evidence = weigh(pairing.strata(table), anytime_valid=not look.final, fixed_ratio=judging.fixed_ratio,
                         confidence=LEVEL)
        planned = looks.planned(cell_name(cell.cell_id)) or looks.planned(reference)
        out[cell.cell_id] = Compared(pairing, look, evidence, advice_anytime=planned or not look.final,
                                     sides=between.clauses[1:] if between.across else between.clauses)
    return out


def _verdict(cell: CellFacts, compared: Compared | None, claims: host_claims.HostClaims | None, context: Context,
             splits: tuple[Split, ...]) -> Verdict:
    decision = judge_cell(cell, compared, claims, context)
    tally = cell.pooled
    look: Look = compared.look if compared is not None else cell.look
    differ = None
    if claims is not None and claims.differ_p is not None and claims.differ_raw is not None:
        differ = Comparison("two-sided", claims.differ_raw, claims.differ_p, "exact test of equal rates across hosts")
    return Verdict(
        cell=cell.cell, cell_id=cell.cell_id, kind=decision.kind, text=decision.text, reference=cell.reference,
        reproductions=tally.reproductions, judged=tally.judged, excluded=tally.excluded,
        hosts=tuple(sorted((h for h, t in cell.per_host.items() if t.judged), key=natural_key)),
        hosts_reproducing=tuple(sorted((h for h, t in cell.per_host.items() if t.reproductions), key=natural_key)),
        rate=stats.rate_interval(tally.reproductions, tally.judged, LEVEL),
        against_reference=decision.comparison, hosts_differ=differ, bound=decision.bound,
        more_needed=decision.advice.more if decision.advice else None, stopped=cell.stopped,
        approximate=not look.final, splits=splits, at_risk=tally.at_risk, not_run=tally.not_run, early=tally.early,
        compared_hosts=compared.pairing.hosts if compared is not None else (), anytime=not look.final,
        look=look.why, advice=decision.advice.words if decision.advice else None, worst_case=decision.worst_case or None,
    )


def _rows(cells: Sequence[CellFacts], claims: Mapping[str, host_claims.HostClaims]) -> list[Row]:
    rows = []
    for cell in cells:
        for host, tally in sorted(cell.per_host.items(), key=lambda item: natural_key(item[0])):
            stopped_here = any(s.endswith(f" on {host}") for s in cell.stopped)
            rows.append(Row(cell.cell, cell.cell_id, host, tally, stats.rate_interval(*tally.counts, LEVEL),
                            cell.reference, stopped_here or not cell.look.final))
        if len(cell.per_host) > 1:
            mix = cell.cell_id in claims and claims[cell.cell_id].mix
            rows.append(Row(cell.cell, cell.cell_id, ALL_HOSTS, cell.pooled,
                            stats.rate_interval(*cell.pooled.counts, LEVEL), cell.reference,
                            bool(cell.stopped) or not cell.look.final, mix))
    return rows
