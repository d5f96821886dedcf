#!/usr/bin/env python3
"""The scale benchmark's PoC: an attempt that does almost nothing and exits clean.

It never imports vLLM (the simulated host's fake vLLM is where wedges are decided), so a
host can only wedge in this benchmark if the controller wrongly declares it: every wedge
it records is a false one. It prints a few lines, so the stream carries log lines as a
real start does, sleeps ``--sleep-s`` and exits 0. Standard library only; it runs under
the cell's runtime (``python3`` on the simulated host).
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sleep-s", type=float, default=1.0, help="how long the attempt lasts")
    parser.add_argument("--lines", type=int, default=3, help="log lines printed across the sleep")
    args, _unknown = parser.parse_known_args(argv)  # a cell's other args are the real PoC's
    lines = max(1, args.lines)
    for index in range(lines):
        print(f"scale-poc: step {index + 1}/{lines}", flush=True)
        time.sleep(max(0.0, args.sleep_s) / lines)
    print("scale-poc: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
