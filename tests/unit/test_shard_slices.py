"""Which hosts each controller shard runs (campaign/shard_slices.py): disjoint, balanced, hosts
on one outlet kept in one shard, the same answer for the same hosts; and a shard's job reads
its slice back from the folder, never recomputing it (campaign/shards.py)."""

from __future__ import annotations

from dataclasses import replace
from itertools import chain
from pathlib import Path

import pytest

from reprofleet.campaign import pipeline
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.campaign.shards import ShardSet, ShardSubmission, shard_request, submit_shards
from reprofleet.campaign.shard_slices import slice_hosts
from reprofleet.cli.config import DEFAULTS
from reprofleet.errors import UsageError
from reprofleet.scheduler import SlurmClient
from tests.support.fake_batch_slurm import FakeBatchSlurm
from tests.support.resume_folders import write_book, write_inventory

NAMES = tuple(f"gpu{n:02d}" for n in range(1, 12))


@pytest.mark.parametrize("count", [1, 2, 3, 4, 11])
def test_slices_are_disjoint_cover_every_host_and_differ_in_size_by_at_most_one(count: int) -> None:
    slices = slice_hosts(NAMES, count)
    assert len(slices) == count
    assert sorted(chain.from_iterable(slices)) == sorted(NAMES)  # every host once: disjoint and whole
    sizes = [len(s) for s in slices]
    assert max(sizes) - min(sizes) <= 1
    assert all(list(s) == sorted(s, key=NAMES.index) for s in slices)  # inventory order within a shard


def test_the_same_hosts_give_the_same_slices() -> None:
    assert slice_hosts(NAMES, 3) == slice_hosts(list(NAMES), 3)
    assert slice_hosts(NAMES[:6], 2) == (("gpu01", "gpu03", "gpu05"), ("gpu02", "gpu04", "gpu06"))


def test_hosts_on_one_outlet_stay_in_one_shard_and_the_rest_balance_around_them() -> None:
    outlets = {"gpu01": frozenset({"pdu-a:1"}), "gpu04": frozenset({"pdu-a:1", "pdu-b:7"}),
               "gpu06": frozenset({"pdu-b:7"})}
    slices = slice_hosts(NAMES[:6], 2, outlets)
    (joined,) = [s for s in slices if "gpu01" in s]
    assert {"gpu01", "gpu04", "gpu06"} <= set(joined)  # one unit, transitively
    assert sorted(len(s) for s in slices) == [3, 3]


@pytest.mark.parametrize("count, words", [(0, "--shards takes a number >= 1, not 0"),
                                          (12, "--shards 12 is more than the 11 hosts chosen")])
def test_a_count_that_cannot_be_sliced_is_one_line(count: int, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        slice_hosts(NAMES, count)


def test_more_shards_than_outlet_groups_is_refused() -> None:
    one_outlet = {name: frozenset({"pdu:1"}) for name in NAMES[:3]}
    with pytest.raises(UsageError, match="more than the 1 groups of hosts that share no outlet"):
        slice_hosts(NAMES[:3], 2, one_outlet)


def test_a_shard_whose_host_left_the_inventory_is_refused_and_never_resliced(tmp_path: Path) -> None:
    hosts = {name: f"192.0.2.{10 + i}" for i, name in enumerate(NAMES[:4])}
    inventory = write_inventory(tmp_path / "inv", hosts)
    asked = ShardSubmission(str(inventory), str(write_book(tmp_path / "book")), tmp_path / "reports", 2, "ctl")
    folder, chosen = submit_shards(asked, SlurmClient(FakeBatchSlurm()), python="python3", workdir=tmp_path)
    assert ShardSet.read(folder) == chosen and chosen.slices == (("gpu01", "gpu03"), ("gpu02", "gpu04"))
    write_inventory(tmp_path / "inv", {k: v for k, v in hosts.items() if k != "gpu03"})  # changed after submission
    config = ControllerConfig(dict(DEFAULTS))
    second = shard_request(folder / "shard-2", config, {"SLURM_JOB_ID": "2"})
    planned = pipeline.run_or_plan(replace(second, dry_run=True), _Quiet())
    assert isinstance(planned, pipeline.DryRun) and [h.name for h in planned.plan.hosts] == ["gpu02", "gpu04"]
    first = shard_request(folder / "shard-1", config, {"SLURM_JOB_ID": "1", "SLURM_RESTART_COUNT": "1"})
    assert first.shard is not None and first.shard.requeued and first.shard.hosts == ("gpu01", "gpu03")
    with pytest.raises(UsageError, match="shard 1 of campaign .*: gpu03 of its slice is no longer chosen"):
        pipeline.run_or_plan(replace(first, dry_run=True), _Quiet())
    with pytest.raises(UsageError, match="not one of this campaign's shard folders"):
        shard_request(folder / "shard-3", config, {})


class _Quiet:
    def text(self, text: str) -> None: ...

    def refused(self, line: str) -> None: ...

    def outlet_off(self, line: str) -> None: ...

    def warning(self, line: str) -> None: ...

    def live(self, *args: object) -> object:
        raise AssertionError("a dry run runs nothing")
