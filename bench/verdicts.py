"""Do reprofleet's verdicts tell the truth where campaigns go wrong? A bench that can fail.

No fleet: campaigns of the seed playbook's shape (its ten cells, the four Blackwell hosts,
its judging) are drawn by ``reprofleet.campaign.simulate`` from a truth fixed first, and the
real ``judge()`` reads them; a **naive engine** (a cell with zero reproductions is "fixed",
no test at all) reads the same records beside it. Each campaign runs PLANNED attempts per
cell and host: ``invoke plan``'s answer for 90% power on the seed playbook.

The truth does not share the engine's assumptions:

* hosts differ: each host's rate is the reference rate (0.3) times a factor drawn per
  campaign and host from 0.5-1.5; a cell's rate is its ratio times its host's rate;
* the bug is not always a freeze: of its strikes, 25% are watchdog reboots, 10% end as an
  error or hang *in* CUDA-graph capture (caught short), and some scenarios lose strikes
  to ``infra`` (informative exclusions) or catch half of them short;
* the fleet is noisy: 2% infra, 4% errors/hangs before capture, 2% in it, 5% after it.

The nine compared cells are, in every campaign: three truly fixed (rate 0), two at a tenth
of the reference's rate, two at a third, one the same as the reference, one host-specific
(the reference's rate on ws01 and ws02, 0 on ws03 and ws04). Scenarios change what the
campaign does besides (module constant SCENARIOS). A claim is true when:

* fixed: the cell's true rate is 0 (a tenth of the rate is not fixed);
* reproduces less often: its true rate is below the reference's; reproduces: above 0;
* host-specific: every host it names "not on" has a true rate of 0;
* clean so far: its true rate is 0 (it claims nothing, but a reader hopes so).

Goals (PASS/FAIL): false "fixed" <= 5% in every scenario for every truth that is not
fixed; power >= 90% for a fixed cell in the plain scenario; the naive engine fails a goal
the real one meets; false "fixed" <= 5% when a reader looks after every round and stops at
the first "fixed". The code hash is sha256 of the verdicts/ and stats/ modules this bench\nimports (followed through every import, module docstrings aside): see ``code_hash``.

    nice -n 19 .venv/bin/python bench/verdicts.py --results bench/RESULTS.md
    nice -n 19 .venv/bin/python bench/verdicts.py --quick
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.campaign import simulate  # noqa: E402
from reprofleet.model import Playbook, StopKind, StopRule  # noqa: E402
from reprofleet.playbook import load_playbook  # noqa: E402
from reprofleet.verdicts import Verdict, VerdictKind  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = load_playbook(ROOT / "playbooks" / "sm120-hostwedge.yml")
HOSTS = ("ws01", "ws02", "ws03", "ws04")
PLANNED = 60  # per cell and host: where a tenth-rate cell is called fixed <= 5% and a fixed one >= 90% (at 30, `invoke plan`'s 90%-power size under its simpler truth, this truth gives 60% power and 6.7% false "fixed" at a tenth)
BASE = 0.3
TRUTHS = ("fixed", "fixed", "fixed", "a tenth", "a tenth", "a third", "a third", "same", "host-specific")
RATIO = {"fixed": 0.0, "a tenth": 0.1, "a third": 1 / 3, "same": 1.0, "host-specific": 1.0}
NOISE = dict(reboot=0.25, caught_short=0.10, infra=0.02, before=0.04, in_risk=0.02, after=0.05)
GOAL_FALSE_FIXED, GOAL_POWER = 0.05, 0.90
CLAIMS = (VerdictKind.FIXED, VerdictKind.LESS_OFTEN, VerdictKind.REPRODUCES, VerdictKind.HOST_SPECIFIC,
          VerdictKind.CLEAN_SO_FAR)
CODE = ("src/reprofleet/verdicts", "src/reprofleet/stats")


@dataclass(frozen=True)
class World:
    """One campaign's truth: the host factors and every (cell, host) behaviour."""

    factors: tuple[float, ...]
    truth: Mapping[tuple[str, str], simulate.Behaviour]
    kinds: Mapping[str, str]  # compared cell -> its truth ("fixed", "a tenth", ...)

    def rate(self, cell: str, host: str) -> float:
        return self.truth[(cell, host)].rate


@dataclass(frozen=True)
class Scenario:
    name: str
    design: Callable[[Playbook], simulate.Design]
    noise: Mapping[str, float] = field(default_factory=dict)  # replaces NOISE's values
    reference_factor: Mapping[str, float] = field(default_factory=dict)  # host -> the reference copy's rate there, x
    same_as_reference: bool = False  # every compared cell is the reference's twin (the test's size)
    peek: bool = False  # look after every round, stop at the first "fixed"
    host_factor: Mapping[str, float] = field(default_factory=dict)  # host -> every cell's rate there, x (unlike hosts)


