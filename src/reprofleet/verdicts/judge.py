"""Evidence -> one plain-words verdict per cell, facts before shares, claims no larger than
their test.

The order of the checks is the point of this module:

1. Nothing ran (every slot runs again): "cannot judge", and why.
2. A cell that reproduced reproduces: a fact, whatever share of its attempts was excluded.
   It is "host-specific" where a host was *shown* not to reproduce (:mod:`.host_claims`),
   and "reproduces less often" where it is significantly rarer than the reference on the
   hosts that ran both.
3. A cell that never reproduced but whose attempts were mostly excluded, or that has no
   clean attempt (errors and hangs in the phase at risk are never clean), "cannot judge".
4. So does one that no host ran beside the reference, or whose reference cannot be judged
   on the hosts that ran both.
5. It is "fixed" only when it is rarer than the reference *and* its rate ratio is bounded
   below ``fixed_ratio``, both Holm-adjusted across the report's cells, on the hosts that
   ran both; "reproduces less often" when only the first holds; "clean so far" otherwise,
   with the clean attempts that would make it fixed, or why none would.

Numbers are fixed-n at a campaign's planned end and anytime-valid at any other look
(:mod:`.looks`), and the sentence says which. Every caveat is in the sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, unique
from typing import Any, Mapping

from reprofleet.model import Judging
from reprofleet.stats import comparison
from reprofleet.stats import intervals as stats
from reprofleet.stats.comparison import Evidence
from reprofleet.stats.ratio import Stratum
from reprofleet.verdicts import words as w
from reprofleet.verdicts.advice import Advice, more_clean_attempts
from reprofleet.verdicts.families import ALPHA, LEVEL, Families
from reprofleet.verdicts.host_claims import HostClaims, fixed_on_its_own
from reprofleet.verdicts.looks import Look, look_words
from reprofleet.verdicts.pairing import Pairing
from reprofleet.verdicts.tally import ALL_HOSTS, Tally, natural_key

fmt_p, pct = w.fmt_p, w.pct


@unique
class VerdictKind(str, Enum):
    REPRODUCES = "reproduces"
    LESS_OFTEN = "reproduces less often"
    FIXED = "fixed"
    CLEAN_SO_FAR = "clean so far"
    NO_DIFFERENCE = "no difference shown"
    HOST_SPECIFIC = "host-specific"
    CANNOT_JUDGE = "cannot judge"


@dataclass(frozen=True)
class Comparison:
    """A cell against the reference on the hosts that ran both: both questions, raw and Holm-adjusted."""

    alternative: str  # "less": the cell reproduces less often
    p_value: float
    p_adjusted: float  # Holm across the cells of this report
    method: str
    odds_ratio: float | None = None
    heterogeneity_p: float | None = None  # do hosts disagree about the effect?
    ratio_upper: float | None = None  # one-sided upper bound on the rate ratio cell / reference
    ratio_method: str = ""
    fixed_ratio: float | None = None
    p_fixed: float | None = None  # "ratio >= fixed_ratio", raw and Holm-adjusted
    p_fixed_adjusted: float | None = None
    anytime: bool = False
    hosts: tuple[str, ...] = ()
    strata: tuple[Stratum, ...] = ()  # per host of ``hosts``: ((cell k, n), (reference k, n))

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["hosts"] = list(self.hosts)
        out["strata"] = [[list(cell), list(ref)] for cell, ref in self.strata]
        out["ratio_upper"] = None if self.ratio_upper is None or math.isinf(self.ratio_upper) else self.ratio_upper
        return out


@dataclass(frozen=True)
class CellFacts:
    """What the judge knows about one cell identity."""

    cell: str
    cell_id: str
    pooled: Tally
    per_host: Mapping[str, Tally]
    reference: bool
    look: Look
    stopped: tuple[str, ...] = ()  # "stopped by sprt after 12 attempts on ws01": a stop's claim is never quoted
    caveats: tuple[str, ...] = ()  # a missing manifest, pooled campaigns that judge differently


@dataclass(frozen=True)
class Compared:
    """A cell's comparison with the reference: the hosts, the look, the numbers."""

    pairing: Pairing
    look: Look
    evidence: Evidence | None  # None: no host ran both
    advice_anytime: bool = True  # more attempts would be judged anytime-valid (False: no plan, fixed-n)
    sides: tuple[str, ...] = ()  # what else differs between the cell and its reference (verdicts/sides.py)


