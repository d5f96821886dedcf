"""Which hosts a cell is compared with the reference on, and with which copy of the reference.

A comparison is one only where both ran: on a host that ran the cell but not the
reference, the difference could be the host's, not the change's (reference 16/20 on host
A, cell 0/20 on host B says A differs from B). So the strata are the hosts that have
judged attempts of both, and nothing else is compared; a cell no host ran beside the
reference is never "fixed". On each host the reference is the identity that ran there
(the tag may resolve to another image, or torch to another patch version, on another
host): the strata are host x runtime identity. Where one host ran the reference as
several identities, the one with the most judged attempts is used, and the sentence says
so. Every identity of the reference cell is the reference: a copy of it is never a cell
compared with itself.

A reference stratum (``Pool.strata``) whose GPU settings read back other than planned is
never the reference on a host (a default cell under its owner's clock lock is not the
default); where the reference ran under several host stacks, the stratum named like the
cell's own (the same driver) is preferred, and what still differs between the sides is
named by ``verdicts/sides.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from reprofleet.records.identity import departed, stratum_of
from reprofleet.stats.ratio import Stratum
from reprofleet.verdicts.tally import Tally, natural_key


@dataclass(frozen=True)
class Pairing:
    """A cell's comparison hosts, the reference identity used on each, and what was left out."""

    cell_id: str
    hosts: tuple[str, ...]  # judged attempts of the cell and of the reference on each
    reference_on: Mapping[str, str] = field(default_factory=dict)  # host -> reference identity used there
    not_compared: tuple[str, ...] = ()  # the cell ran there, the reference did not (or judged nothing)
    several: tuple[str, ...] = ()  # hosts that ran the reference as more than one identity
    reference_hosts: tuple[str, ...] = ()  # every host with judged reference attempts

    def strata(self, table: Mapping[tuple[str, str], Tally], extra_clean: Mapping[str, int] | None = None,
               at_risk_as_reproductions: bool = False) -> list[Stratum]:
        """((cell reproductions, judged), (reference reproductions, judged)) per comparison host;
        ``extra_clean`` adds hypothetical clean attempts, ``at_risk_as_reproductions`` the worst case."""
        out = []
        for host in self.hosts:
            cell, ref = table[(self.cell_id, host)], table[(self.reference_on[host], host)]
            k, n = cell.counts
            if at_risk_as_reproductions:
                k, n = k + cell.at_risk, n + cell.at_risk
            out.append(((k, n + (extra_clean or {}).get(host, 0)), ref.counts))
        return out

    def cell_tally(self, table: Mapping[tuple[str, str], Tally]) -> Tally:
        """The cell's tally on the comparison hosts only."""
        out = Tally(self.cell_id, "")
        for host in self.hosts:
            out = out.merged(table[(self.cell_id, host)])
        return out

    def reference_tally(self, table: Mapping[tuple[str, str], Tally]) -> Tally:
        out = Tally("", "")
        for host in self.hosts:
            out = out.merged(table[(self.reference_on[host], host)])
        return out

    def cell_counts(self, table: Mapping[tuple[str, str], Tally]) -> tuple[int, int]:
        """The cell's (reproductions, judged) on the comparison hosts."""
        counts = [table[(self.cell_id, h)].counts for h in self.hosts]
        return sum(k for k, _ in counts), sum(n for _, n in counts)

    def reference_counts(self, table: Mapping[tuple[str, str], Tally]) -> tuple[int, int]:
        counts = [table[(self.reference_on[h], h)].counts for h in self.hosts]
        return sum(k for k, _ in counts), sum(n for _, n in counts)


def pair(cell_id: str, reference_ids: Sequence[str], hosts: Sequence[str],
         table: Mapping[tuple[str, str], Tally]) -> Pairing:
    """The comparison of ``cell_id`` with the reference (all its identities), host by host."""
    reference_on: dict[str, str] = {}
    several, reference_hosts = [], []
    for host in hosts:
        ran = [i for i in reference_ids if (i, host) in table and table[(i, host)].judged and not departed(i)]
        if not ran:
            continue
        reference_hosts.append(host)
        alike = [i for i in ran if stratum_of(i) == stratum_of(cell_id)] or ran
        reference_on[host] = max(alike, key=lambda i: (table[(i, host)].judged, -reference_ids.index(i)))
        if len(ran) > 1:
            several.append(host)
    cell_hosts = [h for h in hosts if (cell_id, h) in table and table[(cell_id, h)].total]
    compared = tuple(h for h in cell_hosts if h in reference_on and table[(cell_id, h)].judged)
    return Pairing(cell_id, compared, {h: reference_on[h] for h in compared},
                   tuple(sorted((h for h in cell_hosts if h not in compared), key=natural_key)),
                   tuple(h for h in several if h in compared), tuple(reference_hosts))
