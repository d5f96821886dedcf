"""A playbook's ``search:`` or ``bisect:`` block, validated: the ordered factor and its cells.

Each level of a search (each version of a bisection) is an ordinary cell of the playbook,
named from the factor and the value (``search-graphics_clocks-2800``, ``bisect-vllm-0.26.0``)
so its records, identity, outcome roles and phase gate are those of any matrix cell. These
blocks only say which cells form the ladder, in which order, and what answer is sought; the
models that read the evidence (``stats.boundary``, ``stats.changepoint``) see them through
``playbook.ladder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SearchBlock:
    """``search:``: one ordered factor, its levels and the target.

    ``cells``: the level cells' names, safest level first (index 0 of the model's levels);
    ``values``: the level values in that same order. ``groups``: (host pattern or inventory
    group, stratum) pairs in the order written; a host none matches is in stratum ``all``."""

    factor: str  # graphics_clocks | power_limit | args.NAME | env.NAME | vars.NAME
    values: tuple[Any, ...]
    cells: tuple[str, ...]
    riskier: str = "higher"  # "higher" | "lower"
    floor: int | None = None  # graphics_clocks: the minimum of the -lgc pair
    epsilon: float = 0.05
    delta: float = 0.05
    epsilon_high: float = 0.5
    budget_attempts: int | None = None
    budget_power_cycles: int | None = None
    clean_cost_s: float = 120.0
    wedge_cost_s: float = 900.0
    groups: tuple[tuple[str, str], ...] = ()

    @property
    def unit(self) -> str:
        return {"graphics_clocks": " MHz", "power_limit": " W"}.get(self.factor, "")

    def label(self, level: int) -> str:
        """A level as a person reads it: ``2800 MHz``, ``spec_tokens=8``."""
        value = self.values[level]
        if self.unit:
            return f"{value:g}{self.unit}" if isinstance(value, float) else f"{value}{self.unit}"
        return f"{self.factor.split('.', 1)[-1]}={value}"


@dataclass(frozen=True)
class BisectBlock:
    """``bisect:``: ordered runtimes, oldest first, with the known bad end.

    ``cells`` and ``versions`` are in the written order (oldest first: index 0 of the model)."""

    factor: str  # vars.NAME | runtime.image | runtime.vllm
    versions: tuple[str, ...]
    cells: tuple[str, ...]
    bad_first: bool = True  # known: {bad: first}: the oldest is bad, the search is for the first fixed one
    posterior: float = 0.95
    epsilon: float = 0.05
    delta: float = 0.05
    budget_attempts: int | None = None
    budget_power_cycles: int | None = None
    speculate: float = 0.5  # a parallel host's probe must add this share of a fresh attempt's information, or it waits
    clean_cost_s: float = 120.0
    wedge_cost_s: float = 900.0
    min_bad_rate: float = 0.2  # the lowest rate at which a bad version is assumed to reproduce (bisect.min_rate)
    groups: tuple[tuple[str, str], ...] = ()  # as SearchBlock's: each stratum its own bisection (issue 33)

    def label(self, version: int) -> str:
        return str(self.versions[version])
