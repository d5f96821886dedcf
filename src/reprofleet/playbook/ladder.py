"""The one seam between a search's records and its model: records -> Probes -> the model's answer.

The runner (which level a host runs next), the report (the boundary, the posterior per
level) and ``invoke plan`` all reach the models through :class:`Ladder`, whose real
implementations import ``stats.boundary`` and ``stats.changepoint`` only when asked, so a
test can put a scripted ladder in their place. Records become :class:`Probe` values here,
through the campaign's own :class:`Judging` (outcome roles and the phase gate): a
reproduction counts, a clean attempt that got through the phase at risk counts, anything
else that ran (infra, an error before the risky phase, an excluded attempt) is UNUSABLE,
and a slot that runs again (interrupted, not run) is no probe at all.

A spec is also written to ``campaign.json`` (:func:`ladder_json`) so that a report needs
only the campaign folder to compute the same result the runner did.
"""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence

from reprofleet.model import BisectBlock, Host, Judging, Outcome, Role, SearchBlock
from reprofleet.model.phases import PhasePosition, position
from reprofleet.model.shutdown import orderly_shutdown
from reprofleet.stats.search_contract import (BisectResult, BisectSpec, Probe, ProbeOutcome, SearchResult,
                                              SearchSpec)

LadderResult = tuple[SearchResult, ...] | BisectResult


class Ladder(Protocol):
    """What the runner and the report ask of a search's or bisection's model."""

    def next(self, host: str, probes: Sequence[Probe], running: Mapping[str, int]) -> int | None:
        """The level ``host`` runs next given every probe so far and the level each other
        host runs now; None: nothing for this host (done, or waiting for others' results)."""

    def results(self, probes: Sequence[Probe]) -> LadderResult:
        """The answer so far: one SearchResult per host group, or the BisectResult."""


def _model(name: str) -> Any:
    """``stats.boundary`` / ``stats.changepoint``, imported when first asked (issue 23's models)."""
    return importlib.import_module(f"reprofleet.stats.{name}")


class SearchLadder:
    """The boundary model (``stats.boundary``), imported when first asked."""

    def __init__(self, spec: SearchSpec) -> None:
        self.spec = spec

    def next(self, host: str, probes: Sequence[Probe], running: Mapping[str, int]) -> int | None:
        boundary = _model("boundary")
        return boundary.next_search_level(self.spec, list(probes), host, dict(running))

    def results(self, probes: Sequence[Probe]) -> LadderResult:
        return tuple(_model("boundary").search_results(self.spec, list(probes)))


class BisectLadder:
    """The change-point model (``stats.changepoint``), imported when first asked."""

    def __init__(self, spec: BisectSpec) -> None:
        self.spec = spec

    def next(self, host: str, probes: Sequence[Probe], running: Mapping[str, int]) -> int | None:
        changepoint = _model("changepoint")
        return changepoint.next_bisect_version(self.spec, list(probes), host, dict(running))

    def results(self, probes: Sequence[Probe]) -> LadderResult:
        return _model("changepoint").bisect_result(self.spec, list(probes))


@dataclass(frozen=True)
class LadderPlan:
    """A campaign's ladder as the manifest keeps it: which cells, in which order, and the spec."""

    kind: str  # "search" | "bisect"
    factor: str
    cells: tuple[str, ...]  # index = the model's level
    labels: tuple[str, ...]
    spec: SearchSpec | BisectSpec

    def level_of(self, cell: str) -> int | None:
        return self.cells.index(cell) if cell in self.cells else None

    def ladder(self) -> Ladder:
        return SearchLadder(self.spec) if isinstance(self.spec, SearchSpec) else BisectLadder(self.spec)


def host_groups(block: SearchBlock | BisectBlock, hosts: Iterable[Host | str]) -> tuple[tuple[str, str], ...]:
    """(host, stratum): the first ``groups:`` entry whose pattern is one of the host's inventory
    groups or globs its name; a host none matches is in ``all`` (and is left out of the pairs)."""
    pairs = []
    for host in hosts:
        name = host.name if isinstance(host, Host) else host
        groups = host.groups if isinstance(host, Host) else ()
        stratum = next((s for p, s in block.groups if p in groups or fnmatch.fnmatchcase(name, p)), None)
        if stratum is not None:
            pairs.append((name, stratum))
    return tuple(pairs)


