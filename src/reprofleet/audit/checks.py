"""Each claim's preconditions against the auditor's own reading of the records.

A contradiction names the claim, what its records show, and the item of issue 33 whose
rule it breaks (so a known class can be told from a new one):

- item 1, claims per stratum: a search's "highest clean level" on a host whose own records
  there reject P <= ε; a bisection's "first good" version that reproduced on a host;
- item 2, the worst case: a "fixed" or "clean so far" on hosts where attempts may have been
  reproductions (an error, hang or lost host inside the phase at risk) that its worst case
  does not count, or a search level called clean only because its errors and hangs were dropped;
- item 3, comparisons across campaigns: the two sides ran in different campaigns (or under
  another PoC or driver) and the sentence names none of the values that differ;
- item 4, identity includes what the host runs: one cell pooled across drivers whose
  sentence does not name each driver;
- item 9, the auditor's own: a host named that has no record there, counts that are not
  the records' counts, a host said to reproduce where nothing reproduced.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from reprofleet.audit.claims import (CLEAN_KINDS, COMPARING_KINDS, WORST_CASE_KINDS, BisectClaim, RateClaim,
                                     SearchClaim, VerdictClaim)
from reprofleet.audit.evidence import Attempt, Evidence
from reprofleet.records.identity import STRATUM_MARK

DEFAULT_EPSILON = 0.05
DEFAULT_DELTA = 0.05


@dataclass(frozen=True)
class Contradiction:
    """One claim its own records contradict."""

    claim: str  # the claim as the report names it: "verdict lgc-2800 (fixed)"
    shown: str  # what the records show
    item: int  # the item of issue 33 whose rule it breaks

    def line(self) -> str:
        return f"{self.claim}: {self.shown} (issue 33 item {self.item})"


def _hosts(attempts: Iterable[Attempt]) -> set[str]:
    return {a.host for a in attempts}


def _on(attempts: Iterable[Attempt], host: str) -> list[Attempt]:
    return [a for a in attempts if a.host == host]


def _early_excluded(evidence: Evidence, attempts: Iterable[Attempt]) -> bool:
    """The judge may count fewer reproductions than listed outcomes (early_reproductions: exclude)."""
    return any(evidence.manifests[c].rules.early_excluded for c in {a.campaign for a in attempts}
               if c in evidence.manifests)


def _counts(claim: str, totals: tuple[int, int, int], attempts: Sequence[Attempt], early_excluded: bool) -> list[str]:
    """(reproductions, at risk, ran) as claimed, against the records: what does not add up."""
    reproductions, at_risk, ran = totals
    seen = sum(a.reproduced for a in attempts)
    in_risk = sum(a.failed_in_risk for a in attempts)
    out = []
    if ran != len(attempts):
        out.append(f"{claim} counts {ran} attempts that ran, the records hold {len(attempts)}")
    if reproductions > seen or (reproductions < seen and not early_excluded):
        out.append(f"{claim} counts {reproductions} reproductions, the records hold {seen}")
    if at_risk > in_risk:
        out.append(f"{claim} counts {at_risk} errors/hangs/lost attempts in the phase at risk, the records hold "
                   f"{in_risk}")
    return out


def check_verdict(verdict: VerdictClaim, evidence: Evidence, references: frozenset[str] = frozenset()) -> list[Contradiction]:
    """Hosts, counts, reproductions, the worst case, and what a comparison's sides ran
    (``references``: every identity of the reference cell)."""
    cell = evidence.of_identity(verdict.cell_id)
    ran_on = _hosts(cell)
    found = [Contradiction(verdict.name, f"names {host}, which has no attempt of {verdict.cell_id} that ran", 9)
             for host in sorted(set(verdict.hosts) | set(verdict.hosts_reproducing) | set(verdict.compared_hosts))
             if host not in ran_on]
    # slots that run again have no read-back nor stack of their own: they belong to the cell, not a stratum
    base = verdict.cell_id.partition(STRATUM_MARK)[0]
    not_run = sum(1 for a in evidence.attempts if a.identity == base and not a.counted)
    totals = (verdict.reproductions, verdict.at_risk, verdict.judged + verdict.at_risk + verdict.excluded)
    found += [Contradiction(verdict.name, why, 9) for why in _counts("it", totals, cell, _early_excluded(evidence, cell))]
    if verdict.not_run > not_run or (verdict.not_run < not_run and base == verdict.cell_id):
        found.append(Contradiction(verdict.name, f"counts {verdict.not_run} slots that run again, the records "
                                                 f"hold {not_run}", 9))
    found += [Contradiction(verdict.name, f"says it reproduced on {host}, where none of its "
                                          f"{len(_on(cell, host))} attempts did", 9)
              for host in verdict.hosts_reproducing if host in ran_on and not any(a.reproduced for a in _on(cell, host))]
    if verdict.kind in CLEAN_KINDS:
        found += _clean_claim(verdict, cell)
    if verdict.compared and verdict.kind in COMPARING_KINDS:
        found += _sides(verdict, cell, evidence, references)
    if verdict.kind != "cannot judge":
        found += _drivers(verdict, cell)
    return found


def _clean_claim(verdict: VerdictClaim, cell: Sequence[Attempt]) -> list[Contradiction]:
    """Nothing reproduced on any host it covers; and what may have been a reproduction (an
    error, hang or lost host inside the phase at risk) is in the claim's worst case.

    "fixed" and "clean so far" claim no reproduction, so their worst case must count every
    such attempt on the hosts they cover (the judge then calls "fixed" only if it holds there:
    a rate ratio, which the judge's numbers decide, not the auditor's). "no difference shown"
    claims nothing such an attempt could overturn: neither side reproduced, nothing is shown.
    """
    covered = verdict.compared_hosts if verdict.compared else tuple(sorted(_hosts(cell)))
    maybe = {host: [a for a in _on(cell, host) if a.maybe_reproduced] for host in covered}
    counted = verdict.at_risk if verdict.worst_case else 0
    short = verdict.kind in WORST_CASE_KINDS and counted < sum(len(m) for m in maybe.values())
    found = []
    for host, here in maybe.items():
        if not here or not (short or any(a.reproduced for a in here)):
            continue
        item = 7 if any(a.reproduced for a in here) else 2
        found.append(Contradiction(verdict.name, f"on {host} {len(here)} of {len(_on(cell, host))} attempts may be "
                                                 f"reproductions in the worst case ({_listed(here)}); its worst case "
                                                 f"counts {counted}", item))
    return found


def _listed(attempts: Iterable[Attempt]) -> str:
    return ", ".join(f"{n} {o}" for o, n in sorted(_outcomes(attempts).items()))


def _outcomes(attempts: Iterable[Attempt]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in attempts:
        key = a.outcome if a.reproduced else f"{a.outcome} in the phase at risk"
        out[key] = out.get(key, 0) + 1
    return out


_HEX = re.compile(r"[0-9a-f]{8,}")


def named(text: str, value: str) -> bool:
    """Whether ``text`` names ``value``: the value itself as a word, or a digest by a prefix of 8 or more."""
    if re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", text):
        return True
    digest = value.rsplit(":", 1)[-1].lower()
    return any(digest.startswith(token) for token in _HEX.findall(text.lower()))


def _sides(verdict: VerdictClaim, cell: Sequence[Attempt], evidence: Evidence,
           references: frozenset[str]) -> list[Contradiction]:
    """A comparison whose sides ran in different campaigns, or under another PoC or driver,
    names what differs (a value of the difference, in its sentence)."""
    mine = [a for a in cell if a.host in verdict.compared_hosts]
    theirs = [a for r in _counterparts(verdict.cell_id, references) for a in evidence.of_identity(r)
              if a.host in verdict.compared_hosts]
    if not mine or not theirs:
        return []
    found = []
    campaigns_differ = {a.campaign for a in mine} != {a.campaign for a in theirs}
    for what, value in (("campaign", lambda a: a.campaign), ("PoC digest", lambda a: a.poc),
                        ("image", lambda a: a.image), ("driver", lambda a: a.driver)):
        if what == "image" and not campaigns_differ:
            continue  # within one campaign another image is the experiment's own factor
        ours = {value(a) for a in mine} - {""}
        other = {value(a) for a in theirs} - {""}
        if ours and other and ours != other and not any(named(verdict.text, v) for v in (other - ours) or other):
            found.append(Contradiction(verdict.name, f"compared across {what}s ({', '.join(sorted(ours))} against "
                                                     f"the reference's {', '.join(sorted(other))}) without naming them",
                                       3 if what != "driver" else 4))
    return found


def _counterparts(cell_id: str, references: frozenset[str]) -> list[str]:
    """The reference strata a cell's stratum is compared with: those that ran under what it ran
    under (the same label after the mark), else every one (the comparison then crosses them)."""
    label = cell_id.partition(STRATUM_MARK)[2]
    alike = sorted(r for r in references if r.partition(STRATUM_MARK)[2] == label)
    return alike or sorted(references)


def _drivers(verdict: VerdictClaim, cell: Sequence[Attempt]) -> list[Contradiction]:
    """One cell pooled across drivers names every driver it ran under."""
    drivers = sorted({a.driver for a in cell} - {""})
    if len(drivers) < 2 or all(named(verdict.text, d) for d in drivers):
        return []
    return [Contradiction(verdict.name, f"pools attempts that ran under drivers {', '.join(drivers)} without "
                                        "naming each", 4)]


def check_rate(rate: RateClaim, evidence: Evidence) -> list[Contradiction]:
    """A rate row's counts on its host."""
    here = _on(evidence.of_identity(rate.cell_id), rate.host)
    claimed = rate.reproductions + rate.at_risk + rate.judged + rate.excluded
    if not here and claimed == 0:
        return []  # a row that counts nothing (its slots were not run, or run again) claims nothing
    if not here:
        return [Contradiction(rate.name, f"{rate.host} has no attempt of {rate.cell_id} that ran", 9)]
    totals = (rate.reproductions, rate.at_risk, rate.judged + rate.at_risk + rate.excluded)
    return [Contradiction(rate.name, why, 9) for why in _counts("it", totals, here, _early_excluded(evidence, here))]


def upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), by the auditor's own sum (in logs: n may be large)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
            + (n - i) * math.log1p(-p) for i in range(k, n + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


def _spec(evidence: Evidence, campaign: str) -> Mapping[str, object]:
    manifest = evidence.manifests.get(campaign)
    spec = manifest.search.get("spec") if manifest is not None else None
    return spec if isinstance(spec, Mapping) else {}


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def check_search(search: SearchClaim, evidence: Evidence) -> list[Contradiction]:
    """Every host of the group, at every level up to the boundary: its own records do not
    reject P <= ε (one-sided binomial, δ split over the hosts and levels checked)."""
    ladder = [a for cell in search.cells for a in evidence.of_cell(search.campaign, cell)]
    found = [Contradiction(search.name, f"names {host}, which ran no attempt of the search", 9)
             for host in search.hosts if not _on(ladder, host)]
    if search.boundary is None:
        return found
    spec = _spec(evidence, search.campaign)
    epsilon, delta = _number(spec.get("epsilon"), DEFAULT_EPSILON), _number(spec.get("delta"), DEFAULT_DELTA)
    levels = range(search.boundary + 1)
    alpha = delta / max(1, len(search.hosts) * len(levels))
    for level in levels:
        at_level = evidence.of_cell(search.campaign, search.cells[level])
        for host in search.hosts:
            here = _on(at_level, host)
            maybe = sum(a.maybe_reproduced for a in here)
            if upper_tail(maybe, len(here), epsilon) >= alpha:
                continue
            sure = sum(a.reproduced for a in here)
            item = 1 if upper_tail(sure, len(here), epsilon) < alpha else 2
            found.append(Contradiction(search.name, f"{host} at {search.labels[level]}: {maybe} of {len(here)} "
                                                    f"attempts may be reproductions ({sure} are), which rejects "
                                                    f"P <= {epsilon:g} on {host} (p < {alpha:.2g})", item))
    return found


def check_bisection(bisection: BisectClaim, evidence: Evidence) -> list[Contradiction]:
    """The first good version never reproduced on any host, in the worst case."""
    if bisection.first_good is None:
        return []
    version = evidence.of_cell(bisection.campaign, bisection.cells[bisection.first_good])
    found = []
    for host in sorted(_hosts(version)):
        here = _on(version, host)
        maybe = [a for a in here if a.maybe_reproduced]
        if maybe:
            sure = sum(a.reproduced for a in maybe)
            found.append(Contradiction(bisection.name, f"{host}: {len(maybe)} of {len(here)} attempts of "
                                                       f"{bisection.labels[bisection.first_good]} may be "
                                                       f"reproductions ({sure} are)", 1 if sure else 2))
    return found
