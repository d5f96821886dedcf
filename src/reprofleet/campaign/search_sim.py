"""What a boundary search or a bisection will cost, simulated against known true curves.

``invoke plan`` and ``bench/search.py`` ask: for these true curves (host -> P(reproduce) per
level) or this version list (P(reproduce) per version), how many attempts and power cycles
does the search spend, and how often is its answer true? Each run drives the real
:func:`reprofleet.stats.boundary.next_search_level` / :func:`reprofleet.stats.changepoint.next_bisect_version`
through a small event loop (hosts run in parallel; an attempt lasts ``clean_cost_s`` or
``wedge_cost_s``), and two naive rules run beside it on the same truths:

* **full grid** (search): every level, on its own, run until its exact one-sided
  Clopper-Pearson bound at 1 - delta decides (upper <= epsilon: meets; lower > epsilon:
  bad; ``GRID_CAP`` attempts undecided: not met); no monotonicity. Its answer: the
  riskiest level with every level at or below it met. The same guarantee, level by level.
* **fixed-run rule** (syzkaller-like, ktest's BISECT_TRIES): N runs per point, a point is
  bad if any reproduces (it stops at the first), binary search; on several hosts a point's
  runs go out one per host at a time and the round of the first reproduction counts whole.
  For a search N is the guarantee's own size (the clean runs that rule out epsilon at
  1 - delta: 59 at 5%/5%); for a bisection N is the smallest whose share of true answers
  reaches ours on the same truth (scanned 1..``FIXED_MAX``; where none does, the best N,
  and the plan says so). Its
  known bad gets N runs and must reproduce; its known good gets the same target check as
  ours (``changepoint.good_end_check``: met at its exact bound, failed at its anytime-valid
  one), so both make the same claim about the good end and their attempts compare.

A run's answer **meets the target** when every host of its group has P <= epsilon at every
level up to the reported one (None: always); it is **within one** when it also lies at most
one level below the best such level. A bisection's answer is true when it is done, its
endpoints passed, and its first good is the true first good.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial

import numpy as np
from scipy.stats import beta

from reprofleet.stats.boundary import group_of, next_search_level, search_results
from reprofleet.stats.changepoint import EndCheck, bisect_result, good_end_check, next_bisect_version
from reprofleet.stats.intervals import clean_attempts_to_rule_out
from reprofleet.stats.search_contract import BisectSpec, Probe, ProbeOutcome, SearchSpec

GRID_CAP = 400  # attempts after which the full grid calls a level undecided (not met)
FIXED_MAX = 60
PLAN_CAP = 3000  # attempts a simulated search may spend where its spec states no budget  # the largest N the fixed-run rule is tried with for a bisection


@dataclass(frozen=True)
class MethodFigures:
    """One method's figures over the simulated runs (the raw tallies kept, so plans can be pooled)."""

    method: str
    mean_attempts: float
    p90_attempts: float
    mean_power_cycles: float
    p90_power_cycles: float
    share_meets: float  # search: answer truly meets the target; bisection: the true change point found
    share_within_one: float  # search: and at most one level below the best; bisection: first good off by <= 1
    attempts: tuple[int, ...] = ()  # per run
    power_cycles: tuple[int, ...] = ()  # per run
    meets: tuple[bool, ...] = ()  # per answer (a search's run has one per group)
    within_one: tuple[bool, ...] = ()
    mean_wall: float = 0.0  # a bisection's wall time in attempt lengths, hosts in parallel (0: not simulated)
    walls: tuple[float, ...] = ()  # per run


def figures(method: str, attempts: Sequence[int], cycles: Sequence[int], meets: Sequence[bool],
            within: Sequence[bool], walls: Sequence[float] = ()) -> MethodFigures:
    """The figures of raw per-run tallies."""
    return MethodFigures(method, float(np.mean(attempts)), float(np.percentile(attempts, 90)), float(np.mean(cycles)),
                         float(np.percentile(cycles, 90)), float(np.mean(meets)), float(np.mean(within)),
                         tuple(attempts), tuple(cycles), tuple(meets), tuple(within),
                         float(np.mean(walls)) if len(walls) else 0.0, tuple(walls))


