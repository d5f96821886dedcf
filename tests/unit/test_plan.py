"""``invoke plan``: what ruling out a rate costs, and how long a campaign will take, before it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from reprofleet.model import StopKind, StopRule
from reprofleet.campaign.estimate import baseline_plan, campaign_estimate, cell_plan, describe_campaign
from reprofleet.playbook import load_playbook
from reprofleet.stats.sprt import Sprt
from tests.support.fleet_campaign import write_playbook
from tests.support.paths import REPO


def reprofleet(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reprofleet", "plan", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("baseline", "clean"), [("0.3", 9), ("0.2", 14)])
def test_the_first_line_says_how_many_clean_attempts_rule_the_baseline_out(baseline: str, clean: int) -> None:
    result = reprofleet("--baseline", baseline, "--confidence", "0.95")
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert int(first.split()[0]) == clean
    assert f"rule out a reproduction rate of {float(baseline):.0%} at 95% (one-sided, exact)" in first
    assert any("SPRT" in line for line in rest) and any("fixed-n" in line for line in rest)


def test_the_sprt_lines_show_what_it_saves_over_fixed_n() -> None:
    plan = baseline_plan(0.3)  # fixed = 3%, alpha 5%, beta 20%
    assert (plan.clean_attempts, plan.fixed_n, plan.cap) == (9, 14, 42)
    assert plan.wald_if_reproduces == pytest.approx(2.90, abs=0.01)
    assert plan.exact_if_reproduces < plan.exact_if_fixed < plan.fixed_n
    result = reprofleet("--baseline", "0.3", "--fixed-rate", "0.05", "--alpha", "0.1", "--beta", "0.1")
    assert "against p1 5.0% (fixed), alpha 0.1, beta 0.1" in result.stdout


@pytest.mark.parametrize("args", [["--baseline", "lots"], ["--baseline", "0.3", "--fixed-rate", "0.3"]])
def test_bad_numbers_are_one_line_and_exit_2(args: list[str]) -> None:
    result = reprofleet(*args)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("reprofleet: error:")


@pytest.mark.parametrize(("baseline", "fixed"), [(0.0, None), (1.0, None), (1.5, None), (0.3, 0.3), (0.3, 0.0)])
def test_a_baseline_is_a_rate_and_fixed_is_below_it(baseline: float, fixed: float | None) -> None:
    with pytest.raises(ValueError):
        baseline_plan(baseline, fixed_rate=fixed)


def test_the_seed_campaign_on_the_blackwell_fleet_prints_a_length_and_power_cycles() -> None:
    result = reprofleet("--hosts", "inventory/blackwell.yml", "--playbook", "playbooks/sm120-hostwedge.yml",
                        "--campaigns", "4")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "4 hosts (ws01, ws02, ws03, ws04)" in out
    assert "per host: 60 slots, 60.0 attempts expected" in out  # 10 cells x 6, every one fixed_n
    assert "900 s (the playbook's attempt timeout: an upper bound" in out
    # 30% of the reference's 6 attempts, to 30% of all 60; each dwell 10 s + boot 600 s
    assert "power cycles per host: 1.8 (only the reference reproduces, at 30%) to 18.0" in out and "610 s" in out
    hours = re.search(r"expected length: ([\d.]+) to ([\d.]+) h per host", out)
    assert hours is not None
    assert float(hours[1]) == pytest.approx((60 * 900 + 1.8 * 610) / 3600, abs=0.06)
    assert float(hours[2]) == pytest.approx((60 * 900 + 18 * 610) / 3600, abs=0.06)


def test_a_typical_attempt_time_replaces_the_timeout(tmp_path: Path) -> None:
    result = reprofleet("--hosts", "inventory/blackwell.yml", "--playbook", "playbooks/sm120-hostwedge.yml",
                        "--attempt-s", "150", "--baseline", "0.5", "--campaigns", "4")
    assert "attempt duration: 150 s (as given)" in result.stdout
    assert "3.0 (only the reference reproduces, at 50%) to 30.0" in result.stdout
    assert "more power cycles than the budget of 20 per host" in result.stdout


def test_a_missing_inventory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = reprofleet("--hosts", str(tmp_path / "none.yml"), "--playbook", "playbooks/sm120-hostwedge.yml")
    assert result.returncode == 2 and "none.yml" in result.stderr.strip()


def test_each_stop_rule_has_its_expected_attempts(tmp_path: Path) -> None:
    book = load_playbook(write_playbook(
        tmp_path, attempts=6, extra="stop: {rule: first_reproduction}\n",
        cells="  - name: default\n  - name: lgc\n    graphics_clocks: [180, 2800]\n"
              "  - name: pl\n    power_limit: 350\n    stop: {rule: sprt, p0: 0.3, p1: 0.03}\n"))
    estimate = campaign_estimate(book, ["ws01"], 0.3, dwell_s=10)
    reference, first, sprt = estimate.cells
    assert (reference.reference, reference.slots, reference.attempts.low, reference.attempts.high) == (True, 6, 6, 6)
    # first reproduction, reproducing at 30%: E[min(wait, 18)] = (1 - 0.7^18) / 0.3; truly fixed: its cap of 3 x 6,
    # since 18 clean attempts never show a rate ratio below 0.2 against the reference's 6
    assert first.slots == 18 and first.if_fixed.attempts == 18 and first.if_fixed.no_claim == 1.0
    assert first.if_reproduces.attempts == pytest.approx((1 - 0.7 ** 18) / 0.3)
    assert first.reproductions_at_baseline == pytest.approx(1 - 0.7 ** 18)  # at most one, then it stops
    # SPRT: at least its own average at p0 (a "fixed" boundary crossed by chance must wait for the
    # comparison); truly fixed, all 42 slots, as the comparison with 6 reference attempts never concludes
    textbook = Sprt(0.3, 0.03, 0.05, 0.2).exact_expected_attempts(0.3, 42)
    assert sprt.slots == 42 and textbook <= sprt.if_reproduces.attempts < 10
    assert sprt.if_fixed.attempts == pytest.approx(42, abs=0.01) and sprt.if_fixed.no_claim > 0.99  # 6/6: 0.07%
    assert estimate.power_cycles.low == pytest.approx(0.3 * 6)
    text = describe_campaign(estimate)
    assert "first_reproduction" in text and "sprt" in text and "(reference)" in text
    assert "42.0 (100% runs to its cap with no claim)" in text
    assert "with no claim 100% of the time" in text and "(lgc, pl)" in text


def test_a_cell_that_never_stops_early_is_expected_to_use_every_slot(tmp_path: Path) -> None:
    book = load_playbook(write_playbook(tmp_path, attempts=6, cells="  - name: default\n  - name: c\n"))
    plan = cell_plan(book, book.cells[1], ["ws01", "ws02"], 0.3)
    assert (plan.slots, plan.attempts.low, plan.attempts.high) == (6, pytest.approx(6), 6)
    assert plan.reproductions_at_baseline == pytest.approx(1.8) and plan.if_fixed.reproductions == 0
    sprt = replace(book, stop=StopRule(StopKind.SPRT, 0.3, 0.03))
    assert cell_plan(sprt, sprt.cells[1], ["ws01"], 0.3).slots == 42
