"""A campaign on a real Slurm (issue 37 items 2 and 3): slurmctld and munged beside the controller,
a slurmd on each simulated host, and one campaign over the partition (``-i slurm:gpu -i <the
fleet's inventory>``) that shows it all. A user's job runs on ``busy`` when the campaign starts:
the campaign drains the node, waits for the job, and starts no attempt before the job's own
output says it ended. ``wedgy`` freezes in its first attempt: Slurm shows it down with our reason
within the liveness budget (seconds, where Slurm's own SlurmdTimeout is 300 s), its plug cycles
it, its slurmd starts again with the new boot, and it is drained again before its next attempt.
``theirs`` was drained by someone else before the campaign: refused, untouched, never resumed.
At the end the campaign resumes exactly the two nodes it took.

What Slurm did is read from Slurm itself (a watcher polling ``sinfo --json``), the job's end from
the job's output file, the freeze from the simulated hardware's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.inventory import load_inventory
from reprofleet.inventory.slurm_source import SOURCE_JOINER
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.recovery import recovery_factory
from reprofleet.runner.slurm_node import SlurmTerms
from reprofleet.sim.procs import wait_until
from reprofleet.sim.spec import SimHostSpec
from tests.support.fleet_campaign import FLEET_TEST_HOLD_S, settings_for, write_playbook
from tests.support.slurm_fleet import NodeSeen, SlurmLab, SlurmWatch, UserJob, slurm_fleet

pytestmark = pytest.mark.fleet

PARTITION = "gpu"
THEIR_REASON = "fan noise, ticket 4411"
JOB_S = 8.0  # long enough to be running when the campaign takes the node, under load too
SETTLE_S = 15.0
TERMS = SlurmTerms(job_wait_s=120.0, poll_s=0.5)
SPECS = [SimHostSpec("busy", script=("clean", "clean"), boot_delay_s=0.5, time_scale=0.2),
         SimHostSpec("wedgy", script=("wedge", "clean"), boot_delay_s=0.5, time_scale=0.2),
         SimHostSpec("theirs", script=("clean", "clean"), boot_delay_s=0.5, time_scale=0.2)]


@dataclass(frozen=True)
class Played:
    """What the one campaign left: its result, records and events, the user's job, what Slurm showed."""

    lab: SlurmLab
    result: Any
    records: list[dict[str, Any]]
    events: list[dict[str, Any]]
    job: UserJob
    watch: SlurmWatch
    taken_reason: str
    settled: bool  # no node NOT_RESPONDING after the campaign, within SETTLE_S


@pytest.fixture(scope="module")
def played(sim_ready: None, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[Played]:
    failed_before = request.session.testsfailed
    tmp = tmp_path_factory.mktemp("slurm")
    def failed() -> bool:
        return request.session.testsfailed != failed_before

    with slurm_fleet(SPECS, PARTITION, keep_files=failed) as lab, pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(lab.cluster.conf))  # the campaign's Slurm commands find the cluster
        drained = lab.cluster.run(["scontrol", "update", "nodename=theirs", "state=drain", f"reason={THEIR_REASON}"])
        assert drained.returncode == 0, drained.stderr
        job = lab.submit_job("busy", JOB_S)
        inventory = load_inventory(f"slurm:{PARTITION}{SOURCE_JOINER}{lab.fleet.inventory_path}")
        book = write_playbook(tmp / "book", attempts=2, attempt_timeout=60)
        plan = make_plan(load_playbook(book), inventory.hosts)
        with SlurmWatch(lab.cluster) as watch:
            result = run_campaign(plan, settings_for(lab.fleet), tmp / "reports", recovery_factory=recovery_factory,
                                  slurm_terms=TERMS)
            # a resumed node is NOT_RESPONDING until slurmctld's next ping, which a resume asks for at once
            settled = wait_until(lambda: not any("NOT_RESPONDING" in (n.get("state_flags") or ())
                                                 for n in lab.cluster.nodes().values()),
                                 SETTLE_S, "Slurm's ping after the resumes", interval_s=0.2, fail=False)
        records = sorted(read_records(result.directory.attempts), key=lambda r: (r["host"], r["attempt_index"]))
        events = list(read_log_lines(result.directory.events))
        yield Played(lab, result, records, events, job, watch, f"reprofleet:{plan.campaign_id} taken for attempts",
                     settled)
        if failed():
            print(f"slurm fleet's logs: {lab.cluster.root / 'log'}; campaign: {result.directory.root}")


