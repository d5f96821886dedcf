"""When a cell may stop before its planned attempts: pure decisions from counts.

The host runner asks before every slot; the state is nothing but the counts in
``attempts.jsonl``, so a resumed campaign decides exactly as the first run would have.
"""

from __future__ import annotations

from dataclasses import dataclass


from reprofleet.model import StopKind, StopRule
from reprofleet.stats.sprt import SPRT_CAP_FACTOR, Sprt, fixed_n
from reprofleet.stats.intervals import clean_attempts_to_rule_out, lower_bound

FIRST_REPRODUCTION_CAP_FACTOR = 3  # nor does first_reproduction run past 3x the playbook's attempts


def max_attempts(rule: StopRule, planned: int) -> int:
    """The most attempts a cell under ``rule`` may run on one host (the plan's slots)."""
    if rule.kind is StopKind.SPRT:
        assert rule.p0 is not None and rule.p1 is not None
        return SPRT_CAP_FACTOR * fixed_n(rule.p0, rule.p1, rule.alpha, rule.beta)
    if rule.kind is StopKind.FIRST_REPRODUCTION:
        return FIRST_REPRODUCTION_CAP_FACTOR * planned
    return planned


@dataclass(frozen=True)
class StopDecision:
    """Why a cell stopped on a host, in plain words, and the claim it stopped with (if any)."""

    rule: StopKind
    why: str
    verdict: str | None  # "reproduces" | "fixed" | None (stopped without a claim, e.g. at a cap)


def decide(rule: StopRule, cell: tuple[int, int], reference: tuple[int, int], planned: int) -> StopDecision | None:
    """Whether a cell stops now on one host; None = keep going.

    ``cell`` and ``reference`` are (reproductions, judged) so far on that host; ``planned``
    is the playbook's attempts per cell (what :func:`max_attempts` takes). Excluded
    attempts are in neither count, so a cell stops at a cap only once that many attempts
    were judged; before that the plan simply runs out of slots.
    """
    reproductions, judged = cell
    if judged <= 0:
        return None
    if rule.kind is StopKind.FIRST_REPRODUCTION:
        early = _first_reproduction(rule, reproductions, judged, reference)
    elif rule.kind is StopKind.SPRT:
        early = _sprt(rule, reproductions, judged)
    else:
        early = None
    if early is not None:
        return early
    cap = max_attempts(rule, planned)
    if judged >= cap:
        what = f"all {cap} planned attempts judged" if rule.kind is StopKind.FIXED_N \
            else f"{_rule_name(rule)} cap of {cap} attempts reached"
        return StopDecision(rule.kind, what, None)
    return None


def _first_reproduction(rule: StopRule, reproductions: int, judged: int,
                        reference: tuple[int, int]) -> StopDecision | None:
    if reproductions > 0:
        return StopDecision(rule.kind, f"first reproduction at attempt {judged}", "reproduces")
    floor = lower_bound(*reference, rule.confidence).low
    needed = clean_attempts_to_rule_out(floor, rule.confidence)
    if needed is not None and judged >= needed:
        return StopDecision(rule.kind, f"{judged} clean attempts rule out the reference's lower bound "
                            f"{percent(floor)} at {percent(rule.confidence)}", "fixed")
    return None


def _sprt(rule: StopRule, reproductions: int, judged: int) -> StopDecision | None:
    test = sprt_of(rule)
    verdict = test.decide(reproductions, judged)
    if verdict is None:
        return None
    llr = test.llr(reproductions, judged)
    boundary = f">= {test.upper:.2f}" if verdict == "fixed" else f"<= {test.lower:.2f}"
    return StopDecision(rule.kind, f"SPRT: {verdict} (LLR {llr:.2f} {boundary})", verdict)


def sprt_of(rule: StopRule) -> Sprt:
    """The SPRT a ``stop: sprt`` rule describes."""
    if rule.p0 is None or rule.p1 is None:
        raise ValueError("an SPRT stop rule needs p0 and p1")
    return Sprt(rule.p0, rule.p1, rule.alpha, rule.beta)


def _rule_name(rule: StopRule) -> str:
    return "SPRT" if rule.kind is StopKind.SPRT else rule.kind.value.replace("_", " ")


def percent(rate: float) -> str:
    """A rate as a percentage that does not round a small bound to 0%."""
    if rate >= 0.1 or rate == 0.0:
        return f"{rate:.0%}"
    if rate >= 0.01:
        return f"{rate:.1%}"
    return f"{rate * 100:.2g}%"
