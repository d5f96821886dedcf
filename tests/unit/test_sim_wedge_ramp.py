"""The wedge model's optional ramp: P(wedge | ceiling) a known function for a boundary search to find."""

from __future__ import annotations

import pytest

from reprofleet.sim.rfsim.wedge import Conditions, WedgeParams, wedge_probability
from reprofleet.sim.spec import SimHostSpec, spec_from_mapping


def _p(params: WedgeParams, ceiling: int, version: str = "0.25.1") -> float:
    return wedge_probability(params, Conditions(ceiling, 600.0, 9, vllm_version=version))


def test_with_a_ramp_p_rises_linearly_from_zero_at_the_safe_clock_to_p_wedge() -> None:
    params = WedgeParams(p_wedge=0.6, safe_clock_mhz=2400, wedge_ramp_mhz=400)
    assert [_p(params, c) for c in (2200, 2400, 2500, 2600, 2800, 3000)] == pytest.approx([0, 0, 0.15, 0.3, 0.6, 0.6])


def test_without_a_ramp_the_model_is_the_seeds_step() -> None:
    params = WedgeParams(p_wedge=0.6, safe_clock_mhz=2400)
    assert [_p(params, c) for c in (2400, 2401, 3000)] == pytest.approx([0, 0.6, 0.6])


def test_the_ramp_reaches_the_hosts_fake_tools_and_refuses_a_negative_width() -> None:
    spec = spec_from_mapping({"name": "sim-a", "p_wedge": 0.5, "safe_clock_mhz": 2400, "wedge_ramp_mhz": 400})
    assert spec.wedge_params().wedge_ramp_mhz == 400 and _p(spec.wedge_params(), 2600) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="wedge_ramp_mhz must be >= 0"):
        SimHostSpec("sim-b", wedge_ramp_mhz=-1)


def test_four_vllm_versions_can_change_between_the_second_and_the_third() -> None:
    """What a bisection fleet test's hosts say: 0.24.0 and 0.25.1 wedge, 0.26.0 and 0.27.0 never."""
    spec = spec_from_mapping({"name": "sim-a", "p_wedge": 0.5, "vllm_fixed_in": "0.26.0", "vllm_factors": [],
                              "vllm_fixed_factor": 0.0})
    params = spec.wedge_params()
    assert [_p(params, 3090, v) for v in ("0.24.0", "0.25.1", "0.26.0", "0.27.0")] == pytest.approx([0.5, 0.5, 0, 0])
    moved = spec_from_mapping({"name": "sim-a", "p_wedge": 0.5, "vllm_fixed_in": "0.27.0", "vllm_factors": []})
    assert _p(moved.wedge_params(), 3090, "0.26.0") == pytest.approx(0.5)  # the change point is a parameter
