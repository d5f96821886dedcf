"""Controller shards as Slurm jobs (issue 37 item 4), decided at the seam: the real submission
(``campaign/shards.py``) against Slurm's batch side at the command seam, built from a real
Slurm 22.05's output (tests/support/fake_batch_slurm.py), and each submitted job's own script
run in-process through the real pipeline and runner, its hosts played by fake hosts in virtual
time. Shards run one after another, as jobs on a cluster would interleave only in time."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

from reprofleet.campaign import pipeline, run as run_mod
from reprofleet.campaign.run import CampaignResult, make_plan, run_campaign
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.campaign.shard_slices import ShardOf
from reprofleet.campaign.shards import ShardSet, ShardSubmission, shard_request, submit_shards, wait_for_jobs
from reprofleet.cli.config import DEFAULTS
from reprofleet.clock import VirtualClock
from reprofleet.errors import SchedulerError, UsageError
from reprofleet.playbook import load_playbook
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.report.write import ReportRequest, pooled_report
from reprofleet.runner.recovery import recovery_factory
from reprofleet.scheduler import SlurmClient
from tests.support.fake_batch_slurm import FakeBatchSlurm
from tests.support.fake_slurm import FakeNode, FakeSlurm
from tests.support.fleet_campaign import write_playbook
from tests.support.resume_folders import write_book, write_inventory
from tests.support.seam_host import FakeHost, seam_settings

SIX = ("n1", "n2", "n3", "n4", "n5", "n6")
ATTEMPTS = 2
CELLS = "  - name: ref\n"


class ShardView:
    """The pipeline's view of one shard's run; ``kill_after``: after this many recorded outcomes,
    Slurm ends the job (its SIGTERM: the stop event), and what it leaves on its hosts is kept
    (``left``: each host's lease as the dead run left it, put back after the run: a SIGKILL
    gives nothing back)."""

    def __init__(self, fakes: Mapping[str, FakeHost], kill_after: int | None = None) -> None:
        self.fakes = fakes
        self.kill_after = kill_after
        self.outcomes = 0
        self.left: dict[str, Any] = {}

    def text(self, text: str) -> None: ...

    def refused(self, line: str) -> None: ...

    def outlet_off(self, line: str) -> None: ...

    def warning(self, line: str) -> None: ...

    @contextmanager
    def live(self, planned: Mapping[str, int | None], budget: int | None,
             stop: threading.Event) -> Iterator[Callable[..., None]]:
        def progress(host: str, **fields: Any) -> None:
            if not fields.get("outcome"):
                return
            self.outcomes += 1
            if self.kill_after is not None and self.outcomes == self.kill_after and not stop.is_set():
                self.left = {name: dict(self.fakes[name].lease_holder or {}) for name in planned}
                stop.set()

        yield progress

    def put_back_what_a_kill_leaves(self) -> None:
        """Each lease as the killed run left it, its pid one of the node it ran on: alive here
        (pid 1), so only what Slurm says (a requeue) can tell that run is over."""
        for name, lease in self.left.items():
            self.fakes[name].lease_holder = dict(lease, pid=1) if lease else None


class Cluster:
    """Six fake hosts, their inventory and playbook, and Slurm's batch side."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...] = SIX) -> None:
        self.clock = VirtualClock()
        self.fakes = {name: FakeHost(self.clock, name, script=("clean",) * 20) for name in names}
        self.inventory = write_inventory(tmp_path / "inv", {n: f"192.0.2.{10 + i}" for i, n in enumerate(names)})
        self.book = write_book(tmp_path / "book", cells=CELLS, attempts=ATTEMPTS)
        self.reports = tmp_path / "reports"
        self.slurm = FakeBatchSlurm()
        self.results: list[CampaignResult] = []
        real = run_mod.run_campaign

        def run(plan: Any, settings: Any, report_root: Path, **kwargs: Any) -> CampaignResult:
            kwargs.update(recovery_factory=recovery_factory, clock=self.clock, network_ok=lambda: True,
                          port_for=lambda ctx, host: self.fakes[host.name].port(ctx))
            return real(plan, settings, report_root, **kwargs)

        monkeypatch.setattr(run_mod, "run_campaign", run)

    def submit(self, count: int, partition: str = "ctl") -> tuple[Path, ShardSet]:
        asked = ShardSubmission(str(self.inventory), str(self.book), self.reports, count, partition)
        return submit_shards(asked, SlurmClient(self.slurm), python="/usr/bin/python3", workdir=self.reports.parent)

    def run_job(self, job_id: str, view: ShardView | None = None) -> None:
        def runner(folder: Path, env: Mapping[str, str]) -> None:
            request = shard_request(folder, ControllerConfig(dict(DEFAULTS)), env)
            result = pipeline.run_or_plan(request, view or ShardView(self.fakes))
            assert isinstance(result, CampaignResult)
            self.results.append(result)

        self.slurm.run(job_id, runner)


def _slots(folder: Path) -> list[tuple[str, str, int]]:
    """(host, cell, attempt index) of every record that counts, from every shard's folder."""
    pool = load_pool([folder])
    return sorted((r.host, r.cell, r.attempt_index) for r in pool.records if not r.runs_again)


