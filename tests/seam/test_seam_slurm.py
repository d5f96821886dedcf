"""A campaign on Slurm nodes, decided at the host seam in virtual time against a fake Slurm at the
command seam built from the golden output of a real Slurm 22.05 (tests/support/fake_slurm.py):
a node is drained before its first attempt and its running job waited for; someone else's drain
is never taken nor resumed; a wedge sets the node down with a reason people read, the health
gate drains it again, a quarantine leaves it down; the end, a Ctrl-C and a resume give back
exactly this campaign's nodes."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from reprofleet.campaign.run import make_plan, run_campaign
from reprofleet.clock import VirtualClock
from reprofleet.model.events import CampaignEvent
from reprofleet.playbook import load_playbook
from reprofleet.records.store import read_log_lines, read_records
from reprofleet.runner.context import CampaignContext
from reprofleet.runner.recovery import recovery_factory
from reprofleet.runner.slurm_node import SlurmNodes, SlurmTerms
from reprofleet.scheduler import NodeReasons, SlurmClient
from tests.support.fake_slurm import FakeNode, FakeSlurm
from tests.support.fleet_campaign import write_playbook
from tests.support.seam_host import FakeHost, events, records, run_host, seam_book, seam_context, seam_settings

TERMS = SlurmTerms(job_wait_s=600.0, poll_s=10.0)
FACTS = {"nvml": "ok", "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0", "name": "NVIDIA RTX PRO 6000"}]}


def _node_host(clock: VirtualClock, name: str, script: tuple[str, ...], **kwargs: Any) -> FakeHost:
    fake = FakeHost(clock, name, script=script, boot_delay_s=0.5, **kwargs)
    fake.host = replace(fake.host, vars={"slurm_node": name})
    fake.facts = dict(FACTS)
    return fake


def _on_slurm(ctx: CampaignContext, slurm: FakeSlurm) -> CampaignContext:
    ctx.slurm = SlurmNodes(SlurmClient(slurm), ctx.campaign_id, TERMS)
    return ctx


def _t(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["t"].replace("Z", "+00:00")).timestamp()


def test_a_node_running_a_job_is_drained_at_once_and_no_attempt_starts_before_the_job_ends(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean", "clean"))
    job_ends = clock.wall() + 125.0
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01", jobs_until=clock.monotonic() + 125.0))
    ctx = _on_slurm(seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock), slurm)
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["clean", "clean"]
    assert slurm.updates_of("gpu01") == ["drain"]  # taken before anything ran; given back by the campaign's end
    assert slurm.nodes["gpu01"].reason == NodeReasons("seam-campaign").taken()
    (waiting,) = events(ctx, "slurm_jobs_waiting")
    assert waiting["jobs"] == ["job 2 of slurmtest (running)"] and waiting["node"] == "gpu01"
    (ended,) = events(ctx, "slurm_jobs_ended")
    first = events(ctx, "attempt_started")[0]
    assert ended["waited_s"] >= 125.0 and _t(first) >= job_ends and _t(first) >= _t(ended)
    order = [e["event"] for e in events(ctx)]
    # drained first (no new job lands while the running one ends), waited before anything touches the host
    assert order.index("slurm_taken") < order.index("slurm_jobs_waiting") < order.index("slurm_jobs_ended") \
        < order.index("prepared")


def test_a_job_that_lands_while_the_node_goes_from_down_back_to_drain_is_waited_for(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("wedge", "clean"))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01", job_on_resume_s=80.0))  # a pending job takes the instant
    ctx = _on_slurm(seam_context(seam_book(tmp_path, attempts=2), tmp_path, clock), slurm)
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["wedge", "clean"]
    (waiting,) = events(ctx, "slurm_jobs_waiting")
    (ended,) = events(ctx, "slurm_jobs_ended")
    second = events(ctx, "attempt_started")[1]
    assert ended["waited_s"] >= 80.0 and _t(second) >= _t(ended) > _t(waiting)


def test_a_job_that_outlasts_the_bound_leaves_the_host_unused(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean",))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01", jobs_until=clock.monotonic() + 10_000.0))
    ctx = _on_slurm(seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock), slurm)
    runner = run_host(fake, ctx)
    assert fake.attempts_run == 0
    assert ("1 Slurm job(s) still run on gpu01 after 600 s, the bound (timeouts.slurm_jobs 600 s): job 2 of slurmtest"
            in str(runner.state.quarantined))


def test_the_playbooks_slurm_jobs_bound_quarantines_a_node_whose_job_outlasts_it_and_shows_it_while_waiting(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean",))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01", jobs_until=clock.monotonic() + 10_000.0))
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30)
    book.write_text(book.read_text().replace("boot: 60}", "boot: 60, slurm_jobs: 300}"))
    plan = make_plan(load_playbook(book), [fake.host])
    shown: list[str] = []
    result = run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                          clock=clock, port_for=lambda ctx, h: fake.port(ctx), network_ok=lambda: True,
                          slurm_client=SlurmClient(slurm),
                          progress=lambda host, **fields: shown.append(str(fields.get("status", ""))))
    (record,) = read_records(result.directory.attempts)  # its slot, recorded as not run: nothing ran there
    assert fake.attempts_run == 0 and record["outcome"] == "infra" and record["boot_id"] is None
    assert record["reason"].startswith("not run: cannot run here: 1 Slurm job(s) still run on gpu01")
    assert result.quarantined["gpu01"].endswith(
        "1 Slurm job(s) still run on gpu01 after 300 s, the bound (timeouts.slurm_jobs 300 s): job 2 of slurmtest "
        "(running)")
    assert "waiting for 1 Slurm job(s), up to 300 s" in shown  # the live view's waiting line
    (waiting,) = [e for e in read_log_lines(result.directory.events) if e["event"] == "slurm_jobs_waiting"]
    assert waiting["up_to_s"] == 300.0


def test_a_node_someone_else_drained_is_neither_taken_nor_resumed(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu02", ("clean",))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu02", flags={"DRAIN"}, reason="fan noise, ticket 4411"))
    result = _campaign(tmp_path, clock, [fake], slurm)
    assert fake.attempts_run == 0 and "not this campaign's to take" in result.quarantined["gpu02"]
    assert slurm.updates == []  # not drained again, not resumed
    assert slurm.nodes["gpu02"].reason == "fan noise, ticket 4411" and "DRAIN" in slurm.nodes["gpu02"].flags


def test_a_wedge_sets_the_node_down_with_its_phase_and_the_health_gate_drains_it_again(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("wedge", "clean"))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"))
    result = _campaign(tmp_path, clock, [fake], slurm)
    found = list(read_records(result.directory.attempts))
    assert [r["outcome"] for r in found] == ["wedge", "clean"]
    said = read_log_lines(result.directory.events)
    (wedge,) = [e for e in said if e["event"] == "wedge"]
    (down,) = [e for e in said if e["event"] == "slurm_down"]
    assert down["reason"] == (f"reprofleet:{result.directory.root.name} wedge in {found[0]['last_phase']}, "
                              f"attempt {found[0]['attempt']}, power cycle under way")
    assert _t(down) - _t(wedge) < 1.0  # in Slurm the moment it is declared, not after SlurmdTimeout
    # down, then (health gate passed) resume + drain before the next attempt, then given back at the end
    assert slurm.updates_of("gpu01") == ["drain", "down", "resume", "drain", "resume"]
    ready = next(e for e in said if e["event"] == "recovery" and e["to"] == "ready")
    again = [e for e in said if e["event"] == "slurm_taken" and e.get("again")]
    assert again and _t(again[0]) >= _t(ready)
    assert slurm.nodes["gpu01"].reason == "" and not slurm.nodes["gpu01"].flags


def test_a_wedge_on_a_node_someone_else_drained_meanwhile_keeps_their_reason(tmp_path: Path) -> None:
    clock = VirtualClock()
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"))
    said: list[tuple[str, dict[str, Any]]] = []
    nodes = SlurmNodes(SlurmClient(slurm), "c1", TERMS)
    fake = _node_host(clock, "gpu01", ("clean",))
    hold = nodes.hold(fake.host, lambda host, what, **f: said.append((what.value, f)), lambda host, **f: None,
                      clock, threading.Event())
    assert hold is not None
    hold.take()
    slurm.nodes["gpu01"].reason = "hardware swap, ticket 99"  # an operator re-drains it mid-campaign
    hold.told(CampaignEvent.WEDGE, {"last_phase": "cuda_graph_capture", "attempt": "a1"})
    hold.told(CampaignEvent.RECOVERY, {"to": "ready"})
    assert slurm.updates_of("gpu01") == ["drain"] and slurm.nodes["gpu01"].reason == "hardware swap, ticket 99"
    assert [w for w, _ in said] == ["slurm_taken", "slurm_error"] and "whose reason is kept" in said[1][1]["error"]
    assert nodes.give_back(lambda host, what, **f: None) == ()


def test_a_quarantined_node_is_left_down_with_its_reason(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("wedge", "clean"), gpu_falls_off=True)
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"))
    result = _campaign(tmp_path, clock, [fake], slurm, boot=15)
    assert "gpu01" in result.quarantined
    assert slurm.updates_of("gpu01") == ["drain", "down"]  # never resumed: its reason is for a person
    node = slurm.nodes["gpu01"]
    assert node.state == "down" and " wedge in " in node.reason
    (given,) = [e for e in read_log_lines(result.directory.events) if e["event"] == "slurm_given_back"]
    assert given["resumed"] == [] and "wedge in" in given["left"]["gpu01"]


def test_ctrl_c_gives_back_the_nodes_this_campaign_took(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean",) * 5)
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"))
    stop = threading.Event()

    def ctrl_c_after_the_first_attempt(host: str, **fields: Any) -> None:
        if fields.get("outcome"):
            stop.set()

    result = _campaign(tmp_path, clock, [fake], slurm, attempts=5, stop=stop, progress=ctrl_c_after_the_first_attempt)
    assert result.interrupted and fake.attempts_run < 5
    assert slurm.updates_of("gpu01") == ["drain", "resume"] and not slurm.nodes["gpu01"].flags


def test_a_resume_gives_back_what_a_dead_controller_took_and_nothing_of_other_campaigns(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean",))
    book = write_playbook(tmp_path / "book", attempts=1, attempt_timeout=30)
    plan = make_plan(load_playbook(book), [fake.host])
    ours, theirs = NodeReasons(plan.campaign_id), NodeReasons(plan.campaign_id + "x")
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"),
                      FakeNode("gpu03", flags={"DRAIN"}, reason=ours.taken()),  # the dead controller's, not in this run
                      FakeNode("gpu04", flags={"DRAIN"}, reason=theirs.taken()),  # another campaign's
                      FakeNode("gpu05", flags={"DRAIN"}, reason="reprofleet-like: someone's note"))
    _run(tmp_path, clock, plan, [fake], slurm)
    resumed = [k[2] for k in slurm.updates if k[3] == "state=resume"]
    assert sorted(resumed) == ["nodename=gpu01", "nodename=gpu03"]
    assert slurm.nodes["gpu04"].reason == theirs.taken() and slurm.nodes["gpu05"].flags == {"DRAIN"}


def test_a_user_who_may_not_drain_gets_no_attempt_and_one_line_saying_why(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = _node_host(clock, "gpu01", ("clean",))
    slurm = FakeSlurm(clock.monotonic, FakeNode("gpu01"), denied=True)
    result = _campaign(tmp_path, clock, [fake], slurm)
    assert fake.attempts_run == 0
    assert "Invalid user id" in result.quarantined["gpu01"] and "operator" in result.quarantined["gpu01"]


def _campaign(tmp_path: Path, clock: VirtualClock, fakes: list[FakeHost], slurm: FakeSlurm, *, attempts: int = 2,
              boot: float = 60, **kwargs: Any) -> Any:
    book = write_playbook(tmp_path / "book", attempts=attempts, attempt_timeout=30, boot=boot)
    return _run(tmp_path, clock, make_plan(load_playbook(book), [f.host for f in fakes]), fakes, slurm, **kwargs)


def _run(tmp_path: Path, clock: VirtualClock, plan: Any, fakes: list[FakeHost], slurm: FakeSlurm, **kwargs: Any) -> Any:
    by_name = {f.name: f for f in fakes}
    return run_campaign(plan, seam_settings(tmp_path), tmp_path / "reports", recovery_factory=recovery_factory,
                        clock=clock, port_for=lambda ctx, h: by_name[h.name].port(ctx), network_ok=lambda: True,
                        slurm_client=SlurmClient(slurm), **kwargs)
