"""The secrets sweep finds what it looks for: a planted secret in a file, an argv, a text.

The fleet test (tests/fleet/test_power_fleet_trust.py) asserts the sweep finds nothing; these
show it would have found a leak, without a fleet.
"""

from __future__ import annotations

import subprocess
import sys
import time
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


def test_the_environ_sweep_reads_the_variable_of_the_processes_named_and_of_no_other() -> None:
    """The fleet test proves the token reached the PoC by this reading: it must see a planted
    value in the named process and ignore the same variable in a process it was not asked about."""
    sleeper = "import signal; signal.pause()"  # lives until the test kills it
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": PLANTED}
    named = subprocess.Popen([sys.executable, "-c", sleeper, "poc-marker-5e1"], env=env)
    other = subprocess.Popen([sys.executable, "-c", sleeper, "not-the-poc"], env={**env, "HF_TOKEN": "other-1"})
    try:
        for child, marker in ((named, b"poc-marker-5e1"), (other, b"not-the-poc")):
            for _ in range(500):  # until the child has exec'd (its argv is the sleeper's), at most 10 s
                if marker in Path(f"/proc/{child.pid}/cmdline").read_bytes():
                    break
                time.sleep(0.02)
        with PsSweep([PLANTED], interval_s=0.02, environ=("HF_TOKEN", "poc-marker-5e1")) as sweep:
            for _ in range(500):  # two whole rounds over both living processes, at most 10 s
                if sweep.rounds >= 2:
                    break
                time.sleep(0.02)
    finally:
        for child in (named, other):
            child.kill()
            child.wait(timeout=10)
    assert sweep.environ_found == {PLANTED}
    assert sweep.found == []  # a value in an environment is not a command line's leak
