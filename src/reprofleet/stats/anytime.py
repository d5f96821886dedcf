"""Anytime-valid numbers: bounds and tests that stay valid however often someone looks.

A fixed-n p-value is valid once, at the planned end. Verdicts are also printed live, on a
resumed or running campaign, for a cell a stop rule ended early, and for a campaign that
was extended after its verdicts were seen; "stop when it says fixed" then turns a 5% test
into a 5-7% one. Everything here is valid at any stopping time, by Ville's inequality: a
nonnegative (super)martingale with mean at most 1 exceeds 1/alpha with probability at most
alpha, ever.

* **A rate**: Robbins' beta-binomial mixture confidence sequence (Robbins 1970, "Statistical
  methods related to the law of the iterated logarithm", Ann. Math. Statist. 41:1397-1409;
  Howard, Ramdas, McAuliffe and Sekhon 2021, Ann. Statist. 49:1055-1080): p is excluded
  once the Beta(1/2, 1/2)-mixture likelihood of the attempts so far is 1/alpha times their
  likelihood at p. A one-sided bound uses the same set (valid, a little conservative).
* **The cell against the reference**: the e-value of universal inference (Wasserman, Ramdas
  and Balakrishnan 2020, "Universal inference", PNAS 117:16880-16890) for the composite null
  "on every host, the cell's rate is at least rho0 times the reference's": the product over
  hosts and both sides of Beta(1/2, 1/2)-mixture likelihoods, divided by the likelihood
  maximised over the null (on the boundary p_cell = rho0 p_ref its maximiser is Farrington
  and Manning's closed form, shared with :mod:`reprofleet.stats.ratio`). Under the null
  every such ratio is at most a mixture likelihood ratio against the true rates, a
  martingale of mean 1, so P(ever >= 1/alpha) <= alpha; hosts multiply because their
  attempts are independent. rho0 = 1 is "rarer than the reference at all", rho0 = the
  playbook's ``fixed_ratio`` is "fixed". Its p-value is min(1, 1/E).

Both pay for their validity with attempts: 0/36 against 18/36 gives E = 4.4 at rho0 = 1/3
(fixed-n: p = 0.001); about 60 clean attempts a side reach E = 20.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy.special import betaln

from reprofleet.stats.ratio import Stratum, constrained_rates

PRIOR = 0.5  # Beta(1/2, 1/2): Jeffreys' prior, the Krichevsky-Trofimov mixture
LOG_RANGE = (math.log(1e-9), math.log(1e9))
BISECTIONS = 60
METHOD_RATE = "confidence sequence (beta-binomial mixture)"
METHOD_RATIO = "e-process (universal inference)"


def log_mixture(successes: int, trials: int) -> float:
    """Log of the Beta(1/2, 1/2)-mixture likelihood of a sequence with these counts."""
    return float(betaln(successes + PRIOR, trials - successes + PRIOR) - betaln(PRIOR, PRIOR))


def log_likelihood(successes: int, trials: int, p: float) -> float:
    """Log-likelihood of a Bernoulli sequence with these counts at rate ``p`` (0 log 0 = 0)."""
    out = 0.0
    if successes:
        out += successes * math.log(p) if p > 0 else -math.inf
    if trials - successes:
        out += (trials - successes) * math.log1p(-p) if p < 1 else -math.inf
    return out


def _check(successes: int, trials: int) -> None:
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")


def rate_excluded(successes: int, trials: int, p: float, alpha: float) -> bool:
    """Whether the confidence sequence at ``alpha`` excludes rate ``p`` after these counts."""
    return log_mixture(successes, trials) - log_likelihood(successes, trials, p) >= math.log(1.0 / alpha)


def rate_upper(successes: int, trials: int, alpha: float = 0.05) -> float:
    """The largest rate the confidence sequence keeps (1.0 with no attempts)."""
    _check(successes, trials)
    if trials == 0 or successes == trials:
        return 1.0
    low, high = successes / trials, 1.0
    if not rate_excluded(successes, trials, 1.0 - 1e-12, alpha):
        return 1.0
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (low, middle) if rate_excluded(successes, trials, middle, alpha) else (middle, high)
    return high


def rate_lower(successes: int, trials: int, alpha: float = 0.05) -> float:
    """The smallest rate the confidence sequence keeps (0.0 with no reproductions)."""
    _check(successes, trials)
    return 1.0 - rate_upper(trials - successes, trials, alpha)


def _log_null_max(stratum: Stratum, rho: float) -> float:
    """Log-likelihood of one host's two sides, maximised over p_cell >= rho p_ref."""
    (x1, n1), (x2, n2) = stratum
    free1, free2 = (x1 / n1 if n1 else 0.0), (x2 / n2 if n2 else 0.0)
    if free1 >= rho * free2:
        return log_likelihood(x1, n1, free1) + log_likelihood(x2, n2, free2)
    p1, p2 = constrained_rates(x1, n1, x2, n2, rho)
    return log_likelihood(x1, n1, p1) + log_likelihood(x2, n2, p2)


def log_e_value(strata: Sequence[Stratum], rho: float) -> float:
    """Log of the universal-inference e-value against "the cell's rate >= rho x the reference's"."""
    total = 0.0
    for stratum in strata:
        (x1, n1), (x2, n2) = stratum
        _check(x1, n1)
        _check(x2, n2)
        if n1 == 0 or n2 == 0:
            continue
        total += log_mixture(x1, n1) + log_mixture(x2, n2) - _log_null_max(stratum, rho)
    return total


def p_value(strata: Sequence[Stratum], rho: float) -> float:
    """Anytime-valid p-value of "ratio >= rho": min(1, 1/E), valid at any stopping time."""
    return min(1.0, math.exp(-log_e_value(strata, rho)))


@dataclass(frozen=True)
class AnytimeRatio:
    """The confidence sequence's upper bound on the common ratio, and the p-value at a threshold."""

    upper: float  # math.inf: not bounded (the reference never reproduced on these hosts)
    p_at_threshold: float
    threshold: float
    method: str = METHOD_RATIO


def ratio_upper(strata: Sequence[Stratum], alpha: float = 0.05, threshold: float = 1.0) -> AnytimeRatio:
    """The smallest rho whose null "ratio >= rho" the e-process rejects at ``alpha``; every
    larger rho is rejected too (the null shrinks as rho grows, so E grows)."""
    p = p_value(strata, threshold)
    if all(x2 == 0 for (_, n1), (x2, n2) in strata if n1 and n2):
        return AnytimeRatio(math.inf, p, threshold)
    bar = math.log(1.0 / alpha)
    low, high = LOG_RANGE
    if log_e_value(strata, math.exp(high)) < bar:
        return AnytimeRatio(math.inf, p, threshold)
    if log_e_value(strata, math.exp(low)) >= bar:
        return AnytimeRatio(0.0, p, threshold)
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (low, middle) if log_e_value(strata, math.exp(middle)) >= bar else (middle, high)
    return AnytimeRatio(math.exp(high), p, threshold)