@dataclass(frozen=True)
class Decision:
    kind: VerdictKind
    text: str
    bound: stats.Interval | None = None
    comparison: Comparison | None = None
    advice: Advice | None = None
    worst_case: str | None = None


@dataclass(frozen=True)
class Context:
    """What every cell of one report is judged against."""

    judging: Judging
    table: Mapping[tuple[str, str], Tally]
    families: Families
    reference: str  # the reference cell's name
    reference_ids: tuple[str, ...] = ()  # every identity it ran as


def comparison_of(compared: Compared, families: Families,
                  table: Mapping[tuple[str, str], Tally]) -> Comparison | None:
    evidence = compared.evidence
    if evidence is None:
        return None
    below, fixed = families.adjusted(compared.pairing.cell_id)
    method = f"{evidence.below_method} on {', '.join(compared.pairing.hosts)}"
    return Comparison("less", evidence.p_below, below, method, evidence.odds_ratio,
                      evidence.heterogeneity_p, evidence.ratio_upper, evidence.ratio_method, evidence.fixed_ratio,
                      evidence.p_fixed, fixed, evidence.anytime, compared.pairing.hosts,
                      tuple(compared.pairing.strata(table)))


def _clauses(cell: CellFacts, look: Look) -> list[str]:
    """What every sentence of this cell ends with: how the look was made, stops, caveats."""
    if cell.stopped:  # the stop says itself, with its rule and count
        look = Look(look.final, tuple(why for why in look.why if not why.startswith("stopped early")))
    return [look_words(look), *cell.stopped, *cell.caveats]


def _pairing_clauses(compared: Compared, context: Context) -> list[str]:
    pairing, out = compared.pairing, []
    for host in pairing.not_compared:
        ran = context.table[(pairing.cell_id, host)].total
        out.append(f"not compared on {host} ({w.plural(ran, 'attempt')}; no judged {context.reference} attempt there)")
    used = sorted(set(pairing.reference_on.values()))
    if len(used) > 1:
        out.append("the reference ran as " + ", ".join(
            f"{i} on {', '.join(h for h in pairing.hosts if pairing.reference_on[h] == i)}" for i in used))
    for host in pairing.several:
        out.append(f"on {host} the reference ran as several identities; compared with {pairing.reference_on[host]}")
    return out + list(compared.sides)


def judge_cell(cell: CellFacts, compared: Compared | None, claims: HostClaims | None, context: Context) -> Decision:
    """One cell's verdict (the reference's own when ``compared`` is None and the cell is the reference)."""
    tally, judging = cell.pooled, context.judging
    look = compared.look if compared is not None else cell.look
    tail = [w.not_run(tally), *_clauses(cell, look)]
    if tally.total == 0:
        return Decision(VerdictKind.CANNOT_JUDGE, w.join("cannot judge: no attempt ran", tail))
    if tally.reproductions:
        return _reproduces(cell, compared, claims, context, tail)
    share = tally.excluded_share > judging.max_excluded_share
    if tally.judged == 0 or share:
        why = (f"{tally.excluded} of {tally.total} attempts excluded ({w.reasons(tally.excluded_reasons)}), more than "
               f"{judging.max_excluded_share:.0%}" if share else f"no clean attempt ({w.counts(tally, judging)})")
        if tally.at_risk:
            why += f"; {tally.at_risk} errors/hangs in {w.risk_words(judging)} are never counted as clean"
        return Decision(VerdictKind.CANNOT_JUDGE, w.join(f"cannot judge: {why}", tail))
    if compared is None:
        return _reference_clean(cell, context, tail)
    return _never_reproduced(cell, compared, context, tail)


