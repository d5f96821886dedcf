"""``invoke plan`` for a search or bisection: the attempts and power cycles to reach the target.

A search's length is not arithmetic on the playbook (which level runs next depends on what
wedged), so it is simulated against a true curve the user states: ``--truth`` gives
P(reproduction) at each level, as an onset curve (``onset=2700,slope=0.25,floor=0.01``: the
floor below the onset, then rising by ``slope`` per level from the onset on) or as the
probabilities themselves (``p=0/0/0.02/0.3/0.6``); a bisection's truth is the version the
change lands on and the two rates (``change=0.26.0,bad=0.4,good=0``). Without ``--truth`` a
stated default is used. The simulation (``campaign.search_sim``: ours beside a full grid at
the same guarantee and a fixed-run rule) is imported when asked, the seam a test replaces.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from reprofleet.model import BisectBlock, Playbook, SearchBlock
from reprofleet.playbook.ladder import ladder_plan

DEFAULT_RUNS = 200  # simulated searches per truth
DEFAULT_SLOPE = 0.25
DEFAULT_FLOOR = 0.01  # a false wedge now and then (a flaky PSU, a cosmic ray): never exactly 0
DEFAULT_BAD = 0.4  # the seed's rate at default clocks, roughly: "in fewer than 6 tries"


@dataclass(frozen=True)
class Truth:
    """A true curve: P(reproduction) per level, safest (or oldest) first, and how it was said."""

    p: tuple[float, ...]
    words: str


@dataclass(frozen=True)
class SearchEstimate:
    kind: str  # "search" | "bisect"
    truths: tuple[Truth, ...]
    plans: tuple[Any, ...]  # campaign.search_sim's SearchPlan / BisectPlan, one per truth
    runs: int
    hosts: int | None


def parse_truth(text: str, block: SearchBlock | BisectBlock) -> Truth:
    """One ``--truth`` (see the module's docstring); ValueError names what is wrong."""
    fields = _fields(text)
    if isinstance(block, BisectBlock):
        return _bisect_truth(fields, block, text)
    if "p" in fields:
        p = tuple(_rate(v, "p") for v in fields["p"].split("/"))
        if len(p) != len(block.values):
            raise ValueError(f"--truth p= gives {len(p)} rates for {len(block.values)} levels")
        return Truth(p, f"P per level {', '.join(f'{x:g}' for x in p)}")
    unknown = set(fields) - {"onset", "slope", "floor"}
    if unknown:
        raise ValueError(f"--truth for a search takes onset=, slope=, floor= or p=, not {', '.join(sorted(unknown))}")
    onset = float(fields["onset"]) if "onset" in fields else float(block.values[len(block.values) // 2])
    slope = _rate(fields.get("slope", str(DEFAULT_SLOPE)), "slope")
    floor = _rate(fields.get("floor", str(DEFAULT_FLOOR)), "floor")
    risky = [(v >= onset) if block.riskier == "higher" else (v <= onset) for v in block.values]
    rates: list[float] = []
    step = 0
    for is_risky in risky:
        step = step + 1 if is_risky else 0
        rates.append(min(1.0, floor + slope * step) if is_risky else floor)
    unit = block.unit.strip() or ""
    return Truth(tuple(rates), f"onset {onset:g}{(' ' + unit) if unit else ''}, +{slope:g} per level from it, "
                           f"false-wedge floor {floor:g}")


def _bisect_truth(fields: Mapping[str, str], block: BisectBlock, text: str) -> Truth:
    unknown = set(fields) - {"change", "bad", "good"}
    if unknown:
        raise ValueError(f"--truth for a bisection takes change=, bad=, good=, not {', '.join(sorted(unknown))}")
    change = fields.get("change", block.versions[len(block.versions) // 2])
    if change not in block.versions or change == (block.versions[0] if block.bad_first else block.versions[-1]):
        raise ValueError(f"--truth change= names the first version on the good side, one of "
                         f"{', '.join(block.versions[1:] if block.bad_first else block.versions[:-1])}; got {change!r}")
    bad, good = _rate(fields.get("bad", str(DEFAULT_BAD)), "bad"), _rate(fields.get("good", "0"), "good")
    at = block.versions.index(change)
    p = tuple((bad if i < at else good) if block.bad_first else (good if i < at else bad)
              for i in range(len(block.versions)))
    side = "good from" if block.bad_first else "bad from"
    return Truth(p, f"{side} {change}: P {bad:g} on the bad side, {good:g} on the good side")


def _fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--truth takes NAME=VALUE pairs separated by commas, got {text!r}")
        fields[key.strip()] = value.strip()
    return fields


def _rate(value: str, name: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        raise ValueError(f"--truth {name}= takes a rate, not {value!r}") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"--truth {name}= takes a rate in [0, 1], not {value!r}")
    return rate


def default_truth(block: SearchBlock | BisectBlock) -> Truth:
    return parse_truth("bad=0.4" if isinstance(block, BisectBlock) else f"onset={block.values[len(block.values) // 2]}",
                       block)


Simulate = Callable[..., Any]


def search_estimate(book: Playbook, truths: Sequence[Truth], runs: int = DEFAULT_RUNS, seed: int = 0,
                    hosts: Sequence[str] = (), simulate: Simulate | None = None) -> SearchEstimate:
    """Simulated searches against each truth: ``campaign.search_sim.plan_search(spec, truths, runs, seed,
    hosts_parallel)`` once per truth, or ``plan_bisect(spec, truth, hosts, runs, seed)``."""
    block = book.ladder
    if block is None:
        raise ValueError(f"{book.path} has no search: or bisect: block")
    spec = ladder_plan(block, hosts, book.seed).spec
    plans = []
    for truth in truths:
        if isinstance(block, SearchBlock):
            run = simulate or _model("plan_search")
            curves = {host: truth.p for host in hosts} or {SIMULATED_HOST: truth.p}  # every host on the stated curve
            plans.append(run(spec, curves, runs, seed, hosts_parallel=len(hosts) or None))
        else:
            run = simulate or _model("plan_bisect")
            plans.append(run(spec, truth.p, max(1, len(hosts)), runs, seed))
    kind = "search" if isinstance(block, SearchBlock) else "bisect"
    return SearchEstimate(kind, tuple(truths), tuple(plans), runs, len(hosts) or None)


SIMULATED_HOST = "host"  # the one host a plan without --hosts simulates


def _model(name: str) -> Simulate:
    search_sim = importlib.import_module("reprofleet.campaign.search_sim")  # lands with issue 23's models
    return getattr(search_sim, name)


def describe_search_estimate(estimate: SearchEstimate) -> str:
    """One table per truth: each design the simulation compared, side by side."""
    hosts = f"{estimate.hosts} hosts in parallel" if estimate.hosts else "one host"
    lines = [f"{estimate.kind}: {estimate.runs} simulated runs per truth, {hosts}"]
    for truth, plan in zip(estimate.truths, estimate.plans):
        lines.append(f"truth: {truth.words}")
        lines += [f"  {line}" for line in _plan_lines(plan)]
    return "\n".join(lines)


FIGURES = ("mean_attempts", "p90_attempts", "mean_power_cycles", "p90_power_cycles", "share_meets", "share_within_one")


def _designs(plan: Any) -> list[tuple[str, Any]]:
    """(what the row is, its MethodFigures): ours, then the baselines the plan carries."""
    rows = [("ours (monotone model, value of information)", plan.ours)]
    if getattr(plan, "grid", None) is not None:
        rows.append(("full grid (each level to its own bound)", plan.grid))
    rows.append((f"fixed-run rule ({plan.fixed_n} runs a point, any wedge is bad)", plan.fixed))
    return rows


def _plan_lines(plan: Any) -> list[str]:
    if not hasattr(plan, "ours"):  # a simulation a test put in its place
        return [str(plan)]
    bisect = not hasattr(plan, "grid")
    meets, within = ("finds the true change", "first good off by <= 1") if bisect else \
        ("answer truly meets target", "within one level of best")
    head = f"{'design':<52} {'attempts mean / p90':>20} {'power cycles mean / p90':>24} {meets:>26} {within:>24}"
    lines = [head]
    for name, row in _designs(plan):
        lines.append(f"{name:<52} {row.mean_attempts:>11.0f} / {row.p90_attempts:<6.0f} "
                     f"{row.mean_power_cycles:>14.1f} / {row.p90_power_cycles:<6.0f} "
                     f"{row.share_meets:>26.1%} {row.share_within_one:>24.1%}")
    if bisect and not plan.fixed_reaches:
        lines.append("the fixed-run rule reaches our share of true answers at no N tried: its best is shown")
    return lines


def search_estimate_json(estimate: SearchEstimate) -> dict[str, Any]:
    """``invoke plan --json`` of a search or bisection (docs/schema/plan.schema.json)."""
    return {"mode": estimate.kind, "runs": estimate.runs, "hosts": estimate.hosts,
            "truths": [{"p": list(truth.p), "words": truth.words,
                        "designs": [{"design": row.method, **{k: getattr(row, k) for k in FIGURES}}
                                    for _name, row in _designs(plan)] if hasattr(plan, "ours") else []}
                       for truth, plan in zip(estimate.truths, estimate.plans)]}