def pooled(parts: Sequence[MethodFigures]) -> MethodFigures:
    """One method's figures over several plans (several drawn truths), from their raw tallies."""
    return figures(parts[0].method, [a for p in parts for a in p.attempts], [c for p in parts for c in p.power_cycles],
                   [m for p in parts for m in p.meets], [w for p in parts for w in p.within_one],
                   [t for p in parts for t in p.walls])


@dataclass(frozen=True)
class SearchRun:
    """One simulated search: each group's reported boundary beside its true best level (-1: none)."""

    boundaries: tuple[tuple[str, int, int], ...]  # (group, reported, true best)
    attempts: int
    power_cycles: int
    done: bool
    budget_spent: bool  # it ended by spending budget_attempts (or PLAN_CAP where the spec has none)
    wall_s: float


@dataclass(frozen=True)
class SearchPlan:
    ours: MethodFigures
    grid: MethodFigures
    fixed: MethodFigures
    fixed_n: int
    runs: tuple[SearchRun, ...]
    mean_wall_s: float  # ours, hosts in parallel


@dataclass(frozen=True)
class BisectPlan:
    ours: MethodFigures
    fixed: MethodFigures
    fixed_n: int
    fixed_reaches: bool  # some N <= FIXED_MAX matched our share of true answers
    true_first_good: int
    mean_good_end_attempts: float  # ours: the known good's target check, part of mean_attempts


Next = Callable[[Sequence[Probe], str, Mapping[str, int]], "int | None"]


def _drive(hosts: Sequence[str], parallel: int, choose: Next, chance: Callable[[str, int], float],
           cost: Callable[[bool], float], rng: random.Random) -> tuple[list[Probe], float]:
    """An event loop: up to ``parallel`` hosts run at once.

    As the runner's ladder does (``runner.search.LadderSchedule``): a host answered None
    while others still run waits and is asked again when the next attempt ends; it retires
    only when it is answered None with nobody running."""
    probes: list[Probe] = []
    running: dict[str, int] = {}
    busy: list[tuple[float, int, str, int, bool]] = []
    idle = list(hosts)
    waiting: list[str] = []
    now, order = 0.0, 0

    def start() -> None:
        nonlocal order
        for host in list(idle):
            if len(running) >= parallel:
                return
            idle.remove(host)
            level = choose(probes, host, running)
            if level is None:
                if running:
                    waiting.append(host)
                continue
            wedge = rng.random() < chance(host, level)
            running[host] = level
            order += 1
            heapq.heappush(busy, (now + cost(wedge), order, host, level, wedge))
    start()
    while busy:
        now, _, host, level, wedge = heapq.heappop(busy)
        del running[host]
        probes.append(Probe(level, host, ProbeOutcome.REPRODUCED if wedge else ProbeOutcome.CLEAN, wedge))
        idle.append(host)
        idle.extend(waiting)
        waiting.clear()
        start()
    return probes, now


def _true_best(spec: SearchSpec, curves: Sequence[Sequence[float]]) -> int:
    best = -1
    for level in range(spec.levels):
        if max(curve[level] for curve in curves) > spec.epsilon:
            break
        best = level
    return best


