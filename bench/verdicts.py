"""Do reprofleet's verdicts tell the truth? Simulated campaigns with known rates, judged by the real code.

No fleet: each campaign's TRUE reproduction rates are drawn first, then attempt records are
drawn from them, and the real record -> verdict path (``Pool`` -> ``judge``) reads them.

One attempt of cell c on host h (true rate r[h][c], pre-risk failure share e[c]):

1. ``infra`` with probability 3% (last phase anywhere): excluded;
2. else an ``error`` or ``hang`` before cuda_graph_capture with probability e[c] (0-6% for a
   working cell, 60-90% for a broken one): excluded;
3. else the start reached the phase at risk and reproduces with probability r[h][c]: a
   ``wedge``, or in 25% of reproductions a ``reboot`` (the watchdog reset a host the bug
   locked: the bug itself, so it is a reproduction, Judging's default, and part of r);
4. else a non-reproduction: ``clean`` at ready, or in 10% an ``error``/``hang`` after capture began.

So r is exactly P(reproduction | judged attempt), the rate a verdict is about. Scenarios per
cell: the reference runs at 0.2-0.6 on every host (in 5% of campaigns it is truly 0: the bug
is not there); other cells are "same as reference", "half the reference", "fixed" (0),
"host-specific" (the reference's rate on a non-empty proper subset of hosts, 0 elsewhere),
or "broken" (60-90% pre-risk errors; underlying rate the reference's or 0, at even odds).

TRUTH, fixed before any verdict is read: a cell's true rate is > 0 when r > 0 on some host;
it is truly broken when its expected excluded share, 3% + 97% x e, exceeds max_excluded_share.
A verdict AGREES when its claim is true:

- "reproduces": true rate > 0;
- "host-specific": every host it names clean has r = 0 (the ones it names reproducing did reproduce);
- "fixed": true rate 0 (strict, what a reader takes "fixed" to mean; the looser "below the
  reference on every host" is reported beside it);
- "clean so far": true rate 0; it agrees, and is also counted as "inconclusive, not wrong";
- "no difference shown": the reference's true rate is 0;
- "cannot judge": the cell is truly broken.

SPRT: sequences under p0 and under p1 run through ``stopping.decide`` up to
``stopping.max_attempts``; after the last slot the counts get one final look.

    .venv/bin/python bench/verdicts.py --campaigns 1000 --jobs 2 --results bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import hashlib
import io
import multiprocessing
import pstats
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.stats import stop_rules as stopping
from reprofleet.model import Judging, Phase, PHASE_ORDER, StopKind, StopRule  # noqa: E402
from reprofleet.records.pooling import CampaignInfo, Pool  # noqa: E402
from reprofleet.stats.intervals import clean_attempts_to_rule_out  # noqa: E402
from reprofleet.verdicts import Verdict, VerdictKind, judge  # noqa: E402

JUDGING = Judging(at_risk_phase=Phase.CUDA_GRAPH_CAPTURE)
REFERENCE = "default"
INFRA = 0.03
WORKING_PRE_RISK = (0.0, 0.06)
BROKEN_PRE_RISK = (0.6, 0.9)
POST_RISK_FAILURE = 0.10
REBOOT_SHARE = 0.25
REFERENCE_RATE = (0.2, 0.6)
DORMANT = 0.05
SCENARIOS = ("same as reference", "half the reference", "fixed", "host-specific", "broken")
SCENARIO_WEIGHTS = (0.25, 0.20, 0.25, 0.15, 0.15)
BEFORE_RISK = PHASE_ORDER[:PHASE_ORDER.index(Phase.CUDA_GRAPH_CAPTURE.value)]
SPRT_DESIGNS = ((0.3, 0.03), (0.5, 0.05), (0.2, 0.02))
GOAL_AGREE, GOAL_FALSE_FIXED, GOAL_SPRT_SHARE = 0.95, 0.05, 0.60
ALPHA = 0.05  # the SPRT designs' alpha
KINDS = tuple(VerdictKind)
JUDGED_CODE = ("verdicts", "stats", "model", "records/pooling.py", "records/identity.py")
PROFILED = 5  # campaigns profiled for the time shares


@dataclass(frozen=True)
class CellTruth:
    name: str
    scenario: str
    rates: tuple[float, ...]  # per host, in host order
    pre_risk: float

    @property
    def reproduces(self) -> bool:
        return any(r > 0 for r in self.rates)

    @property
    def broken(self) -> bool:
        return bool(INFRA + (1 - INFRA) * self.pre_risk > JUDGING.max_excluded_share)


@dataclass(frozen=True)
class Campaign:
    index: int
    name: str
    hosts: tuple[str, ...]
    attempts: int  # per host and cell
    cells: tuple[CellTruth, ...]  # the reference first

    @property
    def reference(self) -> CellTruth:
        return self.cells[0]


@dataclass(frozen=True)
class CellResult:
    """One verdict next to the truth it is checked against."""

    campaign: int
    scenario: str
    truth: str  # the truth class (a confusion-table row)
    verdict: str
    agrees: bool
    loose_agrees: bool  # "fixed" read as "below the reference on every host"
    reproducing_candidate: bool  # a working non-reference cell whose true rate is > 0
    detail: str


def truth_class(cell: CellTruth, reference: CellTruth) -> str:
    if cell.broken:
        return "broken (excluded share truly > 20%)"
    if all(r > 0 for r in cell.rates):
        return "reproduces on every host"
    if cell.reproduces:
        return "reproduces on some hosts only"
    return "rate 0, reference reproduces" if reference.reproduces else "rate 0, reference 0 too"


def draw_campaign(seed: int, index: int) -> tuple[Campaign, random.Random]:
    rng = random.Random(f"verdicts/{seed}/{index}")
    hosts = tuple(f"ws{i + 1:02d}" for i in range(rng.randint(2, 4)))
    base = 0.0 if rng.random() < DORMANT else rng.uniform(*REFERENCE_RATE)
    cells = [CellTruth(REFERENCE, "reference" if base else "reference, truly 0", (base,) * len(hosts),
                       rng.uniform(*WORKING_PRE_RISK))]
    for i in range(rng.randint(6, 10)):
        scenario = rng.choices(SCENARIOS, SCENARIO_WEIGHTS)[0]
        cells.append(_cell(rng, f"cell{i + 1:02d}", scenario if base else f"{scenario} (reference 0)", base, len(hosts)))
    return Campaign(index, f"sim{index:05d}", hosts, rng.randint(8, 12), tuple(cells)), rng


def _cell(rng: random.Random, name: str, scenario: str, base: float, hosts: int) -> CellTruth:
    pre_risk = rng.uniform(*WORKING_PRE_RISK)
    if scenario.startswith("same"):
        rates = (base,) * hosts
    elif scenario.startswith("half"):
        rates = (base / 2,) * hosts
    elif scenario.startswith("host-specific"):
        on = set(rng.sample(range(hosts), rng.randint(1, hosts - 1)))
        rates = tuple(base if h in on else 0.0 for h in range(hosts))
    elif scenario.startswith("broken"):
        rates, pre_risk = (rng.choice((base, 0.0)),) * hosts, rng.uniform(*BROKEN_PRE_RISK)
    else:
        rates = (0.0,) * hosts
    return CellTruth(name, scenario, rates, pre_risk)


def _attempt(rng: random.Random, rate: float, pre_risk: float) -> tuple[str, str | None]:
    """(outcome, last_phase) of one attempt, by the model in the module docstring."""
    if rng.random() < INFRA:
        return "infra", rng.choice((None,) + PHASE_ORDER)
    if rng.random() < pre_risk:
        return rng.choice(("error", "hang")), rng.choice(BEFORE_RISK)
    if rng.random() < rate:
        return ("reboot" if rng.random() < REBOOT_SHARE else "wedge"), Phase.CUDA_GRAPH_CAPTURE.value
    if rng.random() < POST_RISK_FAILURE:
        return rng.choice(("error", "hang")), rng.choice((Phase.CUDA_GRAPH_CAPTURE.value, Phase.READY.value))
    return "clean", Phase.READY.value


def draw_records(campaign: Campaign, rng: random.Random) -> list[dict[str, Any]]:
    """Every attempt, host by host and cell by cell (order: blocks); a reproduction means a fresh boot."""
    records: list[dict[str, Any]] = []
    for h, host in enumerate(campaign.hosts):
        in_boot = 0
        for cell in campaign.cells:
            for j in range(campaign.attempts):
                outcome, phase = _attempt(rng, cell.rates[h], cell.pre_risk)
                in_boot += 1
                records.append({
                    "schema": 1, "campaign": campaign.name, "attempt": f"{campaign.name}-{host}-{cell.name}-{j}",
                    "host": host, "cell": cell.name, "factors": {"cell": cell.name},
                    "runtime": {"kind": "docker", "label": "vllm/vllm-openai:v0.25.1"}, "outcome": outcome,
                    "last_phase": phase, "attempt_in_boot": in_boot, "cold_boot": in_boot == 1,
                    "started": f"2026-11-30T{h:02d}:{len(records) // 60 % 60:02d}:{len(records) % 60:02d}Z"})
                if outcome in ("wedge", "reboot"):
                    in_boot = 0
    return records


def check(verdict: Verdict, cell: CellTruth, campaign: Campaign) -> tuple[bool, bool]:
    """(agrees, agrees when "fixed" only claims "below the reference on every host")."""
    ref = campaign.reference
    kind = verdict.kind
    if kind is VerdictKind.REPRODUCES:
        return cell.reproduces, cell.reproduces
    if kind is VerdictKind.HOST_SPECIFIC:
        rate = dict(zip(campaign.hosts, cell.rates))
        clean = [h for h in verdict.hosts if h not in verdict.hosts_reproducing]
        ok = all(rate[h] == 0 for h in clean) and all(rate[h] > 0 for h in verdict.hosts_reproducing)
        return ok, ok
    if kind is VerdictKind.FIXED:
        return not cell.reproduces, all(c < r for c, r in zip(cell.rates, ref.rates))
    if kind is VerdictKind.CLEAN_SO_FAR:
        return not cell.reproduces, not cell.reproduces
    if kind is VerdictKind.NO_DIFFERENCE:
        return not ref.reproduces, not ref.reproduces
    return cell.broken, cell.broken


def judge_campaign(seed: int, index: int) -> list[CellResult]:
    """One campaign: truth, records, the real verdicts, and each verdict checked."""
    campaign, rng = draw_campaign(seed, index)
    records = draw_records(campaign, rng)
    info = CampaignInfo(campaign.name, JUDGING, REFERENCE, tuple(c.name for c in campaign.cells))
    judgement = judge(Pool(tuple(records), {campaign.name: info}))
    by_name = {v.cell: v for v in judgement.verdicts}
    out = []
    for cell in campaign.cells:
        verdict = by_name[cell.name]
        agrees, loose = check(verdict, cell, campaign)
        rates = "/".join(f"{r:.2f}" for r in cell.rates)
        detail = (f"{campaign.name} (seed {seed}) {cell.name} [{cell.scenario}; true rates {rates}, reference "
                  f"{campaign.reference.rates[0]:.2f}, pre-risk {cell.pre_risk:.0%}]: {verdict.text}")
        candidate = cell is not campaign.reference and cell.reproduces and not cell.broken
        out.append(CellResult(index, cell.scenario, truth_class(cell, campaign.reference), verdict.kind.value,
                              agrees, loose, candidate, detail))
    return out


def _judge_one(job: tuple[int, int]) -> list[CellResult]:
    return judge_campaign(*job)


def run_campaigns(seed: int, campaigns: int, jobs: int) -> list[CellResult]:
    work = [(seed, i) for i in range(campaigns)]
    if jobs <= 1:
        return [r for job in work for r in _judge_one(job)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return [r for batch in pool.imap(_judge_one, work, chunksize=8) for r in batch]


@dataclass(frozen=True)
class Summary:
    verdicts: int
    agree: float
    loose_agree: float
    false_fixed: int
    reproducing: int
    inconclusive_not_wrong: float
    inconclusive_wrong: float

    @property
    def false_fixed_share(self) -> float:
        return self.false_fixed / self.reproducing if self.reproducing else 0.0

    @property
    def goals(self) -> tuple[bool, bool]:
        return self.agree >= GOAL_AGREE, self.false_fixed_share <= GOAL_FALSE_FIXED


def summarize(results: Sequence[CellResult]) -> Summary:
    n = len(results) or 1
    clean = [r for r in results if r.verdict == VerdictKind.CLEAN_SO_FAR.value]
    return Summary(len(results), sum(r.agrees for r in results) / n, sum(r.loose_agrees for r in results) / n,
                   sum(r.reproducing_candidate and r.verdict == VerdictKind.FIXED.value for r in results),
                   sum(r.reproducing_candidate for r in results),
                   sum(r.agrees for r in clean) / n, sum(not r.agrees for r in clean) / n)


def confusion(results: Iterable[CellResult], row: str) -> list[str]:
    """A markdown table: truth (``row``: "truth" or "scenario") x verdict, with each row's agreement."""
    counts: Counter[tuple[str, str]] = Counter()
    agree: Counter[str] = Counter()
    rows: list[str] = []
    for r in results:
        key = getattr(r, row)
        rows += [key] if key not in rows else []
        counts[(key, r.verdict)] += 1
        agree[key] += r.agrees
    lines = [f"| {row} \\ verdict | " + " | ".join(k.value for k in KINDS) + " | n | agree |",
             "| --- |" + " ---: |" * (len(KINDS) + 2)]
    for key in sorted(rows):
        total = sum(counts[(key, k.value)] for k in KINDS)
        lines.append(f"| {key} | " + " | ".join(str(counts[(key, k.value)] or "") for k in KINDS)
                     + f" | {total} | {agree[key] / total:.1%} |")
    return lines


