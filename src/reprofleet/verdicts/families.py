"""The Holm families of one report: every cell's raw p-values, adjusted together.

"fixed" for one cell of ten is a claim about ten comparisons, so each question (rarer than
the reference; rate ratio below ``fixed_ratio``) is one family across the report's
compared cells, Holm-adjusted (Holm 1979, "A simple sequentially rejective multiple test
procedure", Scand. J. Statist. 6:65-70). Holm holds under any dependence (every cell
shares the reference) and for anytime-valid p-values at any look. The advice and the
worst case ask the same families "what if this cell's p-values were these": the rank a
cell reaches is part of the rule they invert.

``invoke compare`` judges each of its sides as a report, but "fixed on one host of eight"
is a claim about all eight: the raw p-values of the other sides join each family
(:class:`Beside`), so Holm runs over sides x cells, with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from reprofleet.stats.intervals import holm

LEVEL = 0.95
ALPHA = 1.0 - LEVEL


@dataclass(frozen=True)
class Beside:
    """Raw p-values of one report's families, by question, or of the comparisons judged beside it.

    ``below`` and ``fixed``: one per compared cell; ``host_pairs``: every "is X rarer than R"
    pair of the host claims; ``hosts_differ``: every reproducing cell's omnibus test.
    """

    below: tuple[float, ...] = ()
    fixed: tuple[float, ...] = ()
    host_pairs: tuple[float, ...] = ()
    hosts_differ: tuple[float, ...] = ()

    def plus(self, other: Beside) -> Beside:
        return Beside(self.below + other.below, self.fixed + other.fixed, self.host_pairs + other.host_pairs,
                      self.hosts_differ + other.hosts_differ)


@dataclass(frozen=True)
class Families:
    """Raw one-sided p-values per compared cell: ``below`` (rarer at all) and ``fixed`` (ratio below the
    threshold); ``beside``: the same questions' p-values from comparisons judged beside this report."""

    below: Mapping[str, float]
    fixed: Mapping[str, float]
    beside: Beside = field(default_factory=Beside)

    def adjusted(self, cell: str, p_below: float | None = None, p_fixed: float | None = None) -> tuple[float, float]:
        """The cell's Holm-adjusted (below, fixed) p-values, with its raw ones replaced when given."""
        return (_adjust(self.below, cell, p_below, self.beside.below),
                _adjust(self.fixed, cell, p_fixed, self.beside.fixed))

    def concludes_fixed(self, cell: str, p_below: float, p_fixed: float) -> bool:
        below, fixed = self.adjusted(cell, p_below, p_fixed)
        return below < ALPHA and fixed < ALPHA

    def fixed_passes(self, cell: str, p_fixed: float) -> bool:
        """The effect-size question alone at the rank this p-value would reach."""
        return _adjust(self.fixed, cell, p_fixed, self.beside.fixed) < ALPHA


def _adjust(family: Mapping[str, float], cell: str, replaced: float | None, beside: tuple[float, ...]) -> float:
    values = dict(family)
    if replaced is not None:
        values[cell] = replaced
    if cell not in values:
        return 1.0
    keys = list(values)
    return holm([values[k] for k in keys] + list(beside))[keys.index(cell)]
