"""Where along one ordered factor the bug starts: a monotone model and the next probe.

The answer a search gives is "the riskiest level c with Pr(P(c) > epsilon) < delta" (issue
23): clean can never be proven, so the claim is a posterior bound, not "never wedges".

**The model.** P(c), the bug's rate at level c (0 the safest), is nondecreasing in c. On a
grid of rates it is a Markov chain over the levels: level 0 draws P from the base prior
``pi`` (log-uniform on [1e-3, 0.999] with a point at 0); each step up *stays* at the same
rate with probability 1/2, else *jumps* to a rate drawn from ``pi`` above the current one.
Every path is monotone, so the model uses monotonicity both ways by construction: clean
runs at a riskier level bound every safer level (P(c) <= P(c+1)), and a wedge at a safer
level raises every riskier one. An attempt reproduces with probability f + (1 - f) P(c),
where f, the false-wedge floor (a wedge the bug did not cause: infra, a stray hang), is
unknown and integrated over {0, 0.25, 0.5, 1, 2}% (equal weights): one stray wedge at a
safe level among many clean runs is then explained by f and does not condemn every level
above for ever. The target is on P, the bug's rate, not on the floor.

**The prior is not optimistic, and why that matters.** A uniform prior on the ordered
vector (P(0) <= ... <= P(L-1) uniform on the ordered simplex) makes the levels' marginals
order statistics: P(c) ~ Beta(c + 1, L - c), so the prior alone "knows" the curve climbs
linearly and low levels are small (with 12 levels Pr(P(0) > 5%) = 0.95^12 = 0.54, but
Pr(P(0) > 20%) = 0.07): it claims safety it never saw. Here the marginal of every level has
Pr(P(c) > 5%) >= 0.40 (level 0's; higher levels more), and the chain forgets upward:
whatever the data at c, Pr(P(c+1) > epsilon | P(c)) >= 1/2 * Pr_pi(P > epsilon | P > P(c)),
above 0.2 for epsilon <= 5% — far above delta — so a level is claimed safe only on clean
runs at it or above it, never by extrapolating up from safer ones
(``tests/test_boundary.py`` checks both numbers).

**Strata.** Hosts are stratified by ``spec.groups``: each group's posterior uses only its
own hosts' probes, so one bad card moves only its group's boundary. Nothing is pooled
across groups (a pooled answer would be the most conservative group's, which the report can
read off the per-group results).

**The next probe.** The decision is the boundary B = max{c : P(c) <= epsilon}; by
monotonicity Pr(B >= c) = 1 - Pr(P(c) > epsilon), so its whole distribution comes from the
levels' posteriors. A host is sent to the level with the largest expected drop in the
entropy of B per expected second (a wedge costs ``wedge_cost_s``, a clean run
``clean_cost_s``, weighted by the predicted wedge probability), counting the probes other
hosts of its group are running now: the gain of a level that j hosts already run is that of
its (j+1)-th outcome, I(j+1) - I(j), so parallel hosts spread out where that is worth more.
**The cap:** a level is never probed while Pr(P(c) > epsilon_high | the data) >= 1/2
(the real data only, not the outcomes still running). Ties break by a hash of seed, host and
probe count, so a resumed campaign makes the same choices from the same records.

**Stop.** A group is done when its boundary b meets the target and the level above is shown
bad (Pr(P(b+1) > epsilon) >= 1 - delta) or capped; when b is the riskiest level; when not
even level 0 meets and level 0 is shown bad or capped; or when the budget is spent
(``budget_attempts`` counts every probe, unusable ones included; ``budget_power_cycles``
counts reproduced or ``power_cycled`` probes; both over the whole search).

Sources: the order-statistics trap and monotone Bernoulli models follow the isotonic
Beta-Binomial literature; the stopping target ("rule out P >= p at 1 - delta") is the one
``stats.intervals.clean_attempts_to_rule_out`` states exactly for one level.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaln

from reprofleet.stats import agreement
from reprofleet.stats.search_contract import (
    HostException,
    LevelPosterior,
    Probe,
    ProbeOutcome,
    SearchResult,
    SearchSpec,
    budget_spent,
)

STAY = 0.5  # chance the rate stays the same from one level to the next
FLOOR = (0.0, 0.0025, 0.005, 0.01, 0.02)  # false-wedge rates integrated over, equal prior weight
CAP_LIKELY = 0.5  # a level with Pr(P > epsilon_high) >= this is never probed
UPPER = 0.95  # LevelPosterior.upper's credible level
POINTS = 30  # log-spaced grid points between 1e-3 and 0.999 (plus 0, epsilon and epsilon_high)
DEFAULT_GROUP = "all"


@dataclass(frozen=True)
class _Grid:
    rates: np.ndarray  # (G,) ascending, 0 first
    prior: np.ndarray  # (G,) level 0's distribution, sums to 1
    step: np.ndarray  # (G, G) step[x, y] = Pr(P(c+1) = y | P(c) = x)
    floor: np.ndarray  # (F,)
    log_q: np.ndarray  # (F, G) log Pr(reproduce | f, P)
    log_not_q: np.ndarray  # (F, G)
    q: np.ndarray  # (F, G)


@lru_cache(maxsize=16)
def _grid(epsilon: float, epsilon_high: float) -> _Grid:
    """The rate grid holds epsilon and epsilon_high exactly, so 'P > epsilon' cuts on a point."""
    rates = np.unique(np.concatenate(([0.0], np.geomspace(1e-3, 0.999, POINTS), [epsilon, epsilon_high])))
    rates = rates[rates < 1.0]
    edges = np.concatenate(([1e-3 / 1.2], np.sqrt(rates[1:-1] * rates[2:]), [1.0]))
    widths = np.log(edges[1:] / edges[:-1])  # log-uniform mass of each nonzero point's cell
    prior = np.concatenate(([widths.mean()], widths))
    prior = prior / prior.sum()
    size = len(rates)
    step = np.zeros((size, size))
    for x in range(size):
        above = prior[x + 1:]
        if above.sum() == 0.0:
            step[x, x] = 1.0
            continue
        step[x, x] = STAY
        step[x, x + 1:] = (1.0 - STAY) * above / above.sum()
    floor = np.array(FLOOR)
    q = floor[:, None] + (1.0 - floor[:, None]) * rates[None, :]
    # log(0) (no floor, rate 0) as a finite -690: a wedge there weighs exp(-690) = 0, with no NaN from 0 * -inf
    return _Grid(rates, prior, step, floor, np.log(np.maximum(q, 1e-300)), np.log1p(-q), q)


@dataclass(frozen=True)
class _Posterior:
    """A batch of posteriors: one per dataset (counts per level)."""

    marginal: np.ndarray  # (B, L, G)
    log_evidence: np.ndarray  # (B,)
    wedge_chance: np.ndarray  # (B, L) predictive Pr(the next attempt at the level reproduces)


def _posterior(grid: _Grid, wedges: np.ndarray, cleans: np.ndarray) -> _Posterior:
    """Forward-backward over the levels for every floor value, mixed by the floor's evidence.

    ``wedges``/``cleans``: (B, L) counts. Each level's likelihood is scaled by one constant
    shared by every floor value, so the evidence still weighs the floor values correctly."""
    batch, levels = wedges.shape
    floors, size = grid.log_q.shape
    w = wedges.T[:, :, None, None].astype(float)  # levels first: each level's slice is one contiguous matrix
    k = cleans.T[:, :, None, None].astype(float)
    ll = w * grid.log_q[None, None] + k * grid.log_not_q[None, None]  # (L, B, F, G)
    top = ll.max(axis=(2, 3), keepdims=True)
    emit = np.exp(ll - top).reshape(levels, batch * floors, size)
    alpha = np.empty_like(emit)
    log_scale = np.zeros(batch * floors)
    a = grid.prior[None, :] * emit[0]
    for c in range(levels):
        if c:
            a = (a @ grid.step) * emit[c]
        s = a.sum(axis=-1)
        a = a / s[:, None]
        log_scale += np.log(s)
        alpha[c] = a
    beta = np.empty_like(emit)
    beta[levels - 1] = 1.0
    for c in range(levels - 2, -1, -1):
        b = (emit[c + 1] * beta[c + 1]) @ grid.step.T
        beta[c] = b / b.sum(axis=-1, keepdims=True)
    gamma = alpha * beta
    gamma /= gamma.sum(axis=-1, keepdims=True)
    gamma = gamma.reshape(levels, batch, floors, size)
    log_scale = log_scale.reshape(batch, floors)
    top = top[:, :, 0, 0].sum(axis=0)[:, None]  # (B, 1)
    log_z = log_scale + top - math.log(floors)  # (B, F)
    peak = log_z.max(axis=1, keepdims=True)
    weight = np.exp(log_z - peak)
    total = weight.sum(axis=1, keepdims=True)
    log_evidence = (peak + np.log(total))[:, 0]
    weight /= total  # (B, F)
    marginal = np.einsum("bf,lbfg->blg", weight, gamma)
    chance = np.einsum("bf,lbfg,fg->bl", weight, gamma, grid.q)
    return _Posterior(marginal, log_evidence, chance)


def _tail(grid: _Grid, marginal: np.ndarray, threshold: float) -> np.ndarray:
    return marginal[..., grid.rates > threshold].sum(axis=-1)


def _entropy_of_boundary(p_bad: np.ndarray) -> np.ndarray:
    """Entropy of B from (..., L) Pr(P(c) > epsilon): Pr(B = c) = p_bad(c+1) - p_bad(c)."""
    clipped = np.maximum.accumulate(np.clip(p_bad, 0.0, 1.0), axis=-1)
    edges = np.concatenate((np.zeros(clipped.shape[:-1] + (1,)), clipped, np.ones(clipped.shape[:-1] + (1,))),
                           axis=-1)
    mass = np.diff(edges, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(mass > 0, mass * np.log(mass), 0.0).sum(axis=-1)


def group_of(spec: SearchSpec, host: str) -> str:
    """The stratum ``host`` belongs to: its named group, else ``"all"``."""
    return dict(spec.groups).get(host, DEFAULT_GROUP)


def _check(spec: SearchSpec, probes: Sequence[Probe]) -> None:
    if spec.levels < 1:
        raise ValueError(f"a search needs at least one level, got {spec.levels}")
    if not 0.0 < spec.epsilon < spec.epsilon_high < 1.0 or not 0.0 < spec.delta < 0.5:
        raise ValueError(f"need 0 < epsilon < epsilon_high < 1 and 0 < delta < 0.5, got {spec}")
    for probe in probes:
        if not 0 <= probe.level < spec.levels:
            raise ValueError(f"probe level {probe.level} of host {probe.host} is outside 0..{spec.levels - 1}")


def _counts(spec: SearchSpec, probes: Sequence[Probe], hosts: Collection[str]) -> tuple[np.ndarray, np.ndarray]:
    """Reproductions and clean runs per level over the probes of ``hosts``."""
    wedges = np.zeros(spec.levels, dtype=int)
    cleans = np.zeros(spec.levels, dtype=int)
    for probe in probes:
        if probe.host not in hosts:
            continue
        if probe.outcome is ProbeOutcome.REPRODUCED:
            wedges[probe.level] += 1
        elif probe.outcome is ProbeOutcome.CLEAN:
            cleans[probe.level] += 1
    return wedges, cleans


def _budget_spent(spec: SearchSpec, probes: Sequence[Probe], running: int = 0) -> str | None:
    return budget_spent(spec.budget_attempts, spec.budget_power_cycles, probes, running)


@dataclass(frozen=True)
class _State:
    """One group's posterior, read the ways the result and the next probe need."""

    p_bad: np.ndarray  # (L,)
    capped: np.ndarray  # (L,) bool: Pr(P > epsilon_high) >= CAP_LIKELY
    boundary: int | None
    done: bool
    why: str


