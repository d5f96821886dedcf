"""When a cell may stop before its planned attempts: pure decisions from counts.

The host runner asks before every slot; the state is nothing but the counts in
``attempts.jsonl``, so a resumed campaign decides exactly as the first run would have.

A stop is a look before the planned end, so the claim a cell stops with is the one the
judge would make at such a look: "reproduces" at a reproduction (a fact), "fixed" only
where the anytime-valid comparison with the reference's *measured* counts on that host
(:func:`reprofleet.stats.comparison.weigh`, the judge's own rule) concludes fixed, rate
ratio below ``fixed_ratio`` included, at level alpha / the number of compared cells: the
strictest rank Holm gives, so the judge's Holm step reaches it on that host's data
whatever the other cells show. An SPRT's boundary is not enough on its own: its p0 is the
playbook's guess, not the reference's rate. The words of a stop (``why``) go to the
``stopped`` event; a verdict only says "stopped by RULE after n".
"""

from __future__ import annotations

from dataclasses import dataclass


from reprofleet.model import DEFAULT_FIXED_RATIO, StopKind, StopRule
from reprofleet.stats.comparison import concludes_fixed, weigh
from reprofleet.stats.sprt import SPRT_CAP_FACTOR, Sprt, fixed_n

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


@dataclass(frozen=True)
class Conclusion:
    """What the judge would need to call a cell fixed at a look: its ``fixed_ratio`` and how
    many cells share the Holm family (the reference's comparisons in the playbook)."""

    fixed_ratio: float = DEFAULT_FIXED_RATIO
    family: int = 1


def decide(rule: StopRule, cell: tuple[int, int], reference: tuple[int, int], planned: int,
           conclusion: Conclusion = Conclusion()) -> StopDecision | None:
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
        early = _first_reproduction(rule, reproductions, judged, reference, conclusion)
    elif rule.kind is StopKind.SPRT:
        early = _sprt(rule, reproductions, judged, reference, conclusion)
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


def judge_concludes_fixed(cell: tuple[int, int], reference: tuple[int, int], alpha: float,
                         conclusion: Conclusion) -> bool:
    """The judge's anytime-valid rule on one host's counts, at its strictest Holm rank."""
    if cell[0] > 0 or cell[1] == 0 or reference[1] == 0 or reference[0] == 0:
        return False
    evidence = weigh([(cell, reference)], anytime_valid=True, fixed_ratio=conclusion.fixed_ratio,
                     confidence=1.0 - alpha)
    return concludes_fixed(evidence, alpha / max(conclusion.family, 1))


def _first_reproduction(rule: StopRule, reproductions: int, judged: int, reference: tuple[int, int],
                        conclusion: Conclusion) -> StopDecision | None:
    if reproductions > 0:
        return StopDecision(rule.kind, f"first reproduction at attempt {judged}", "reproduces")
    alpha = 1.0 - rule.confidence
    if judge_concludes_fixed((0, judged), reference, alpha, conclusion):
        return StopDecision(rule.kind, f"{judged} clean attempts against the reference's {reference[0]}/{reference[1]}: "
                            f"rate ratio below {conclusion.fixed_ratio:g} at level {alpha:g}/{conclusion.family} "
                            "(anytime-valid)", "fixed")
    return None


def _sprt(rule: StopRule, reproductions: int, judged: int, reference: tuple[int, int],
          conclusion: Conclusion) -> StopDecision | None:
    test = sprt_of(rule)
    verdict = test.decide(reproductions, judged)
    if verdict is None:
        return None
    if verdict == "fixed" and not judge_concludes_fixed((reproductions, judged), reference, rule.alpha, conclusion):
        return None  # the playbook's p0 is a guess: only the reference's own counts may end the cell
    llr = test.llr(reproductions, judged)
    if verdict == "fixed":
        return StopDecision(rule.kind, f"upper SPRT boundary (LLR {llr:.2f} >= {test.upper:.2f}), and against the "
                            f"reference's {reference[0]}/{reference[1]} a rate ratio below {conclusion.fixed_ratio:g} "
                            f"at level {rule.alpha:g}/{conclusion.family} (anytime-valid)", verdict)
    return StopDecision(rule.kind, f"lower SPRT boundary (LLR {llr:.2f} <= {test.lower:.2f}) after "
                        f"{reproductions} reproduction{'s' if reproductions != 1 else ''}", verdict)


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
