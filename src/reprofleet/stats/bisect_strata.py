"""Which hosts a bisection's answer rests on and covers (issue 33 item 1).

A bisection pools its hosts' probes into one change point. That is sound only on hosts
where the bug shows at all: a host on which it never reproduces runs every version clean,
and its clean runs of bad versions read as "good", pulling the change point early while the
one host that shows the bug keeps reproducing at the "first good" (issue 33: "first good:
0.21.0 (posterior 0.975)" beside 3/23 at 0.21.0 on one host). So, per stratum (a declared
``groups:`` entry; ``all`` otherwise):

* a host is **confirmed** once it reproduced at a version other than the known good; only
  confirmed hosts' probes are evidence for the change point (every host's runs of the known
  good count for its target check: the good end is good on any host). While no host is
  confirmed, every probe counts, as before, so the known bad's re-check can fail.
* a host not confirmed is sent to the known bad once it has ``PARK`` counted probes elsewhere
  (they wait, uncounted, until it reproduces), and is **unseen** after as many clean runs
  there as the known bad's own re-check allows (:func:`bad_check_attempts`): the bug does not
  show on it, it leaves the bisection, and the answer names it.
* the answer covers the confirmed hosts less any that reproduced at the first good: a
  version that reproduced on a host is never called good on it.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from reprofleet.stats.search_contract import BisectSpec, HostException, Probe, ProbeOutcome

PARK = 3  # counted probes away from the known good a host runs before it must show the bug at the known bad
DEFAULT_GROUP = "all"


def bad_check_attempts(posterior: float, min_bad_rate: float) -> int:
    """Clean runs that a version reproducing at ``min_bad_rate`` passes with probability at
    most 1 - ``posterior``: after them the known bad is called 'never reproduced', and the
    first good needs them before it is called good (14 at 0.95 and 20%)."""
    return math.ceil(math.log1p(-posterior) / math.log1p(-min_bad_rate))


def known_bad(spec: BisectSpec) -> int:
    return 0 if spec.bad_first else spec.versions - 1


def known_good(spec: BisectSpec) -> int:
    return spec.versions - 1 if spec.bad_first else 0


def declared(groups: tuple[tuple[str, str], ...], probes: Sequence[Probe]) -> list[tuple[str, tuple[str, ...]]]:
    """(stratum, its hosts) in name order: the declared groups, and ``all`` for hosts none names."""
    named = dict(groups)
    names = set(named.values())
    if not names or any(p.host not in named for p in probes):
        names.add(DEFAULT_GROUP)
    return [(name, tuple(sorted({h for h, g in groups if g == name}
                                | {p.host for p in probes if named.get(p.host, DEFAULT_GROUP) == name})))
            for name in sorted(names)]


def group_of(groups: tuple[tuple[str, str], ...], host: str) -> str:
    return dict(groups).get(host, DEFAULT_GROUP)


def stratum_hosts(groups: tuple[tuple[str, str], ...], probes: Sequence[Probe], host: str) -> set[str]:
    """``host`` and every host of its stratum that a probe or the groups name."""
    mine = group_of(groups, host)
    return {host} | {p.host for p in probes if group_of(groups, p.host) == mine} | {h for h, g in groups if g == mine}


def confirmed(spec: BisectSpec, probes: Iterable[Probe]) -> set[str]:
    """Hosts the bug reproduced on, at a version other than the known good."""
    good = known_good(spec)
    return {p.host for p in probes if p.outcome is ProbeOutcome.REPRODUCED and p.level != good}


def evidence(spec: BisectSpec, probes: Sequence[Probe]) -> list[Probe]:
    """The probes the change point rests on: confirmed hosts', and every host's at the known good."""
    shown = confirmed(spec, probes)
    if not shown:
        return list(probes)
    good = known_good(spec)
    return [p for p in probes if p.host in shown or p.level == good]


def _at(probes: Sequence[Probe], host: str, version: int) -> tuple[int, int]:
    """(reproductions, counted attempts) of ``host`` at ``version``."""
    mine = [p for p in probes if p.host == host and p.level == version and p.outcome is not ProbeOutcome.UNUSABLE]
    return sum(p.outcome is ProbeOutcome.REPRODUCED for p in mine), len(mine)


def host_check(spec: BisectSpec, probes: Sequence[Probe], host: str) -> tuple[bool, int | None]:
    """(decided, version): whether this host's own standing decides its next version, and which
    (None: it leaves). Undecided for a confirmed host, or while no host of the stratum is."""
    shown = confirmed(spec, probes)
    if host in shown or not shown:
        return False, None
    bad = known_bad(spec)
    _, at_bad = _at(probes, host, bad)
    if at_bad >= bad_check_attempts(spec.posterior, spec.min_bad_rate):
        return True, None  # unseen: the bug does not show on it
    elsewhere = sum(1 for p in probes if p.host == host and p.outcome is not ProbeOutcome.UNUSABLE
                    and p.level != known_good(spec))
    if at_bad or elsewhere >= PARK:
        return True, bad
    return False, None


def coverage(spec: BisectSpec, probes: Sequence[Probe], hosts: Sequence[str],
             first_good: int | None) -> tuple[tuple[str, ...], tuple[HostException, ...]]:
    """The hosts a first good covers, and the others with the reason."""
    shown = confirmed(spec, probes)
    if not shown:
        return tuple(hosts), ()
    covered, exceptions = [], []
    bad = known_bad(spec)
    for host in hosts:
        if host not in shown:
            w, n_bad = _at(probes, host, bad)
            total = sum(1 for p in probes if p.host == host and p.outcome is not ProbeOutcome.UNUSABLE)
            exceptions.append(HostException(host, bad, w, n_bad, f"the bug never reproduced on {host} in {total} "
                                            f"counted attempts ({n_bad} at the known bad): no change point is "
                                            "claimed there"))
            continue
        w, n = _at(probes, host, first_good) if first_good is not None else (0, 0)
        if w:
            exceptions.append(HostException(host, first_good or 0, w, n, f"{host} reproduced at the first good "
                                            f"({w}/{n}): it is not good there"))
            continue
        covered.append(host)
    return tuple(covered), tuple(exceptions)