def _state(spec: SearchSpec, p_bad: np.ndarray, p_high: np.ndarray) -> _State:
    p_bad = np.maximum.accumulate(p_bad)  # monotone already; guard against rounding
    capped = p_high >= CAP_LIKELY
    meets = np.flatnonzero(p_bad < spec.delta)
    boundary = int(meets[-1]) if meets.size else None
    shown_bad = 1.0 - spec.delta
    if boundary is None:
        if p_bad[0] >= shown_bad or capped[0]:
            return _State(p_bad, capped, None, True, f"not even the safest level meets the target: "
                          f"Pr(P(0) > {spec.epsilon:g}) = {p_bad[0]:.3f}")
        return _State(p_bad, capped, None, False, f"waiting: Pr(P(0) > {spec.epsilon:g}) = {p_bad[0]:.3f}, "
                      f"needs < {spec.delta:g}")
    if boundary == spec.levels - 1:
        return _State(p_bad, capped, boundary, True, "the riskiest level meets the target")
    above = boundary + 1
    if p_bad[above] >= shown_bad or capped[above]:
        said = "shown bad" if p_bad[above] >= shown_bad else f"too risky to probe (Pr(P > {spec.epsilon_high:g}) >= {CAP_LIKELY:g})"
        return _State(p_bad, capped, boundary, True, f"level {boundary} meets the target and level {above} is "
                      f"{said}, Pr(P > {spec.epsilon:g}) = {p_bad[above]:.3f}")
    return _State(p_bad, capped, boundary, False, f"waiting: level {boundary} meets the target, level {above} is "
                  f"undecided (Pr(P > {spec.epsilon:g}) = {p_bad[above]:.3f})")


