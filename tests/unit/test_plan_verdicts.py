"""``invoke plan`` says what the verdicts of a campaign can show: simulated campaigns in the
playbook's own shape, judged by the real judge (``campaign.simulate``, ``campaign.estimate``)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from dataclasses import replace

import pytest

from reprofleet.campaign import estimate, simulate
from reprofleet.inventory import load_inventory
from reprofleet.model import Role, StopKind, StopRule
from reprofleet.playbook import load_playbook
from reprofleet.stats import intervals
from reprofleet.verdicts import VerdictKind
from tests.support.paths import REPO

SEED = load_playbook(REPO / "playbooks" / "sm120-hostwedge.yml")
HOSTS = tuple(load_inventory(REPO / "inventory" / "blackwell.yml").names)


def _truth(book: object, rates: dict[str, float], hosts: tuple[str, ...] = HOSTS,
           **extra: float) -> dict[tuple[str, str], simulate.Behaviour]:
    return {(c, h): simulate.Behaviour(r, **extra) for c, r in rates.items() for h in hosts}


def test_the_seed_playbook_calls_a_truly_fixed_cell_fixed_almost_never_at_its_six_attempts() -> None:
    chance = estimate.called_fixed(SEED, HOSTS, 0.3, 0.0, campaigns=10)
    assert chance.p == 0.0 and chance.campaigns == 10 and chance.half_width == pytest.approx(0.3)  # rule of three
    # 0/24 against ~7/24 with nine cells in one Holm family cannot bound the rate ratio below 0.2


def test_a_fixed_cell_is_called_fixed_most_of_the_time_once_each_cell_runs_36_attempts_a_host() -> None:
    chance = estimate.called_fixed(replace(SEED, attempts=36), HOSTS, 0.3, 0.0, campaigns=12)
    assert chance.p >= 0.8


def test_the_playbooks_own_fixed_ratio_is_what_the_plan_judges_with() -> None:
    # the same campaigns at 12 attempts a cell and host: 0/48 against ~14/48 bounds the ratio
    # near 0.17-0.3 at Holm's rank 9, below 0.5 but not below the seed's 0.2
    book = replace(SEED, attempts=12)
    strict = estimate.called_fixed(book, HOSTS, 0.3, 0.0, campaigns=8)
    loose = estimate.called_fixed(replace(book, fixed_ratio=0.5), HOSTS, 0.3, 0.0, campaigns=8)
    assert strict.p == 0.0 and loose.p > 0.5


def test_the_power_search_finds_a_size_that_reaches_the_goal_and_says_the_chance_there() -> None:
    book = replace(SEED, cells=SEED.cells[:2])  # one compared cell: the search is cheap
    (answer,) = estimate.attempts_for_power(book, HOSTS[:2], 0.5, (0.8,), campaigns=10)
    assert answer.attempts is not None and answer.chance is not None
    assert answer.chance.p >= 0.8 and answer.attempts > book.attempts
    smaller = estimate.called_fixed(replace(book, attempts=answer.attempts // 2), HOSTS[:2], 0.5, 0.0, 10)
    assert smaller.p < 0.8


def test_a_cell_under_first_reproduction_stops_at_its_first_reproduction_by_the_runners_own_rule() -> None:
    book = replace(SEED, cells=SEED.cells[:3], stop=StopRule(StopKind.FIRST_REPRODUCTION))
    design = simulate.Design(book, HOSTS[:2])
    truth = _truth(book, {c.name: 0.5 for c in book.cells}, HOSTS[:2])
    campaign = simulate.draw(design, truth, random.Random(3))
    stops = [s for s in campaign.stops if s["verdict"] == "reproduces"]
    assert stops and all(s["cell"] != book.reference_cell.name for s in campaign.stops)
    for stop in stops:
        ran = [r for r in campaign.records if r["cell"] == stop["cell"] and r["host"] == stop["host"]]
        assert ran[-1]["outcome"] in ("wedge", "reboot") and not any(r["outcome"] in ("wedge", "reboot")
                                                                    for r in ran[:-1])
    reference = [r for r in campaign.records if r["cell"] == book.reference_cell.name and r["host"] == HOSTS[0]]
    assert len(reference) == book.attempts  # the reference never stops early
    verdicts = simulate.judge_campaign(design, campaign).verdicts
    stopped = {s["cell"] for s in stops}
    assert all("stopped by first_reproduction" in v.text for v in verdicts if v.cell in stopped)


def test_what_goes_wrong_in_a_design_lands_in_the_records_with_the_role_a_campaign_gives_it() -> None:
    book = replace(SEED, cells=SEED.cells[:2], attempts=40)
    design = simulate.Design(book, HOSTS[:2], quarantined={HOSTS[1]: 10}, interrupted=0.1)
    truth = _truth(book, {c.name: 0.5 for c in book.cells}, HOSTS[:2], caught_short=0.3, lost=0.2)
    campaign = simulate.draw(design, truth, random.Random(5))
    roles = Counter((r["outcome"], book.judging.role(r["outcome"], r["last_phase"], None, r.get("reason")))
                    for r in campaign.records)
    assert roles[("error", Role.FAILED_AT_RISK)] + roles[("hang", Role.FAILED_AT_RISK)] > 0  # the bug caught short
    assert roles[("infra", Role.FAILED_AT_RISK)] > 0  # a strike the controller lost in capture: at risk (issue 33 item 2)
    assert roles[("infra", Role.NOT_RUN)] > 0  # interrupted slots and the quarantined host's rest
    quarantined = [r for r in campaign.records if r["host"] == HOSTS[1] and r["outcome"] != "infra"]
    assert len(quarantined) <= 10
    records = list(campaign.records)
    interrupted = [i for i, r in enumerate(records) if r.get("reason", "").startswith("interrupted")]
    assert interrupted
    for i in interrupted:  # run again: the next record is the same slot's second try
        first, again = records[i], records[i + 1]
        assert (again["cell"], again["host"], again["attempt_index"]) == (first["cell"], first["host"],
                                                                         first["attempt_index"])
        assert not again.get("reason", "").startswith("interrupted")


def test_a_design_without_a_manifest_is_judged_as_a_folder_without_campaign_json() -> None:
    book = replace(SEED, cells=SEED.cells[:2])
    design = simulate.Design(book, HOSTS[:2], manifest=False)
    campaign = simulate.draw(design, _truth(book, {"default": 0.5}, HOSTS[:2]), random.Random(1))
    verdicts = simulate.judge_campaign(design, campaign).verdicts
    assert all("has no campaign.json" in v.text for v in verdicts)


def test_remembered_statistics_change_no_verdict_and_leave_the_originals_in_place() -> None:
    book = replace(SEED, attempts=12)
    design = simulate.Design(book, HOSTS)
    truth = _truth(book, {c.name: (0.3 if c.name == "default" else 0.0) for c in book.cells})
    campaign = simulate.draw(design, truth, random.Random(2))
    plain = [v.to_json() for v in simulate.judge_campaign(design, campaign).verdicts]
    before = (intervals.hosts_disagree, intervals.stratified)
    with simulate.remembered_statistics():
        remembered = [v.to_json() for v in simulate.judge_campaign(design, campaign).verdicts]
        assert intervals.hosts_disagree is not before[0]
    assert remembered == plain and (intervals.hosts_disagree, intervals.stratified) == before


def test_a_look_after_a_round_is_the_running_campaign_and_the_last_round_is_the_planned_end() -> None:
    book = replace(SEED, cells=SEED.cells[:2], attempts=30)
    design = simulate.Design(book, HOSTS[:2])
    campaign = simulate.draw(design, _truth(book, {"default": 0.5}, HOSTS[:2]), random.Random(4))
    early = {v.cell: v for v in simulate.judge_campaign(design, campaign, after_round=9).verdicts}
    final = {v.cell: v for v in simulate.judge_campaign(design, campaign, after_round=campaign.rounds - 1).verdicts}
    assert early["lgc-2800"].anytime and "still running" in early["lgc-2800"].text
    assert not final["lgc-2800"].anytime and final["lgc-2800"].kind is VerdictKind.FIXED


def reprofleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", "plan", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_invoke_plan_says_how_often_a_fixed_cell_is_called_fixed_and_the_attempts_for_80_and_90_percent() -> None:
    result = reprofleet("--hosts", "inventory/blackwell.yml", "--playbook", "playbooks/sm120-hostwedge.yml",
                        "--campaigns", "4", "--ratio", "0.1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "what the verdicts can show (4 simulated campaigns per number" in out
    assert "9 cells compared with it (one Holm family), fixed_ratio 0.2, stop rule fixed_n" in out
    assert "a truly fixed cell (rate 0) is called fixed 0% ± 75% of the time" in out  # none of 4: the rule of three
    assert "at 0.1 of the reference's rate (3.0%) is called fixed" in out
    assert "80% power for a fixed cell needs about" in out and "90% power for a fixed cell needs about" in out


@pytest.mark.parametrize(("args", "words"), [(["--campaigns", "1.5"], "--campaigns takes a whole number"),
                                             (["--campaigns", "1"], "at least 2 campaigns"),
                                             (["--ratio", "0.1,1.5"], "--ratio takes rate ratios"),
                                             (["--ratio", "lots"], "--ratio takes a number")])
def test_bad_plan_numbers_are_one_line_exit_2_and_nothing_is_estimated(args: list[str], words: str) -> None:
    result = reprofleet("--hosts", "inventory/blackwell.yml", "--playbook", "playbooks/sm120-hostwedge.yml", *args)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert words in line
