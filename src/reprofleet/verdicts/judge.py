"""Tallies -> one plain-words verdict per cell, never a broken cell called fixed.

The order of the checks is the point of this module:

1. A cell whose attempts were mostly excluded (errors before the phase at risk, infra) is
   "cannot judge", whatever its clean count: six broken starts are not a fix.
2. A cell that reproduced reproduces; if its hosts disagree significantly (exact test,
   Holm-adjusted across cells) it is "host-specific" and names them.
3. A cell that never reproduced is "fixed" only when an exact one-sided test against the
   reference (stratified by host where both ran on several hosts, Holm-adjusted across the
   cells of this report) says so; otherwise it is "clean so far", with the number of further
   clean attempts that would rule out the reference's own lower confidence bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, unique
from typing import Any, Mapping, Sequence

from reprofleet.stats import intervals as stats
from reprofleet.model import Judging
from reprofleet.verdicts.tally import Tally, natural_key

LEVEL = 0.95
ALPHA = 1.0 - LEVEL


@unique
class VerdictKind(str, Enum):
    REPRODUCES = "reproduces"
    FIXED = "fixed"
    CLEAN_SO_FAR = "clean so far"
    NO_DIFFERENCE = "no difference shown"
    HOST_SPECIFIC = "host-specific"
    CANNOT_JUDGE = "cannot judge"


@dataclass(frozen=True)
class Comparison:
    """One exact test of a cell against the reference."""

    alternative: str  # "less" (the cell reproduces less often) or "two-sided"
    p_value: float
    p_adjusted: float  # Holm across the cells of this report
    method: str
    odds_ratio: float | None = None
    heterogeneity_p: float | None = None  # do hosts disagree about the effect?

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Split:
    """A cell's rate in two groups of its own attempts, and whether the difference is real."""

    what: str
    yes_label: str
    no_label: str
    yes: tuple[int, int]
    no: tuple[int, int]
    p_value: float
    p_adjusted: float

    @property
    def flagged(self) -> bool:
        return self.p_adjusted < ALPHA

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "flagged": self.flagged}


@dataclass(frozen=True)
class Verdict:
    """One cell's conclusion, with every number the sentence rests on."""

    cell: str  # display name: the cell's name, or name@hash when one name ran two contents
    cell_id: str
    kind: VerdictKind
    text: str
    reference: bool
    reproductions: int
    judged: int
    excluded: int
    hosts: tuple[str, ...]
    hosts_reproducing: tuple[str, ...]
    rate: stats.Interval
    against_reference: Comparison | None = None
    hosts_differ: Comparison | None = None
    bound: stats.Interval | None = None
    more_needed: int | None = None
    stopped: tuple[str, ...] = ()
    approximate: bool = False
    splits: tuple[Split, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell, "cell_id": self.cell_id, "verdict": self.kind.value, "text": self.text,
            "reference": self.reference, "reproductions": self.reproductions, "judged": self.judged,
            "excluded": self.excluded, "hosts": list(self.hosts), "hosts_reproducing": list(self.hosts_reproducing),
            "rate": _interval_json(self.rate), "bound": _interval_json(self.bound),
            "against_reference": self.against_reference.to_json() if self.against_reference else None,
            "hosts_differ": self.hosts_differ.to_json() if self.hosts_differ else None,
            "more_needed": self.more_needed, "stopped": list(self.stopped), "approximate": self.approximate,
            "splits": [s.to_json() for s in self.splits],
        }


def _interval_json(interval: stats.Interval | None) -> dict[str, Any] | None:
    if interval is None:
        return None
    return {"low": interval.low, "high": interval.high, "confidence": interval.confidence,
            "sided": interval.sided, "method": interval.method, "label": interval.label()}


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def pct(value: float) -> str:
    return f"{value:.0%}" if value >= 0.01 or value == 0 else f"{value:.1%}"


@dataclass(frozen=True)
class CellEvidence:
    """What the judge needs about one cell: its tallies and how it was run."""

    cell: str
    cell_id: str
    pooled: Tally
    per_host: Mapping[str, Tally]
    stopped: tuple[str, ...] = ()


def _hosts_with(cell: CellEvidence, reproducing: bool) -> tuple[str, ...]:
    hosts = [h for h, t in cell.per_host.items() if t.judged and (t.reproductions > 0) == reproducing]
    return tuple(sorted(hosts, key=natural_key))


def _exclusion_reasons(tally: Tally) -> str:
    return ", ".join(f"{n}× {reason}" for reason, n in tally.excluded_reasons.most_common(3))


def compare_with_reference(cell: CellEvidence, ref: CellEvidence, alternative: str) -> tuple[float, str, float | None, float | None]:
    """(p, method, odds ratio, heterogeneity p): stratified by host where both ran on several."""
    common = sorted((h for h in cell.per_host if cell.per_host[h].judged and h in ref.per_host
                     and ref.per_host[h].judged), key=natural_key)
    if len(common) >= 2:
        result = stats.stratified([(cell.per_host[h].counts, ref.per_host[h].counts) for h in common], alternative)
        return result.p_value, f"{result.method}, {len(common)} hosts", result.common_odds_ratio, result.heterogeneity_p
    if len(common) == 1:
        host = common[0]
        p = stats.boschloo(cell.per_host[host].counts, ref.per_host[host].counts, alternative)
        return p, f"Boschloo exact ({alternative}) on {host}", None, None
    p = stats.boschloo(cell.pooled.counts, ref.pooled.counts, alternative)
    return p, f"Boschloo exact ({alternative}), hosts pooled: no host ran both cells", None, None