def _group_names(spec: SearchSpec, probes: Sequence[Probe]) -> list[str]:
    names = {group for _, group in spec.groups}
    if any(group_of(spec, p.host) == DEFAULT_GROUP for p in probes) or not names:
        names.add(DEFAULT_GROUP)
    return sorted(names)


@dataclass(frozen=True)
class _Stratum:
    """Hosts answered together: a declared group less the hosts left out of it, or one host left out."""

    name: str
    hosts: tuple[str, ...]
    split_from: str | None = None
    exceptions: tuple[HostException, ...] = ()


def _answer(spec: SearchSpec, grid: _Grid, wedges: np.ndarray, cleans: np.ndarray) -> tuple[_State, np.ndarray]:
    marginal = _posterior(grid, wedges[None, :], cleans[None, :]).marginal[0]
    return _state(spec, _tail(grid, marginal, spec.epsilon), _tail(grid, marginal, spec.epsilon_high)), marginal


def _left_out(spec: SearchSpec, probes: Sequence[Probe], hosts: Sequence[str], level: int) -> HostException | None:
    """The host whose own records most contradict "P(level) <= epsilon" for it, if any does."""
    rate = agreement.worst_rate(spec.epsilon, max(FLOOR))
    worst: tuple[float, HostException] | None = None
    for host in hosts:
        wedges, cleans = _counts(spec, probes, (host,))
        found = agreement.contradicts_clean(wedges.tolist(), (wedges + cleans).tolist(), level, rate)
        if found is None or found.p_value >= agreement.AGREE_ALPHA:
            continue
        why = (f"{host} reproduced {found.reproductions} of {found.attempts} at levels {found.lowest}..{level}, "
               f"against P <= {spec.epsilon:g} for the group there (p = {found.p_value:.2g})")
        key = (found.p_value, HostException(host, level, found.reproductions, found.attempts, why))
        if worst is None or key[0] < worst[0]:
            worst = key
    return None if worst is None else worst[1]