def wrong_examples(results: Sequence[CellResult], per_kind: int = 2) -> list[str]:
    """Each kind of wrong verdict (truth x verdict), its count and a few examples."""
    wrong = Counter((r.truth, r.scenario, r.verdict) for r in results if not r.agrees)
    lines = []
    for (truth, scenario, verdict), n in wrong.most_common():
        lines.append(f"- {n}x \"{verdict}\" on {scenario} ({truth}), e.g.:")
        examples = [r for r in results if not r.agrees and (r.truth, r.scenario, r.verdict) == (truth, scenario, verdict)]
        lines += [f"  - {r.detail}" for r in examples[:per_kind]]
    return lines


@dataclass(frozen=True)
class SprtRow:
    p0: float
    p1: float
    fixed_n: int
    cap: int
    exact_p0: float  # Sprt.exact_expected_attempts: what the simulated means should match
    exact_p1: float
    exact_false_fixed: float  # the same walk's probability of each claim, no sampling error
    exact_false_reproduces: float
    mean_p0: float
    mean_p1: float
    false_fixed: float  # declared fixed although the rate is p0
    false_reproduces: float  # declared reproduces although the rate is p1
    undecided_p0: float
    undecided_p1: float

    @property
    def share(self) -> float:
        """Mean attempts as a share of fixed-n, over a campaign whose cells are half still
        broken (p0) and half fixed (p1): what a matrix of candidate fixes costs."""
        return (self.mean_p0 + self.mean_p1) / 2 / self.fixed_n

    @property
    def floor_p1(self) -> int:
        """The fewest attempts ANY test with this alpha needs to call a clean cell fixed:
        clean runs in a row that rule out p0 at 1 - alpha (at p1 no design can beat it)."""
        return int(clean_attempts_to_rule_out(self.p0, 1.0 - ALPHA) or 0)

    @property
    def goal(self) -> bool:
        return self.share <= GOAL_SPRT_SHARE


