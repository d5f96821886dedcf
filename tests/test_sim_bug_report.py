"""The simulated hosts' nvidia-bug-report.sh does what a caller of the real one relies on:
root only, nvidia-bug-report.log.gz in the folder it runs from (an earlier one kept as .old.gz),
a gzip of a log that starts the way NVIDIA's does and holds nvidia-smi -q."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest


def _run(tree: Any, folder: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    folder.mkdir(exist_ok=True)
    folder.chmod(0o777)
    argv = [*prefix, "/usr/bin/python3", str(tree.bin / "nvidia-bug-report.sh")]
    return subprocess.run(argv, cwd=folder, env=tree.env(), capture_output=True, text=True, timeout=30, check=False)


def test_it_writes_the_archive_where_it_runs_and_keeps_the_earlier_one(sim_host_tree: Callable[..., Any],
                                                                       tmp_path: Path) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("the script runs as root only, as the real one")
    tree = sim_host_tree()
    first = _run(tree, tmp_path / "here")
    assert first.returncode == 0, first.stderr
    assert "create the file 'nvidia-bug-report.log.gz' in the current directory" in first.stdout
    log = gzip.decompress((tmp_path / "here" / "nvidia-bug-report.log.gz").read_bytes()).decode()
    assert "Start of NVIDIA bug report log file" in log and "nvidia-smi -q" in log and "Driver Version" in log
    assert _run(tree, tmp_path / "here").returncode == 0
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["nvidia-bug-report.log.gz",
                                                                    "nvidia-bug-report.log.old.gz"]


def test_anyone_but_root_is_refused_as_by_the_real_script(sim_host_tree: Callable[..., Any], tmp_path: Path) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("setpriv to another user needs root")
    tree = sim_host_tree()
    done = _run(tree, tmp_path / "there", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    assert (done.returncode, done.stdout.strip()) == (1, "ERROR: Please run nvidia-bug-report.sh as root.")
    assert list((tmp_path / "there").iterdir()) == []
