"""A policy counts as applied only when the GPU reports it back."""

from __future__ import annotations

from types import MappingProxyType

from reprofleet.model import Cell, GpuPolicy, Host, Playbook, Poc, Timeouts
from reprofleet.runner.gpu_policy import check_power_limits, verify


def test_read_back_within_tolerance_verifies() -> None:
    wanted = GpuPolicy(graphics_clocks=(180, 2800), power_limit_w=350)
    assert verify(wanted, {"graphics_clocks": [180, 2805], "graphics_clocks_freqs": [180, 2800],
                           "power_limit_w": 350.0}) == []


def test_a_clock_lock_the_gpu_does_not_report_is_a_problem() -> None:
    wanted = GpuPolicy(graphics_clocks=(180, 2800))
    problems = verify(wanted, {"graphics_clocks": [180, 3090]})
    assert problems and "graphics_clocks" in problems[0]
    assert verify(wanted, {}) != []


def test_a_lock_only_one_read_reports_cannot_be_told_from_no_lock_and_is_a_problem() -> None:
    wanted = GpuPolicy(graphics_clocks=(180, 1500))
    (missing,) = verify(wanted, {"graphics_clocks": [180, 1500]})  # a pynvml without the driver's clock range
    assert "cannot tell locked from unlocked" in missing and "graphics_clocks_freqs) is unavailable" in missing
    (disagree,) = verify(wanted, {"graphics_clocks": [180, 1500], "graphics_clocks_freqs": [345, 1980]})
    assert "cannot tell locked from unlocked" in disagree and "[345, 1980]" in disagree
    memory = GpuPolicy(memory_clocks=(3201, 3201))
    assert verify(memory, {"memory_clocks": [3201, 3201], "memory_clocks_freqs": [3201, 3201]}) == []
    assert verify(memory, {"memory_clocks": [3201, 3201], "memory_clocks_freqs": None})
    # application clocks have their own getter (nvmlDeviceGetApplicationsClock): one read suffices
    assert verify(GpuPolicy(application_clocks=(3201, 1980)), {"application_clocks": [3201, 1980]}) == []


def test_power_limit_and_persistence_are_checked() -> None:
    assert verify(GpuPolicy(power_limit_w=350), {"power_limit_w": 600.0})
    assert verify(GpuPolicy(persistence=True), {"persistence": False})


def _book(*limits: float | None) -> Playbook:
    cells = tuple(Cell(f"c{i}", i, {}, gpu=GpuPolicy(power_limit_w=w)) for i, w in enumerate(limits))
    return Playbook("b", "b.yml", Poc("/p.py"), 1, Timeouts(), cells)


def test_out_of_range_power_limit_is_refused_from_cached_facts() -> None:
    host = Host("ws01", "10.0.0.1")
    facts = {"gpus": [{"index": 0, "power_limit_w": {"min": 150.0, "max": 600.0}}]}
    problems = check_power_limits(_book(None, 350, 700), host, facts)
    assert len(problems) == 1 and "c2" in problems[0] and "700" in problems[0]


def test_inventory_power_limit_range_overrides_facts() -> None:
    host = Host("ws01", "10.0.0.1", vars=MappingProxyType({"gpu_power_limits": [150, 300]}))
    assert check_power_limits(_book(350), host, None)


def test_a_change_since_the_policy_was_applied_is_named_and_jitter_is_not() -> None:
    from reprofleet.runner.gpu_policy import changed_since

    applied = {"graphics_clocks": [180, 2800], "power_limit_w": 350.0, "persistence": True, "memory_clocks": None}
    assert changed_since(applied, {**applied, "graphics_clocks": [180, 2805], "power_limit_w": 350.4}) == []
    assert changed_since(applied, {**applied, "power_limit_w": 600.0}) == ["power_limit_w: was 350.0, now 600.0"]
    assert changed_since({**applied, "graphics_clocks": None}, {**applied, "graphics_clocks": [180, 2100]}) == [
        "graphics_clocks: was None, now [180, 2100]"]  # a lock added under the default cell
