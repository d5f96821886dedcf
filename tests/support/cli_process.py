"""The CLI as a person runs it: ``python -m reprofleet ...`` in a process of its own, with no
terminal to ask on (stdin closed), bounded in time. Used by the fleet tests of the by-hand tasks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def reprofleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=90, stdin=subprocess.DEVNULL)