def _strata(spec: SearchSpec, probes: Sequence[Probe]) -> list[_Stratum]:
    """Every stratum, in group-name order, each group followed by the hosts left out of it.

    A group's hosts are pooled only while they agree: the group's clean level is computed,
    and a host whose own counts at that level and below are unlikely under P <= epsilon
    (``agreement.contradicts_clean``) is left out, the one most in contradiction first; the
    rest are answered again without it, until no host contradicts. A host left out is its
    own stratum, answered from its own records, so the others' clean runs never dilute its
    wedges (issue 33: 11 of 19 at 2800 beside 3 x 120 clean read as 3%). Deterministic
    given the probes, so the runner and the report split the same hosts."""
    grid = _grid(spec.epsilon, spec.epsilon_high)
    out: list[_Stratum] = []
    for group in _group_names(spec, probes):
        members = sorted({h for h, g in spec.groups if g == group}
                         | {p.host for p in probes if group_of(spec, p.host) == group})
        out_of_it: list[HostException] = []
        while spec.per_host and len(members) > 1:
            state, _ = _answer(spec, grid, *_counts(spec, probes, members))
            if state.boundary is None:
                break
            found = _left_out(spec, probes, members, state.boundary)
            if found is None:
                break
            members.remove(found.host)
            out_of_it.append(found)
        out.append(_Stratum(group, tuple(members), None, tuple(out_of_it)))
        out += [_Stratum(f"{group}/{e.host}", (e.host,), group) for e in out_of_it]
    return out


def _stratum_of(spec: SearchSpec, strata: Sequence[_Stratum], host: str) -> _Stratum:
    return next((s for s in strata if host in s.hosts),
                next(s for s in strata if s.name == group_of(spec, host)))


