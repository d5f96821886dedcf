"""Simulated fleet configs: what a host is, and errors that point at the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprofleet.sim import FleetConfigError, SimHostSpec, demo_specs, load_fleet_config
from reprofleet.sim.spec import spec_from_mapping


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.yml"
    path.write_text(text)
    return path


def test_defaults_apply_to_every_host_and_hosts_override_them(tmp_path: Path) -> None:
    specs = load_fleet_config(write(tmp_path, (
        "defaults:\n  time_scale: 0.02\n  p_wedge: 0.4\n"
        "hosts:\n  - name: ws01\n    script: [clean, wedge]\n  - name: ws02\n    p_wedge: 0.1\n"
        "    vllm_factors: {'0.26': 0.5}\n")))
    assert [(s.name, s.p_wedge, s.time_scale, s.script) for s in specs] == [
        ("ws01", 0.4, 0.02, ("clean", "wedge")), ("ws02", 0.1, 0.02, ())]
    assert specs[1].vllm_factors == (("0.26", 0.5),)
    assert specs[1].wedge_params().vllm_factors == (("0.26", 0.5),)


def test_an_unknown_key_is_reported_with_its_host_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  - name: ok\n  - name: bad\n    p_wegde: 0.3\n")
    with pytest.raises(FleetConfigError) as caught:
        load_fleet_config(path)
    assert caught.value.location.line == 3 and caught.value.location.field == "hosts[1]"
    assert "p_wegde" in str(caught.value)


@pytest.mark.parametrize("body, words", [
    ("hosts:\n  - name: a\n    p_wedge: 1.5\n", "between 0 and 1"),
    ("hosts:\n  - name: a\n    p_wedge: 0.9\n    p_error: 0.2\n", "must not exceed 1"),
    ("hosts:\n  - name: a\n    script: [boom]\n", "script entries"),
    ("hosts:\n  - name: Bad_Name\n", "lowercase"),
    ("hosts:\n  - name: a\n    wedge_phase: lunch\n", "wedge_phase"),
    ("hosts:\n  - name: a\n  - name: a\n", "unique"),
    ("hosts: []\n", "non-empty"),
    ("fleet: 3\n", "unknown top-level key"),
])
def test_invalid_configs_are_refused_with_a_reason(tmp_path: Path, body: str, words: str) -> None:
    with pytest.raises(FleetConfigError, match=words):
        load_fleet_config(write(tmp_path, body))


def test_yaml_syntax_errors_carry_the_line(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError) as caught:
        load_fleet_config(write(tmp_path, "hosts:\n  - name: a\n   bad: [\n"))
    assert caught.value.location.line is not None


def test_the_demo_fleet_is_two_susceptible_hosts_and_one_that_is_not() -> None:
    specs = demo_specs()
    assert [(s.name, s.susceptible, s.p_wedge) for s in specs] == [
        ("sim0", True, 0.5), ("sim1", True, 0.3), ("sim2", False, 0.35)]
    assert [s.name for s in demo_specs(5)] == ["sim0", "sim1", "sim2", "sim3", "sim4"]
    assert not demo_specs(5)[4].susceptible


def test_a_host_config_round_trips_through_json_data() -> None:
    spec = SimHostSpec("rt", script=("hang",), seed=None, xid_on_wedge=True)
    config = spec.host_config()
    assert config["seed"] == spec.effective_seed and config["script"] == ["hang"]
    back = spec_from_mapping({**config, "seed": None})
    assert back == spec