def _reference_clean(cell: CellFacts, context: Context, tail: list[str]) -> Decision:
    tally = cell.pooled
    bound = comparison.upper(0, tally.judged, LEVEL, anytime_valid=not cell.look.final)
    others = [i for i in context.reference_ids if i != cell.cell_id and context.table[(i, ALL_HOSTS)].reproductions]
    if others:
        seen = ", ".join(f"{i} {context.table[(i, ALL_HOSTS)].reproductions}/{context.table[(i, ALL_HOSTS)].judged}"
                         for i in others)
        head = (f"clean so far: 0/{tally.judged} (rate below {pct(bound.high)}, {bound.label()}); this copy of the "
                f"reference is not compared with its other copies ({seen}): they ran other contents, on their hosts")
    else:
        head = (f"clean so far: 0/{tally.judged}; the reference never reproduced, so no cell can be compared with it "
                f"(rate below {pct(bound.high)}, {bound.label()})")
    return Decision(VerdictKind.CLEAN_SO_FAR, w.join(head, [w.counts(tally, context.judging), *tail]), bound)


def _reproduces(cell: CellFacts, compared: Compared | None, claims: HostClaims | None, context: Context,
                tail: list[str]) -> Decision:
    tally, judging = cell.pooled, context.judging
    reproducing = sorted((h for h, t in cell.per_host.items() if t.reproductions), key=natural_key)
    facts = [w.early(tally, judging)]
    if tally.excluded_share > judging.max_excluded_share:
        facts.append(f"{tally.excluded} of {tally.total} attempts excluded ({w.reasons(tally.excluded_reasons)}): "
                     "the rate is uncertain, the reproductions are not")
    if tally.at_risk:
        facts.append(f"{w.plural(tally.at_risk, 'error/hang', 'errors/hangs')} in {w.risk_words(judging)} besides")
    if claims is not None:
        facts += [f"clean so far on {c.host} ({w.plural(c.judged, 'attempt')})" for c in claims.clean_so_far]
        if claims.mix:
            rate = tally.reproductions / tally.judged
            why = f", {fmt_p(claims.differ_p)}" if claims.differ_p is not None and claims.differ_p < ALPHA else ""
            facts.append(f"the pooled rate {pct(rate)} is this fleet's mix of hosts that differ{why}")
    result = comparison_of(compared, context.families, context.table) if compared is not None else None
    extra = _pairing_clauses(compared, context) if compared is not None and compared.evidence else []
    if compared is not None and compared.evidence is None and not cell.reference:
        extra.append(f"not compared with {context.reference}: no host ran both")
    if claims is not None and claims.not_on:
        shown = "; ".join(f"{c.host}: 0/{c.judged}, rate below {pct(c.upper)}, under {pct(c.floor)} where it "
                          f"reproduced, {fmt_p(c.p_adjusted)}" for c in claims.not_on)
        head = (f"host-specific: reproduces on {', '.join(reproducing)}, not on "
                f"{', '.join(c.host for c in claims.not_on)} ({shown}; pairwise, Holm-adjusted)")
        return Decision(VerdictKind.HOST_SPECIFIC, w.join(head, facts + extra + tail), comparison=result)
    if result is not None and result.p_adjusted < ALPHA and (result.ratio_upper or math.inf) < 1.0:
        assert compared is not None
        return Decision(VerdictKind.LESS_OFTEN, w.join(_less_often_head(compared, result, context),
                                                       facts + extra + tail), comparison=result)
    head = (f"reproduces ({tally.reproductions}/{tally.judged} on {len(reproducing)} "
            f"host{'s' if len(reproducing) != 1 else ''})")
    return Decision(VerdictKind.REPRODUCES, w.join(head, facts + extra + tail), comparison=result)


def _less_often_head(compared: Compared, result: Comparison, context: Context) -> str:
    cell_k, cell_n = compared.pairing.cell_counts(context.table)
    ref_k, ref_n = compared.pairing.reference_counts(context.table)
    if_at_all = ", if at all" if cell_k == 0 else ""
    bound, threshold = result.ratio_upper or math.inf, result.fixed_ratio or 0.0
    if cell_k:
        why = "it still reproduces, so it is not fixed"
    elif bound >= threshold:
        why = f"not low enough to call fixed (that needs a ratio below {threshold:g})"
    elif (result.p_fixed_adjusted or 1.0) < ALPHA:
        why = "fixed only if none of the attempts at risk was a reproduction, so not fixed (the worst case below)"
    else:
        why = (f"a ratio below {threshold:g} is not shown at this report's Holm rank "
               f"({fmt_p(result.p_fixed_adjusted or 1.0)}), so not fixed")
    return (f"reproduces less often than {context.reference}{if_at_all}: {cell_k}/{cell_n} against {ref_k}/{ref_n} on "
            f"{w.hosts_words(list(compared.pairing.hosts))}, rate ratio ≤ {w.ratio(bound)} "
            f"({LEVEL:.0%} one-sided, {result.ratio_method}; rarer: {fmt_p(result.p_adjusted)}, {result.method}, "
            f"Holm-adjusted); {why}")


