"""Stopping at run time without a fleet: tallies by role, the decide wiring, resume, identity.

A host runner whose attempts are scripted (no SSH) runs a plan; what it writes to
attempts.jsonl and events.jsonl is what a real campaign would write.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import pytest

from reprofleet.campaign import run as campaign
from reprofleet.records import identity
from reprofleet.stats import stop_rules as stopping
from reprofleet.runner.host import HostRunner, cell_identity, record_runtime
from reprofleet.runner.stops import HostStops
from reprofleet.model import Outcome, Playbook, Record, Runtime, RuntimeKind, StopKind, StopRule
from reprofleet.records.store import AttemptLog, CampaignDir, JsonlAppender
from tests.support.scripted_runner import HOST, POC_BYTES, Script, ScriptedRecovery, ScriptedRunner, book, cell, context, records_of

FIRST = StopRule(StopKind.FIRST_REPRODUCTION)


@dataclasses.dataclass(frozen=True)
class FakeDecision:
    """``stopping.StopDecision``'s fields."""

    rule: StopKind
    why: str
    verdict: str | None


def first_reproduction_decide(rule: StopRule, cell: tuple[int, int], reference: tuple[int, int],
                              planned: int) -> FakeDecision | None:
    """A stand-in with ``stopping.decide``'s signature: stop at the first reproduction."""
    if rule.kind is StopKind.FIRST_REPRODUCTION and cell[0] > 0:
        return FakeDecision(rule.kind, f"first reproduction after {cell[1]} judged", "reproduces")
    return None