def _cells(book: Playbook) -> list[str]:
    return [c.name for c in book.cells if c.name != book.reference_cell.name]


def _unbalanced(book: Playbook) -> simulate.Design:
    """The compared cells run all their attempts on ws01-02, a third of them on ws03, none on ws04."""
    runs = {(c, h): n for c in _cells(book) for h, n in (("ws03", book.attempts // 3), ("ws04", 0))}
    return simulate.Design(book, HOSTS, runs=runs)


def _disjoint(book: Playbook) -> simulate.Design:
    runs = {(c, h): 0 for c in _cells(book) for h in HOSTS[2:]}
    runs.update({(book.reference_cell.name, h): 0 for h in HOSTS[:2]})
    return simulate.Design(book, HOSTS, runs=runs)


def _split(book: Playbook) -> simulate.Design:
    reference = book.reference_cell
    other = {"kind": "docker", "label": "vllm/vllm-openai:v0.25.1", "image_digest": "sha256:0b2d-repulled"}
    return simulate.Design(book, HOSTS, runtimes={(reference.name, h): other for h in HOSTS[2:]})


def _stop(rule: StopRule) -> Callable[[Playbook], simulate.Design]:
    return lambda book: simulate.Design(replace(book, stop=rule), HOSTS)


def _plain(book: Playbook) -> simulate.Design:
    return simulate.Design(book, HOSTS)


SCENARIOS = (
    Scenario("plain (stop rule none: fixed_n)", _plain),
    Scenario("unbalanced coverage (cells: all of ws01-02, a third on ws03, none on ws04)", _unbalanced),
    Scenario("disjoint coverage (cells on ws01-02, the reference on ws03-04)", _disjoint),
    Scenario("reference split by identity (re-pulled image on ws03-04, at half the rate there)", _split,
             reference_factor={"ws03": 0.5, "ws04": 0.5}),
    Scenario("a quarantined host (ws04 after a third of its slots)",
             lambda book: simulate.Design(book, HOSTS, quarantined={"ws04": book.attempts * len(book.cells) // 3})),
    Scenario("informative exclusions (30% of strikes recorded infra)", _plain, noise={"lost": 0.3}),
    Scenario("errors and hangs in capture (half the strikes caught short, 5% others)", _plain,
             noise={"caught_short": 0.5, "in_risk": 0.05}),
    Scenario("missing manifest (no campaign.json; 60% of strikes are reboots)",
             lambda book: simulate.Design(book, HOSTS, manifest=False), noise={"reboot": 0.6}),
    Scenario("resumes (10% of slots interrupted and re-run; ws02's last two rounds never run)",
             lambda book: simulate.Design(book, HOSTS, interrupted=0.1,
                                          quarantined={"ws02": (book.attempts - 2) * len(book.cells)})),
    Scenario("stop rule sprt (p0 0.3, p1 0.03)", _stop(StopRule(StopKind.SPRT, p0=0.3, p1=0.03))),
    Scenario("stop rule first_reproduction", _stop(StopRule(StopKind.FIRST_REPRODUCTION))),
    Scenario("every cell the same as the reference (the test's size)", _plain, same_as_reference=True),
    Scenario("unlike hosts: one host's onset lower (ws01 at 2.5x every rate, capped at 1)", _plain,
             host_factor={"ws01": 2.5}),
    Scenario("unlike hosts: a bug on one host only (ws02-04 at 0.05x every rate)", _plain,
             host_factor={"ws02": 0.05, "ws03": 0.05, "ws04": 0.05}),
    Scenario("look after every round, stop at the first fixed", _plain, peek=True),
)


def world(scenario: Scenario, book: Playbook, rng: random.Random) -> World:
    factors = tuple(rng.uniform(0.5, 1.5) for _ in HOSTS)
    noise = {**NOISE, **scenario.noise}
    truth: dict[tuple[str, str], simulate.Behaviour] = {}
    kinds = {c: ("same" if scenario.same_as_reference else t) for c, t in zip(_cells(book), TRUTHS)}
    for h, host in enumerate(HOSTS):
        rate = min(1.0, BASE * factors[h] * scenario.host_factor.get(host, 1.0))
        truth[(book.reference_cell.name, host)] = simulate.Behaviour(rate * scenario.reference_factor.get(host, 1.0),
                                                                     **noise)
        for cell, kind in kinds.items():
            ratio = 0.0 if kind == "host-specific" and h >= 2 else RATIO[kind]
            truth[(cell, host)] = simulate.Behaviour(ratio * rate, **noise)
    return World(factors, truth, kinds)


def naive(records: Sequence[Mapping[str, Any]], cell: str) -> VerdictKind:
    """No statistics: a cell with no wedge or reboot among its records is "fixed"."""
    mine = [r for r in records if r["cell"] == cell and r["outcome"] != "infra"]
    if not mine:
        return VerdictKind.CANNOT_JUDGE
    return VerdictKind.REPRODUCES if any(r["outcome"] in ("wedge", "reboot") for r in mine) else VerdictKind.FIXED


NOT_ON = re.compile(r"not on ([\w, -]+?) \(")


def claim_true(verdict: Verdict, kind: str, w: World) -> bool | None:
    """Whether a compared cell's claim is true of its truth (None: it claims nothing)."""
    rates = [w.rate(verdict.cell, h) for h in HOSTS]
    if verdict.kind in (VerdictKind.FIXED, VerdictKind.CLEAN_SO_FAR):
        return kind == "fixed"
    if verdict.kind is VerdictKind.LESS_OFTEN:
        return RATIO[kind] < 1.0 or kind == "host-specific"
    if verdict.kind is VerdictKind.REPRODUCES:
        return any(r > 0 for r in rates)
    if verdict.kind is VerdictKind.HOST_SPECIFIC:
        named = NOT_ON.search(verdict.text)
        hosts = [h.strip() for h in named.group(1).split(",")] if named else []
        return bool(hosts) and all(w.rate(verdict.cell, h) == 0 for h in hosts if h in HOSTS)
    return None


@dataclass
class Tallies:
    """Counts of one scenario: (engine, truth) -> called fixed / seen; claims; reports."""

    fixed: Counter[tuple[str, str]] = field(default_factory=Counter)
    seen: Counter[tuple[str, str]] = field(default_factory=Counter)
    claims: Counter[tuple[str, bool]] = field(default_factory=Counter)
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)  # (truth, verdict kind)
    reports: int = 0
    reports_false_fixed: Counter[str] = field(default_factory=Counter)  # engine -> reports with a false "fixed"

    def share(self, engine: str, truth: str) -> tuple[float, int]:
        seen = self.seen[(engine, truth)]
        return (self.fixed[(engine, truth)] / seen if seen else 0.0), seen


def _final(verdicts: Sequence[Verdict], cells: Sequence[str]) -> dict[str, list[Verdict]]:
    out: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        if v.cell in cells:
            out[v.cell].append(v)
    return out


def run_campaign(scenario: Scenario, book: Playbook, seed: int, index: int, tallies: Tallies) -> None:
    rng = random.Random(f"verdicts/{seed}/{scenario.name}/{index}")
    design = scenario.design(book)
    w = world(scenario, design.playbook, rng)
    campaign = simulate.draw(design, w.truth, rng)
    cells = list(w.kinds)
    looks = range(campaign.rounds) if scenario.peek else [None]
    real: dict[str, bool] = {c: False for c in cells}
    naive_fixed: dict[str, bool] = {c: False for c in cells}
    last: dict[str, list[Verdict]] = {}
    for look in looks:
        judged = _final(simulate.judge_campaign(design, campaign, look).verdicts, cells)
        records = [r for r in campaign.records if look is None or int(r["attempt_index"]) <= look]
        for cell in cells:
            real[cell] = real[cell] or any(v.kind is VerdictKind.FIXED for v in judged[cell])
            naive_fixed[cell] = naive_fixed[cell] or naive(records, cell) is VerdictKind.FIXED
        last = judged
    tallies.reports += 1
    false = {"real": False, "naive": False}
    for cell in cells:
        truth = w.kinds[cell]
        for engine, called in (("real", real[cell]), ("naive", naive_fixed[cell])):
            tallies.seen[(engine, truth)] += 1
            tallies.fixed[(engine, truth)] += called
            false[engine] = false[engine] or (called and truth != "fixed")
        for verdict in last[cell]:
            tallies.kinds[(truth, verdict.kind.value)] += 1
            right = claim_true(verdict, truth, w)
            if right is not None and verdict.kind in CLAIMS:
                tallies.claims[(verdict.kind.value, right)] += 1
    for engine, hit in false.items():
        tallies.reports_false_fixed[engine] += hit


def code_hash() -> str:
    """sha256 of the judging code this bench runs, from the files, so it matches a commit.

    The files: every module of ``CODE`` (verdicts/, stats/) that this script's imports reach,
    followed through the whole package (a campaign module that imports a stats module brings
    it in), each without its module docstring. A new stats module no bench path imports (a
    boundary search's model) and the package docstring that lists it leave the hash, and so
    the recorded results, standing; any change to code the bench runs does not."""
    files = sorted(_reached(ROOT / "bench" / "verdicts.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + _without_docstring(path) + b"\0")
    return digest.hexdigest()[:16]


def _reached(start: Path) -> set[Path]:
    """Files under ``CODE`` that importing ``start``'s reprofleet modules loads (packages' __init__ too)."""
    src = ROOT / "src"
    seen: set[Path] = set()
    todo = [start]
    while todo:
        for name in _imported(todo.pop()):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                stem = src.joinpath(*parts[:i])
                for path in (stem / "__init__.py", stem.with_suffix(".py")):
                    if path.is_file() and path not in seen:
                        seen.add(path)
                        todo.append(path)
    return {p for p in seen if any(p.is_relative_to(ROOT / d) for d in CODE)}


def _imported(path: Path) -> set[str]:
    """reprofleet modules ``path`` imports (``from a.b import c`` names a.b and a.b.c: c may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n == "reprofleet" or n.startswith("reprofleet.")}


def _without_docstring(path: Path) -> bytes:
    source = path.read_text()
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        lines = source.splitlines(keepends=True)
        source = "".join(lines[:body[0].lineno - 1] + lines[body[0].end_lineno or body[0].lineno:])
    return source.encode()


def goals(results: Mapping[str, Tallies]) -> list[tuple[str, bool, bool, str]]:
    """(goal, real meets it, naive meets it, the numbers)."""
    out = []
    not_fixed = [t for t in RATIO if t != "fixed"]

    def worst(engine: str, scenarios: Sequence[str]) -> tuple[float, str]:
        rows = [(results[s].share(engine, t)[0], f"{t} in {s}") for s in scenarios for t in not_fixed
                if results[s].seen[(engine, t)]]
        return max(rows) if rows else (0.0, "none")
    fixed_n = [s.name for s in SCENARIOS if not s.peek]
    (r_worst, r_where), (n_worst, n_where) = worst("real", fixed_n), worst("naive", fixed_n)
    out.append((f"false \"fixed\" <= {GOAL_FALSE_FIXED:.0%} in every scenario, every truth not fixed",
                r_worst <= GOAL_FALSE_FIXED, n_worst <= GOAL_FALSE_FIXED,
                f"worst: real {r_worst:.1%} ({r_where}); naive {n_worst:.1%} ({n_where})"))
    plain = results[SCENARIOS[0].name]
    (r_power, r_n), (n_power, _) = plain.share("real", "fixed"), plain.share("naive", "fixed")
    out.append((f"power >= {GOAL_POWER:.0%} for a fixed cell at the planned {PLANNED} attempts per cell and host",
                r_power >= GOAL_POWER, n_power >= GOAL_POWER, f"real {r_power:.1%} of {r_n}; naive {n_power:.1%}"))
    peek = [s.name for s in SCENARIOS if s.peek]
    (r_peek, r_pw), (n_peek, n_pw) = worst("real", peek), worst("naive", peek)
    out.append((f"false \"fixed\" <= {GOAL_FALSE_FIXED:.0%} looking after every round, stopping at the first fixed",
                r_peek <= GOAL_FALSE_FIXED, n_peek <= GOAL_FALSE_FIXED,
                f"worst: real {r_peek:.1%} ({r_pw}); naive {n_peek:.1%} ({n_pw})"))
    naive_fails = any(real and not naive for _, real, naive, _ in out)
    out.append(("the naive engine fails a goal the real one meets", naive_fails, False,
                ", ".join(g for g, real, naive, _ in out if real and not naive) or "none"))
    return out


def report(results: Mapping[str, Tallies], args: argparse.Namespace, seconds: float) -> list[str]:
    mark = {True: "PASS", False: "FAIL"}
    command = "nice -n 19 .venv/bin/python bench/verdicts.py " + " ".join(sys.argv[1:])
    lines = [f"Command: `{command}` (code sha256 {code_hash()} of src/reprofleet/verdicts + stats, "
             f"{args.campaigns} campaigns per scenario ({args.peek_campaigns} for the look-every-round one), "
             f"{args.attempts} attempts per cell and host, seed {args.seed}, one process, {seconds:.0f} s, 2-core VM).",
             "",
             f"The planned size, {PLANNED} attempts per cell and host, in the seed playbook's shape (4 hosts, reference "
             "at 30%, 9 compared cells, fixed_ratio 0.2): at 30, `invoke plan`'s 90%-power answer under its simpler "
             "truth (hosts alike, every attempt judged), this truth gave 60.0% power and 6.7% false \"fixed\" at a "
             "tenth (both goals failed, commit 1fa5b24); at 60 both hold. The truth and the claims are "
             "in the module docstring: hosts differ (x0.5-1.5), strikes are 25% reboots and 10% errors/hangs in "
             "capture, and the fleet is noisy; 3 cells fixed, 2 at a tenth, 2 at a third, 1 the same, 1 host-specific.",
             "", "| goal | real engine | naive engine | numbers |", "| --- | --- | --- | --- |"]
    lines += [f"| {g} | {mark[r]} | {mark[n]} | {why} |" for g, r, n, why in goals(results)]
    truths = list(RATIO)
    lines += ["", "P(called fixed) by scenario and truth, real engine / naive engine (cells judged):", "",
              "| scenario | " + " | ".join(truths) + " | reports with a false \"fixed\" (real / naive) |",
              "| --- |" + " ---: |" * (len(truths) + 1)]
    for s in SCENARIOS:
        t = results[s.name]
        row = []
        for truth in truths:
            (real, n), (nv, _) = t.share("real", truth), t.share("naive", truth)
            row.append(f"{real:.1%} / {nv:.1%} ({n})" if n else "")
        reports = t.reports or 1
        lines.append(f"| {s.name} | " + " | ".join(row) + f" | {t.reports_false_fixed['real'] / reports:.1%} / "
                     f"{t.reports_false_fixed['naive'] / reports:.1%} |")
    size = results[next(s.name for s in SCENARIOS if s.same_as_reference)]
    per_comparison, n = size.share("real", "same")
    lines += ["", f"The test's size, P(fixed | cell = reference): {per_comparison:.1%} per comparison ({n} cells), "
              f"{size.reports_false_fixed['real'] / max(size.reports, 1):.1%} per report of 9 comparisons "
              f"({size.reports} reports); naive {size.share('naive', 'same')[0]:.1%} and "
              f"{size.reports_false_fixed['naive'] / max(size.reports, 1):.1%}.", "",
              "Per-claim precision of the real engine's final verdicts, every scenario but the look-every-round one "
              "(a claim is right when its truth holds, as the docstring says):", "",
              "| claim | made | right | precision |", "| --- | ---: | ---: | ---: |"]
    claims: Counter[tuple[str, bool]] = Counter()
    for s in SCENARIOS:
        if not s.peek:
            claims.update(results[s.name].claims)
    for kind in CLAIMS:
        made = claims[(kind.value, True)] + claims[(kind.value, False)]
        lines.append(f"| {kind.value} | {made} | {claims[(kind.value, True)]} | "
                     + (f"{claims[(kind.value, True)] / made:.1%} |" if made else "- |"))
    kinds = list(VerdictKind)
    lines += ["", "Final verdicts by truth, all scenarios but the look-every-round one (real engine):", "",
              "| truth | " + " | ".join(k.value for k in kinds) + " |", "| --- |" + " ---: |" * len(kinds)]
    total: Counter[tuple[str, str]] = Counter()
    for s in SCENARIOS:
        if not s.peek:
            total.update(results[s.name].kinds)
    for truth in truths:
        lines.append(f"| {truth} | " + " | ".join(str(total[(truth, k.value)] or "") for k in kinds) + " |")
    return lines


def run(args: argparse.Namespace) -> tuple[dict[str, Tallies], float]:
    book = replace(SEED, attempts=args.attempts)
    started = time.time()
    results: dict[str, Tallies] = {}
    with simulate.remembered_statistics():
        for scenario in SCENARIOS:
            tallies = Tallies()
            for index in range(args.peek_campaigns if scenario.peek else args.campaigns):
                run_campaign(scenario, book, args.seed, index, tallies)
            results[scenario.name] = tallies
            print(f"{scenario.name}: {time.time() - started:.0f} s", file=sys.stderr)
    return results, time.time() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaigns", type=int, default=30)
    parser.add_argument("--peek-campaigns", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=PLANNED, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="1 campaign per scenario at 6 attempts: a smoke run")
    parser.add_argument("--results", default=None, help="rewrite this file's <!-- verdicts --> section")
    args = parser.parse_args(argv)
    if args.quick:
        args.campaigns, args.peek_campaigns, args.attempts = 1, 1, 6
    results, seconds = run(args)
    body = report(results, args, seconds)
    if args.results:
        rewrite_section(Path(args.results), "verdicts", "Verdicts against the truth, beside a naive engine "
                        "(bench/verdicts.py)", "\n".join(body))
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
