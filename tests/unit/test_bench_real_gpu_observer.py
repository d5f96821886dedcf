"""The observer bench's estimate at equal CPU speed (bench/real_gpu.py), and what it found on the H200.

The VM's vCPU changes speed by up to 2x between identical captures; the bench measures that
speed inside each capture with a fixed probe and takes the sampler's effect as the intercept
of the paired log ratios regressed on the probe's log ratios. These tests pin that the
estimate recovers a known effect under such noise (where the raw ratio cannot), that it does
not absorb an effect the probe shares, and that the committed H200 figures meet issue 22's goal.
"""

from __future__ import annotations

import json
import math
import random
import sys

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "bench"))

import real_gpu  # noqa: E402  (bench script: stdlib only at import)


def _rounds(effect: float, cpu_effect: float = 1.0, rounds: int = 300, seed: int = 5) -> dict:
    """Paired captures whose CPU speed varies by ~15% (log SD) between captures; the sampler
    slows the capture's own work by ``effect`` and the CPU by ``cpu_effect``."""
    rng = random.Random(seed)
    by = {}
    for k in range(rounds):
        for condition in ("off", "10hz"):
            slow = math.exp(rng.gauss(0.0, 0.15)) * (cpu_effect if condition == "10hz" else 1.0)
            probe = 0.01 * slow * math.exp(rng.gauss(0.0, 0.01))
            work = 0.7 * slow * (effect if condition == "10hz" else 1.0) * math.exp(rng.gauss(0.0, 0.02))
            by[(k, condition)] = {"work_s": work, "inline_probe_s": probe}
    return by


def test_the_effect_at_equal_cpu_speed_is_recovered_where_the_raw_ratio_is_lost_in_noise() -> None:
    by = _rounds(effect=1.02)
    summary = real_gpu.inline_probe_summary(by, sorted({k for k, _ in by}), "10hz")
    low, high = summary["at_equal_cpu_ci95"]
    assert low < 1.02 < high and high - low < 0.01
    raw_low, raw_high = summary["work_ratio"]["geomean_ci95"]
    assert raw_high - raw_low > 0.03  # the same rounds, read raw: three times as wide


def test_a_sampler_that_slows_the_cpu_shows_in_the_probe_ratio_not_hidden() -> None:
    by = _rounds(effect=1.0, cpu_effect=1.08)
    summary = real_gpu.inline_probe_summary(by, sorted({k for k, _ in by}), "10hz")
    low, high = summary["at_equal_cpu_ci95"]
    assert low < 1.0 < high  # at equal CPU speed the capture's own work is unchanged ...
    assert summary["probe_ratio"]["geomean_ci95"][0] > 1.0  # ... the CPU slowdown is reported beside it ...
    assert summary["work_ratio"]["geomean_ci95"][0] > 1.0  # ... and the raw ratio keeps it


def test_the_h200_figures_meet_the_goal_at_10_hz() -> None:
    results = json.loads((REPO / "bench" / "real-gpu-observer-inline-results.json").read_text())
    ten = results["summary"]["warm"]["inline_probe"]["10hz"]
    low, high = ten["at_equal_cpu_ci95"]
    assert ten["n"] >= 500 and ten["at_equal_cpu"] <= 1.01 and high - low <= 0.04
    assert 1.0 - 0.02 <= low and high <= 1.0 + 0.02
    raw_low, raw_high = ten["work_ratio"]["geomean_ci95"]
    assert 0.98 <= raw_low and raw_high <= 1.02
    seen = {mhz for row in results["rows"] for mhz in row["gfx_mhz_min_max"]}
    assert seen == {1980}  # no condition moved the clocks reached
    rows = {(row["round"], row["condition"]): row for row in results["rows"]}
    again = real_gpu.inline_probe_summary(rows, sorted({k for k, _ in rows}), "10hz")
    assert math.isclose(again["at_equal_cpu"], ten["at_equal_cpu"], rel_tol=1e-4)  # the rows give the summary