@pytest.fixture
def decide(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Replace ``stopping.decide`` by the stand-in and record every call."""
    calls: list[tuple[Any, ...]] = []

    def recording(rule: StopRule, cell: tuple[int, int], reference: tuple[int, int], planned: int,
                  conclusion: Any = None) -> Any:
        calls.append((rule, cell, reference, planned))
        return first_reproduction_decide(rule, cell, reference, planned)

    monkeypatch.setattr(stopping, "decide", recording, raising=False)
    return calls


def run_host(playbook: Playbook, root: Path, script: Script, **kwargs: Any) -> tuple[ScriptedRunner, CampaignDir]:
    """One host's share of a campaign in ``root`` (resuming whatever is there already)."""
    directory = CampaignDir(root / "unit-campaign")
    done = campaign.completed_counts(directory)
    plan = campaign.make_plan(playbook, [HOST], "unit-campaign", done)
    ctx = context(playbook, root, kwargs.pop("progress", lambda host, **f: None))
    earlier = campaign.earlier_records(directory).get(HOST.name, [])
    stopped = {c for h, c in campaign.stopped_cells(directory) if h == HOST.name}
    runner = ScriptedRunner(ctx, list(plan.per_host[HOST.name]), script, earlier=earlier, stopped=stopped, **kwargs)
    runner.run()
    return runner, directory


def stop_events(directory: CampaignDir) -> list[dict[str, Any]]:
    if not directory.events.exists():
        return []
    events = [json.loads(line) for line in directory.events.read_text().splitlines()]
    return [e for e in events if e["event"] == "stopped"]


def wedges_at_first(cell_name: str) -> Script:
    return lambda name, index: (Outcome.WEDGE, "cuda_graph_capture") if name == cell_name \
        else (Outcome.CLEAN, "ready")


# -- tallies ---------------------------------------------------------------------------

def test_a_tally_counts_reproductions_and_judged_by_the_campaigns_roles(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    earlier = [
        {"host": "h1", "cell": "fix", "outcome": "wedge", "last_phase": "cuda_graph_capture"},
        {"host": "h1", "cell": "fix", "outcome": "reboot", "last_phase": None},
        {"host": "h1", "cell": "fix", "outcome": "clean", "last_phase": "ready"},
        {"host": "h1", "cell": "fix", "outcome": "error", "last_phase": "model_load"},  # before the phase at risk
        {"host": "h1", "cell": "fix", "outcome": "hang", "last_phase": "cuda_graph_capture"},  # in it: never clean
        {"host": "h1", "cell": "fix", "outcome": "error", "last_phase": "ready"},  # after it: a non-reproduction
        {"host": "h1", "cell": "fix", "outcome": "infra", "last_phase": "ready"},
        {"host": "h1", "cell": "fix", "outcome": "infra", "reason": "interrupted: the campaign was stopped"},  # runs again
        {"host": "h1", "cell": "ref", "outcome": "clean", "last_phase": "ready"},
    ]
    stops = HostStops(playbook, earlier)
    assert stops.tally("fix").counts == (2, 4)
    assert stops.tally("fix").attempts == 7
    assert stops.tally("ref").counts == (0, 1)
    assert stops.tally("never-ran").counts == (0, 0)


def test_errors_before_the_phase_at_risk_are_never_judged_even_six_of_six(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    earlier = [{"cell": "fix", "outcome": "error", "last_phase": "model_load"}] * 6
    assert HostStops(playbook, earlier).tally("fix").counts == (0, 0)


# -- the decide wiring -----------------------------------------------------------------

def test_decide_gets_the_cells_rule_its_counts_the_references_counts_and_the_planned_attempts(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1, stop=FIRST), cell("other", 2), attempts=7)
    earlier = [{"cell": "ref", "outcome": "wedge"}, {"cell": "ref", "outcome": "clean"},
               {"cell": "ref", "outcome": "reboot"}, {"cell": "fix", "outcome": "clean"}]
    stops = HostStops(playbook, earlier)
    assert stops.check(playbook.cells[1]) is None
    assert decide == [(FIRST, (0, 1), (2, 3), 7)]
    assert stops.check(playbook.cells[0]) is None and stops.check(playbook.cells[2]) is None
    assert len(decide) == 1, "the reference and fixed-n cells never ask: their plan is their end"


def test_a_cell_that_stopped_stays_stopped_and_decide_is_not_asked_again(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    stops = HostStops(playbook, [{"cell": "fix", "outcome": "wedge"}])
    stop = stops.check(playbook.cells[1])
    assert stop is not None and stop.verdict == "reproduces" and stop.rule == "first_reproduction"
    assert stop.event_fields()["attempts"] == 1
    assert stops.is_stopped("fix") and stops.check(playbook.cells[1]) is None
    assert len(decide) == 1


def test_a_first_reproduction_cell_stops_after_its_wedge_and_the_reference_runs_every_attempt(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    shown: list[dict[str, Any]] = []
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), cell("other", 2, stop=StopRule()), stop=FIRST)
    runner, directory = run_host(playbook, tmp_path, wedges_at_first("fix"),
                                 progress=lambda host, **fields: shown.append(fields))
    records = records_of(directory)
    fix = [r for r in records if r["cell"] == "fix"]
    assert [r["outcome"] for r in fix] == ["wedge"]
    assert len([r for r in records if r["cell"] == "ref"]) == playbook.attempts
    assert len([r for r in records if r["cell"] == "other"]) == playbook.attempts
    (event,) = stop_events(directory)
    assert event["host"] == "h1" and event["cell"] == "fix" and event["rule"] == "first_reproduction"
    assert event["verdict"] == "reproduces" and event["attempts"] == 1 and event["why"]
    assert any("stopped fix" in str(f.get("status", "")) for f in shown), "the live view shows the stop"
    assert not [r for r in records if r["cell"] == "fix" and r["attempt_index"] > 0], "a stopped slot is no record"


def test_a_resumed_campaign_skips_a_stopped_cell_and_does_not_repeat_its_event(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    _, directory = run_host(playbook, tmp_path, wedges_at_first("fix"), interrupt_after=4)
    assert len(stop_events(directory)) == 1
    resumed, _ = run_host(playbook, tmp_path, wedges_at_first("fix"))
    assert resumed.ran and all(name == "ref" for name, _ in resumed.ran)
    assert len(stop_events(directory)) == 1
    assert len([r for r in records_of(directory) if r["cell"] == "fix"]) == 1


def test_the_stop_event_is_authoritative_on_resume_even_if_the_counts_alone_would_go_on(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    directory = CampaignDir(tmp_path / "unit-campaign").create()
    JsonlAppender(directory.events).append({"host": "h1", "event": "stopped", "cell": "fix", "rule": "sprt",
                                            "why": "decided earlier", "verdict": "fixed", "attempts": 0})
    resumed, _ = run_host(playbook, tmp_path, lambda name, index: (Outcome.CLEAN, "ready"))
    assert ("fix", 0) not in resumed.ran
    assert len(stop_events(directory)) == 1


@pytest.mark.parametrize("interrupt_after", [1, 3, 5, 8])
def test_an_interrupted_and_resumed_campaign_decides_exactly_as_an_uninterrupted_one(
        tmp_path: Path, decide: list[tuple[Any, ...]], interrupt_after: int) -> None:
    def script(name: str, index: int) -> tuple[Outcome, str | None]:
        if name == "late":
            return (Outcome.WEDGE if index == 2 else Outcome.CLEAN), "cuda_graph_capture"
        if name == "early":
            return (Outcome.REBOOT if index == 0 else Outcome.CLEAN), None
        return Outcome.CLEAN, "ready"

    playbook = book(tmp_path, cell("ref", 0), cell("early", 1), cell("late", 2), cell("never", 3), stop=FIRST,
                    attempts=5)
    _, straight = run_host(playbook, tmp_path / "straight", script)
    _, first = run_host(playbook, tmp_path / "resumed", script, interrupt_after=interrupt_after)
    run_host(playbook, tmp_path / "resumed", script)

    def judged(directory: CampaignDir) -> list[tuple[str, int, str]]:
        return sorted((r["cell"], r["attempt_index"], r["outcome"]) for r in records_of(directory)
                      if not campaign.runs_again(r))

    def stops(directory: CampaignDir) -> list[tuple[str, str, int]]:
        return sorted((e["cell"], e["why"], e["attempts"]) for e in stop_events(directory))

    assert judged(first) == judged(straight)
    assert stops(first) == stops(straight) == [("early", "first reproduction after 1 judged", 1),
                                                ("late", "first reproduction after 3 judged", 3)]


def test_a_quarantined_host_still_skips_a_stopped_cell_instead_of_writing_not_run_records(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    directory = CampaignDir(tmp_path / "unit-campaign").create()
    AttemptLog(directory.attempts).append({"schema": 1, "attempt": "a0", "host": "h1", "cell": "fix",
                                           "outcome": "wedge", "attempt_index": 0, "last_phase": None})

    from reprofleet.errors import ReprofleetError

    done = campaign.completed_counts(directory)
    plan = campaign.make_plan(playbook, [HOST], "unit-campaign", done)
    ctx = context(playbook, tmp_path)
    runner = ScriptedRunner(ctx, list(plan.per_host["h1"]), wedges_at_first("fix"), earlier=records_of(directory),
                            refuse_prepare=ReprofleetError("no route to host"))
    runner.run()
    fix = [r for r in records_of(directory) if r["cell"] == "fix"]
    assert len(fix) == 1
    assert all(r["reason"].startswith("not run") for r in records_of(directory)[1:])


# -- identity --------------------------------------------------------------------------

def test_records_carry_the_poc_digest_and_the_cell_identity_of_what_they_store(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1))
    _, directory = run_host(playbook, tmp_path, lambda name, index: (Outcome.CLEAN, "ready"))
    digest = hashlib.sha256(POC_BYTES).hexdigest()
    for record in records_of(directory):
        assert record["poc"] == digest
        assert record["cell_id"] == identity.cell_id(record["cell"], record["factors"], record["runtime"], digest)
        assert record["cell_id"] == identity.record_cell_id({**record, "cell_id": None})
    ids = {r["cell"]: r["cell_id"] for r in records_of(directory)}
    assert ids["ref"] != ids["fix"] and ids["ref"].startswith("ref@")


def test_skipped_records_of_a_quarantined_host_carry_the_same_identity(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0))
    ctx = context(playbook, tmp_path)
    runner = HostRunner(ctx, HOST, [])
    runner.state.quarantined = "could not prepare the host"
    skipped = runner.recorder.not_run(playbook.cells[0], 0, str(runner.state.quarantined))
    assert skipped.poc == hashlib.sha256(POC_BYTES).hexdigest()
    assert skipped.cell_id == cell_identity(playbook.cells[0], skipped.poc)
    assert dict(skipped.runtime) == record_runtime(playbook.cells[0])


def test_a_new_poc_or_a_new_image_is_a_new_cell_identity(tmp_path: Path) -> None:
    base = cell("ref", 0)
    other_image = dataclasses.replace(base, runtime=Runtime(RuntimeKind.DOCKER, image="vllm/vllm-openai:v0.26.0"))
    assert cell_identity(base, "a" * 64) == cell_identity(base, "a" * 64)
    assert cell_identity(base, "a" * 64) != cell_identity(base, "b" * 64)
    assert cell_identity(base, "a" * 64) != cell_identity(other_image, "a" * 64)


# -- the manifest ----------------------------------------------------------------------

def test_the_manifest_records_judging_reference_order_seed_and_each_cells_identity_and_stop(tmp_path: Path) -> None:
    sprt = StopRule(StopKind.SPRT, p0=0.3, p1=0.03)
    playbook = dataclasses.replace(book(tmp_path, cell("ref", 0), cell("fix", 1, stop=sprt), stop=FIRST), seed=7)
    plan = campaign.make_plan(playbook, [], "unit-campaign")
    directory = CampaignDir(tmp_path / "unit-campaign").create()
    digest = hashlib.sha256(POC_BYTES).hexdigest()
    campaign.write_manifest(directory, plan, "controller", digest)
    manifest: Mapping[str, Any] = json.loads(directory.manifest.read_text())
    assert manifest["judging"] == playbook.judging.to_json()
    assert manifest["judging"]["at_risk_phase"] == "cuda_graph_capture"
    assert manifest["reference"] == "ref" and manifest["order"] == "interleaved" and manifest["seed"] == 7
    assert manifest["reproductions"] == ["wedge", "reboot"]
    cells = {c["name"]: c for c in manifest["cells"]}
    assert cells["ref"]["stop"] == {"kind": "fixed_n"}, "the reference never stops early"
    assert cells["fix"]["stop"] == sprt.to_json()
    assert cells["fix"]["cell_id"] == cell_identity(playbook.cells[1], digest)
    assert cells["fix"]["factors"] == {"vllm": "0.25.1", "cell": "fix"}


# -- with the real stopping.decide -----------------------------------------------------

def test_a_first_reproduction_cell_stops_as_fixed_exactly_where_the_judge_calls_it_fixed(tmp_path: Path) -> None:
    # the reference wedges 11 of 11; the old one-sample rule stopped "fix" after 5 clean attempts,
    # where the judge said "clean so far"; now it stops where the judge's anytime-valid rule concludes
    from dataclasses import replace

    from reprofleet.records.pooling import Plan, load_pool
    from reprofleet.verdicts import VerdictKind, judge

    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST, attempts=11)
    script: Script = lambda name, index: (Outcome.WEDGE, "cuda_graph_capture") if name == "ref" \
        else (Outcome.CLEAN, "ready")
    _, directory = run_host(playbook, tmp_path, script)
    fix = [r for r in records_of(directory) if r["cell"] == "fix"]
    conclusion = stopping.Conclusion(playbook.judging.fixed_ratio, 1)
    first = next(n for n in range(1, 40) if stopping.decide(FIRST, (0, n), (11, 11), 11, conclusion))
    assert [r["outcome"] for r in fix] == ["clean"] * first and first > 5
    (event,) = stop_events(directory)
    assert event["cell"] == "fix" and event["verdict"] == "fixed" and event["judged"] == first

    def verdict_after(clean: int) -> Any:
        pool = load_pool([directory.root])
        kept = tuple(r for r in pool.records if r["cell"] == "ref" or r["attempt_index"] < clean)
        info = replace(pool.campaigns["unit-campaign"], judging=playbook.judging, reference="ref", cells=("ref", "fix"),
                       plan=Plan(11, ("h1",), {"fix": 33}), caveat="")
        pool = replace(pool, records=kept, campaigns={"unit-campaign": info})
        return next(v for v in judge(pool).verdicts if v.cell == "fix")
    assert verdict_after(first).kind is VerdictKind.FIXED and "stopped by first_reproduction" in verdict_after(first).text
    assert verdict_after(first - 1).kind is not VerdictKind.FIXED
    assert len([r for r in records_of(directory) if r["cell"] == "ref"]) == 11


def test_the_real_decide_stops_a_cell_at_its_first_wedge(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    _, directory = run_host(playbook, tmp_path, wedges_at_first("fix"))
    assert [r["outcome"] for r in records_of(directory) if r["cell"] == "fix"] == ["wedge"]
    (event,) = stop_events(directory)
    assert event["verdict"] == "reproduces" and event["rule"] == "first_reproduction"


# -- reboots get forensics -------------------------------------------------------------

def test_a_reboot_found_on_re_attach_goes_through_recovery_and_gets_forensics(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=2)
    ctx = context(playbook, tmp_path)
    # what a host that came back by itself gets (the real recovery reads the previous boot's journal)
    recovery = ScriptedRecovery(forensics={"previous_boot_available": True, "findings": []})
    script: Script = lambda name, index: ((Outcome.REBOOT if index == 0 else Outcome.CLEAN), None)
    runner = ScriptedRunner(ctx, [(playbook.cells[0], 0), (playbook.cells[0], 1)], script, recovery=recovery)
    runner.run()
    records = records_of(ctx.directory)
    assert [r["outcome"] for r in records] == ["reboot", "clean"]
    assert records[0]["forensics"] == {"previous_boot_available": True, "findings": []}
    assert records[1]["forensics"] is None
    assert len(recovery.recovered) == 1 and not runner.state.quarantined


def test_a_reboot_without_recovery_is_recorded_and_the_host_goes_on(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), attempts=2)
    ctx = context(playbook, tmp_path)
    script: Script = lambda name, index: ((Outcome.REBOOT if index == 0 else Outcome.CLEAN), None)
    runner = ScriptedRunner(ctx, [(playbook.cells[0], 0), (playbook.cells[0], 1)], script, recovery=None)
    runner.run()
    assert [r["outcome"] for r in records_of(ctx.directory)] == ["reboot", "clean"]
    assert not runner.state.quarantined


def test_the_dry_run_names_each_cells_stop_rule_and_the_reference(tmp_path: Path) -> None:
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1, stop=FIRST), cell("other", 2))
    text = campaign.describe_plan(campaign.make_plan(playbook, [HOST], "unit-campaign"))
    assert "  - ref: " in text and "reference" in text.split("  - ref: ")[1].splitlines()[0]
    assert "stop first_reproduction" in text.split("  - fix: ")[1].splitlines()[0]
    assert "stop" not in text.split("  - other: ")[1].splitlines()[0]
    assert "at most" in text.split("attempts planned:")[1].splitlines()[0]