@lru_cache(maxsize=8)
def _grid_rule(epsilon: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact bounds as tables over n = 0..GRID_CAP: the most wedges that still meet, the fewest that are bad."""
    n = np.arange(GRID_CAP + 1)
    meet_max = np.full(GRID_CAP + 1, -1)
    bad_min = np.full(GRID_CAP + 1, GRID_CAP + 2)
    for trials in n[1:]:
        w = np.arange(trials + 1)
        upper = np.where(w < trials, beta.ppf(1 - delta, w + 1, np.maximum(trials - w, 1)), 1.0)
        lower = np.where(w > 0, beta.ppf(delta, np.maximum(w, 1), trials - w + 1), 0.0)
        meets, bad = np.flatnonzero(upper <= epsilon), np.flatnonzero(lower > epsilon)
        meet_max[trials] = meets[-1] if meets.size else -1
        bad_min[trials] = bad[0] if bad.size else GRID_CAP + 2
    return meet_max, bad_min


def _target_check(epsilon: float, delta: float, rate: Callable[[int], float],
                  rng: random.Random) -> tuple[bool, int, int]:
    """(met, attempts, wedges): one level run until its exact bound decides (``rate(n)``: the nth run's rate)."""
    meet_max, bad_min = _grid_rule(epsilon, delta)
    wedges = 0
    for n in range(1, GRID_CAP + 1):
        wedges += rng.random() < rate(n)
        if wedges <= meet_max[n] or wedges >= bad_min[n]:
            return bool(wedges <= meet_max[n]), n, wedges
    return False, GRID_CAP, wedges


@lru_cache(maxsize=8)
def _good_end_rule(epsilon: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """``changepoint.good_end_check`` as tables over n = 0..GRID_CAP: the most wedges that meet, the fewest that fail."""
    meet_max = np.full(GRID_CAP + 1, -1)
    fail_min = np.full(GRID_CAP + 1, GRID_CAP + 2)
    meets = fails = 0
    for n in range(1, GRID_CAP + 1):
        while meets <= n and good_end_check(meets, n, epsilon, delta) is EndCheck.OK:
            meets += 1
        while fails <= n and good_end_check(fails, n, epsilon, delta) is not EndCheck.FAILED:
            fails += 1
        meet_max[n], fail_min[n] = meets - 1, fails if fails <= n else GRID_CAP + 2
    return meet_max, fail_min


def _round_robin(rates: Sequence[float], start: int, index: int) -> float:
    """The rate of the index-th run of a level whose runs go to the hosts in turn."""
    return rates[(start + index) % len(rates)]


def _grid_search(spec: SearchSpec, hosts: Sequence[str], truths: Mapping[str, Sequence[float]],
                 rng: random.Random) -> tuple[int, int, int]:
    """(boundary, attempts, wedges) of the full grid for one group."""
    attempts = wedges = 0
    boundary, broken = -1, False
    for level in range(spec.levels):
        on_host = [truths[h][level] for h in hosts]
        met, n, w = _target_check(spec.epsilon, spec.delta,
                                  partial(_round_robin, on_host, attempts), rng)
        attempts += n
        wedges += w
        broken = broken or not met
        if not broken:
            boundary = level
    return boundary, attempts, wedges


def _runs_until_wedge(p: float, n: int, rng: random.Random) -> int | None:
    """Which of n runs at rate p reproduces first (1-based), or None when all n are clean."""
    if p <= 0.0:
        return None
    if p >= 1.0:
        return 1
    first = math.ceil(math.log(1.0 - rng.random()) / math.log1p(-p))
    return first if first <= n else None


def _fixed_search(spec: SearchSpec, hosts: Sequence[str], truths: Mapping[str, Sequence[float]], n: int,
                  rng: random.Random) -> tuple[int, int, int]:
    """(boundary, attempts, wedges): binary search, n runs a level, any wedge makes it bad."""
    low, high, attempts, wedges = -1, spec.levels, 0, 0
    while high - low > 1:
        mid = (low + high) // 2
        rate = truths[hosts[attempts % len(hosts)]][mid]
        first = _runs_until_wedge(rate, n, rng)
        attempts += n if first is None else first
        if first is None:
            low = mid
        else:
            wedges += 1
            high = mid
    return low, attempts, wedges


def fixed_n(spec: SearchSpec) -> int:
    """The fixed-run rule's N for a search: the clean runs that rule out epsilon at 1 - delta."""
    return clean_attempts_to_rule_out(spec.epsilon, 1.0 - spec.delta) or 1


def _groups(spec: SearchSpec, hosts: Sequence[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for host in hosts:
        groups.setdefault(group_of(spec, host), []).append(host)
    return dict(sorted(groups.items()))


def plan_search(spec: SearchSpec, truths: Mapping[str, Sequence[float]], runs: int, seed: int,
                hosts_parallel: int | None = None) -> SearchPlan:
    """Simulate ``runs`` searches of ``spec`` on hosts whose P(reproduce) per level is ``truths``."""
    if runs < 1 or not truths or any(len(c) != spec.levels for c in truths.values()):
        raise ValueError(f"need runs >= 1 and one curve of {spec.levels} levels per host")
    if spec.budget_attempts is None:
        spec = replace(spec, budget_attempts=PLAN_CAP)
    hosts = sorted(truths)
    groups = _groups(spec, hosts)
    best = {g: _true_best(spec, [truths[h] for h in members]) for g, members in groups.items()}
    runs_per_level = fixed_n(spec)
    tallies: dict[str, tuple[list[int], list[int], list[bool], list[bool]]] = {
        m: ([], [], [], []) for m in ("ours", "grid", "fixed")}
    outs: list[SearchRun] = []

    def score(method: str, answers: Mapping[str, int], attempts: int, cycles: int) -> None:
        a, c, meets, within = tallies[method]
        a.append(attempts)
        c.append(cycles)
        for group, reported in answers.items():
            meets.append(reported <= best[group])
            within.append(best[group] - 1 <= reported <= best[group])

    for run in range(runs):
        rng = random.Random(f"search:{seed}:{run}")
        run_spec = replace(spec, seed=spec.seed + run)
        probes, wall = _drive(hosts, hosts_parallel or len(hosts),
                              partial(next_search_level, run_spec),
                              lambda h, lvl: truths[h][lvl],
                              lambda wedge: spec.wedge_cost_s if wedge else spec.clean_cost_s, rng)
        results = search_results(run_spec, probes)
        answers = {r.group: -1 if r.boundary is None else r.boundary for r in results if r.group in groups}
        cycles = sum(1 for p in probes if p.power_cycled)
        score("ours", answers, len(probes), cycles)
        outs.append(SearchRun(tuple((g, answers[g], best[g]) for g in answers), len(probes), cycles,
                              all(r.done for r in results), len(probes) >= (run_spec.budget_attempts or 0), wall))
        grid = {g: _grid_search(spec, members, truths, rng) for g, members in groups.items()}
        fixed = {g: _fixed_search(spec, members, truths, runs_per_level, rng) for g, members in groups.items()}
        for method, found in (("grid", grid), ("fixed", fixed)):
            score(method, {g: f[0] for g, f in found.items()}, sum(f[1] for f in found.values()),
                  sum(f[2] for f in found.values()))
    made = {m: figures(m, *t) for m, t in tallies.items()}
    return SearchPlan(made["ours"], made["grid"], made["fixed"], runs_per_level, tuple(outs),
                      float(np.mean([r.wall_s for r in outs])))


def _true_first_good(spec: BisectSpec, truth: Sequence[float]) -> int:
    order = list(range(spec.versions)) if spec.bad_first else list(range(spec.versions - 1, -1, -1))
    good = [v for v in order if all(truth[u] <= spec.epsilon for u in order[order.index(v):])]
    return good[0] if good else order[-1]


def _good_end_rounds(epsilon: float, delta: float, rate: float, hosts: int,
                     rng: random.Random) -> tuple[bool, int, int, int]:
    """(met, attempts, wedges, rounds): the known good's check with ``hosts`` runs at a time; the
    runs of the round in which it decides were started, so they count."""
    meet_max, fail_min = _good_end_rule(epsilon, delta)
    wedges = n = rounds = 0
    decided: bool | None = None
    while decided is None and n < GRID_CAP:
        rounds += 1
        for _ in range(min(hosts, GRID_CAP - n)):
            n += 1
            wedges += rng.random() < rate
            if decided is None and (wedges <= meet_max[n] or wedges >= fail_min[n]):
                decided = bool(wedges <= meet_max[n])
    return bool(decided), n, wedges, rounds


def _fixed_bisect(spec: BisectSpec, truth: Sequence[float], n: int, rng: random.Random,
                  hosts: int = 1) -> tuple[int | None, int, int, int]:
    """(first good or None when an endpoint failed, attempts, wedges, rounds) of the fixed-run rule.

    With ``hosts`` > 1 a point's N runs go out ``hosts`` at a time, as a lab with that many
    machines would run them: a bad point stops after the round with its first reproduction,
    and every run of that round counts."""
    order = list(range(spec.versions)) if spec.bad_first else list(range(spec.versions - 1, -1, -1))
    attempts = wedges = rounds = 0

    def bad(index: int) -> bool:
        nonlocal attempts, wedges, rounds
        first = _runs_until_wedge(truth[order[index]], n, rng)
        ran = n if first is None else min(n, math.ceil(first / hosts) * hosts)
        attempts += ran
        rounds += math.ceil(ran / hosts)
        wedges += first is not None
        return first is not None
    met, n_good, w_good, r_good = _good_end_rounds(spec.epsilon, spec.delta, truth[order[-1]], hosts, rng)
    attempts += n_good
    wedges += w_good
    rounds += r_good
    if not bad(0) or not met:
        return None, attempts, wedges, rounds
    low, high = 0, len(order) - 1
    while high - low > 1:
        mid = (low + high) // 2
        if bad(mid):
            low = mid
        else:
            high = mid
    return order[high], attempts, wedges, rounds


def fixed_bisect(spec: BisectSpec, truths: Sequence[Sequence[float]], n: int, runs: int, seed: int,
                 hosts: int = 1) -> MethodFigures:
    """The fixed-run rule at N = ``n`` on ``hosts`` hosts, ``runs`` times on each truth."""
    rows, good = [], []
    for index, truth in enumerate(truths):
        rng = random.Random(f"fixed:{seed}:{index}:{n}")
        true_good = _true_first_good(spec, truth)
        for _ in range(runs):
            rows.append(_fixed_bisect(spec, truth, n, rng, hosts))
            good.append(true_good)
    return figures("fixed", [r[1] for r in rows], [r[2] for r in rows], [r[0] == g for r, g in zip(rows, good)],
                   [r[0] is not None and abs(r[0] - g) <= 1 for r, g in zip(rows, good)], [r[3] for r in rows])


def matched_fixed(spec: BisectSpec, truths: Sequence[Sequence[float]], share: float, runs: int,
                  seed: int, hosts: int = 1) -> tuple[int, MethodFigures, bool]:
    """(N, its figures, reached): the smallest N whose share of true answers reaches ``share``;
    where none up to FIXED_MAX does, the N of the highest share (reached False)."""
    best: tuple[int, MethodFigures] | None = None
    for n in range(1, FIXED_MAX + 1):
        made = fixed_bisect(spec, truths, n, runs, seed, hosts)
        if made.share_meets >= share:
            return n, made, True
        if best is None or made.share_meets > best[1].share_meets:
            best = (n, made)
    assert best is not None
    return best[0], best[1], False


def bisect_figures(spec: BisectSpec, truth: Sequence[float], hosts: int, runs: int,
                   seed: int) -> tuple[MethodFigures, float]:
    """Our bisection ``runs`` times on one truth: its figures and its mean attempts on the known good."""
    if runs < 1 or hosts < 1 or len(truth) != spec.versions:
        raise ValueError(f"need runs >= 1, hosts >= 1 and one rate per version ({spec.versions})")
    names = [f"h{i:02d}" for i in range(hosts)]
    true_good = _true_first_good(spec, truth)
    good_end = spec.versions - 1 if spec.bad_first else 0
    a, c, meets, within, at_good, walls = [], [], [], [], [], []
    for run in range(runs):
        rng = random.Random(f"bisect:{seed}:{run}")
        run_spec = replace(spec, seed=spec.seed + run)
        probes, wall = _drive(names, hosts, partial(next_bisect_version, run_spec),
                           lambda h, v: truth[v], lambda wedge: 1.0, rng)
        result = bisect_result(run_spec, probes)
        a.append(len(probes))
        c.append(result.power_cycles)
        meets.append(result.done and bool(result.endpoints_ok) and result.first_good == true_good)
        within.append(result.first_good is not None and abs(result.first_good - true_good) <= 1)
        at_good.append(sum(1 for p in probes if p.level == good_end))
        walls.append(wall)
    return figures("ours", a, c, meets, within, walls), float(np.mean(at_good))


def plan_bisect(spec: BisectSpec, truth: Sequence[float], hosts: int, runs: int, seed: int) -> BisectPlan:
    """Simulate ``runs`` bisections on ``hosts`` parallel hosts; beside it the fixed-run rule at matched accuracy."""
    ours, at_good = bisect_figures(spec, truth, hosts, runs, seed)
    n, fixed, reached = matched_fixed(spec, [truth], ours.share_meets, runs, seed, hosts)
    return BisectPlan(ours, fixed, n, reached, _true_first_good(spec, truth), at_good)
