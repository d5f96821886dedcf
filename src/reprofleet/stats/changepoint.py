"""Which runtime fixed it (or broke it): a change-point posterior for a flaky, host-killing bug.

Versions are ordered (0 the oldest). Read from the bad end (the oldest when
``spec.bad_first``, else the newest), there is one change point k: the first k versions are
bad, the rest good. Each bad version reproduces at its own unknown rate (a miss is likely:
flaky bugs reproduce 20-60% of the time), drawn from a Beta whose mean (0.15..0.85) and
concentration (6 or 24) its side shares, cut below ``spec.min_bad_rate`` (default 0.2: the
result claims nothing about a bad version rarer than that); the good versions share one unknown small rate
r_good (a false wedge: infra, a stray hang), uniform on {0, 0.25, 0.5, 1, 2, 4}%. All are
integrated on grids; k is uniform a priori over the V - 1 places. This is git-bayesect's model (Beta-Bernoulli, both
rates unknown, a posterior over the change point) with the rates on a grid instead of
conjugate; ktest's BISECT_TRIES and syzkaller's fixed runs per commit, by contrast, call a
point bad at any failure, so one false wedge sends them the wrong way (issue 23).

**Endpoints first.** The known bad must reproduce: it is re-checked until its first
reproduction and fails after ``bad_check_attempts`` counted clean runs (the n with
(1 - min_bad_rate)^n <= 1 - spec.posterior: 14 at 0.95 and 20%, so a bad end reproducing at
the floor is missed less often than the posterior allows). The known good must meet the
target on its own counts (:func:`good_end_check`): its exact one-sided (1 - delta) upper
bound at most epsilon (59 clean runs at 5%/5%); it fails once an anytime-valid lower bound
is above epsilon (an exact one, looked at after every attempt, failed a good end on its
first false wedge). Either failing ends the bisection with ``endpoints_ok=False``. No
result is done before both checks pass.

**Skips.** A version whose first ``SKIP_AFTER`` (3) attempts are all unusable (it did not
start, or failed before the risky phase) is skipped: it has no counted attempt, so it is
never evidence either way, and the answer spans it ("first good X, last bad Y" with the
skipped versions between them, their posterior summed).

**The bad side's spread.** The concentration of the bad side's rates is 6 (versions differ
widely) or 24 (they are close), never "all alike" (256 was): a bisection stops probing a
version at its first reproduction, so bad versions show 1 of 1, 1 of 2; read as alike, a
few such versions convinced the model that every bad version reproduces often, and 6 clean
runs then "proved" a version good that reproduced at 25% (with 4 hosts, whose speculative
probes leave more such versions, 4.3% of answers were wrong at a mean stated posterior of
0.966; bench/search.py).

**The batch.** Each free host gets the version with the largest expected drop in the entropy
of k from one more counted outcome, after the outcomes other hosts are running now (exact
over their combinations, :func:`_gains`), so parallel hosts take different versions:
speculative midpoints. Each gain is per expected second (a reproduction costs
``spec.wedge_cost_s``, a clean run ``spec.clean_cost_s``), so of two versions that tell as
much the one likelier clean goes first. A speculative probe must add at least
``spec.speculate`` of what a fresh attempt would tell; below that the host waits for a running attempt to end (the
runner asks it again), which costs wall time and no attempt. The known good never gets more
hosts than the clean runs it still needs, and while its check is owed only
``INTERIOR_WHILE_OWED`` (1) host bisects the interior and the others run it: those runs are
owed anyway. Ties break by a hash of seed, host and probe count. **Stop** when the most
probable span between two neighbouring counted versions holds ``spec.posterior`` (default
0.95), its first good has ``bad_check_attempts`` clean runs (:func:`first_good_runs_left`)
and both endpoints passed, or when the budget is spent.

**Why the floor, twice.** Without it the bad side's Beta kept a tail near 0 ("this may be a
bad version at 3%"), so the first good waited for 20-30 clean runs, and yet a few 1-of-1 bad
versions could make the posterior call 5 clean runs proof (it is 0.956 after 1 of 1 at the
last bad, wrong for a version at 32%). Cut at the floor, the posterior stops spending on that
tail; the first good's own runs then make the one decision the answer rests on hold for any
bad version at or above the floor, whatever the others showed. bench/search.py: 4 hosts, no
false wedges, 101 attempts at 98.0% before, 91 at 98.5% after.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum, unique
from itertools import pairwise, product

import numpy as np
from scipy.special import betaincc, betaln, gammaln, logsumexp

from reprofleet.stats import bisect_strata as strata
from reprofleet.stats.bisect_strata import bad_check_attempts
from reprofleet.stats.anytime import rate_lower
from reprofleet.stats.intervals import upper_bound
from reprofleet.stats.search_contract import (
    BisectResult,
    BisectSpec,
    Probe,
    ProbeOutcome,
    VersionEvidence,
    budget_spent,
)

SKIP_AFTER = 3  # unusable attempts, with none counted, before a version is skipped
INTERIOR_WHILE_OWED = 1  # hosts bisecting the interior while the known good's target check is still owed
PENDING_CAP = 256  # combinations of running attempts' outcomes enumerated when weighing a speculative probe
BAD_MEANS = np.linspace(0.15, 0.85, 8)  # the bad side's mean rate m
BAD_SPREADS = (6.0, 24.0)  # its concentration kappa: 6 the versions differ widely, 24 they are close
_HYPER = np.array([(m * k, (1.0 - m) * k) for m in BAD_MEANS for k in BAD_SPREADS])
GOOD_RATES = np.array([0.0, 0.0025, 0.005, 0.01, 0.02, 0.04])


@unique
class EndCheck(str, Enum):
    """Where an endpoint's re-check stands (the known bad's too)."""

    PENDING = "pending"
    OK = "ok"
    FAILED = "failed"


@dataclass(frozen=True)
class _Tally:
    """Counts per version in the internal order (bad end at 0)."""

    wedges: np.ndarray
    cleans: np.ndarray
    unusable: np.ndarray

    def skipped(self) -> np.ndarray:
        return (self.wedges + self.cleans == 0) & (self.unusable >= SKIP_AFTER)


def _internal(spec: BisectSpec, version: int) -> int:
    return version if spec.bad_first else spec.versions - 1 - version


def _check(spec: BisectSpec, probes: Sequence[Probe]) -> None:
    if spec.versions < 2:
        raise ValueError(f"a bisection needs at least two versions, got {spec.versions}")
    if not 0.5 < spec.posterior < 1.0 or not 0.0 < spec.epsilon < 1.0 or not 0.0 < spec.delta < 0.5:
        raise ValueError(f"need 0.5 < posterior < 1, 0 < epsilon < 1, 0 < delta < 0.5, got {spec}")
    if not 0.0 <= spec.speculate <= 1.0 or not spec.clean_cost_s > 0 or not spec.wedge_cost_s > 0:
        raise ValueError(f"need 0 <= speculate <= 1 and positive costs, got {spec}")
    if not 0.0 < spec.min_bad_rate < 1.0:
        raise ValueError(f"need 0 < min_bad_rate < 1, got {spec.min_bad_rate}")
    for probe in probes:
        if not 0 <= probe.level < spec.versions:
            raise ValueError(f"probe version {probe.level} of host {probe.host} is outside 0..{spec.versions - 1}")


def _tally(spec: BisectSpec, probes: Sequence[Probe]) -> _Tally:
    counts = {outcome: np.zeros(spec.versions, dtype=int) for outcome in ProbeOutcome}
    for probe in probes:
        counts[probe.outcome][_internal(spec, probe.level)] += 1
    return _Tally(counts[ProbeOutcome.REPRODUCED], counts[ProbeOutcome.CLEAN], counts[ProbeOutcome.UNUSABLE])


_BAD_TERMS: dict[float, np.ndarray] = {}  # per min_bad_rate: [wedges, cleans, hyper] -> log Pr(counts | bad)


def _bad_terms(min_bad_rate: float, wedges: np.ndarray, cleans: np.ndarray) -> np.ndarray:
    """(B, V) counts -> (B, V, H): log Pr(a version's counts | it is bad, hyper h).

    Its rate is drawn from Beta(a_h, b_h) cut below ``min_bad_rate``:
    B(w + a, c + b) I_{>r}(w + a, c + b) / (B(a, b) I_{>r}(a, b)), I_{>r} the upper regularized
    incomplete beta. The cut is the assumption the known bad's re-check already makes; without
    it a Beta's tail near 0 kept the first good waiting for 20-30 clean runs ("it may be a bad
    version at 3%"). Counts are small integers, so the terms are one table per rate, grown by
    doubling: betaincc costs about 60 times betaln (200,000 calls: 1.30 s against 0.022 s)."""
    table = _BAD_TERMS.get(min_bad_rate)
    need_w, need_c = int(wedges.max(initial=0)) + 1, int(cleans.max(initial=0)) + 1
    if table is None or table.shape[0] < need_w or table.shape[1] < need_c:
        rows = max(need_w, 2 * table.shape[0] if table is not None else 16)
        cols = max(need_c, 2 * table.shape[1] if table is not None else 128)
        w = np.arange(rows, dtype=float)[:, None, None]
        c = np.arange(cols, dtype=float)[None, :, None]
        a, b = _HYPER[None, None, :, 0], _HYPER[None, None, :, 1]
        with np.errstate(divide="ignore"):
            table = (betaln(w + a, c + b) + np.log(betaincc(w + a, c + b, min_bad_rate))
                     - betaln(a, b) - np.log(betaincc(a, b, min_bad_rate)))
        _BAD_TERMS[min_bad_rate] = table
    return table[wedges, cleans]


def _log_joint(wedges: np.ndarray, cleans: np.ndarray, min_bad_rate: float) -> np.ndarray:
    """(B, V) counts -> (B, V - 1) log Pr(data, k) for k = 1..V-1 (k: the first good, internal).

    Bad versions: each its own rate from Beta(m kappa, (1 - m) kappa) cut below
    ``min_bad_rate``, (m, kappa) shared and integrated; good versions: one shared false-wedge
    rate, integrated."""
    per_version = _bad_terms(min_bad_rate, wedges, cleans)  # (B, V, H)
    bad = logsumexp(np.cumsum(per_version, axis=1)[:, :-1, :], axis=2) - math.log(len(_HYPER))
    w_post = (wedges.sum(axis=1)[:, None] - np.cumsum(wedges, axis=1)[:, :-1])[:, :, None].astype(float)
    c_post = (cleans.sum(axis=1)[:, None] - np.cumsum(cleans, axis=1)[:, :-1])[:, :, None].astype(float)
    rg = GOOD_RATES[None, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        good_ll = np.where(w_post > 0, w_post * np.log(rg), 0.0) + c_post * np.log1p(-rg)
    good = logsumexp(good_ll, axis=2) - math.log(len(GOOD_RATES))
    return bad + good - math.log(wedges.shape[1] - 1)


def _change_posterior(tally: _Tally, min_bad_rate: float) -> np.ndarray:
    joint = _log_joint(tally.wedges[None, :], tally.cleans[None, :], min_bad_rate)[0]
    return np.exp(joint - logsumexp(joint))


def _entropy(log_joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    log_evidence = logsumexp(log_joint, axis=1)
    post = np.exp(log_joint - log_evidence[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(post > 0, post * np.log(post), 0.0).sum(axis=1), log_evidence


def _span(post: np.ndarray, tally: _Tally) -> tuple[int, int, float]:
    """The most probable (last bad, first good) pair of neighbouring non-skipped versions (internal)."""
    kept = np.flatnonzero(~tally.skipped())
    best = (0, 1, -1.0)
    for low, high in pairwise(kept):
        mass = float(post[low:high].sum())  # k in low+1..high sits at post[k-1]
        if mass > best[2]:
            best = (int(low), int(high), mass)
    return best


def good_end_check(wedges: int, attempts: int, epsilon: float, delta: float) -> EndCheck:
    """The known good's target check on its own counts.

    OK once its exact one-sided (1 - delta) upper bound is at most epsilon (59 clean runs at
    5%/5%). FAILED once the anytime-valid lower bound (a confidence sequence, valid however
    often it is looked at) is above epsilon: the check is looked at after every attempt, and
    an exact bound looked at that often fails a known good on its first false wedge (1 of 1
    has an exact 95% lower bound of 5%), which ended 1 in 40 bisections with a 1% false-wedge
    rate (bench/search.py). The confidence sequence needs 2 of 3, 3 of 5, 4 of 10 or 5 of 15."""
    if attempts and rate_lower(wedges, attempts, delta) > epsilon:
        return EndCheck.FAILED
    if attempts and upper_bound(wedges, attempts, 1.0 - delta).high <= epsilon:
        return EndCheck.OK
    return EndCheck.PENDING


def good_end_runs_left(wedges: int, attempts: int, epsilon: float, delta: float) -> int:
    """Clean runs the known good still needs to meet its target if none of them reproduces."""
    if good_end_check(wedges, attempts, epsilon, delta) is not EndCheck.PENDING:
        return 0
    low, high = 0, 1
    while upper_bound(wedges, attempts + high, 1.0 - delta).high > epsilon:
        low, high = high, high * 2
    while high - low > 1:  # the bound falls as clean runs are added: the first n that meets it
        middle = (low + high) // 2
        low, high = (middle, high) if upper_bound(wedges, attempts + middle, 1.0 - delta).high > epsilon else (low, middle)
    return high


def _endpoint_checks(spec: BisectSpec, tally: _Tally) -> tuple[EndCheck, EndCheck]:
    last = spec.versions - 1
    skipped = tally.skipped()
    if tally.wedges[0] > 0:
        bad = EndCheck.OK
    elif skipped[0] or tally.cleans[0] >= bad_check_attempts(spec.posterior, spec.min_bad_rate):
        bad = EndCheck.FAILED
    else:
        bad = EndCheck.PENDING
    w, n = int(tally.wedges[last]), int(tally.wedges[last] + tally.cleans[last])
    good = EndCheck.FAILED if skipped[last] else good_end_check(w, n, spec.epsilon, spec.delta)
    return bad, good


def _budget_spent(spec: BisectSpec, probes: Sequence[Probe], running: int = 0) -> str | None:
    return budget_spent(spec.budget_attempts, spec.budget_power_cycles, probes, running)


def _external(spec: BisectSpec, internal: int) -> int:
    return internal if spec.bad_first else spec.versions - 1 - internal


def _why_endpoints(spec: BisectSpec, bad: EndCheck, good: EndCheck, tally: _Tally) -> str:
    last = spec.versions - 1
    if bad is EndCheck.FAILED:
        return (f"the known bad (version {_external(spec, 0)}) never reproduced in {int(tally.cleans[0])} counted "
                f"attempts ({int(tally.unusable[0])} unusable)")
    return (f"the known good (version {_external(spec, last)}) fails the target: {int(tally.wedges[last])} "
            f"reproductions in {int(tally.wedges[last] + tally.cleans[last])} counted attempts "
            f"({int(tally.unusable[last])} unusable)")


def first_good_runs_left(spec: BisectSpec, tally: _Tally, first_good: int) -> int:
    """Clean runs the first good (internal) still needs before it is called good: as many as
    pass a version at ``spec.min_bad_rate`` with probability at most 1 - posterior.

    The posterior alone is a claim under the prior; this makes the one decision the answer
    rests on hold for every bad version at or above the rate floor, whatever the other bad
    versions showed (a few 1-of-1 versions made 5 clean runs look like proof at a version that
    reproduced at 32%: bench/search.py)."""
    return max(0, bad_check_attempts(spec.posterior, spec.min_bad_rate) - int(tally.cleans[first_good]))


def _pooled_result(spec: BisectSpec, probes: Sequence[Probe], spent_on: Sequence[Probe]) -> BisectResult:
    """The change point's posterior over ``probes`` (one stratum's evidence), the endpoint
    checks and whether it is done; attempts, power cycles and the budget over ``spent_on``."""
    tally = _tally(spec, probes)
    bad, good = _endpoint_checks(spec, tally)
    post = _change_posterior(tally, spec.min_bad_rate)
    p_good = np.concatenate(([0.0], np.cumsum(post)))  # internal i is good when k <= i
    skipped = tally.skipped()
    versions = tuple(VersionEvidence(
        version=v, attempts=int(tally.wedges[i] + tally.cleans[i]), reproductions=int(tally.wedges[i]),
        unusable=int(tally.unusable[i]), skipped=bool(skipped[i]), p_good=float(min(p_good[i], 1.0)))
        for v in range(spec.versions) for i in (_internal(spec, v),))
    cycles = sum(1 for p in spent_on if p.outcome is ProbeOutcome.REPRODUCED or p.power_cycled)
    failed = EndCheck.FAILED in (bad, good)
    ok: bool | None = False if failed else (True if bad is good is EndCheck.OK else None)
    low, high, mass = _span(post, tally)
    first_good, last_bad = (None, None) if failed else (_external(spec, high), _external(spec, low))
    spent = _budget_spent(spec, spent_on)
    owed = first_good_runs_left(spec, tally, high)
    if failed:
        done, why = True, _why_endpoints(spec, bad, good, tally)
    elif ok and mass >= spec.posterior and not owed:
        done, why = True, f"first good: {first_good} (posterior {mass:.3f}), last bad: {last_bad}"
    else:
        checks = ", ".join(f"the known {name} is still being re-checked" for name, check in
                           (("bad", bad), ("good", good)) if check is EndCheck.PENDING)
        floor = (f"the first good needs {owed} more clean runs (fewer pass a version reproducing at "
                 f"{spec.min_bad_rate:g} more than {1 - spec.posterior:.2g} of the time)") if owed else ""
        checks = "; ".join(filter(None, (checks, floor)))
        done, why = spent is not None, spent or (f"waiting: first good {first_good}, last bad {last_bad} at posterior "
                                                 f"{mass:.3f} of {spec.posterior:g}" + (f"; {checks}" if checks else ""))
        if spent:
            why = f"{spent}: first good {first_good}, last bad {last_bad} at posterior {mass:.3f}" + (
                f"; {floor}" if floor else "")
    return BisectResult(first_good=first_good, last_bad=last_bad, posterior=mass, endpoints_ok=ok,
                        versions=versions, attempts=len(spent_on), power_cycles=cycles, done=done, why=why)


def bisect_result(spec: BisectSpec, probes: Sequence[Probe]) -> BisectResult:
    """The change point of every stratum: the first (in group-name order) with the others in ``strata``.

    Each stratum (a declared group) is its own bisection. Within one, a host's probes are
    evidence only once the bug has reproduced on it (``strata.evidence``): the clean runs of
    a host where the bug never shows would read as "good" at every version and pull the change
    point early (issue 33: "first good 0.21.0 (posterior 0.975)" beside 3/23 at 0.21.0 on the
    one host that shows it). The answer names the hosts it covers: a host the bug never
    reproduced on, or one that reproduced at the first good, is an exception, never covered."""
    _check(spec, probes)
    results = []
    for group, hosts in strata.declared(spec.groups, probes):
        mine = [p for p in probes if p.host in hosts]
        evidence = strata.evidence(spec, mine) if spec.per_host else mine
        pooled = _pooled_result(spec, evidence, mine)
        covered, exceptions = strata.coverage(spec, mine, hosts, pooled.first_good) if spec.per_host else (hosts, ())
        if spec.per_host and not covered and pooled.first_good is not None and strata.confirmed(spec, mine):
            pooled = replace(pooled, done=False, why=f"withheld: the first good ({pooled.first_good}) reproduced on "
                             f"every host the bug shows on; {pooled.why}")
        results.append(replace(pooled, group=group, hosts=covered, exceptions=exceptions))
    first, rest = results[0], tuple(results[1:])
    return replace(first, strata=rest, done=all(r.done for r in results))


def _pending_outcomes(pending: np.ndarray) -> tuple[list[tuple[int, int]], list[tuple[int, ...]]]:
    """The versions with attempts running now (at most PENDING_CAP combinations of their
    wedge counts; beyond it the versions with the fewest running are left out) and every
    combination of wedge counts they can end with."""
    kept: list[tuple[int, int]] = []
    combos = 1
    for version in sorted(np.flatnonzero(pending), key=lambda v: (-int(pending[v]), int(v))):
        n = int(pending[version])
        if combos * (n + 1) > PENDING_CAP:
            continue
        kept.append((int(version), n))
        combos *= n + 1
    return kept, list(product(*(range(n + 1) for _, n in kept)))


def _gains(tally: _Tally, pending: np.ndarray, candidates: Sequence[int],
           min_bad_rate: float) -> tuple[dict[int, float], dict[int, float]]:
    """Per candidate (internal), the expected entropy drop of k from one more outcome there,
    after the attempts other hosts run now (``pending`` per version) have ended.

    Exact over the outcomes of those attempts: E over them of H(k | data, them) minus
    H(k | data, them, the candidate's outcome). Two hosts on neighbouring midpoints thus learn
    less than two fresh midpoints would: the gain of a speculative probe is what it adds to
    the probes already under way, which is what decides whether it is worth an attempt.
    Second: per candidate, the chance its outcome is a reproduction (its expected cost)."""
    kept, combos = _pending_outcomes(pending)
    rows_w, rows_c, layout = [tally.wedges], [tally.cleans], []
    for combo in combos:
        base_w, base_c = tally.wedges.copy(), tally.cleans.copy()
        log_ways = 0.0
        for (version, n), w in zip(kept, combo):
            base_w[version] += w
            base_c[version] += n - w
            log_ways += float(gammaln(n + 1) - gammaln(w + 1) - gammaln(n - w + 1))
        rows_w.append(base_w)
        rows_c.append(base_c)
        for i in candidates:
            for wedge in (1, 0):
                row_w, row_c = base_w.copy(), base_c.copy()
                row_w[i] += wedge
                row_c[i] += 1 - wedge
                rows_w.append(row_w)
                rows_c.append(row_c)
        layout.append(log_ways)
    entropy, log_evidence = _entropy(_log_joint(np.array(rows_w), np.array(rows_c), min_bad_rate))
    width = 1 + 2 * len(candidates)
    gains = dict.fromkeys(candidates, 0.0)
    chance = dict.fromkeys(candidates, 0.0)
    for j, log_ways in enumerate(layout):
        at = 1 + j * width
        weight = math.exp(log_ways + log_evidence[at] - log_evidence[0])  # Pr(this combination)
        for c, i in enumerate(candidates):
            wedge, clean = at + 1 + 2 * c, at + 2 + 2 * c
            p_wedge = math.exp(log_evidence[wedge] - log_evidence[at])
            after = p_wedge * float(entropy[wedge]) + math.exp(log_evidence[clean] - log_evidence[at]) * float(entropy[clean])
            gains[i] += weight * (float(entropy[at]) - after)
            chance[i] += weight * p_wedge
    return {i: max(g, 0.0) for i, g in gains.items()}, chance


def _jitter(spec: BisectSpec, host: str, probes: int, version: int) -> float:
    digest = hashlib.sha256(f"{spec.seed}\0{host}\0{probes}\0{version}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def next_bisect_version(spec: BisectSpec, probes: Sequence[Probe], host: str,
                        running: Mapping[str, int]) -> int | None:
    """The version ``host`` should run next, or None: the bisection is done, its budget
    spent, or nothing is worth an attempt until a running one ends (the runner then asks
    again).

    Order: the known bad while it has not reproduced and the known good while it has not met
    its target, each on one host at a time; then the version of most information, or the
    known good's owed runs where a speculative probe is worth little; once the posterior
    holds, the first good's clean runs (:func:`first_good_runs_left`) and the endpoint checks. The known good never
    gets more hosts than the clean runs it still needs, and a speculative probe (others are
    running) is started only when it adds at least ``spec.speculate`` of what one attempt
    would tell with nothing running: below that, waiting for the running ones costs wall
    time but no attempt."""
    _check(spec, probes)
    if _budget_spent(spec, probes, sum(1 for h in running if h != host)) is not None:
        return None
    stratum = strata.stratum_hosts(spec.groups, probes, host)
    mine = [p for p in probes if p.host in stratum]
    if spec.per_host:
        decided, version = strata.host_check(spec, mine, host)
        if decided:
            return version  # a host the bug has not shown on yet runs the known bad; one it never shows on leaves
    evidence = strata.evidence(spec, mine)
    group = strata.group_of(spec.groups, host)
    others = [_internal(spec, v) for h, v in running.items()
              if h != host and strata.group_of(spec.groups, h) == group and 0 <= v < spec.versions]
    result = _pooled_result(spec, evidence, mine)
    if result.done or result.first_good is None:
        return None  # not done: no endpoint failed, so the span is named
    probes = evidence
    tally = _tally(spec, probes)
    bad, good = _endpoint_checks(spec, tally)
    last = spec.versions - 1
    at_good = others.count(last)
    good_owed = good is EndCheck.PENDING and at_good < good_end_runs_left(
        int(tally.wedges[last]), int(tally.wedges[last] + tally.cleans[last]), spec.epsilon, spec.delta)
    if bad is EndCheck.PENDING and 0 not in others:
        return _external(spec, 0)
    if good is EndCheck.PENDING and at_good == 0:
        return _external(spec, last)
    first_good, mass = _internal(spec, result.first_good), result.posterior  # the span bisect_result found
    if mass >= spec.posterior:  # only the first good's clean runs or an endpoint check is left: more hosts on it
        if first_good_runs_left(spec, tally, first_good) > others.count(first_good):
            return _external(spec, first_good)
        if bad is EndCheck.PENDING:
            return _external(spec, 0)
        return _external(spec, last) if good_owed else None
    interior = sum(1 for i in others if 0 < i < last)
    if good_owed and interior >= INTERIOR_WHILE_OWED:
        return _external(spec, last)  # the known good's runs are owed anyway: never a wasted attempt
    pending = np.bincount(np.array(others, dtype=int), minlength=spec.versions)
    candidates = [int(i) for i in np.flatnonzero(~tally.skipped())]
    worth = _worth(spec, *_gains(tally, pending, candidates, spec.min_bad_rate))
    best = max(candidates, key=lambda i: (worth[i], _jitter(spec, host, len(probes), i)))
    fresh = _gains(tally, np.zeros_like(pending), candidates, spec.min_bad_rate)
    if others and worth[best] < spec.speculate * max(_worth(spec, *fresh).values()):
        return _external(spec, last) if good_owed else None
    return _external(spec, best)


def _worth(spec: BisectSpec, gains: Mapping[int, float], chance: Mapping[int, float]) -> dict[int, float]:
    """Information per expected second: a likely reproduction costs a power cycle and minutes,
    so between two versions that tell as much, the one more likely clean goes first (fewer
    host freezes for the same answer; bench/search.py)."""
    return {i: g / (chance[i] * spec.wedge_cost_s + (1.0 - chance[i]) * spec.clean_cost_s) for i, g in gains.items()}
