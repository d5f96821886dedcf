"""Controller shards as real Slurm jobs (issue 37 item 4): two shards over six simulated hosts,
one killed mid-campaign and requeued, and the pooled records hold every planned slot once.

The cluster (sim/slurm_cluster.py) has the six hosts' slurmd as partition ``gpu`` and one node
of its own beside slurmctld, partition ``ctl``, where the controller jobs run: this machine's
Python (``sys.executable``) and this checkout, reaching the hosts over SSH as any controller.
``reprofleet campaign --shards 2 --slurm-partition ctl`` submits the two jobs as a person would
(the run settings travel in the job's environment, as sbatch passes it). Once shard 1 has
recorded an attempt, its job is killed as Slurm kills one (``scancel --signal=KILL``: the batch
step's processes, SIGKILL, nothing given back) and requeued (``scontrol requeue``); Slurm 22.05
holds a requeued job back for ``cred_expire`` + 1 s (slurm.conf(5), AuthInfo: 120 s by default),
so the test moves its start to now (``scontrol update jobid=... StartTime=now``, scontrol(1))
instead of waiting two minutes, once the clock has left the second in which the node revoked
the killed run's credential (_past_the_revocations_second).

Judged from Slurm (each job's state and restart count, ``scontrol show job``), from the
requeued run's own events (its leases taken over because ``SLURM_RESTART_COUNT`` said Slurm
ended its earlier run) and from the records (``reprofleet report`` over the campaign folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.shards import ShardSet
from reprofleet.records.pooling import load_pool
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.scheduler.batch import BatchJob, parse_show_job
from reprofleet.sim.procs import SimError, wait_until
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import FLEET_TEST_HOLD_S, write_playbook
from tests.support.paths import REPO
from tests.support.slurm_fleet import SlurmLab, slurm_fleet

pytestmark = pytest.mark.fleet

GPU, CTL = "gpu", "ctl"
ATTEMPTS = 2
HOSTS = tuple(f"s{i}" for i in range(1, 7))
SPECS = [SimHostSpec(name, script=("clean",) * ATTEMPTS, boot_delay_s=0.3, time_scale=0.05) for name in HOSTS]
KILL_AFTER_S = 60.0  # shard 1's first record
JOBS_END_S = 120.0  # both jobs COMPLETED, the requeued one included
CLI_S = 60.0


@dataclass(frozen=True)
class Played:
    """What the sharded campaign left: its folder and shards, each job as Slurm last showed it,
    what the killed run had recorded when it was killed, and the report's JSON."""

    lab: SlurmLab
    folder: Path
    shards: ShardSet
    jobs: dict[str, BatchJob]
    killed_after: int
    report: dict[str, Any]
    nodes_after: dict[str, dict[str, Any]]  # sinfo --json's nodes once both jobs ended


def _env(lab: SlurmLab, reports: Path) -> dict[str, str]:
    """The controller's settings as invoke reads them from the environment (tasks.DEFAULTS);
    sbatch hands the submitter's environment to each job, the Slurm cluster's SLURM_CONF too."""
    return {**os.environ, "SLURM_CONF": str(lab.cluster.conf), "PYTHONUNBUFFERED": "1",
            "INVOKE_REPROFLEET_REPORTS": str(reports),
            "INVOKE_REPROFLEET_KNOWN_HOSTS": str(lab.fleet.known_hosts_path),
            "INVOKE_REPROFLEET_DWELL_S": "1", "INVOKE_REPROFLEET_STABILITY_S": "1",
            "INVOKE_REPROFLEET_REBOOT_GRACE_S": "1", "INVOKE_REPROFLEET_SAMPLE_HZ": "5",
            "INVOKE_REPROFLEET_CORRELATED_HOLD_S": f"{FLEET_TEST_HOLD_S:g}"}


def _reprofleet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=CLI_S, stdin=subprocess.DEVNULL, check=False)


def _job(lab: SlurmLab, job_id: str) -> BatchJob:
    done = lab.cluster.run(["scontrol", "show", "job", "-o", job_id])
    if done.returncode != 0:
        raise SimError(f"scontrol show job {job_id}: {done.stderr.strip()}")
    return parse_show_job(done.stdout)


def _slurm(lab: SlurmLab, *argv: str) -> None:
    done = lab.cluster.run(argv)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr.strip()}"


def _past_the_revocations_second(ended_seen: float) -> None:
    """Once the killed job has ended (not COMPLETING: its node finished its end), its node's
    slurmd has revoked the job's credential, stamped in whole seconds; it refuses any credential
    of that job made in that second or before (22.05's cred_revoked: ``ctime <= revoked``), and
    Slurm kills such a start as "Job credential revoked" (seen when the requeued job started at
    once): cred_expire's default delay exists for this. A start in a later second is accepted,
    so the requeue waits for the clock to pass the second the end was seen in, at most 1 s."""
    next_second = int(ended_seen) + 1
    wait_until(lambda: time.time() >= next_second, 2.0, "the second after the killed job's end", interval_s=0.05)


def _records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "attempts.jsonl"
    return list(read_records(path)) if path.exists() else []


