"""Observe-only hosts (inventory ``gpu_policy: observe``): machines we do not own.

No GPU setter ever runs there (the agent's ``policy apply`` and ``policy restore`` are the
only paths to ``nvidia-smi -lgc/-rgc/-pl/-pm``), the card's read-back still goes into every
record, and a cell that asks for a setting is refused for that host before anything runs:
one line naming host and cell, in the dry run and before a campaign.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reprofleet.campaign.preflight import check_playbook_against_hosts, observe_only_refusals
from reprofleet.campaign.run import describe_plan, make_plan
from reprofleet.clock import VirtualClock
from reprofleet.errors import InventoryError, PolicyError
from reprofleet.inventory import load_inventory
from reprofleet.model import GpuAccess, GpuPolicy, Host
from reprofleet.runner import gpu_policy
from tests.support.seam_host import FakeHost, events, records, run_host, seam_book, seam_context
from tests.support.scripted_runner import cell

OWNER_SETTINGS = {"graphics_clocks": [345, 1980], "memory_clocks": [3201, 3201], "power_limit_w": 700.0,
                  "persistence": True, "application_clocks": [3201, 1980]}


def locked(name: str, index: int) -> Any:
    return replace(cell(name, index), gpu=GpuPolicy(graphics_clocks=(180, 1500)))


def observe(fake: FakeHost) -> FakeHost:
    fake.host = replace(fake.host, gpu_access=GpuAccess.OBSERVE)
    return fake


# -- the inventory variable ----------------------------------------------------------------
def test_the_inventory_marks_a_host_observe_only_and_others_stay_managed(tmp_path: Path) -> None:
    yml = tmp_path / "hosts.yml"
    yml.write_text("all:\n  hosts:\n    cloud1:\n      gpu_policy: observe\n    lab1: {}\n")
    hosts = {h.name: h for h in load_inventory(str(yml)).hosts}
    assert hosts["cloud1"].observe_only and hosts["cloud1"].gpu_access is GpuAccess.OBSERVE
    assert not hosts["lab1"].observe_only and hosts["lab1"].gpu_access is GpuAccess.MANAGE
    ini = tmp_path / "hosts.ini"
    ini.write_text("[shared]\nbox1\n[shared:vars]\ngpu_policy=observe\n")
    assert load_inventory(str(ini)).hosts[0].observe_only  # a group's vars mark all its hosts


def test_a_misspelt_gpu_policy_is_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    yml = tmp_path / "hosts.yml"
    yml.write_text("all:\n  hosts:\n    cloud1:\n      ansible_host: 10.0.0.5\n      gpu_policy: obsrve\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(yml))
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{yml}:5:gpu_policy: ") and "'obsrve'" in line and "did you mean 'observe'" in line


# -- refused before anything runs ----------------------------------------------------------
def test_a_cell_that_asks_for_a_setting_is_left_out_of_an_observe_only_hosts_plan(tmp_path: Path) -> None:
    book = seam_book(tmp_path, cell("ref", 0), locked("lgc-1500", 1), attempts=2)
    cloud, lab = Host("cloud1", "10.0.0.5", gpu_access=GpuAccess.OBSERVE), Host("lab1", "10.0.0.6")
    plan = make_plan(book, (cloud, lab))
    assert sorted({c.name for c, _ in plan.per_host["cloud1"]}) == ["ref"]
    assert sorted({c.name for c, _ in plan.per_host["lab1"]}) == ["lgc-1500", "ref"]
    (refused,) = observe_only_refusals(book, (cloud, lab))
    assert refused.startswith("cloud1: cell 'lgc-1500' refused: ") and "graphics_clocks [180, 1500]" in refused
    text = describe_plan(plan)
    assert [line for line in text.splitlines() if "refused" in line] == [refused]  # one line, in the dry run
    assert "attempts planned: 6 (cloud1: 2, lab1: 4)" in text


def test_an_observe_only_hosts_refused_cell_is_not_checked_against_its_power_range(tmp_path: Path) -> None:
    book = seam_book(tmp_path, cell("ref", 0), replace(cell("pl-900", 1), gpu=GpuPolicy(power_limit_w=900)))
    cloud = Host("cloud1", "10.0.0.5", gpu_access=GpuAccess.OBSERVE, vars={"gpu_power_limits": [200, 700]})
    check_playbook_against_hosts(book, (cloud,), tmp_path)  # refused there, so never out of its range
    assert gpu_policy.check_power_limits(book, cloud, None) == []


# -- the setters are never reached ---------------------------------------------------------
class CountingAgent:
    host = "cloud1"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def policy(self, action: str, gpu: int, settings: Any = None) -> Any:
        self.asked.append(action)
        raise AssertionError(f"the agent was asked to {action}")


@pytest.mark.parametrize("action", ["apply", "restore"])
def test_apply_and_restore_refuse_an_observe_only_host_before_the_agent_is_asked(action: str) -> None:
    agent = CountingAgent()
    cloud = Host("cloud1", "10.0.0.5", gpu_access=GpuAccess.OBSERVE)
    with pytest.raises(PolicyError, match="observe-only"):
        if action == "apply":
            gpu_policy.apply(agent, cloud, GpuPolicy())  # type: ignore[arg-type]
        else:
            gpu_policy.restore(agent, cloud)  # type: ignore[arg-type]
    assert agent.asked == []


def test_an_observe_only_host_runs_its_default_cells_reading_the_card_and_never_setting_it(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = observe(FakeHost(clock, "cloud1", script=("clean", "error", "clean")))
    fake.policy = dict(OWNER_SETTINGS)  # what its owner left on the card
    ctx = seam_context(seam_book(tmp_path, attempts=3), tmp_path, clock)
    run_host(fake, ctx)
    assert [r["outcome"] for r in records(ctx)] == ["clean", "error", "clean"]
    assert set(fake.policy_calls) == {"read"}  # never apply, never restore (not even at the end)
    assert all(r["policy"].items() >= OWNER_SETTINGS.items() for r in records(ctx))  # the read-back, in every record
    assert events(ctx, "policy_applied", "policy_restored", "policy_restore_failed") == []


def test_a_policy_cell_that_reaches_an_observe_only_host_all_the_same_is_infra_and_sets_nothing(
        tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = observe(FakeHost(clock, "cloud1", script=("clean", "clean")))
    book = seam_book(tmp_path, cell("ref", 0), locked("lgc-1500", 1), attempts=1)
    ctx = seam_context(book, tmp_path, clock)
    run_host(fake, ctx, plan=[(book.cells[1], 0), (book.cells[0], 0)])  # a plan not built by make_plan
    by_cell = {r["cell"]: r for r in records(ctx)}
    assert by_cell["lgc-1500"]["outcome"] == "infra" and "observe-only" in by_cell["lgc-1500"]["reason"]
    assert by_cell["ref"]["outcome"] == "clean"
    assert "apply" not in fake.policy_calls and "restore" not in fake.policy_calls


def test_a_card_its_owner_changed_between_attempts_is_said_and_left_alone(tmp_path: Path) -> None:
    clock = VirtualClock()
    fake = observe(FakeHost(clock, "cloud1", script=("clean",)))
    fake.policy = dict(OWNER_SETTINGS)
    ctx = seam_context(seam_book(tmp_path, attempts=1), tmp_path, clock)
    runner = run_host(fake, ctx)
    fake.policy = {**OWNER_SETTINGS, "graphics_clocks": [1500, 1500]}  # the owner locked it meanwhile
    now = runner.policy.ensure(runner.link.agent(), GpuPolicy())
    assert now["graphics_clocks"] == [1500, 1500]
    (changed,) = events(ctx, "policy_changed")
    assert "observe-only" in changed["message"] and any("graphics_clocks" in c for c in changed["changes"])
    assert set(fake.policy_calls) == {"read"}


def test_an_observe_only_host_needs_neither_nvidia_smi_nor_root_but_still_nvml() -> None:
    from reprofleet.runner.readiness import problems

    facts = {"nvml": "ok", "gpus": [{"index": 0}], "nvidia_smi": None, "privilege": "none"}
    cloud, lab = Host("cloud1", "10.0.0.5", gpu_access=GpuAccess.OBSERVE), Host("lab1", "10.0.0.6")
    assert problems(cloud, [cell("ref", 0)], facts) == []  # it never runs a setter
    assert problems(lab, [cell("ref", 0)], facts)[0].startswith("nvidia-smi not found")  # a managed host does
    assert problems(cloud, [cell("ref", 0)], {**facts, "nvml": "nvmlInit failed"})  # the read-back needs NVML