def _rate_bounds(compared: Compared, context: Context, anytime: bool) -> tuple[stats.Interval, str]:
    """The cell's upper bound from the comparison hosts, per host when the reference's rates differ there."""
    pairing = compared.pairing
    cell_k, cell_n = pairing.cell_counts(context.table)
    bound = comparison.upper(cell_k, cell_n, LEVEL, anytime_valid=anytime)
    refs = [context.table[(pairing.reference_on[h], h)].counts for h in pairing.hosts]
    if len(refs) > 1 and stats.hosts_disagree(refs) < ALPHA:
        per = [f"below {pct(comparison.upper(*context.table[(pairing.cell_id, h)].counts, LEVEL, anytime_valid=anytime).high)}"
               f" on {h} (0/{context.table[(pairing.cell_id, h)].judged})" for h in pairing.hosts]
        return bound, f"rate {', '.join(per)} ({bound.label()}; the hosts' reference rates differ, so per host)"
    return bound, f"rate below {pct(bound.high)} on {w.hosts_words(list(pairing.hosts))} (0/{cell_n}; {bound.label()})"


def _never_reproduced(cell: CellFacts, compared: Compared, context: Context, tail: list[str]) -> Decision:
    tally, pairing = cell.pooled, compared.pairing
    if compared.evidence is None:
        ran = ", ".join(sorted(cell.per_host, key=natural_key))
        refs = ", ".join(pairing.reference_hosts) or "no host"
        return Decision(VerdictKind.CANNOT_JUDGE, w.join(
            f"cannot judge: no host ran both {cell.cell} and {context.reference} ({cell.cell} ran on {ran}, "
            f"{context.reference} on {refs})", tail))
    ref_tally = pairing.reference_tally(context.table)
    if ref_tally.reproductions == 0 and ref_tally.excluded_share > context.judging.max_excluded_share:
        return Decision(VerdictKind.CANNOT_JUDGE, w.join(
            f"cannot judge: the reference {context.reference} cannot be judged on {w.hosts_words(list(pairing.hosts))} "
            f"({ref_tally.excluded} of {ref_tally.total} attempts excluded)", tail))
    anytime = compared.evidence.anytime
    bound, rate = _rate_bounds(compared, context, anytime)
    result = comparison_of(compared, context.families, context.table)
    assert result is not None
    ref_k, ref_n = pairing.reference_counts(context.table)
    counts = w.counts(pairing.cell_tally(context.table), context.judging)
    extra = _pairing_clauses(compared, context)
    if ref_k == 0:
        return Decision(VerdictKind.NO_DIFFERENCE, w.join(
            f"no difference shown: neither {cell.cell} nor {context.reference} reproduced on "
            f"{w.hosts_words(list(pairing.hosts))} (0/{pairing.cell_counts(context.table)[1]} against 0/{ref_n})",
            ["cannot be shown on these hosts: the reference never reproduced there", counts, *extra, *tail]),
            bound, result, Advice(None, "cannot be shown on these hosts: the reference never reproduced there"))
    worst, holds = _worst_case(cell, compared, context)
    fixed = result.p_adjusted < ALPHA and (result.p_fixed_adjusted or 1.0) < ALPHA and holds
    if fixed:
        head = (f"fixed at {LEVEL:.0%} against {context.reference}: rate ratio ≤ {w.ratio(result.ratio_upper or 0.0)} "
                f"(below {result.fixed_ratio:g}: {fmt_p(result.p_fixed_adjusted or 1.0)}; {LEVEL:.0%} one-sided, "
                f"{result.ratio_method}), rarer ({fmt_p(result.p_adjusted)}, {result.method}; both Holm-adjusted), "
                f"{rate}")
        rests = _rests_on(compared, result, context)
        return Decision(VerdictKind.FIXED, w.join(head, [rests, counts, worst, *extra, *tail]), bound, result, None,
                        worst)
    advice = more_clean_attempts(pairing, context.table, context.families, context.judging.fixed_ratio,
                                 compared.advice_anytime)
    if result.p_adjusted < ALPHA and (result.ratio_upper or math.inf) < 1.0:
        return Decision(VerdictKind.LESS_OFTEN, w.join(_less_often_head(compared, result, context),
                                                       [rate, counts, worst, advice.words, *extra, *tail]),
                        bound, result, advice, worst)
    bound_words = f"rate ratio ≤ {w.ratio(result.ratio_upper or math.inf)} ({result.ratio_method})"
    shown = (f"rarer by its exact test ({fmt_p(result.p_adjusted)}, {result.method}, Holm-adjusted), but its "
             f"{bound_words} does not exclude the reference's own rate" if result.p_adjusted < ALPHA else
             f"not shown rarer ({fmt_p(result.p_adjusted)}, {result.method}, Holm-adjusted); {bound_words}")
    head = (f"clean so far against {context.reference}: 0/{pairing.cell_counts(context.table)[1]} against "
            f"{ref_k}/{ref_n} on {w.hosts_words(list(pairing.hosts))}, {rate}; {shown}")
    return Decision(VerdictKind.CLEAN_SO_FAR, w.join(head, [counts, worst, advice.words, *extra, *tail]),
                    bound, result, advice, worst)