def search_results(spec: SearchSpec, probes: Sequence[Probe]) -> tuple[SearchResult, ...]:
    """Every stratum's boundary, in group-name order (a group with no probes yet included),
    each group followed by the hosts left out of it (their own answers)."""
    _check(spec, probes)
    grid = _grid(spec.epsilon, spec.epsilon_high)
    spent = _budget_spent(spec, probes)
    results = []
    for stratum in _strata(spec, probes):
        wedges, cleans = _counts(spec, probes, stratum.hosts)
        state, marginal = _answer(spec, grid, wedges, cleans)
        mine = [p for p in probes if p.host in stratum.hosts]
        cdf = np.cumsum(marginal, axis=-1)
        levels = tuple(LevelPosterior(
            level=c, attempts=int(wedges[c] + cleans[c]), reproductions=int(wedges[c]), p_bad=float(state.p_bad[c]),
            mean=float(marginal[c] @ grid.rates), upper=float(grid.rates[int(np.searchsorted(cdf[c], UPPER))]))
            for c in range(spec.levels))
        b = state.boundary
        results.append(SearchResult(
            group=stratum.name, hosts=stratum.hosts, boundary=b,
            p_bad_at_boundary=None if b is None else float(state.p_bad[b]),
            above=(0 if b is None else b + 1 if b + 1 < spec.levels else None), levels=levels, attempts=len(mine),
            power_cycles=sum(1 for p in mine if p.outcome is ProbeOutcome.REPRODUCED or p.power_cycled),
            done=state.done or spent is not None, why=spent or state.why, exceptions=stratum.exceptions,
            split_from=stratum.split_from))
    return tuple(results)


def _jitter(spec: SearchSpec, host: str, probes: int, level: int) -> float:
    digest = hashlib.sha256(f"{spec.seed}\0{host}\0{probes}\0{level}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def _gains(grid: _Grid, spec: SearchSpec, wedges: np.ndarray, cleans: np.ndarray,
           pending: Sequence[int], candidates: Sequence[int]) -> np.ndarray:
    """Per level, the expected entropy drop of B from one more outcome beyond ``pending[c]`` (0 off ``candidates``)."""
    rows_w, rows_k, index = [wedges], [cleans], []
    for c in candidates:
        for n in (pending[c], pending[c] + 1):
            for w in range(n + 1):
                row_w, row_k = wedges.copy(), cleans.copy()
                row_w[c] += w
                row_k[c] += n - w
                rows_w.append(row_w)
                rows_k.append(row_k)
                index.append((c, n, w))
    post = _posterior(grid, np.array(rows_w), np.array(rows_k))
    entropy = _entropy_of_boundary(_tail(grid, post.marginal, spec.epsilon))
    expected = np.zeros((spec.levels, 2))
    for row, (c, n, w) in enumerate(index, start=1):
        log_p = gammaln(n + 1) - gammaln(w + 1) - gammaln(n - w + 1) + post.log_evidence[row] - post.log_evidence[0]
        expected[c, n - pending[c]] += math.exp(log_p) * entropy[row]
    return np.maximum(expected[:, 0] - expected[:, 1], 0.0)


def next_search_level(spec: SearchSpec, probes: Sequence[Probe], host: str, running: Mapping[str, int]) -> int | None:
    """The level ``host`` should run next, or None when its group is decided or the budget is spent.

    ``running``: host -> level of the attempts other hosts are running now (this host's own
    entry, if any, is ignored); only those of the same stratum count (its group, or the host
    alone once its records have left it out of its group)."""
    _check(spec, probes)
    others = {h: lvl for h, lvl in running.items() if h != host}
    if _budget_spent(spec, probes, len(others)) is not None:
        return None
    strata = _strata(spec, probes)
    stratum = _stratum_of(spec, strata, host)
    grid = _grid(spec.epsilon, spec.epsilon_high)
    wedges, cleans = _counts(spec, probes, stratum.hosts)
    base = _posterior(grid, wedges[None, :], cleans[None, :])
    state = _state(spec, _tail(grid, base.marginal[0], spec.epsilon), _tail(grid, base.marginal[0], spec.epsilon_high))
    if state.done:
        return None
    pending = [0] * spec.levels
    for other, level in others.items():
        if _stratum_of(spec, strata, other) == stratum and 0 <= level < spec.levels:
            pending[level] += 1
    gains = _gains(grid, spec, wedges, cleans, pending, [c for c in range(spec.levels) if not state.capped[c]])
    chance = base.wedge_chance[0]
    cost = chance * spec.wedge_cost_s + (1.0 - chance) * spec.clean_cost_s
    best: tuple[float, float, int] | None = None
    for c in range(spec.levels):
        if state.capped[c]:
            continue
        key = (float(gains[c] / cost[c]), _jitter(spec, host, len(probes), c), c)
        if best is None or key > best:
            best = key
    return None if best is None else best[2]
