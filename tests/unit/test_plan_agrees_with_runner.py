"""``invoke plan``'s attempts and hours agree with the rule the runner will apply (issue 33, item 6).

The plan walks the runner's stop question exactly (``campaign/stop_walk.py``); here the same
campaigns are drawn attempt by attempt through ``campaign.simulate``, whose host loop asks the
runner's own ``HostStops`` before every slot in the host's plan order and skips a stopped
cell's slots. For every example playbook and every stop rule kind, under both truths the plan
states (every compared cell reproduces like the reference; every compared cell is truly
fixed), the plan's expected attempts and hours per host are within 10% of the simulation's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from reprofleet.campaign import simulate
from reprofleet.campaign.estimate import CampaignEstimate, Scenario, campaign_estimate
from reprofleet.model import Playbook, StopKind, StopRule
from reprofleet.playbook import load_playbook
from tests.support.paths import REPO

HOSTS = ("ws01", "ws02", "ws03", "ws04")
BASELINE = 0.3
DWELL_S = 10.0
RULES = {"fixed_n": StopRule(), "first_reproduction": StopRule(StopKind.FIRST_REPRODUCTION),
         "sprt": StopRule(StopKind.SPRT, 0.3, 0.03)}
EXAMPLES = sorted(p.name for p in (REPO / "playbooks").glob("*.yml")
                  if load_playbook(p).ladder is None)  # a search's or bisection's plan is search_estimate's


@dataclass(frozen=True)
class Simulated:
    """Per host, averaged over the simulated campaigns."""

    attempts: float
    reproductions: float

    def hours(self, plan: CampaignEstimate) -> float:
        return (self.attempts * plan.attempt_s + self.reproductions * plan.cycle_s) / 3600


def simulated(book: Playbook, compared_rate: float, campaigns: int, baseline: float = BASELINE) -> Simulated:
    """Campaigns drawn through the runner's HostStops: each compared cell at ``compared_rate``,
    the reference at ``baseline``; every record counted, every wedge a power cycle."""
    design = simulate.Design(book, HOSTS)
    reference = book.reference_cell.name
    truth = {(c.name, h): simulate.Behaviour(baseline if c.name == reference else compared_rate)
             for c in book.cells for h in HOSTS}
    attempts = reproductions = 0
    for index in range(campaigns):
        campaign = simulate.draw(design, truth, random.Random(f"plan-vs-runner/{index}"))
        attempts += len(campaign.records)
        reproductions += sum(r.outcome in ("wedge", "reboot") for r in campaign.records)
    runs = campaigns * len(HOSTS)
    return Simulated(attempts / runs, reproductions / runs)


def agrees(plan: CampaignEstimate, scenario: Scenario, simulation: Simulated) -> None:
    assert scenario.attempts == pytest.approx(simulation.attempts, rel=0.10)
    assert scenario.duration_s / 3600 == pytest.approx(simulation.hours(plan), rel=0.10)


def with_rule(name: str, rule: str, **changes: object) -> Playbook:
    return replace(load_playbook(REPO / "playbooks" / name), stop=RULES[rule], **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_and_the_runners_rule_agree_when_every_cell_reproduces_like_the_reference(name: str, rule: str) -> None:
    book = with_rule(name, rule)
    plan = campaign_estimate(book, HOSTS, BASELINE, DWELL_S)
    agrees(plan, plan.if_reproduces, simulated(book, BASELINE, campaigns=30))


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_and_the_runners_rule_agree_when_every_compared_cell_is_truly_fixed(name: str, rule: str) -> None:
    book = with_rule(name, rule)
    plan = campaign_estimate(book, HOSTS, BASELINE, DWELL_S)
    agrees(plan, plan.if_fixed, simulated(book, 0.0, campaigns=3))


@pytest.mark.parametrize(("rule", "attempts", "baseline"), [("first_reproduction", 20, 0.7), ("sprt", 20, 0.9)])
def test_they_agree_where_the_comparison_with_a_larger_reference_lets_a_fixed_cell_stop_part_of_the_time(
        rule: str, attempts: int, baseline: float) -> None:
    book = with_rule("demo.yml", rule, attempts=attempts)
    plan = campaign_estimate(book, HOSTS, baseline, DWELL_S)
    stopping = [c.if_fixed for c in plan.cells if not c.reference]
    assert all(0.2 < c.fixed < 0.8 for c in stopping)  # the comparison decides, not the cap alone
    agrees(plan, plan.if_fixed, simulated(book, 0.0, campaigns=12, baseline=baseline))


def test_under_sprt_the_seed_playbooks_truly_fixed_cells_run_to_their_cap_with_no_claim() -> None:
    """The finding: the SPRT's own average said about 10 attempts per cell; the runner also needs
    the anytime-valid comparison with the reference's 6 attempts, which never concludes, so every
    compared cell runs its 42 slots: 9 x 42 + 6 attempts, about 96 h per host at the timeout."""
    book = with_rule("sm120-hostwedge.yml", "sprt")
    plan = campaign_estimate(book, HOSTS, BASELINE, DWELL_S)
    compared = [c for c in plan.cells if not c.reference]
    assert all(c.if_fixed.attempts == 42 and c.if_fixed.no_claim == 1.0 for c in compared)
    assert plan.if_fixed.attempts == 9 * 42 + 6
    assert plan.if_fixed.duration_s / 3600 == pytest.approx(((9 * 42 + 6) * 900 + 1.8 * 610) / 3600)
    assert plan.duration_s.high == plan.if_fixed.duration_s
