"""``invoke campaign --shards``: a flag that cannot work is one line and exit 2, before Slurm is
asked anything (no sbatch runs: none is on PATH for these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_inprocess import run_task
from tests.support.resume_folders import write_book, write_inventory


@pytest.mark.parametrize("flags, words", [
    (["--shards", "0", "--slurm-partition", "ctl"], "--shards takes a number >= 1, not 0"),
    (["--shards", "x", "--slurm-partition", "ctl"], "--shards takes a whole number, not 'x'"),
    (["--shards", "3", "--slurm-partition", "ctl"], "--shards 3 is more than the 2 hosts chosen"),
    (["--shards", "2"], "--shards needs --slurm-partition P"),
    (["--slurm-partition", "ctl"], "--slurm-partition, --slurm-account, --slurm-time and --wait go with --shards N"),
    (["--shards", "2", "--slurm-partition", "ctl", "--dry-run"], "--shards submits a new campaign: not with --dry-run"),
])
def test_a_shard_flag_that_cannot_work_is_one_line_and_submits_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        flags: list[str], words: str) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # an sbatch asked for would fail the test differently
    monkeypatch.chdir(tmp_path)
    inventory = write_inventory(tmp_path / "inv", {"a1": "192.0.2.1", "a2": "192.0.2.2"})
    book = write_book(tmp_path / "book")
    code, out, err = run_task(capsys, "campaign", "-i", str(inventory), "-p", str(book), *flags)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("**/shards.json"))
