"""Stand-ins for issue 23's models, behind the ladder seam (``playbook.ladder.Ladder``).

:class:`StepLadder` is a toy monotone rule that a person can follow by hand: walk up the
levels, each needs ``clean_needed`` clean probes; the first level with a reproduction ends
the walk, and the boundary is the highest level below it with its clean probes. It is
deterministic given the probes, which is all the runner and the report rely on.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from reprofleet.stats.search_contract import (BisectResult, LevelPosterior, Probe, ProbeOutcome, SearchResult,
                                              VersionEvidence)


class StepLadder:
    def __init__(self, levels: int, clean_needed: int = 2, hosts: tuple[str, ...] = ("h1",)) -> None:
        self.levels = levels
        self.clean_needed = clean_needed
        self.hosts = hosts
        self.asked: list[tuple[str, tuple[Probe, ...], dict[str, int]]] = []

    def _first_bad(self, probes: Sequence[Probe]) -> int | None:
        bad = [p.level for p in probes if p.outcome is ProbeOutcome.REPRODUCED]
        return min(bad) if bad else None

    def _clean(self, probes: Sequence[Probe], level: int) -> int:
        return sum(p.level == level and p.outcome is ProbeOutcome.CLEAN for p in probes)

    def next(self, host: str, probes: Sequence[Probe], running: Mapping[str, int]) -> int | None:
        self.asked.append((host, tuple(probes), dict(running)))
        top = self._first_bad(probes)
        for level in range(self.levels if top is None else top):
            taken = sum(lv == level for lv in running.values())
            if self._clean(probes, level) + taken < self.clean_needed:
                return level
        if top is not None and not any(p.level == top for p in probes if p.outcome is ProbeOutcome.REPRODUCED):
            return top
        return None

    def results(self, probes: Sequence[Probe]) -> tuple[SearchResult, ...]:
        top = self._first_bad(probes)
        met = [lv for lv in range(self.levels if top is None else top) if self._clean(probes, lv) >= self.clean_needed]
        boundary = max(met) if met else None
        levels = tuple(LevelPosterior(lv, sum(p.level == lv and p.outcome is not ProbeOutcome.UNUSABLE for p in probes),
                                      sum(p.level == lv and p.outcome is ProbeOutcome.REPRODUCED for p in probes),
                                      0.9 if top is not None and lv >= top else 0.03, 0.1, 0.2)
                       for lv in range(self.levels))
        above = None if boundary is None or boundary + 1 >= self.levels else boundary + 1
        return (SearchResult("all", self.hosts, boundary, 0.03 if boundary is not None else None, above, levels,
                             len(probes), sum(p.power_cycled for p in probes), self.next("-", probes, {}) is None,
                             "toy rule"),)


class ScriptedBisect:
    """A bisection stand-in: versions in a fixed order, one probe each, then a fixed answer."""

    def __init__(self, order: Sequence[int], first_good: int, posterior: float = 0.97) -> None:
        self.order = list(order)
        self.first_good = first_good
        self.posterior = posterior

    def next(self, host: str, probes: Sequence[Probe], running: Mapping[str, int]) -> int | None:
        done = len(probes) + len(running)
        return self.order[done] if done < len(self.order) else None

    def results(self, probes: Sequence[Probe]) -> BisectResult:
        versions = tuple(VersionEvidence(v, sum(p.level == v for p in probes),
                                         sum(p.level == v and p.outcome is ProbeOutcome.REPRODUCED for p in probes),
                                         0, False, 0.99 if v >= self.first_good else 0.01)
                         for v in range(max(self.order) + 1))
        return BisectResult(self.first_good, self.first_good - 1, self.posterior, True, versions, len(probes),
                            sum(p.power_cycled for p in probes), len(probes) >= len(self.order), "scripted")