def _rests_on(compared: Compared, result: Comparison, context: Context) -> str:
    """"fixed on A, B" holds per host only where each host's own records show it; else say on which it rests."""
    hosts = compared.pairing.hosts
    if len(hosts) < 2:
        return ""
    own = fixed_on_its_own(result.strata, hosts, context.judging.fixed_ratio, result.anytime)
    if len(own) == len(hosts):
        return f"each of {w.hosts_words(list(hosts))} shows it on its own records"
    alone = "; ".join(f"{h}: {k}/{n} against {rk}/{rn}" for h, ((k, n), (rk, rn)) in zip(hosts, result.strata)
                      if h not in own)
    where = (f"it rests on {w.hosts_words(list(own))}" if own else "no host shows it on its own records")
    return (f"pooled over {w.hosts_words(list(hosts))}: {where}; not shown on "
            f"{w.hosts_words([h for h in hosts if h not in own])} alone ({alone})")


def _worst_case(cell: CellFacts, compared: Compared, context: Context) -> tuple[str, bool]:
    """The verdict had every error or hang in the phase at risk, and every attempt lost with the
    host there, been a reproduction; and whether "fixed" still holds then. "Fixed" is claimed
    only where it does (issue 33 item 2): what might be a reproduction is counted as one."""
    at_risk = cell.pooled.at_risk
    if not at_risk:
        return "", True
    risk = w.risk_words(context.judging)
    head = f"worst case, had the {w.at_risk_words(cell.pooled)} in {risk} been reproductions"
    evidence = compared.evidence
    assert evidence is not None
    strata = compared.pairing.strata(context.table, at_risk_as_reproductions=True)
    if sum(c[0] for c, _ in strata) == 0:
        return f"{head}: reproduces (none of them on the hosts compared)", True
    worst = comparison.weigh(strata, anytime_valid=evidence.anytime, fixed_ratio=context.judging.fixed_ratio)
    below, fixed = context.families.adjusted(compared.pairing.cell_id, worst.p_below, worst.p_fixed)
    if below < ALPHA and fixed < ALPHA:
        return (f"{head}: still fixed (rate ratio ≤ {w.ratio(worst.ratio_upper)}, below "
                f"{context.judging.fixed_ratio:g}: {fmt_p(fixed)})"), True
    if below < ALPHA and worst.ratio_upper < 1.0:
        return (f"{head}: reproduces less often (rate ratio ≤ {w.ratio(worst.ratio_upper)}, {fmt_p(below)}), "
                "so not fixed"), False
    return f"{head}: reproduces, not shown rarer than {context.reference} ({fmt_p(below)}), so not fixed", False