def run_sequence(rule: StopRule, rate: float, cap: int, rng: random.Random) -> tuple[int, str | None]:
    """(attempts run, verdict) of one cell on one host under ``rule`` at true ``rate``."""
    k = n = 0
    while n < cap:
        decision = stopping.decide(rule, (k, n), (0, 0), cap)
        if decision is not None:
            return n, decision.verdict
        k, n = k + (rng.random() < rate), n + 1
    decision = stopping.decide(rule, (k, n), (0, 0), cap)  # the final look at the cap
    return n, decision.verdict if decision else None


def exact_claim(test: Any, p: float, cap: int, claim: str) -> float:
    """P(the test ends with ``claim``) at true rate ``p``: the count distribution walked
    attempt by attempt up to the cap (as ``Sprt.exact_expected_attempts`` does)."""
    alive, ended = {0: 1.0}, 0.0
    for n in range(1, cap + 1):
        step: dict[int, float] = {}
        for k, q in alive.items():
            step[k + 1] = step.get(k + 1, 0.0) + q * p
            step[k] = step.get(k, 0.0) + q * (1.0 - p)
        alive = {k: q for k, q in step.items() if test.decide(k, n) is None}
        ended += sum(q for k, q in step.items() if test.decide(k, n) == claim)
    return ended


