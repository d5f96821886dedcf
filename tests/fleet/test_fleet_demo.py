"""`make demo` ends by printing the path of its report.html, a page with the verdict table: the
demo's simulated fleet, end to end. (report.html itself, from synthetic campaigns:
tests/unit/test_report_html.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO as ROOT

DEMO_ARGS = ("--count", "2", "--attempts", "1")


@pytest.mark.fleet
def test_make_demo_ends_by_printing_the_path_of_its_report_html(tmp_path: Path) -> None:
    # its own sim folder (not the CLI's default, which someone's `make demo` may hold), and
    # one attempt per host and cell: the page's shape, not its numbers, is what is checked
    sim_dir = Path("/var/lib/reprofleet-sim") / f"test-demo-{os.getpid()}"  # not under /tmp: hosts shadow it
    env = {**os.environ, "INVOKE_REPROFLEET_REPORTS": str(tmp_path / "reports"),
           "INVOKE_REPROFLEET_SIM_DIR": str(sim_dir)}
    try:
        done = subprocess.run([sys.executable, "-m", "reprofleet", "demo", *DEMO_ARGS], cwd=ROOT, capture_output=True,
                              text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(sim_dir, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    last = [line for line in done.stdout.splitlines() if line.strip()][-1]
    assert last.startswith("html:") and last.endswith("report.html"), last
    page = Path(last.split(None, 1)[1])
    assert page.is_file() and page.parent.parent == tmp_path / "reports"
    assert 'id="verdict-table"' in page.read_text(encoding="utf-8")
