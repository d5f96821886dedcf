"""Host claims that are tested: "not on X" only where X was shown rarer than every host it
reproduced on.

An omnibus test that hosts differ says nothing about which host is clean, and a host with
one clean attempt is not "not on" anything. So for a cell that reproduced, each host X
where it never did is tested against each host R where it did, one-sided (is X rarer than
R? Boschloo, or the e-process at an interim look), Holm-adjusted across every such pair
of the report (and of the sides ``invoke compare`` judges beside it); and X's own one-sided upper bound must lie below R's lower bound. Only then
"not on X"; otherwise "clean so far on X (n attempts)". The omnibus test (exact, Holm
across cells) still decides whether the pooled rate is labelled as this fleet's mix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from reprofleet.stats import comparison
from reprofleet.stats import intervals as stats
from reprofleet.stats.ratio import Stratum
from reprofleet.verdicts.tally import Tally, natural_key

LEVEL = 0.95
ALPHA = 1.0 - LEVEL


@dataclass(frozen=True)
class CleanHost:
    """A host where a reproducing cell never reproduced, and whether "not on it" was shown."""

    host: str
    judged: int
    upper: float  # its one-sided upper bound
    floor: float  # the lowest lower bound among the hosts it reproduced on
    p_adjusted: float  # the largest Holm-adjusted p of its pairs
    shown: bool


@dataclass(frozen=True)
class HostClaims:
    """One reproducing cell's hosts: where it reproduced, where it was shown not to, and the rest."""

    reproducing: tuple[str, ...]
    clean: tuple[CleanHost, ...]
    differ_p: float | None  # omnibus, Holm-adjusted across cells
    anytime: bool
    differ_raw: float | None = None
    pairs_raw: tuple[float, ...] = ()  # its "is X rarer than R" pairs, unadjusted

    @property
    def not_on(self) -> tuple[CleanHost, ...]:
        return tuple(c for c in self.clean if c.shown)

    @property
    def clean_so_far(self) -> tuple[CleanHost, ...]:
        return tuple(c for c in self.clean if not c.shown)

    @property
    def mix(self) -> bool:
        """The pooled rate mixes hosts that differ."""
        return bool(self.not_on) or (self.differ_p is not None and self.differ_p < ALPHA)


def claims(per_cell: Mapping[str, Mapping[str, Tally]], anytime: Mapping[str, bool],
           beside: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())) -> dict[str, HostClaims]:
    """Every reproducing cell's host claims; ``per_cell`` maps a cell to its tallies per host;
    ``beside``: raw (pair, omnibus) p-values of comparisons judged beside this report, in the same two families."""
    pairs: list[tuple[str, str, str, float]] = []
    omnibus: dict[str, float] = {}
    for cell, hosts in per_cell.items():
        judged = {h: t for h, t in hosts.items() if t.judged}
        reproducing = [h for h, t in judged.items() if t.reproductions]
        if not reproducing or len(judged) < 2:
            continue
        omnibus[cell] = stats.hosts_disagree([t.counts for t in judged.values()])
        for clean in (h for h, t in judged.items() if not t.reproductions):
            for host in reproducing:
                p = comparison.rarer(judged[clean].counts, judged[host].counts, anytime_valid=anytime[cell])
                pairs.append((cell, clean, host, p))
    adjusted = dict(zip(((c, x, r) for c, x, r, _ in pairs), stats.holm([p for *_, p in pairs] + list(beside[0]))))
    differ = dict(zip(omnibus, stats.holm(list(omnibus.values()) + list(beside[1]))))
    raw = {cell: tuple(p for c, _, _, p in pairs if c == cell) for cell in per_cell}
    return {cell: _cell_claims(cell, per_cell[cell], adjusted, differ.get(cell), anytime[cell], omnibus.get(cell),
                               raw[cell])
            for cell in per_cell if any(t.reproductions for t in per_cell[cell].values())}


def _cell_claims(cell: str, hosts: Mapping[str, Tally], adjusted: Mapping[tuple[str, str, str], float],
                 differ_p: float | None, anytime: bool, differ_raw: float | None,
                 pairs_raw: tuple[float, ...]) -> HostClaims:
    judged = {h: t for h, t in hosts.items() if t.judged}
    reproducing = sorted((h for h, t in judged.items() if t.reproductions), key=natural_key)
    clean = []
    for host in sorted((h for h, t in judged.items() if not t.reproductions), key=natural_key):
        upper = comparison.upper(0, judged[host].judged, LEVEL, anytime_valid=anytime).high
        floor = min(comparison.lower(*judged[r].counts, LEVEL, anytime_valid=anytime).low for r in reproducing)
        worst = max(adjusted.get((cell, host, r), 1.0) for r in reproducing)
        clean.append(CleanHost(host, judged[host].judged, upper, floor, worst, worst < ALPHA and upper < floor))
    return HostClaims(tuple(reproducing), tuple(clean), differ_p, anytime, differ_raw, pairs_raw)


def fixed_on_its_own(strata: Sequence[Stratum], hosts: Sequence[str], fixed_ratio: float,
                     anytime: bool) -> tuple[str, ...]:
    """The hosts whose own records show the cell fixed (rarer, and the ratio below ``fixed_ratio``,
    each at 5% on that host alone). A pooled "fixed on A, B" can rest on A alone (0/12 against
    12/12 on A, 0/12 against 1/12 on B): the sentence then names the hosts it rests on
    (issue 33 item 7)."""
    out = []
    for host, stratum in zip(hosts, strata):
        evidence = comparison.weigh([stratum], anytime_valid=anytime, fixed_ratio=fixed_ratio)
        if comparison.concludes_fixed(evidence, ALPHA):
            out.append(host)
    return tuple(out)
