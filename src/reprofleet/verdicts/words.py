"""The pieces every verdict sentence is made of: numbers as people read them, and the
counts a claim rests on ("n clean, m errors/hangs in capture, k excluded: reasons").

Every caveat goes into the sentence itself (the reader of one line of a pasted report sees
it), so these pieces are small and shared by every kind of verdict.
"""

from __future__ import annotations

import math
from collections import Counter

from reprofleet.model import Judging, Phase
from reprofleet.verdicts.tally import Tally

PHASE_WORDS = {Phase.CUDA_GRAPH_CAPTURE: "capture"}


def fmt_p(p: float) -> str:
    """Two significant digits, but never rounded up onto 0.05: 0.0498 is "p = 0.0498", so a
    claim at 5% is never printed beside "p = 0.05"."""
    if p < 0.001:
        return "p < 0.001"
    text = f"{p:.2g}" if p < 0.1 else f"{p:.2f}"
    if p < 0.05 <= float(text):
        text = f"{p:.3g}"
    return f"p = {text}"


def pct(value: float) -> str:
    return f"{value:.0%}" if value >= 0.01 or value == 0 else f"{value:.1%}"


def ratio(value: float) -> str:
    """A rate ratio's bound: "0.21", "1.4", "unbounded"."""
    if math.isinf(value):
        return "unbounded"
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def risk_words(judging: Judging) -> str:
    """The phase at risk as a sentence names it ("capture")."""
    phase = judging.at_risk_phase
    return PHASE_WORDS.get(phase, phase.value.replace("_", " ")) if phase else "the phase at risk"


def reasons(counter: Counter[str], limit: int = 3) -> str:
    shown = [f"{n}× {reason}" for reason, n in counter.most_common(limit)]
    rest = sum(counter.values()) - sum(n for _, n in counter.most_common(limit))
    return ", ".join(shown + ([f"{rest} more"] if rest else []))


def counts(tally: Tally, judging: Judging) -> str:
    """ "36 clean, 2 errors/hangs in capture, 1 excluded: 1× infra: ..." """
    parts = [f"{tally.clean} clean"]
    if judging.at_risk_phase is not None:
        failed = tally.at_risk - tally.lost_at_risk
        parts.append(f"{failed} error{'s' if failed != 1 else ''}/hang{'s' if failed != 1 else ''}"
                     f" in {risk_words(judging)}")
        if tally.lost_at_risk:
            parts.append(f"{plural(tally.lost_at_risk, 'attempt')} lost with the host in {risk_words(judging)}")
    excluded = f"{tally.excluded} excluded"
    if tally.excluded:
        excluded += f": {reasons(tally.excluded_reasons)}"
    return ", ".join(parts + [excluded])


def not_run(tally: Tally) -> str:
    """Slots that run again, listed apart: they are in no rate and no share."""
    if not tally.not_run:
        return ""
    return f"{plural(tally.not_run, 'slot')} not run yet, in no rate or share ({reasons(tally.not_run_reasons)})"


def early(tally: Tally, judging: Judging) -> str:
    if not tally.early:
        return ""
    return (f"{tally.early} of the reproductions came before {risk_words(judging)} (counted; the playbook's "
            "early_reproductions: exclude leaves them out)")


def hosts_words(hosts: tuple[str, ...] | list[str]) -> str:
    return ", ".join(hosts)


def join(head: str, clauses: list[str]) -> str:
    """A verdict sentence: its head, then every non-empty clause after a semicolon."""
    return "; ".join([head] + [c for c in clauses if c])


def at_risk_words(tally: Tally) -> str:
    """What the worst case counts as reproductions: "2 errors/hangs", "7 attempts lost", or both."""
    failed, lost = tally.at_risk - tally.lost_at_risk, tally.lost_at_risk
    parts = ([plural(failed, "error/hang", "errors/hangs")] if failed else []) + \
        ([plural(lost, "attempt") + " lost with the host"] if lost else [])
    return " and ".join(parts)
