"""When a cell may stop before its planned attempts: pure decisions from counts.

The host runner asks before every slot; the state is nothing but the counts in
``attempts.jsonl``, so a resumed campaign decides exactly as the first run would have.
"""

from __future__ import annotations

from scipy.stats import binom

from .model import StopKind, StopRule

SPRT_CAP_FACTOR = 3  # SPRT never runs longer than 3x the fixed-n design at the same error rates
FIRST_REPRODUCTION_CAP_FACTOR = 3  # nor does first_reproduction run past 3x the playbook's attempts


def fixed_n(p0: float, p1: float, alpha: float, beta: float, limit: int = 10_000) -> int:
    """Attempts a fixed-sample exact binomial test needs to tell rate p0 from p1 < p0.

    The smallest n with a cut-off c such that P(X <= c | p0) <= alpha (a false "fixed") and
    P(X <= c | p1) >= 1 - beta (power to call a real fix).
    """
    if not 0.0 <= p1 < p0 <= 1.0:
        raise ValueError(f"need 0 <= p1 < p0 <= 1, got p0={p0}, p1={p1}")
    for n in range(1, limit + 1):
        c = int(binom.ppf(alpha, n, p0))  # the largest c with cdf(c) <= alpha is c or c - 1
        while c >= 0 and binom.cdf(c, n, p0) > alpha:
            c -= 1
        if c >= 0 and binom.cdf(c, n, p1) >= 1.0 - beta:
            return n
    raise ValueError(f"no design of at most {limit} attempts separates p0={p0} from p1={p1}")


def max_attempts(rule: StopRule, planned: int) -> int:
    """The most attempts a cell under ``rule`` may run on one host (the plan's slots)."""
    if rule.kind is StopKind.SPRT:
        assert rule.p0 is not None and rule.p1 is not None
        return SPRT_CAP_FACTOR * fixed_n(rule.p0, rule.p1, rule.alpha, rule.beta)
    if rule.kind is StopKind.FIRST_REPRODUCTION:
        return FIRST_REPRODUCTION_CAP_FACTOR * planned
    return planned
