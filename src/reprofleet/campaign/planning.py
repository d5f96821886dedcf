"""``invoke plan`` below the command line: which estimate the flags ask for, worked out.

Three answers: the clean attempts that rule out a rate and what an SPRT saves (``--baseline``,
``estimate.py``); a campaign's length, power cycles and what its verdicts can show (``--hosts``
and ``--playbook``, ``estimate.py``); a search's or bisection's cost against stated true curves
(a playbook with ``search:`` or ``bisect:``, ``search_estimate.py``).

The numbers arrive as typed on the command line and are read here, in the order the task
always read them: a playbook named is read first, so a command with a broken playbook and a
bad number reports the playbook, as it always did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from reprofleet.campaign import estimate, search_estimate
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.errors import UsageError
from reprofleet.inventory import load_inventory
from reprofleet.model import Playbook
from reprofleet.playbook import load_playbook


@dataclass(frozen=True)
class PlanRequest:
    """``invoke plan``'s flags as typed (None: not given)."""

    config: ControllerConfig  # dwell_s and power_cycle_budget, for a campaign's length
    baseline: str | None = None
    confidence: str = "0.95"
    fixed_rate: str | None = None
    alpha: str = "0.05"
    beta: str = "0.2"
    inventory: str | None = None
    playbook: str | None = None
    attempt_s: str | None = None
    campaigns: str | None = None
    ratio: str | None = None
    truths: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanAnswer:
    """The plan as ``--json`` prints it, and as words."""

    document: Mapping[str, Any]
    text: str


def plan(request: PlanRequest, say: Callable[[str], None]) -> PlanAnswer:
    """The estimate the request asks for; ``say``: a line shown before a slow simulation starts."""
    if request.playbook:  # a search's or bisection's plan is a simulation of its own (search_estimate.py)
        book = load_playbook(request.playbook)
        if book.ladder is not None:
            return _search_plan(book, request, say)
        if request.truths:
            raise UsageError(f"--truth is for a playbook with search: or bisect:, and {request.playbook} has neither")
    rate, level = _number("baseline", request.baseline), _number("confidence", request.confidence)
    assert level is not None
    try:
        if request.inventory or request.playbook:
            return _campaign_plan(request, rate)
        if rate is None:
            raise UsageError("give --baseline RATE, or --hosts and --playbook")
        baseline = estimate.baseline_plan(rate, level, _number("fixed-rate", request.fixed_rate),
                                          _number("alpha", request.alpha) or 0.0, _number("beta", request.beta) or 0.0)
        return PlanAnswer(baseline.to_json(), estimate.describe_baseline(baseline))
    except ValueError as exc:  # a rate or level out of its range, in the estimate's own words
        raise UsageError(str(exc)) from None


def _campaign_plan(request: PlanRequest, rate: float | None) -> PlanAnswer:
    if not (request.inventory and request.playbook):
        raise UsageError("--hosts and --playbook go together")
    runs = _number("campaigns", request.campaigns)
    if runs is not None and (runs != int(runs) or runs < 2):
        raise UsageError(f"--campaigns takes a whole number of at least 2 campaigns, not {request.campaigns!r}")
    ratios = tuple(_number("ratio", r.strip()) or 0.0 for r in request.ratio.split(",")) if request.ratio \
        else estimate.DEFAULT_RATIOS
    if not all(0.0 < r < 1.0 for r in ratios):
        raise UsageError(f"--ratio takes rate ratios (cell / reference) between 0 and 1, not {request.ratio!r}")
    book, names = load_playbook(request.playbook), load_inventory(request.inventory).names
    baseline = rate or estimate.DEFAULT_BASELINE
    length = estimate.campaign_estimate(book, names, baseline, request.config.dwell_s,
                                        _number("attempt-s", request.attempt_s), request.config.power_cycle_budget)
    verdicts = estimate.verdict_plan(book, names, baseline,
                                     estimate.DEFAULT_CAMPAIGNS if runs is None else int(runs), ratios)
    return PlanAnswer(estimate.campaign_plan_json(length, verdicts),
                      estimate.describe_campaign(length) + "\n" + estimate.describe_verdicts(verdicts))


def _search_plan(book: Playbook, request: PlanRequest, say: Callable[[str], None]) -> PlanAnswer:
    assert book.ladder is not None
    try:
        runs = int(request.campaigns) if request.campaigns else search_estimate.DEFAULT_RUNS
    except ValueError:
        raise UsageError(f"--campaigns takes a whole number of simulated runs, not {request.campaigns!r}") from None
    try:
        stated = [search_estimate.parse_truth(t, book.ladder) for t in request.truths] \
            or [search_estimate.default_truth(book.ladder)]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    names = list(load_inventory(request.inventory).names) if request.inventory else []
    if not request.truths:
        say(f"no --truth given: simulating the default curve ({stated[0].words})")
    found = search_estimate.search_estimate(book, stated, runs, book.seed or 0, names)
    return PlanAnswer(search_estimate.search_estimate_json(found), search_estimate.describe_search_estimate(found))


def _number(flag: str, value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        raise UsageError(f"--{flag} takes a number, not {value!r}") from None
