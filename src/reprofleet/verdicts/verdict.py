"""What a verdict hands to every report: the sentence, its kind, and every number it rests on.

The terminal, report.md, report.html and ``invoke report --json`` print these fields and
nothing else, so a verdict cannot read one way in one place and another in the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reprofleet.stats import intervals as stats
from reprofleet.verdicts.families import ALPHA
from reprofleet.verdicts.judge import Comparison, VerdictKind


@dataclass(frozen=True)
class Split:
    """A cell's rate in two groups of its own attempts, and whether the difference is real."""

    what: str
    yes_label: str
    no_label: str
    yes: tuple[int, int]
    no: tuple[int, int]
    p_value: float
    p_adjusted: float

    @property
    def flagged(self) -> bool:
        return self.p_adjusted < ALPHA

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "flagged": self.flagged}


@dataclass(frozen=True)
class Verdict:
    """One cell's conclusion, with every number the sentence rests on."""

    cell: str  # display name: the cell's name, or name@hash when one name ran two contents
    cell_id: str
    kind: VerdictKind
    text: str
    reference: bool
    reproductions: int
    judged: int
    excluded: int
    hosts: tuple[str, ...]
    hosts_reproducing: tuple[str, ...]
    rate: stats.Interval
    against_reference: Comparison | None = None
    hosts_differ: Comparison | None = None
    bound: stats.Interval | None = None
    more_needed: int | None = None
    stopped: tuple[str, ...] = ()  # "stopped by RULE after n attempts on HOST"
    approximate: bool = False  # its fixed-n intervals are not valid at this look
    splits: tuple[Split, ...] = ()
    at_risk: int = 0  # errors and hangs in the phase at risk
    not_run: int = 0  # slots that run again, in nothing
    early: int = 0  # reproductions before the phase at risk
    compared_hosts: tuple[str, ...] = ()
    anytime: bool = False  # the numbers are anytime-valid (this look is not the planned end)
    look: tuple[str, ...] = ()  # why this is not the planned end
    advice: str | None = None  # how many more clean attempts would make it fixed, or why none would
    worst_case: str | None = None  # the verdict had every error/hang in the phase at risk reproduced

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell, "cell_id": self.cell_id, "verdict": self.kind.value, "text": self.text,
            "reference": self.reference, "reproductions": self.reproductions, "judged": self.judged,
            "excluded": self.excluded, "at_risk": self.at_risk, "not_run": self.not_run, "early": self.early,
            "hosts": list(self.hosts), "hosts_reproducing": list(self.hosts_reproducing),
            "compared_hosts": list(self.compared_hosts),
            "rate": interval_json(self.rate), "bound": interval_json(self.bound),
            "against_reference": self.against_reference.to_json() if self.against_reference else None,
            "hosts_differ": self.hosts_differ.to_json() if self.hosts_differ else None,
            "more_needed": self.more_needed, "advice": self.advice, "worst_case": self.worst_case,
            "stopped": list(self.stopped), "approximate": self.approximate, "anytime": self.anytime,
            "look": list(self.look), "splits": [s.to_json() for s in self.splits],
        }


def interval_json(interval: stats.Interval | None) -> dict[str, Any] | None:
    if interval is None:
        return None
    return {"low": interval.low, "high": interval.high, "confidence": interval.confidence,
            "sided": interval.sided, "method": interval.method, "label": interval.label()}