def _memoize_fixed_n() -> None:
    """``stopping.decide`` recomputes the fixed-n design (a binomial search, ~9 ms) on every
    call; it is a pure function, so the bench remembers it rather than spend minutes on it."""
    if not hasattr(stopping.fixed_n, "cache_info"):
        stopping.fixed_n = functools.lru_cache(maxsize=64)(stopping.fixed_n)


def simulate_sprt(p0: float, p1: float, runs: int, seed: int, alpha: float = 0.05, beta: float = 0.2) -> SprtRow:
    _memoize_fixed_n()
    rule = StopRule(StopKind.SPRT, p0=p0, p1=p1, alpha=alpha, beta=beta)
    cap = stopping.max_attempts(rule, 0)
    test = stopping.sprt_of(rule)
    rng = random.Random(f"sprt/{seed}/{p0}/{p1}")
    under = {p: [run_sequence(rule, p, cap, rng) for _ in range(runs)] for p in (p0, p1)}
    def share(p: float, verdict: str | None) -> float:
        return sum(v == verdict for _, v in under[p]) / runs
    return SprtRow(p0, p1, stopping.fixed_n(p0, p1, alpha, beta), cap,
                   test.exact_expected_attempts(p0, cap), test.exact_expected_attempts(p1, cap),
                   exact_claim(test, p0, cap, "fixed"), exact_claim(test, p1, cap, "reproduces"),
                   sum(n for n, _ in under[p0]) / runs, sum(n for n, _ in under[p1]) / runs,
                   share(p0, "fixed"), share(p1, "reproduces"), share(p0, None), share(p1, None))


