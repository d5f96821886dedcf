"""CPU cost of newline-less plain-text netconsole datagrams: the receiver's partial line.

A host (or anything that can send UDP to the receiver's port from a host's address) sends
datagrams of plain text with no newline in them, then one newline. The receiver keeps the
text after the last newline as the partial line; issue 20 found it rebuilt (copied and split
again) on every datagram, so N datagrams cost O(N^2) bytes of work, all of it inside the
receiver's lock. This feeds the datagrams straight to ``Reassembler.feed`` (the code that runs
under that lock, without sockets: what is measured is the work, not the loopback), counts
the process's CPU time, and records what was filed: how many lines and how long the longest.
The per-datagram cost at several N shows the shape (flat: linear; growing: quadratic).

    python bench/netconsole_partial.py --label after --results bench/RESULTS.md

``--label`` names the run in bench/netconsole-results.json (``before`` was run on the commit
before the fix, with that tree's ``src`` first on PYTHONPATH); ``--results`` rewrites the
RESULTS.md section from every run kept there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import rewrite_section  # noqa: E402

from reprofleet.remote import netconsole  # noqa: E402

KEPT = Path(__file__).resolve().parent / "netconsole-results.json"


def run(datagrams: int, size: int, lifted: bool) -> dict[str, Any]:
    """``datagrams`` newline-less datagrams of ``size`` bytes, then a newline: CPU and what was filed.
    ``lifted``: with the line cap out of the way (1 GiB), to show the cost is linear by itself."""
    if lifted:
        from reprofleet.remote.netconsole_lines import WireCaps  # only after the fix
        reassembler = netconsole.Reassembler(WireCaps(line_bytes=1 << 30))
    else:
        reassembler = netconsole.Reassembler()
    piece = b"A" * size
    started = time.process_time()
    filed = [line for i in range(datagrams) for line in reassembler.feed(piece, float(i))]
    filed += reassembler.feed(b"\n", float(datagrams))
    cpu = time.process_time() - started
    return {"datagrams": datagrams, "size": size, "cpu_s": round(cpu, 3),
            "per_datagram_us": round(cpu / datagrams * 1e6, 1), "lines_filed": len(filed),
            "longest_line": max((len(line.line) for line in filed), default=0)}


def code_commit() -> str:
    """The commit of the tree whose reprofleet was imported (with ``+dirty`` for local changes)."""
    where = Path(netconsole.__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                           capture_output=True, text=True, check=False).stdout.strip()
    return head + ("+dirty" if dirty else "")


def section(kept: dict[str, Any]) -> str:
    lines = ["Command: `PYTHONPATH=<tree>/src nice -n 19 python bench/netconsole_partial.py --label <label> "
             "--results bench/RESULTS.md` (1500 is the issue's count; 375, 750 and 1500 datagrams of 65000 "
             "bytes by default), once on the commit before the fix (`before`), once after (`after`) and once "
             "after with `--cap-lifted` (`after, cap lifted`: the line cap at 1 GiB, so the whole 97.5 MB "
             "line is kept and filed). 2-core VM shared with other work: CPU time of the process, not wall "
             "time.", "",
             "| run | code commit | date | datagrams x bytes | CPU s | us per datagram | lines filed | longest line (chars) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for label in kept:  # in the order they were first run
        run_ = kept[label]
        for row in run_["rows"]:
            lines.append(f"| {label} | {run_['commit']} | {run_['date']} | {row['datagrams']} x {row['size']} | "
                         f"{row['cpu_s']} | {row['per_datagram_us']} | {row['lines_filed']} | {row['longest_line']} |")
    lines += ["", "Before, the per-datagram cost grows with N (the partial is copied and split again on "
              "every datagram: quadratic) and the one line filed holds every byte sent. After, it is flat "
              "(only the new datagram is searched for a newline; the partial is appended to, never rebuilt) "
              "and the line is cut at the receiver's 4 KiB line cap with the number of bytes cut at its end; "
              "with the cap lifted it is still flat, so the linearity is the code's, not the cap's."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="this run's name in bench/netconsole-results.json")
    parser.add_argument("--datagrams", default="375,750,1500", help="comma-separated counts")
    parser.add_argument("--size", type=int, default=65000, help="bytes per datagram (a UDP datagram holds 65507)")
    parser.add_argument("--cap-lifted", action="store_true", help="line cap at 1 GiB (the fixed code only)")
    parser.add_argument("--results", type=Path, help="rewrite this RESULTS.md's netconsole section")
    args = parser.parse_args()
    rows = [run(int(n), args.size, args.cap_lifted) for n in args.datagrams.split(",")]
    kept = json.loads(KEPT.read_text()) if KEPT.exists() else {}
    kept[args.label] = {"commit": code_commit(), "date": datetime.date.today().isoformat(), "rows": rows}
    KEPT.write_text(json.dumps(kept, indent=1) + "\n")
    print(json.dumps(kept[args.label], indent=1))
    if args.results:
        rewrite_section(args.results, "netconsole-partial",
                        "netconsole: newline-less datagrams, before and after (bench/netconsole_partial.py)",
                        section(kept))


if __name__ == "__main__":
    main()
