"""report.html of a 1000-attempt campaign full of wedges: its bytes and the time to write it.

A report carries one figure per wedge; a campaign that wedges hundreds of times would make a
page nobody can open. report/freeze.py draws figures round-robin over (cell, host) pairs until
a byte budget is spent, the rest as text. This measures the page it writes for a synthetic
campaign (tests/support/synthetic_campaign.py: 5 hosts x 3 cells x 67 attempts, about 60% of
the default cell wedging) and, beside it, the naive page that draws every wedge's figure.

    python3 bench/report_size.py [--attempts 67] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from reprofleet.records.pooling import load_pool  # noqa: E402
from reprofleet.report import freeze, render_html  # noqa: E402
from reprofleet.verdicts import judge  # noqa: E402
from tests.support.synthetic_campaign import Spec, build, write  # noqa: E402

LIMIT_BYTES = 5 * 2**20


def measure(folder: Path, budget: int) -> dict[str, Any]:
    """One page: bytes, figures drawn, wedges, CPU seconds to render."""
    pool = load_pool([folder])
    wedges = sum(r["outcome"] == "wedge" for r in pool.records)
    default = freeze.draw_within_budget.__defaults__
    freeze.draw_within_budget.__defaults__ = (budget,)  # the budget report/html.py's call leaves to its default
    try:
        started = time.process_time()
        page = render_html(judge(pool), pool, "bench")
        cpu_s = time.process_time() - started
    finally:
        freeze.draw_within_budget.__defaults__ = default
    return {"records": len(pool.records), "wedges": wedges, "bytes": len(page.encode()),
            "figures": page.count("<svg"), "cpu_s": round(cpu_s, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=67, help="attempts per host and cell")
    parser.add_argument("--results", help="rewrite this RESULTS.md's report-size section")
    args = parser.parse_args()
    spec = Spec(hosts={f"ws{i}": "ctl-a" for i in range(1, 6)}, attempts=args.attempts, seconds=60.0,
                wedge_rate={"default": 0.6, "lgc-2800": 0.05, "pl-350": 0.4})
    folder = write(Path(tempfile.mkdtemp(prefix="rf-bench-report-")) / "big", build(spec))
    rows = {"ours": measure(folder, freeze.FIGURE_BUDGET_BYTES), "naive (every figure)": measure(folder, 10**12)}
    print(json.dumps(rows, indent=2))
    if args.results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import rewrite_section

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        table = ["| page | records | wedges | figures drawn | bytes | under 5 MiB | render CPU-s |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
        table += [f"| {name} | {r['records']} | {r['wedges']} | {r['figures']} | {r['bytes']:,} | "
                  f"{'yes' if r['bytes'] <= LIMIT_BYTES else 'no'} | {r['cpu_s']} |" for name, r in rows.items()]
        text = (f"Command: `python3 bench/report_size.py --attempts {args.attempts} --results bench/RESULTS.md` "
                f"(commit {commit}) on this 2-core VM.\n\nA synthetic campaign (tests/support/synthetic_campaign.py: "
                f"5 hosts x 3 cells x {args.attempts} attempts, the default cell wedging about 60%); report.html as "
                "`invoke report` writes it (figures round-robin over cell x host until "
                f"{freeze.FIGURE_BUDGET_BYTES:,} bytes of figures, the rest of the wedges as text), and the naive "
                "page that draws every wedge's figure. The unit test keeps the mechanism at a small scale "
                "(tests/unit/test_report_html.py); the 5 MiB goal is held here.\n\n" + "\n".join(table))
        rewrite_section(Path(args.results), "report-size", "report.html of a 1000-attempt campaign (bench/report_size.py)",
                        text)
    return 0 if rows["ours"]["bytes"] <= LIMIT_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