def test_a_moved_tag_stops_its_cell_through_the_same_stop_as_a_rule_with_the_events_old_fields(
        tmp_path: Path, decide: list[tuple[Any, ...]]) -> None:
    """runtimes' moved-tag stop and a rule's stop are one HostStops.stop: the cell is skipped
    from then on, no rule is asked again, and the event has the fields it always had."""
    playbook = book(tmp_path, cell("ref", 0), cell("fix", 1), stop=FIRST)
    stops = HostStops(playbook, [{"cell": "fix", "outcome": "clean"}])
    stop = stops.stop("fix", "runtime_moved", "the tag moved", None, error=True, tag="t:1", old_digest="a",
                      new_digest="b", old_id="1", new_id="2")
    assert stops.is_stopped("fix") and stops.check(playbook.cells[1]) is None and decide == []
    assert stop.event_fields() == {"cell": "fix", "rule": "runtime_moved", "why": "the tag moved", "verdict": None,
                                   "attempts": 1, "reproductions": 0, "judged": 1, "error": True, "tag": "t:1",
                                   "old_digest": "a", "new_digest": "b", "old_id": "1", "new_id": "2"}
    stops.add("fix", "wedge", None)
    assert stop.tally.attempts == 1, "the event's tally is the one at the stop"


# -- invoke plan against the real host runner (issue 33, item 6) -------------------------