def sprt_table(rows: Sequence[SprtRow]) -> list[str]:
    lines = ["| p0 -> p1 | fixed-n | cap | mean attempts at p0 (exact) | at p1 (exact) | floor at p1 (any test) | "
             "mean over p0 and p1 | false \"fixed\" at p0 | false \"reproduces\" at p1 | no claim at cap (p0 / p1) | "
             "<= 60% of fixed-n |",
             "| --- |" + " ---: |" * 9 + " --- |"]
    for r in rows:
        lines.append(f"| {r.p0:g} -> {r.p1:g} | {r.fixed_n} | {r.cap} | {r.mean_p0:.1f} = {r.mean_p0 / r.fixed_n:.0%} "
                     f"({r.exact_p0:.1f}) | {r.mean_p1:.1f} = {r.mean_p1 / r.fixed_n:.0%} ({r.exact_p1:.1f}) | "
                     f"{r.floor_p1} = {r.floor_p1 / r.fixed_n:.0%} | {r.share:.0%} | "
                     f"{r.false_fixed:.1%} ({r.exact_false_fixed:.2%}) | {r.false_reproduces:.1%} "
                     f"({r.exact_false_reproduces:.2%}) | "
                     f"{r.undecided_p0:.1%} / {r.undecided_p1:.1%} | {'met' if r.goal else 'NOT MET'} |")
    return lines


HOT_SPOTS = (("boschloo", "stats.boschloo (scipy's boschloo_exact)"), ("hosts_disagree", "stats.hosts_disagree"),
             ("holm", "stats.holm"), ("<built-in method gc.collect>", "gc.collect() that statsmodels' Holm runs"),
             ("stratified", "stats.stratified"), ("draw_records", "drawing the records"))


def profiled(seed: int, campaigns: int) -> pstats.Stats:
    """cProfile of ``campaigns`` campaigns in this process: where the time goes (after one
    unprofiled campaign, so that lazy imports are not counted)."""
    judge_campaign(seed, campaigns)
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [judge_campaign(seed, i) for i in range(campaigns)])
    return pstats.Stats(profiler, stream=io.StringIO())


def time_shares(stats: pstats.Stats) -> list[str]:
    """Each hot spot's cumulative share of the profiled time (they nest, so shares overlap)."""
    cumulative: Counter[str] = Counter()
    for (_, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[name] += row[3]
    total = stats.total_tt  # type: ignore[attr-defined]
    return [f"{label} {cumulative[name] / total:.0%}" for name, label in HOT_SPOTS]


def code_state() -> str:
    """The commit, and a hash of the code that judged: other work may be uncommitted in the tree."""
    root = Path(__file__).resolve().parent.parent
    src = root / "src" / "reprofleet"
    files = sorted(f for name in JUDGED_CODE for f in ([src / name] if name.endswith(".py") else (src / name).glob("*.py")))
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files if f.exists())).hexdigest()[:12]
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], capture_output=True, text=True, cwd=root).stdout.rstrip()
    dirty = [line[3:] for line in git("status", "--porcelain", "--", *(str(f.relative_to(root)) for f in files)).splitlines()]
    note = f"; not committed there: {', '.join(dirty)}" if dirty else ""
    return f"commit {git('rev-parse', '--short', 'HEAD') or 'unknown'}, judging code sha256 {digest}{note}"


