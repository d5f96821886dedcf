"""The secrets sweep finds what it looks for: a planted secret in a file, an argv, a text.

The fleet test (tests/fleet/test_power_fleet_trust.py) asserts the sweep finds nothing; these
show it would have found a leak, without a fleet.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.secret_sweep import PsSweep, files_under, leaks

PLANTED = "sweep-Pw-13c9"


def test_a_secret_in_a_kept_file_is_found_and_a_skipped_folder_is_not_searched(tmp_path: Path) -> None:
    (tmp_path / "state" / "attempts" / "a1").mkdir(parents=True)
    (tmp_path / "state" / "attempts" / "a1" / "meta.json").write_text(f'{{"env": {{"T": "{PLANTED}"}}}}')
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "config.json").write_text(PLANTED)
    found = leaks(files_under(tmp_path, skip=[tmp_path / "docker"]), [PLANTED, ""])
    assert found == [(str(tmp_path / "state" / "attempts" / "a1" / "meta.json"), PLANTED)]


def test_a_secret_on_a_command_line_is_seen_by_the_ps_sweep_while_the_process_lives() -> None:
    with PsSweep([PLANTED], interval_s=0.02) as sweep:
        child = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(1.0)", PLANTED])
        try:
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
    assert sweep.rounds >= 2
    assert any(secret == PLANTED and where.startswith("ps ") for where, secret in sweep.found)


def test_a_sweep_of_clean_command_lines_finds_nothing() -> None:
    with PsSweep(["never-on-any-command-line-7f3a"], interval_s=0.02) as sweep:
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=10)
    assert sweep.rounds >= 1 and sweep.found == []