def _every_slot_once(names: tuple[str, ...]) -> list[tuple[str, str, int]]:
    return sorted((h, "ref", k) for h in names for k in range(ATTEMPTS))


def test_two_shards_over_six_hosts_pool_every_slot_exactly_once_and_report_as_one_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, monkeypatch)
    folder, chosen = cluster.submit(2)
    assert chosen.slices == (("n1", "n3", "n5"), ("n2", "n4", "n6"))
    jobs = cluster.slurm.submitted()
    assert [j.flags["job-name"] for j in jobs] == [f"reprofleet-{chosen.campaign}-shard-{i}-of-2" for i in (1, 2)]
    assert all("--requeue" in j.argv and j.flags["partition"] == "ctl" for j in jobs)
    assert not any("gres" in word or "gpus" in word for j in jobs for word in j.argv)  # a controller needs no GPU
    assert [j.flags["output"] for j in jobs] == [str(folder / f"shard-{i}" / "slurm-%j.out") for i in (1, 2)]
    for job in jobs:
        cluster.run_job(job.job_id)

    assert _slots(folder) == _every_slot_once(SIX)
    for index, names in enumerate(chosen.slices, 1):  # each shard wrote its own slice, into its own sub-folder
        records = list(read_records(folder / f"shard-{index}" / "attempts.jsonl"))
        assert {r["host"] for r in records} == set(names)
        assert {r["campaign"] for r in records} == {chosen.campaign}
        assert {r["controller"] for r in records} == {f"shard {index} of 2, slurm job {jobs[index - 1].job_id}"}
    assert _planned_hosts(folder) == set(SIX)  # the shards' manifests, pooled as one campaign's plan

    one = _one_folder(folder, tmp_path / "one" / chosen.campaign)  # the same records, as one controller writes them
    sharded = pooled_report(ReportRequest((folder,), "", None, "", None, None, False)).to_json()
    single = pooled_report(ReportRequest((one,), "", None, "", None, None, False)).to_json()
    assert sharded == single


def _planned_hosts(folder: Path) -> set[str]:
    (info,) = load_pool([folder]).campaigns.values()
    assert info.plan is not None
    return set(info.plan.hosts)


def _one_folder(sharded: Path, one: Path) -> Path:
    """The shards' records, events and facts in one folder with one manifest planning every host."""
    one.mkdir(parents=True)
    manifests = [json.loads(p.read_text()) for p in sorted(sharded.glob("shard-*/campaign.json"))]
    whole = dict(manifests[0], hosts=[h for m in manifests for h in m["hosts"]])
    (one / "campaign.json").write_text(json.dumps(whole))
    for name in ("attempts.jsonl", "events.jsonl"):
        (one / name).write_text("".join(p.read_text() for p in sorted(sharded.glob(f"shard-*/{name}"))))
    return one


def test_a_shard_killed_mid_campaign_and_requeued_resumes_its_own_slice_every_slot_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, monkeypatch)
    folder, chosen = cluster.submit(2)
    first, second = cluster.slurm.submitted()
    killed = ShardView(cluster.fakes, kill_after=2)
    cluster.run_job(first.job_id, killed)
    cluster.slurm(("scontrol", "requeue", first.job_id), 15.0)  # Slurm ends it and queues it again
    killed.put_back_what_a_kill_leaves()  # its leases, live, as a killed controller leaves them
    assert all(cluster.fakes[n].lease_holder for n in chosen.slices[0])
    ran_before = {n: cluster.fakes[n].attempts_run for n in SIX}
    assert sum(ran_before.values()) < ATTEMPTS * 3  # it was stopped before its slice was done
    cluster.run_job(first.job_id)  # the requeued run: SLURM_RESTART_COUNT=1
    cluster.run_job(second.job_id)

    assert _slots(folder) == _every_slot_once(SIX)  # no slot twice, none missing
    shard_one = list(read_records(folder / "shard-1" / "attempts.jsonl"))
    assert {r["host"] for r in shard_one} == set(chosen.slices[0])  # the requeued run ran its own slice only
    assert not (folder / "shard-1" / "shard-1").exists() and not list(cluster.reports.glob("*/campaign.json"))
    events = read_log_lines(folder / "shard-1" / "events.jsonl")
    taken_over = [e for e in events if e["event"] == "lease_broken"]
    assert sorted(e["host"] for e in taken_over) == sorted(chosen.slices[0])
    assert all("this Slurm job's earlier run" in e["why"] for e in taken_over)
    assert cluster.results[1].quarantined == {}


