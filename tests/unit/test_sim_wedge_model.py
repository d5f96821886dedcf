"""The wedge model encodes the seed report; tests pin each of its findings."""

from __future__ import annotations

import pytest

from reprofleet.sim.rfsim.wedge import Conditions, WedgeParams, decide, outcome_probabilities, pick, wedge_probability

DEFAULT = Conditions(graphics_ceiling_mhz=3090, power_limit_w=600.0, spec_tokens=9)


def test_a_susceptible_host_wedges_at_its_rate_under_the_default_policy() -> None:
    assert wedge_probability(WedgeParams(p_wedge=0.35), DEFAULT) == pytest.approx(0.35)


def test_a_graphics_clock_ceiling_at_the_safe_clock_makes_a_wedge_impossible() -> None:
    params = WedgeParams(p_wedge=0.9)
    locked = Conditions(graphics_ceiling_mhz=2800, power_limit_w=600.0, spec_tokens=9)
    assert wedge_probability(params, locked) == 0.0
    assert wedge_probability(params, Conditions(2805, 600.0, 9)) == pytest.approx(0.9)


def test_a_power_limit_alone_does_not_protect() -> None:
    capped = Conditions(graphics_ceiling_mhz=3090, power_limit_w=350.0, spec_tokens=9)
    assert wedge_probability(WedgeParams(p_wedge=0.35), capped) == pytest.approx(0.35)


def test_a_host_that_is_not_susceptible_never_wedges() -> None:
    assert wedge_probability(WedgeParams(susceptible=False, p_wedge=1.0), DEFAULT) == 0.0


@pytest.mark.parametrize("cond", [
    Conditions(3090, 600.0, spec_tokens=8),
    Conditions(3090, 600.0, spec_tokens=9, cuda_launch_blocking=True),
    Conditions(3090, 600.0, spec_tokens=9, enforce_eager=True),
    Conditions(3090, 600.0, spec_tokens=9, vllm_version="0.27.0"),
])
def test_the_seeds_other_clean_controls_remove_the_wedge_by_default(cond: Conditions) -> None:
    assert wedge_probability(WedgeParams(p_wedge=0.5), cond) == 0.0


def test_vllm_0_26_keeps_a_fifth_of_the_rate_and_older_versions_all_of_it() -> None:
    params = WedgeParams(p_wedge=0.5)
    assert wedge_probability(params, Conditions(3090, 600.0, 9, vllm_version="0.26.0")) == pytest.approx(0.1)
    assert wedge_probability(params, Conditions(3090, 600.0, 9, vllm_version="0.25.1")) == pytest.approx(0.5)


def test_control_factors_are_parameters() -> None:
    params = WedgeParams(p_wedge=0.5, spec_tokens_factor=0.5, vllm_factors=(("0.27", 0.4),))
    assert wedge_probability(params, Conditions(3090, 600.0, spec_tokens=2)) == pytest.approx(0.25)
    assert wedge_probability(params, Conditions(3090, 600.0, 9, vllm_version="0.27.3")) == pytest.approx(0.2)


def test_outcome_probabilities_form_a_distribution_with_policy_independent_failures() -> None:
    params = WedgeParams(p_wedge=0.35, p_error=0.03, p_hang=0.02, p_reboot=0.01)
    probs = outcome_probabilities(params, DEFAULT)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert probs["clean"] == pytest.approx(0.59)
    locked = outcome_probabilities(params, Conditions(2800, 600.0, 9))
    assert (locked["wedge"], locked["error"], locked["hang"]) == (0.0, 0.03, 0.02)


def test_pick_walks_the_outcomes_in_a_fixed_order() -> None:
    probs = {"wedge": 0.3, "reboot": 0.1, "hang": 0.1, "error": 0.1, "clean": 0.4}
    assert [pick(probs, u) for u in (0.0, 0.35, 0.45, 0.55, 0.65, 0.999)] == [
        "wedge", "reboot", "hang", "error", "clean", "clean"]


def test_a_script_forces_outcomes_attempt_by_attempt_then_the_model_takes_over() -> None:
    params = WedgeParams(susceptible=False, p_error=0.0, p_hang=0.0)
    script = ("wedge", "auto", "error")
    outcomes = [decide(params, DEFAULT, attempt=i, seed=1, script=script) for i in range(4)]
    assert [(d.outcome, d.source) for d in outcomes] == [
        ("wedge", "script"), ("clean", "random"), ("error", "script"), ("clean", "random")]


def test_random_decisions_replay_for_a_seed_and_match_the_rate() -> None:
    params = WedgeParams(p_wedge=0.3, p_error=0.0, p_hang=0.0)
    first = [decide(params, DEFAULT, attempt=i, seed=7).outcome for i in range(2000)]
    again = [decide(params, DEFAULT, attempt=i, seed=7).outcome for i in range(2000)]
    assert first == again
    assert 0.26 < first.count("wedge") / len(first) < 0.34  # binomial sd ~0.01: a fixed draw, not flaky


def test_an_unknown_scripted_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="explode"):
        decide(WedgeParams(), DEFAULT, attempt=0, seed=0, script=("explode",))
