"""Unlike hosts (issue 33): does any answer claim a level clean, or a version good, on a host where it is not?

Four hosts ws01-ws04 with no ``groups:``; ours (``per_host``) beside the naive engine (the
same model pooling every host, ``per_host=False``), driven by ``campaign.search_sim``'s event
loop on the same drawn truths. Scenarios:

* search, ``onset lower``: 12 levels, onset o uniform 4..8, ws01's onset o - 2; curves as
  bench/search.py (slope 0.15-0.6, false wedges 0.5-1% per host).
* search, ``one host only``: ws01 has that curve, the others reproduce only at their floor.
* bisect, ``one host only``: 16 versions, first good k uniform 1..15, bad versions 0.2-0.6 on
  ws01 only; ws02-ws04 never reproduce.

A claim is **wrong** when an answer that is done names a host on which it is false: a
search's clean level has true P > epsilon on a host it covers; a bisection's first good is
not the true first good of a host it covers (a host with no change point has none). The goal
is wrong claims <= 5% of answers in every scenario.

    nice -n 19 .venv/bin/python bench/search_unlike.py --runs 40
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import replace
from functools import partial

from reprofleet.campaign.search_sim import _drive
from reprofleet.stats.boundary import next_search_level, search_results
from reprofleet.stats.changepoint import bisect_result, next_bisect_version
from reprofleet.stats.search_contract import BisectSpec, SearchSpec

HOSTS = ("ws01", "ws02", "ws03", "ws04")
LEVELS, VERSIONS = 12, 16
SEARCH = SearchSpec(levels=LEVELS, budget_attempts=1500)
BISECT = BisectSpec(versions=VERSIONS, budget_attempts=1500)


def _curve(onset: int, slope: float, floor: float) -> tuple[float, ...]:
    return tuple(floor + (1 - floor) * (0.0 if c <= onset else min(0.95, 1 - math.exp(-slope * (c - onset))))
                 for c in range(LEVELS))


def search_truth(scenario: str, rng: random.Random) -> dict[str, tuple[float, ...]]:
    onset = rng.randint(4, 8)
    curves = {}
    for host in HOSTS:
        slope, floor = rng.uniform(0.15, 0.6), rng.uniform(0.005, 0.01)
        if scenario == "onset lower":
            curves[host] = _curve(onset - 2 if host == "ws01" else onset, slope, floor)
        else:
            curves[host] = _curve(onset if host == "ws01" else LEVELS, slope, floor)
    return curves


def search_run(scenario: str, run: int, per_host: bool) -> tuple[int, int, int]:
    """(answers done, wrong ones, attempts) of one search."""
    rng = random.Random(f"unlike:{scenario}:{run}")
    truth = search_truth(scenario, rng)
    spec = replace(SEARCH, seed=run, per_host=per_host)
    probes, _ = _drive(HOSTS, len(HOSTS), partial(next_search_level, spec), lambda h, lv: truth[h][lv],
                       lambda wedge: spec.wedge_cost_s if wedge else spec.clean_cost_s, rng)
    answers = wrong = 0
    for result in search_results(spec, probes):
        if not result.done or result.boundary is None:
            continue
        answers += 1
        wrong += any(truth[h][result.boundary] > spec.epsilon for h in result.hosts)
    return answers, wrong, len(probes)


def bisect_run(run: int, per_host: bool) -> tuple[int, int, int]:
    rng = random.Random(f"unlike:bisect:{run}")
    first_good = rng.randint(1, VERSIONS - 1)
    rates = [rng.uniform(0.2, 0.6) if v < first_good else 0.0 for v in range(VERSIONS)]
    spec = replace(BISECT, seed=run, per_host=per_host)
    probes, _ = _drive(HOSTS, len(HOSTS), partial(next_bisect_version, spec),
                       lambda h, v: rates[v] if h == "ws01" else 0.0, lambda wedge: 1.0, rng)
    answers = wrong = 0
    top = bisect_result(spec, probes)
    for result in (top, *top.strata):
        if not result.done or result.first_good is None or not result.endpoints_ok:
            continue
        answers += 1
        wrong += any(h != "ws01" or result.first_good != first_good for h in result.hosts or HOSTS)
    return answers, wrong, len(probes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    print("| scenario / engine | runs | answers done | wrong claims | share wrong | mean attempts |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    jobs = [("search, onset lower", partial(search_run, "onset lower")),
            ("search, one host only", partial(search_run, "one host only")),
            ("bisect, one host only", bisect_run)]
    for name, job in jobs:
        for per_host, engine in ((False, "naive (pooled)"), (True, "ours (per host)")):
            rows = [job(run, per_host) for run in range(args.runs)]
            answers, wrong = sum(r[0] for r in rows), sum(r[1] for r in rows)
            share = wrong / answers if answers else 0.0
            print(f"| {name} / {engine} | {args.runs} | {answers} | {wrong} | {share:.1%} | "
                  f"{sum(r[2] for r in rows) / len(rows):.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
