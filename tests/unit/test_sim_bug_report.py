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


class TreeShell:
    """A host shell on a host tree, as uid 65534 or root: what fetch_bug_report runs, run for real
    (sh, timeout(1), the simulated sudo and nvidia-bug-report.sh)."""

    def __init__(self, tree: Any, user: str | None) -> None:
        self.tree, self.user = tree, user

    def run(self, command: str, timeout: float | None = None) -> Any:
        from reprofleet.remote.transport import CommandResult

        prefix = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--clear-groups"] if self.user else []
        done = subprocess.run([*prefix, "sh", "-c", command], env=self.tree.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        return CommandResult(command, done.returncode, done.stdout, done.stderr)

    def fetch_file(self, remote_path: str, local_path: Path, max_bytes: int) -> tuple[int, str]:
        import hashlib

        data = Path(remote_path).read_bytes()
        local_path.write_bytes(data)
        return len(data), hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("rule, user, status", [("all", "65534", "fetched"), (None, None, "fetched"),
                                                ("nvidia-smi", "65534", "failed")])
def test_fetching_runs_for_real_through_sh_timeout_and_sudo(sudo_host: Callable[[str], Any],
                                                            sim_host_tree: Callable[..., Any], tmp_path: Path,
                                                            rule: str | None, user: str | None, status: str) -> None:
    import os

    from reprofleet.campaign.bug_report import fetch_bug_report

    if os.geteuid() != 0:
        pytest.skip("root runs the broker; setpriv to another user needs root")
    tree = sudo_host(rule) if rule else sim_host_tree()
    got = fetch_bug_report("h1", TreeShell(tree, user), tmp_path / "out", timeout_s=20)
    assert got.status.value == status, got
    if status == "fetched":
        assert "Start of NVIDIA bug report log file" in gzip.decompress(got.path.read_bytes()).decode()
    else:
        assert f"`nobody ALL=(root) NOPASSWD: {tree.bin / 'nvidia-bug-report.sh'}`" in got.fix, got
    assert not list(Path("/tmp").glob("reprofleet-bug-report.*"))  # the folder went


def test_a_script_past_its_time_is_stopped_through_sudo(sudo_host: Callable[[str], Any], tmp_path: Path) -> None:
    import json
    import os
    import time

    from reprofleet.campaign.bug_report import fetch_bug_report

    if os.geteuid() != 0:
        pytest.skip("root runs the broker; setpriv to another user needs root")
    tree = sudo_host("all")
    config = tree.etc / "host.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "bug_report_s": 60}))
    started = time.monotonic()
    got = fetch_bug_report("h1", TreeShell(tree, "65534"), tmp_path / "out", timeout_s=1)
    assert got.status.value == "failed" and "did not finish within 1 s" in got.detail, got
    assert time.monotonic() - started < 20  # TERM reached the script through sudo: not the 10 s KILL, nor 60 s