@pytest.mark.parametrize("rule", [FIRST, StopRule(StopKind.SPRT, 0.3, 0.03)])
def test_plans_expected_attempts_match_the_real_host_runners_under_its_stop_rule(tmp_path: Path,
                                                                                  rule: StopRule) -> None:
    """The real plan loop (HostRunner through its seams), a scripted truth: the reference wedges
    at 30%, the compared cell at 30% or never; plan's exact walk within 10% of the attempts run."""
    import random

    from reprofleet.campaign.estimate import campaign_estimate
    playbook = book(tmp_path, cell("ref", 0), cell("other", 1), attempts=6, stop=rule)
    plan = campaign_estimate(playbook, [HOST.name], 0.3, dwell_s=10)
    for rate, expected in ((0.3, plan.if_reproduces.attempts), (0.0, plan.if_fixed.attempts)):
        runs = 80 if rate else 2  # a truly fixed cell runs to its cap: no spread to average out
        ran = 0
        for index in range(runs):
            draw = random.Random(f"seam-plan/{rate}/{index}")

            def script(name: str, attempt: int) -> tuple[Outcome, str | None]:
                strikes = draw.random() < (0.3 if name == "ref" else rate)
                return (Outcome.WEDGE, "cuda_graph_capture") if strikes else (Outcome.CLEAN, "ready")
            runner, _ = run_host(playbook, tmp_path / f"{rate}-{index}", script)
            ran += len(runner.ran)
        assert ran / runs == pytest.approx(expected, rel=0.10)
