"""``nvidia-bug-report.sh`` on a simulated host: the archive the real one writes, small.

What is modelled is what a caller depends on, from the script NVIDIA ships with the driver:
it refuses anyone but root (``ERROR: Please run nvidia-bug-report.sh as root.``, exit 1),
moves an earlier ``nvidia-bug-report.log.gz`` of the current folder to
``nvidia-bug-report.log.old.gz``, and writes ``nvidia-bug-report.log.gz`` (gzip of a text log
that starts "Start of NVIDIA bug report log file" and holds sections such as ``nvidia-smi -q``)
into the folder it is run from; it prints where. NVIDIA's bug template asks for that file
(NVIDIA/open-gpu-kernel-modules, .github/ISSUE_TEMPLATE/bug_report.md).

The host's ``host.json`` may hold ``bug_report_s``: seconds the script takes (default 0.2), so
a caller's time bound can be played.
"""

from __future__ import annotations

import gzip
import os
import platform
import subprocess
import sys
import time
from typing import List

from . import hwio

LOG = "nvidia-bug-report.log.gz"
OLD = "nvidia-bug-report.log.old.gz"
LINE = "_" * 44


def _section(title: str, argv: List[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        body = done.stdout + done.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        body = f"{argv[0]} failed: {exc}\n"
    return f"{LINE}\n\n{title}\n\n{body}\n"


def main(argv: List[str]) -> int:
    if os.geteuid() != 0:
        print("ERROR: Please run nvidia-bug-report.sh as root.")
        return 1
    print(f"nvidia-bug-report.sh will now collect information about your system and create the file '{LOG}' "
          "in the current directory.")
    if os.path.exists(LOG):
        os.replace(LOG, OLD)
    time.sleep(float(hwio.host_config().get("bug_report_s", 0.2)))
    text = (f"{LINE}\n\nStart of NVIDIA bug report log file.  Please include this file, along\n"
            "with a detailed description of your problem, when reporting a graphics\ndriver bug.\n\n"
            f"nvidia-bug-report.sh Version: simulated (reprofleet.sim)\nDate: {time.ctime()}\n"
            f"uname: {' '.join(platform.uname())}\ncommand line flags: {' '.join(argv)}\n\n"
            + _section("nvidia-smi -q", ["nvidia-smi", "-q"]))
    with gzip.open(LOG, "wt") as handle:
        handle.write(text)
    print(f"complete.\n\nThe file '{LOG}' is ready for the bug report.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