@dataclass(frozen=True)
class _Tests:
    """Every p-value of one report, Holm-adjusted within its family."""

    fixed: Mapping[str, Comparison]
    difference: Mapping[str, Comparison]
    hosts: Mapping[str, Comparison]


def _holm_family(raw: Mapping[str, tuple[float, str, float | None, float | None]], alternative: str) -> dict[str, Comparison]:
    keys = list(raw)
    adjusted = stats.holm([raw[k][0] for k in keys])
    return {k: Comparison(alternative, raw[k][0], adj, raw[k][1], raw[k][2], raw[k][3]) for k, adj in zip(keys, adjusted)}


def run_tests(cells: Sequence[CellEvidence], ref: CellEvidence) -> _Tests:
    others = [c for c in cells if c.cell_id != ref.cell_id and c.pooled.judged and ref.pooled.judged]
    fixed = _holm_family({c.cell_id: compare_with_reference(c, ref, "less") for c in others}, "less")
    difference = _holm_family({c.cell_id: compare_with_reference(c, ref, "two-sided") for c in others}, "two-sided")
    host_raw = {}
    for cell in cells:
        counts = [t.counts for t in cell.per_host.values() if t.judged]
        if len(counts) >= 2 and cell.pooled.reproductions:
            host_raw[cell.cell_id] = (stats.hosts_disagree(counts), "exact test of equal rates across hosts", None, None)
    return _Tests(fixed, difference, _holm_family(host_raw, "two-sided"))


def _cannot_judge(cell: CellEvidence, judging: Judging) -> str | None:
    tally = cell.pooled
    if tally.total == 0:
        return "no attempts"
    if tally.judged == 0 or tally.excluded_share > judging.max_excluded_share:
        hits = f"; {tally.reproductions} reproductions among the rest" if tally.reproductions else ""
        return (f"{tally.excluded} of {tally.total} attempts excluded ({_exclusion_reasons(tally)}), more than "
                f"{judging.max_excluded_share:.0%}{hits}")
    return None


def judge_cell(cell: CellEvidence, ref: CellEvidence, tests: _Tests, judging: Judging,
               ref_problem: str | None) -> tuple[Any, ...]:
    """(kind, text, bound, more_needed) for one cell."""
    tally = cell.pooled
    problem = _cannot_judge(cell, judging)
    if problem:
        return VerdictKind.CANNOT_JUDGE, f"cannot judge: {problem}", None, None
    reproducing = _hosts_with(cell, True)
    if tally.reproductions:
        differ = tests.hosts.get(cell.cell_id)
        clean_hosts = _hosts_with(cell, False)
        if differ is not None and differ.p_adjusted < ALPHA and clean_hosts:
            return (VerdictKind.HOST_SPECIFIC, f"host-specific: reproduces on {', '.join(reproducing)}, not on "
                    f"{', '.join(clean_hosts)} (hosts differ, {fmt_p(differ.p_adjusted)}, Holm-adjusted)", None, None)
        return (VerdictKind.REPRODUCES,
                f"reproduces ({tally.reproductions}/{tally.judged} on {len(reproducing)} "
                f"host{'s' if len(reproducing) != 1 else ''})", None, None)
    bound = stats.upper_bound(0, tally.judged, LEVEL)
    if cell.cell_id == ref.cell_id:
        return (VerdictKind.CLEAN_SO_FAR, f"clean so far: 0/{tally.judged}; the reference never reproduced, so no "
                f"cell can be compared with it (rate below {pct(bound.high)}, {bound.label()})", bound, None)
    if ref_problem:
        return VerdictKind.CANNOT_JUDGE, f"cannot judge: the reference {ref.cell} cannot be judged ({ref_problem})", None, None
    if ref.pooled.reproductions == 0:
        diff = tests.difference.get(cell.cell_id)
        p = diff.p_adjusted if diff else 1.0
        return (VerdictKind.NO_DIFFERENCE, f"no difference shown ({fmt_p(p)}): neither this cell nor the reference "
                f"{ref.cell} reproduced", None, None)
    fixed = tests.fixed.get(cell.cell_id)
    if fixed is not None and fixed.p_adjusted < ALPHA:
        return (VerdictKind.FIXED, f"fixed at 95% against {ref.cell}: rate below {pct(bound.high)} "
                f"({fmt_p(fixed.p_adjusted)}, Holm-adjusted; {bound.label()})", bound, None)
    p0 = stats.lower_bound(ref.pooled.reproductions, ref.pooled.judged, LEVEL).low
    needed = stats.clean_attempts_to_rule_out(p0, LEVEL)
    if needed is None:
        return VerdictKind.NO_DIFFERENCE, f"no difference shown ({fmt_p(fixed.p_adjusted if fixed else 1.0)})", bound, None
    more = max(needed - tally.judged, 0)
    if more == 0:
        return (VerdictKind.CLEAN_SO_FAR, f"clean so far: {tally.judged} clean attempts rule out {pct(p0)} (the "
                f"reference's lower bound) at 95%, but the difference from {ref.cell} is not yet significant "
                f"({fmt_p(fixed.p_adjusted if fixed else 1.0)}, Holm-adjusted)", bound, 0)
    return (VerdictKind.CLEAN_SO_FAR, f"clean so far: {more} more clean attempts rule out {pct(p0)} at 95% "
            f"({pct(p0)} is {ref.cell}'s one-sided 95% lower bound; 0/{tally.judged} so far)", bound, more)
