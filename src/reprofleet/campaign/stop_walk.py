"""How a cell's stop rule ends it on one host, worked out exactly before anything runs.

A stop rule's length is not the SPRT's or the first reproduction's textbook average: the
runner stops a cell as "fixed" only where the anytime-valid comparison with the reference's
own counts *on that host so far* concludes (``stats.stop_rules.decide``, at the strictest Holm
rank), and the reference runs only the playbook's ``attempts``. With the seed playbook's
6-attempt reference, a truly fixed ``stop: sprt`` cell never gets there and runs all 42 of
its slots with no claim. So ``invoke plan`` asks the runner's own question
(``runner.stops.ask``) before every slot, in the host's own slot order
(``playbook.order.plan_order``), over every count the cell and the reference can have
then, each weighted by its binomial probability: an exact expectation, no sampling noise,
and nothing of the rule re-implemented here.

    walk = StopWalk(load_playbook("playbooks/sm120-hostwedge.yml"))
    course = walk.course(book.cells[1], "ws01", rate=0.0, reference_rate=0.3)
    course.attempts, course.no_claim  # 42.0, 1.0 under stop: sprt
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from reprofleet.model import Cell, Playbook
from reprofleet.playbook.order import plan_order
from reprofleet.runner.stops import ask
from reprofleet.stats.stop_rules import StopDecision


@dataclass(frozen=True)
class Course:
    """One cell on one host under a stated truth: what its stop rule makes of it, on average."""

    attempts: float  # expected attempts run (slots the rule did not skip)
    reproductions: float  # expected reproductions: each one a power cycle
    fixed: float  # P(the rule stopped it with the claim "fixed")
    reproduces: float  # P(the rule stopped it with the claim "reproduces")

    @property
    def no_claim(self) -> float:
        """P(it ran to its cap or out of slots with no claim): the verdict is left to the judge."""
        return max(0.0, 1.0 - self.fixed - self.reproduces)

    def to_json(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "reproductions": self.reproductions, "fixed": self.fixed,
                "reproduces": self.reproduces, "no_claim": self.no_claim}


def mean_course(courses: Sequence[Course]) -> Course:
    """The average over hosts (each host has its own slot order, so its own course)."""
    return Course(*(statistics.fmean(getattr(c, name) for c in courses)
                    for name in ("attempts", "reproductions", "fixed", "reproduces")))


@dataclass
class StopWalk:
    """The exact walk for one playbook; the rule's answers are remembered across cells, hosts
    and truths, since they depend on the counts alone (and the rule)."""

    playbook: Playbook
    _answers: dict[tuple[Any, ...], StopDecision | None] = field(default_factory=dict)

    def course(self, cell: Cell, host: str, rate: float, reference_rate: float) -> Course:
        """``cell`` on ``host`` when its attempts reproduce at ``rate`` and the reference's at
        ``reference_rate``: the reference's slots and the cell's, in the host's plan order, with
        the rule asked before each of the cell's slots (as ``HostStops.check`` is)."""
        book = self.playbook
        index, reference = book.cells.index(cell), book.cells.index(book.reference_cell)
        order = [(c, a) for c, a in plan_order(book, host) if c in (index, reference)]
        if index == reference:  # the reference never stops early
            slots = sum(1 for c, _ in order if c == index)
            return Course(float(slots), rate * slots, 0.0, 0.0)
        alive: dict[tuple[int, int], float] = {(0, 0): 1.0}  # (cell's reproductions, reference's) -> P
        judged_reference, attempts, reproductions, fixed, reproduces = 0, 0.0, 0.0, 0.0, 0.0
        for c, a in order:
            if c == reference:
                alive = _step(alive, reference_rate, second=True)
                judged_reference += 1
                continue
            running: dict[tuple[int, int], float] = {}
            for (k, r), p in alive.items():
                decision = self._ask(cell, (k, a), (r, judged_reference))
                if decision is None:
                    running[(k, r)] = p
                elif decision.verdict == "fixed":
                    fixed += p
                elif decision.verdict == "reproduces":
                    reproduces += p
            share = sum(running.values())
            attempts, reproductions = attempts + share, reproductions + share * rate
            alive = _step(running, rate, second=False)
        return Course(attempts, reproductions, fixed, reproduces)

    def _ask(self, cell: Cell, counts: tuple[int, int], reference: tuple[int, int]) -> StopDecision | None:
        key = (self.playbook.stop_rule(cell), counts, reference)
        if key not in self._answers:
            self._answers[key] = ask(self.playbook, cell, counts, reference)
        return self._answers[key]


def _step(alive: dict[tuple[int, int], float], rate: float, second: bool) -> dict[tuple[int, int], float]:
    """One more attempt of the cell (``second`` False) or of the reference: a reproduction at
    ``rate``; branches of probability 0 are never made, so a fixed cell's walk stays small."""
    after: dict[tuple[int, int], float] = {}
    for (k, r), p in alive.items():
        if rate < 1.0:
            after[(k, r)] = after.get((k, r), 0.0) + p * (1.0 - rate)
        if rate > 0.0:
            hit = (k, r + 1) if second else (k + 1, r)
            after[hit] = after.get(hit, 0.0) + p * rate
    return after
