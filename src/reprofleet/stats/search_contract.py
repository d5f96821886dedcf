"""The types a boundary search and a bisection exchange with the runner and the report.

A search (``search:`` in a playbook) walks one ordered factor (a graphics-clock ceiling, a
power limit, spec_tokens ...) to find the riskiest level that still meets a target; a
bisection (``bisect:``) walks an ordered list of runtimes to find the first good one. Both
see the campaign only as :class:`Probe` values (one judged attempt each, built by the
runner and the report from ordinary records through the verdict engine's outcome roles and
phase gate), and answer with frozen results. Keeping the types here, apart from the models
that compute with them (:mod:`reprofleet.stats.boundary`, :mod:`reprofleet.stats.changepoint`),
lets the runner, the report and the plan depend on one small shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Sequence


class ProbeOutcome(str, Enum):
    """What one attempt says about its level.

    UNUSABLE: it ran but says nothing (infra, or an error before the risky phase): never
    counted as either; a bisection skips a version whose attempts are all unusable.
    """

    REPRODUCED = "reproduced"
    CLEAN = "clean"
    UNUSABLE = "unusable"


@dataclass(frozen=True)
class Probe:
    """One attempt of a search or bisection, in the order it ended.

    ``level``: index into the ordered levels; for a search 0 is the safest (least risky)
    level, for a bisection 0 is the oldest version. ``power_cycled``: recovering from it took
    a power cycle (its cost). ``worst_case``: a REPRODUCED probe that may not have been one
    (an error or hang in the phase at risk, or the host lost inside it): counted as a
    reproduction, because a level or version is called clean or good only if it would still
    be with every such attempt a reproduction (issue 33 item 2)."""

    level: int
    host: str
    outcome: ProbeOutcome
    power_cycled: bool = False
    worst_case: bool = False


@dataclass(frozen=True)
class HostException:
    """A host an answer does not cover, because its own records contradict the answer or say
    nothing of it; ``level``, ``reproductions`` and ``attempts`` are the evidence named."""

    host: str
    level: int
    reproductions: int
    attempts: int
    why: str


@dataclass(frozen=True)
class SearchSpec:
    """A boundary search over ``levels`` ordered levels, 0 safest.

    The answer sought: the riskiest level c with Pr(P(c) > epsilon) < delta. No level whose
    posterior says Pr(P > epsilon_high) is likely is ever probed. ``groups``: (host, group)
    pairs; hosts of one group share a boundary (strata), a host not named is in group
    ``"all"``. Costs steer the choice of the next probe (a wedge costs a power cycle and
    minutes, a clean run one attempt)."""

    levels: int
    epsilon: float = 0.05
    delta: float = 0.05
    epsilon_high: float = 0.5
    budget_attempts: int | None = None
    budget_power_cycles: int | None = None
    clean_cost_s: float = 120.0
    wedge_cost_s: float = 900.0
    groups: tuple[tuple[str, str], ...] = ()
    seed: int = 0
    per_host: bool = True  # False: every group pooled whatever its hosts show (the naive engine of bench/search.py)


@dataclass(frozen=True)
class LevelPosterior:
    """One level's evidence and what the monotone model says of it."""

    level: int
    attempts: int  # counted ones (reproduced + clean)
    reproductions: int
    p_bad: float  # Pr(P(level) > epsilon | every group's data under the monotone model)
    mean: float  # posterior mean of P(level)
    upper: float  # 95% credible upper bound of P(level)


@dataclass(frozen=True)
class SearchResult:
    """The boundary of one host group."""

    group: str
    hosts: tuple[str, ...]
    boundary: int | None  # riskiest level meeting the target; None: not even the safest does
    p_bad_at_boundary: float | None
    above: int | None  # the level above the boundary (None when the boundary is the riskiest level)
    levels: tuple[LevelPosterior, ...]
    attempts: int
    power_cycles: int
    done: bool  # the target is decided (met at a level whose next level is shown bad, or budget spent)
    why: str  # one sentence: why it stopped or what it waits for
    exceptions: tuple[HostException, ...] = ()  # hosts of the group left out: their records contradict its answer
    split_from: str | None = None  # this stratum is one host left out of that group, answered from its own records


@dataclass(frozen=True)
class BisectSpec:
    """A bisection over ``versions`` ordered runtimes, 0 the oldest.

    ``bad_first``: the oldest is the known bad and the newest the known good (the search for
    the first fixed release); False: the other way round (a regression). The change point is
    decided when its posterior reaches ``posterior``; the good side must meet the target
    (epsilon, delta) at the endpoint re-check. Costs weigh each probe's information by what
    it is expected to cost (a reproduction a power cycle and minutes, a clean run one
    attempt); ``speculate``: the share of a fresh attempt's information (per cost) a probe
    started beside running ones must add, or the host waits (0: hosts never wait, 1: no
    speculative probe, the fewest attempts). ``min_bad_rate``: the lowest rate at which a bad
    version is assumed to reproduce (the bug report's "reproduces in under 6 tries" is about
    20%); it sizes the known bad's re-check and the clean runs the first good needs, and
    bounds the bad side's rates from below, so the result claims nothing about a bad version
    that reproduces less often."""

    versions: int
    bad_first: bool = True
    posterior: float = 0.95
    epsilon: float = 0.05
    delta: float = 0.05
    budget_attempts: int | None = None
    budget_power_cycles: int | None = None
    clean_cost_s: float = 120.0
    wedge_cost_s: float = 900.0
    speculate: float = 0.5
    min_bad_rate: float = 0.2
    seed: int = 0
    groups: tuple[tuple[str, str], ...] = ()  # (host, stratum) as SearchSpec's: each stratum its own bisection
    per_host: bool = True  # False: every stratum pooled whatever its hosts show (the naive engine of bench/search.py)


@dataclass(frozen=True)
class VersionEvidence:
    version: int
    attempts: int  # counted ones
    reproductions: int
    unusable: int
    skipped: bool  # it never started a counted attempt: left out of the change point
    p_good: float  # posterior probability that this version is on the good side


@dataclass(frozen=True)
class BisectResult:
    first_good: int | None
    last_bad: int | None
    posterior: float  # of the change point between last_bad and first_good
    endpoints_ok: bool | None  # None: not re-checked yet; False: the known bad never reproduced or the good end failed its target
    versions: tuple[VersionEvidence, ...]
    attempts: int
    power_cycles: int
    done: bool
    why: str
    group: str = "all"
    hosts: tuple[str, ...] = ()  # the hosts the answer covers (empty: every host, as before strata)
    exceptions: tuple[HostException, ...] = ()  # hosts of the stratum it does not cover, and why
    strata: tuple["BisectResult", ...] = ()  # the other strata's answers (declared groups), each its own bisection


def budget_spent(attempts: int | None, power_cycles: int | None, probes: Sequence[Probe],
                 running: int = 0) -> str | None:
    """Why a search's or bisection's budget ends it (None: it does not), one rule for both models.

    Every probe counts as an attempt (unusable ones too, and the ``running`` ones other hosts have
    started); a reproduction, or a probe that needed a power cycle, counts as a power cycle."""
    cycles = sum(1 for p in probes if p.outcome is ProbeOutcome.REPRODUCED or p.power_cycled)
    if attempts is not None and len(probes) + running >= attempts:
        return f"the budget of {attempts} attempts is spent"
    if power_cycles is not None and cycles >= power_cycles:
        return f"the budget of {power_cycles} power cycles is spent"
    return None