@pytest.fixture(scope="module")
def played(sim_ready: None, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[Played]:
    failed_before = request.session.testsfailed
    tmp = tmp_path_factory.mktemp("slurm-shards")

    def failed() -> bool:
        return request.session.testsfailed != failed_before

    with slurm_fleet(SPECS, GPU, keep_files=failed, control_partition=CTL) as lab:
        env = _env(lab, tmp / "reports")
        book = write_playbook(tmp / "book", attempts=ATTEMPTS, attempt_timeout=60)
        submitted = _reprofleet(env, "campaign", "-i", f"slurm:{GPU}", "-i", str(lab.fleet.inventory_path),
                                "--playbook", str(book), "--shards", "2", "--slurm-partition", CTL)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        (folder,) = [p.parent for p in (tmp / "reports").glob("*/shards.json")]
        shards = ShardSet.read(folder)
        try:
            first = folder / "shard-1"
            wait_until(lambda: len(_records(first)) >= 1, KILL_AFTER_S, "shard 1's first record", interval_s=0.2)
            _slurm(lab, "scancel", "--batch", "--signal=KILL", shards.jobs[0])  # no SIGTERM first: nothing given back
            killed_after = len(_records(first))
            wait_until(lambda: _job(lab, shards.jobs[0]).ended, 30.0, "the killed job to end", interval_s=0.2)
            _past_the_revocations_second(time.time())
            _slurm(lab, "scontrol", "requeue", shards.jobs[0])
            _slurm(lab, "scontrol", "update", f"jobid={shards.jobs[0]}", "StartTime=now")  # not cred_expire's 121 s
            ended = wait_until(lambda: all(_job(lab, j).ended for j in shards.jobs), JOBS_END_S,
                               "both shard jobs to end", interval_s=0.5, fail=False)
            jobs = {j: _job(lab, j) for j in shards.jobs}
            assert ended, {j: job.words() for j, job in jobs.items()}
        finally:
            for job in shards.jobs:  # nothing of ours left running on the control node
                lab.cluster.run(["scancel", job])
        reported = _reprofleet(env, "report", "--json", str(folder))
        assert reported.returncode == 0, reported.stdout[-2000:] + reported.stderr[-2000:]
        yield Played(lab, folder, shards, jobs, killed_after, json.loads(reported.stdout), lab.cluster.nodes())
        if failed():
            print(f"slurm logs: {lab.cluster.root / 'log'}; campaign: {folder}")


def test_both_shard_jobs_completed_the_killed_one_after_slurm_requeued_it(played: Played) -> None:
    first, second = (played.jobs[j] for j in played.shards.jobs)
    assert (first.state, first.restarts) == ("COMPLETED", 1), first.words()
    assert (second.state, second.restarts) == ("COMPLETED", 0), second.words()
    assert first.nodes == second.nodes == "rfctl"  # the controllers' node, not a GPU host
    assert played.shards.slices == (("s1", "s3", "s5"), ("s2", "s4", "s6"))
    assert 1 <= played.killed_after < ATTEMPTS * 3  # killed mid-campaign, its slice not done


def test_the_requeued_run_resumed_its_own_slice_taking_over_only_its_earlier_runs_leases(played: Played) -> None:
    events = list(read_log_lines(played.folder / "shard-1" / "events.jsonl"))
    taken = [e for e in events if e["event"] == "lease_broken"]
    assert sorted(e["host"] for e in taken) == list(played.shards.slices[0])
    assert all("this Slurm job's earlier run" in e["why"] for e in taken), taken  # SLURM_RESTART_COUNT said so
    job = played.shards.jobs[0]
    assert {e["previous"]["controller"] for e in taken} == {f"shard 1 of 2, slurm job {job}"}
    for index, names in enumerate(played.shards.slices, 1):
        records = _records(played.folder / f"shard-{index}")
        assert {r["host"] for r in records} == set(names)  # no slot of one shard run by the other
        assert {r["controller"] for r in records} == {f"shard {index} of 2, slurm job {played.shards.jobs[index - 1]}"}
    for name in HOSTS:  # the killed run left its nodes drained: its requeued run gave them back, as shard 2 did its own
        node = played.nodes_after[name]
        assert "DRAIN" not in (node.get("state_flags") or ()) and not node.get("reason"), (name, node.get("reason"))
    assert not list(played.folder.glob("shard-1/shard-*")) and not list(played.folder.parent.glob("*/campaign.json"))
    output = (played.folder / "shard-1" / f"slurm-{job}.out").read_text(errors="replace")
    assert output.count("records: ") == 1, output[-2000:]  # one job's output, appended: only the requeued run ended


def test_the_report_pools_every_planned_slot_exactly_once(played: Played) -> None:
    pool = load_pool([played.folder])
    slots = Counter((r.host, r.cell, r.attempt_index) for r in pool.records if not r.runs_again)
    planned = {(h, "default", k) for h in HOSTS for k in range(ATTEMPTS)}
    assert set(slots) == planned and set(slots.values()) == {1}, slots
    (info,) = pool.campaigns.values()
    assert info.plan is not None and set(info.plan.hosts) == set(HOSTS)
    report = played.report  # `reprofleet report --json FOLDER`: the shards' sub-folders as one campaign
    assert report["hosts"] == list(HOSTS) and report["attempts"] == len(planned) and not report["not_run"], report
    per_host = {(r["host"], r["judged"], r["clean"]) for r in report["rates"] if r["host"] is not None}
    assert per_host == {(h, ATTEMPTS, ATTEMPTS) for h in HOSTS}, report["rates"]