def test_a_second_shard_given_an_overlapping_slice_by_mistake_is_refused_on_each_shared_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, monkeypatch)
    folder, chosen = cluster.submit(2)
    first, second = cluster.slurm.submitted()
    wrong = ShardSet(chosen.campaign, chosen.inventory, chosen.playbook, chosen.limit, chosen.attempts,
                     (chosen.slices[0], ("n1", "n2", "n4")), chosen.partition, chosen.jobs)
    wrong.write(folder)  # n1 in both slices
    holding = ShardView(cluster.fakes, kill_after=1)
    cluster.run_job(first.job_id, holding)
    holding.put_back_what_a_kill_leaves()  # shard 1 still holds n1 (its job was killed, its lease is live)
    cluster.slurm(("scontrol", "requeue", second.job_id), 15.0)  # even a requeued run takes no other shard's lease
    ran_on_n1 = cluster.fakes["n1"].attempts_run
    cluster.run_job(second.job_id)

    result = cluster.results[-1]
    assert set(result.quarantined) == {"n1"}
    assert f"leased to shard 1 of 2, slurm job {first.job_id}" in result.quarantined["n1"]
    assert f"campaign {chosen.campaign}" in result.quarantined["n1"]
    assert cluster.fakes["n1"].attempts_run == ran_on_n1  # nothing of shard 2's ran there
    assert cluster.fakes["n1"].lease_holder["controller"] == f"shard 1 of 2, slurm job {first.job_id}"
    shard_two = list(read_records(folder / "shard-2" / "attempts.jsonl"))
    on_n1 = [r for r in shard_two if r["host"] == "n1"]
    assert on_n1 and all(r["outcome"] == "infra" and r["reason"].startswith("not run: ") for r in on_n1)
    assert {r["host"] for r in shard_two if r["outcome"] == "clean"} == {"n2", "n4"}


@pytest.mark.parametrize("count, partition, words", [
    (7, "ctl", "--shards 7 is more than the 6 hosts chosen"),
    (0, "ctl", "--shards takes a number >= 1, not 0"),
    (2, "", "--shards needs --slurm-partition P"),
])
def test_bad_shard_arguments_are_one_clear_line_and_nothing_is_submitted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, partition: str, words: str) -> None:
    cluster = Cluster(tmp_path, monkeypatch)
    with pytest.raises(UsageError) as raised:
        cluster.submit(count, partition)
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert cluster.slurm.calls == [] and not cluster.reports.exists()


def test_a_partition_slurm_refuses_submits_nothing_and_a_refusal_part_way_cancels_what_went_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, monkeypatch)
    with pytest.raises(SchedulerError, match="invalid partition specified: nosuch"):
        cluster.submit(2, "nosuch")
    assert cluster.slurm.jobs == {}
    cluster.slurm.refuse_after = 1
    with pytest.raises(SchedulerError):
        cluster.submit(3)
    (only,) = cluster.slurm.submitted()
    assert only.state == "CANCELLED" and ("scancel", only.job_id) in cluster.slurm.calls



def test_a_shard_on_slurm_nodes_drains_under_its_own_reason_and_gives_back_only_its_own(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = FakeHost(clock, "gpu01", script=("clean",), boot_delay_s=0.5)
    fake.host = replace(fake.host, vars={"slurm_node": "gpu01"})
    fake.facts = {"nvml": "ok", "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0", "name": "NVIDIA RTX PRO 6000"}]}
    second = "reprofleet:c1/shard-2 taken for attempts"  # what shard 2, still running, drained its node with
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"), FakeNode("gpu02", flags={"DRAIN"}, reason=second))
    book = load_playbook(write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30))
    plan = make_plan(book, [fake.host], "c1", shard=ShardOf("c1", 1, 2, ("gpu01",), job="7"))
    result = run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                          clock=clock, port_for=lambda ctx, h: fake.port(ctx), network_ok=lambda: True,
                          slurm_client=SlurmClient(slurm))
    assert result.directory.root == tmp_path / "reports" / "c1" / "shard-1"
    (taken,) = [dict(w.split("=", 1) for w in k[2:]) for k in slurm.updates if "state=drain" in k]
    assert taken["reason"] == "reprofleet:c1/shard-1 taken for attempts"
    assert slurm.updates_of("gpu01") == ["drain", "resume"]  # its own node, given back at its end
    assert slurm.updates_of("gpu02") == [] and slurm.nodes["gpu02"].reason == second  # shard 2's, left alone


def test_waiting_follows_every_job_until_each_has_ended_a_requeued_one_included(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, monkeypatch, names=SIX[:2])
    _, chosen = cluster.submit(2)
    first, second = cluster.slurm.submitted()
    said: list[str] = []
    polls = iter(range(10))

    def sleep(seconds: float) -> None:  # between polls, the cluster moves on
        step = next(polls)
        if step == 0:
            first.state, second.state = "RUNNING", "RUNNING"
        elif step == 1:
            cluster.slurm(("scontrol", "requeue", first.job_id), 15.0)  # pending again: not ended
            second.state = "COMPLETED"
        elif step == 2:
            first.state = "COMPLETED"

    last = wait_for_jobs(SlurmClient(cluster.slurm), chosen.jobs, sleep, 10.0, said.append)
    assert last == {first.job_id: f"job {first.job_id} completed on gpu01, requeued 1x",
                    second.job_id: f"job {second.job_id} completed on gpu01"}
    assert f"job {first.job_id} pending on gpu01, requeued 1x" in said and next(polls) == 3  # polled until both ended