def test_the_campaign_waits_for_a_users_job_then_takes_its_node_and_no_attempt_overlaps_it(played: Played) -> None:
    started, ended = played.job.times()  # the job's script: ended means it ran to its end
    assert ended - started >= JOB_S - 0.5
    busy = [r for r in played.records if r["host"] == "busy"]
    assert [r["outcome"] for r in busy] == ["clean", "clean"]
    assert all(_epoch(r["started"]) > ended for r in busy), (ended, [r["started"] for r in busy])
    waited = [e for e in played.events if e["host"] == "busy" and e["event"] == "slurm_jobs_waiting"]
    assert len(waited) == 1 and f"job {played.job.job_id} of slurmtest (running)" in waited[0]["jobs"]
    assert [e["event"] for e in played.events if e["host"] == "busy" and e["event"] == "slurm_jobs_ended"]
    # Slurm showed the node draining (our drain, the job still on it) before it showed it drained
    draining = [s for s in played.watch.of("busy") if s.drained and s.reason == played.taken_reason]
    assert draining and draining[0].state in ("mixed", "allocated") and draining[0].reason_set < ended
    drained = [s for s in played.watch.of("busy") if s.t > draining[0].t and s.state == "idle" and s.drained]
    assert drained and drained[0].reason == played.taken_reason, played.watch.of("busy")  # the job gone, still ours


def test_a_frozen_host_is_down_in_slurm_with_our_reason_within_the_liveness_budget_then_drained_after_its_cycle(
        played: Played) -> None:
    hardware = played.lab.fleet.events()
    frozen_at = next(e["t"] for e in hardware if e["event"] == "wedge" and e["host"] == "wedgy")
    booted_after = [e["t"] for e in hardware if e["event"] == "boot" and e["host"] == "wedgy" and e["t"] > frozen_at]
    assert booted_after, "the plug's cycle gave wedgy a new boot"
    seen = played.watch.of("wedgy")
    down = [s for s in seen if s.state == "down" and s.reason.startswith(played.taken_reason.split()[0] + " wedge in ")]
    assert down, [(s.state, s.flags, s.reason) for s in seen]
    watchdog = settings_for(played.lab.fleet).watchdog
    budget = watchdog.silence_s + watchdog.probe_timeout_s + watchdog.dead_rounds * watchdog.probe_interval_s \
        + FLEET_TEST_HOLD_S + 5.0  # + the load of a shared CI machine; Slurm's own SlurmdTimeout is 300 s
    down_at = down[0].reason_set  # Slurm's stamp, in whole seconds (the watcher's own sighting may lag under load)
    assert down_at - frozen_at < budget, (down_at - frozen_at, budget)
    print(f"wedgy frozen -> down in Slurm with our reason: {down_at - frozen_at:.0f} s by Slurm's whole-second stamp, "
          f"{down[0].t - frozen_at:.1f} s as the watcher saw it (budget {budget:g} s)")
    assert down_at < booted_after[0]  # set down while it was frozen, not after it came back
    assert "attempt" in down[0].reason and "power cycle under way" in down[0].reason
    again = [s for s in seen if s.t > down[0].t and s.drained and s.reason == played.taken_reason]
    assert again, "back to the campaign's drain after the health gate"
    second = [r for r in played.records if r["host"] == "wedgy"]
    assert [r["outcome"] for r in second] == ["wedge", "clean"]
    assert again[0].reason_set <= _epoch(second[1]["started"])  # drained again before its next attempt
    starts = sorted({s.slurmd_started for s in seen if s.slurmd_started})
    assert len(starts) >= 2, "wedgy's slurmd started again with the new boot"


def test_at_the_end_the_campaign_resumes_exactly_the_nodes_it_took(played: Played) -> None:
    given = [e for e in played.events if e["event"] == "slurm_given_back"]
    assert len(given) == 1 and sorted(given[0]["resumed"]) == ["busy", "wedgy"]
    assert played.settled and not played.watch.errors, played.watch.errors
    last = _last(played.watch.changes)
    for node in ("busy", "wedgy"):
        assert last[node].state == "idle" and not last[node].flags and not last[node].reason, \
            [(round(s.t, 1), s.state, s.flags, s.reason, s.slurmd_started) for s in played.watch.of(node)]


def test_a_node_someone_else_drained_is_refused_untouched_and_never_resumed(played: Played) -> None:
    assert "theirs" in played.result.quarantined and THEIR_REASON in played.result.quarantined["theirs"]
    slots = [r for r in played.records if r["host"] == "theirs"]  # a fixed plan records a refused host's slots
    assert [(r["outcome"], r["boot_id"]) for r in slots] == [("infra", None), ("infra", None)], slots  # none ran
    seen = played.watch.of("theirs")
    assert {(s.reason, s.drained) for s in seen} == {(THEIR_REASON, True)}, seen
    assert not [e for e in played.events if e.get("node") == "theirs" and e["event"].startswith("slurm_")
                and e["event"] != "slurm_error"]


def test_each_slurmd_is_a_process_of_its_hosts_cgroup(played: Played) -> None:
    for host in played.lab.fleet.hosts:
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] for pid in host.cgroup.pids()
                    if Path(f"/proc/{pid}/cmdline").exists()]
        assert b"/usr/sbin/slurmd" in commands, (host.name, commands)


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _last(changes: list[NodeSeen]) -> dict[str, NodeSeen]:
    last: dict[str, NodeSeen] = {}
    for seen in changes:
        last[seen.node] = seen
    return last