def report(args: argparse.Namespace, results: Sequence[CellResult], sprt: Sequence[SprtRow], seconds: float,
           shares: Sequence[str]) -> list[str]:
    s = summarize(results)
    agree_goal, fixed_goal = s.goals
    met = {True: "met", False: "NOT MET"}
    lines = [
        f"Command: `.venv/bin/python bench/verdicts.py {' '.join(sys.argv[1:])}` ({code_state()}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, {args.campaigns} campaigns, {s.verdicts} verdicts, "
        f"2-core VM). No fleet: outcomes drawn from known rates, judged by the real `judge()`.",
        "",
        f"Time: judging took {seconds:.0f} s with {args.jobs} processes, {seconds * args.jobs / max(args.campaigns, 1):.2f} s "
        f"per campaign per process. Where it goes (cProfile of {PROFILED} campaigns, cumulative, nested): {', '.join(shares)}.",
        "",
        "Model and truth (the module docstring has the full text): 2-4 hosts, 8-12 attempts per host and cell, "
        "reference rate 0.2-0.6 (truly 0 in 5% of campaigns), 6-10 other cells: same as the reference, half of it, "
        "fixed (0), host-specific, broken (60-90% errors before capture). Every cell: 3% infra, 0-6% errors/hangs "
        "before capture (excluded), 10% of non-reproductions an error/hang after capture (judged), 25% of "
        "reproductions a reboot (a reproduction). A verdict agrees when its claim is true: reproduces <-> true rate "
        "> 0; host-specific <-> every host named clean has rate 0; fixed <-> true rate 0; clean so far <-> true "
        "rate 0 (inconclusive, not wrong); no difference shown <-> the reference's true rate is 0; cannot judge "
        "<-> expected excluded share > 20%.",
        "",
        "| measure | value | goal |",
        "| --- | ---: | --- |",
        f"| verdicts that agree with the truth | {s.agree:.1%} | >= 95%: {met[agree_goal]} |",
        f"| ... reading \"fixed\" as \"below the reference on every host\" | {s.loose_agree:.1%} | |",
        f"| false \"fixed\" among working non-reference cells that truly reproduce | {s.false_fixed}/{s.reproducing} = "
        f"{s.false_fixed_share:.1%} | <= 5%: {met[fixed_goal]} |",
        f"| \"clean so far\" on a truly clean cell (inconclusive, not wrong) | {s.inconclusive_not_wrong:.1%} | |",
        f"| \"clean so far\" on a cell that truly reproduces (inconclusive, wrong) | {s.inconclusive_wrong:.1%} | |",
        "",
        *confusion(results, "truth"), "", *confusion(results, "scenario"), "",
        f"SPRT at alpha 0.05, beta 0.2: {args.sprt_runs} simulated sequences per rate, each through "
        "`stopping.decide` until a claim or `stopping.max_attempts` (with a last look at the cap); in brackets "
        "the exact value from walking the count distribution (`Sprt.exact_expected_attempts`, and the same walk "
        "for the claims). Goal: mean attempts <= 60% of the fixed-n design at the same error rates, over a "
        "matrix whose cells are half still broken (p0) and half fixed (p1). At p1 alone the SPRT uses 65-70%: no "
        "test can go below the floor column there (a clean cell is called fixed only after the clean runs that "
        "rule out p0 at 1 - alpha), which is already 62-64% of fixed-n at beta = 0.2. The error rates should stay "
        "near alpha (false \"fixed\") and beta (false \"reproduces\"); Wald's boundaries are approximations, "
        "so the exact false \"fixed\" can exceed alpha by a fraction of a point.", "", *sprt_table(sprt),
    ]
    wrong = wrong_examples(results)
    return lines + (["", "Wrong verdicts, by kind (count, then examples):", "", *wrong] if wrong else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaigns", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sprt-runs", type=int, default=2000)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="profile N campaigns, print, and exit")
    parser.add_argument("--results", default=None, help="rewrite this file's <!-- verdicts --> section")
    args = parser.parse_args()
    if args.profile:
        stats = profiled(args.seed, args.profile)
        stats.stream = sys.stdout  # type: ignore[attr-defined]
        stats.sort_stats("cumulative").print_stats(20)
        print("\n".join(time_shares(stats)))
        return 0
    started = time.time()
    results = run_campaigns(args.seed, args.campaigns, args.jobs)
    judged_s = time.time() - started
    sprt = [simulate_sprt(p0, p1, args.sprt_runs, args.seed) for p0, p1 in SPRT_DESIGNS]
    shares = time_shares(profiled(args.seed, PROFILED))
    body = report(args, results, sprt, judged_s, shares)
    if args.results:
        rewrite_section(Path(args.results), "verdicts", "Verdicts against the truth (bench/verdicts.py)", "\n".join(body))
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