def ladder_plan(block: SearchBlock | BisectBlock, hosts: Iterable[Host | str], seed: int | None = None) -> LadderPlan:
    if isinstance(block, SearchBlock):
        spec: SearchSpec | BisectSpec = SearchSpec(
            levels=len(block.cells), epsilon=block.epsilon, delta=block.delta, epsilon_high=block.epsilon_high,
            budget_attempts=block.budget_attempts, budget_power_cycles=block.budget_power_cycles,
            clean_cost_s=block.clean_cost_s, wedge_cost_s=block.wedge_cost_s, groups=host_groups(block, hosts),
            seed=seed or 0)
        return LadderPlan("search", block.factor, block.cells, tuple(block.label(i) for i in range(len(block.cells))), spec)
    spec = BisectSpec(versions=len(block.cells), bad_first=block.bad_first, posterior=block.posterior,
                      epsilon=block.epsilon, delta=block.delta, budget_attempts=block.budget_attempts,
                      budget_power_cycles=block.budget_power_cycles, clean_cost_s=block.clean_cost_s,
                      wedge_cost_s=block.wedge_cost_s, speculate=block.speculate,
                      min_bad_rate=block.min_bad_rate, seed=seed or 0, groups=host_groups(block, hosts))
    return LadderPlan("bisect", block.factor, block.cells, block.versions, spec)


def ladder_json(plan: LadderPlan) -> dict[str, Any]:
    return {"kind": plan.kind, "factor": plan.factor, "cells": list(plan.cells), "labels": list(plan.labels),
            "spec": asdict(plan.spec)}


def ladder_from_json(data: Mapping[str, Any]) -> LadderPlan:
    spec_fields = dict(data["spec"])
    if data["kind"] == "search":
        spec_fields["groups"] = tuple(tuple(pair) for pair in spec_fields.get("groups") or ())
        spec: SearchSpec | BisectSpec = SearchSpec(**spec_fields)
    else:
        spec_fields["groups"] = tuple(tuple(pair) for pair in spec_fields.get("groups") or ())
        spec = BisectSpec(**spec_fields)
    return LadderPlan(str(data["kind"]), str(data["factor"]), tuple(data["cells"]), tuple(data["labels"]), spec)


_OUTCOMES = {Role.REPRODUCTION: ProbeOutcome.REPRODUCED, Role.NON_REPRODUCTION: ProbeOutcome.CLEAN}


def _lost_at_risk(record: Mapping[str, Any], judging: Judging, phases: list[str] | None) -> bool:
    """An infra attempt (the host lost, the controller cut off) whose last phase was the phase at risk."""
    if str(record.get("outcome")) != Outcome.INFRA.value or judging.at_risk_phase is None:
        return False
    last = record.get("last_phase")
    return position(str(last) if last else None, phases, judging.at_risk_phase) is PhasePosition.IN


def probe_of(record: Mapping[str, Any], plan: LadderPlan, judging: Judging) -> Probe | None:
    """One record as a probe; None for a slot that runs again or a cell not on the ladder.

    What might be a reproduction counts as one, in the worst case (issue 33 item 2): an error
    or hang in the phase at risk (``Role.FAILED_AT_RISK``) and an attempt lost with the host
    inside it are REPRODUCED probes marked ``worst_case``, so no level is called clean and no
    version good that would not be with every one of them a reproduction (60 of 132 attempts
    hung in capture at a level the search called clean). They may make a boundary lower or a
    change point later than the bug's own; never the other way round."""
    level = plan.level_of(str(record.get("cell")))
    if level is None:
        return None
    raw = record.get("phases")
    phases = [str(p) for p in raw] if isinstance(raw, list) else None
    role = judging.role(str(record.get("outcome")), record.get("last_phase"), phases,
                        str(record.get("reason") or "") or None,
                        orderly=orderly_shutdown(record.get("forensics")))  # an orderly reboot is no reproduction
    if role is Role.NOT_RUN:
        return None
    cycled = str(record.get("outcome")) == Outcome.WEDGE.value  # a wedge is recovered by a power cycle
    host = str(record.get("host"))
    if role is Role.FAILED_AT_RISK or (role is Role.EXCLUDED and _lost_at_risk(record, judging, phases)):
        return Probe(level=level, host=host, outcome=ProbeOutcome.REPRODUCED, power_cycled=cycled, worst_case=True)
    outcome = _OUTCOMES.get(role, ProbeOutcome.UNUSABLE)  # infra before the phase at risk, excluded: neither
    return Probe(level=level, host=host, outcome=outcome, power_cycled=cycled)


def probes_of(records: Iterable[Mapping[str, Any]], plan: LadderPlan, judging: Judging) -> list[Probe]:
    """Records in the order given (attempts.jsonl's: the order they were declared) as probes."""
    return [p for p in (probe_of(r, plan, judging) for r in records) if p is not None]


def result_json(result: LadderResult) -> Any:
    """A result as the ``search_done`` event and ``report --json`` carry it (the contract's fields)."""
    if isinstance(result, tuple):
        return [asdict(group) for group in result]
    return asdict(result)
