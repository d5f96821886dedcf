"""Anytime-valid numbers: their error over every look, computed exactly by walking the counts."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import beta as beta_dist

from reprofleet.stats import anytime


@pytest.mark.parametrize("p", [0.02, 0.1, 0.3, 0.5, 0.8])
def test_the_confidence_sequence_excludes_the_true_rate_at_some_look_at_most_alpha_of_the_time(p: float) -> None:
    """P(there is a t <= 300 at which the true rate is outside the sequence) <= 5%, exactly."""
    alive, missed = {0: 1.0}, 0.0
    for n in range(1, 301):
        step: dict[int, float] = {}
        for k, q in alive.items():
            step[k + 1] = step.get(k + 1, 0.0) + q * p
            step[k] = step.get(k, 0.0) + q * (1 - p)
        alive = {}
        for k, q in step.items():
            if anytime.rate_excluded(k, n, p, 0.05):
                missed += q
            else:
                alive[k] = q
    assert missed <= 0.05


def test_a_sequence_is_wider_than_the_exact_fixed_n_bound_and_holds_the_observed_rate() -> None:
    for k, n in ((0, 36), (3, 10), (18, 36), (10, 10)):
        upper = 1.0 if k == n else float(beta_dist.ppf(0.95, k + 1, n - k))
        assert anytime.rate_upper(k, n) >= upper - 1e-12
        assert anytime.rate_lower(k, n) <= k / n <= anytime.rate_upper(k, n)


def _null_max_numerically(x1: int, n1: int, x2: int, n2: int, rho: float) -> float:
    def negative(p: float) -> float:
        return -(anytime.log_likelihood(x1, n1, min(rho * p, 1.0)) + anytime.log_likelihood(x2, n2, p))
    found = minimize_scalar(negative, bounds=(1e-12, min(1.0, 1.0 / rho) - 1e-12), method="bounded",
                            options={"xatol": 1e-12})
    free = anytime.log_likelihood(x1, n1, x1 / n1) + anytime.log_likelihood(x2, n2, x2 / n2)
    return free if x1 / n1 >= rho * x2 / n2 else -float(found.fun)


@pytest.mark.parametrize("table", [(0, 36, 18, 36), (2, 30, 9, 30), (3, 10, 1, 10), (0, 5, 5, 5), (7, 9, 2, 20)])
@pytest.mark.parametrize("rho", [0.2, 1 / 3, 1.0, 2.5])
def test_the_null_maximum_is_the_numerical_one(table: tuple[int, int, int, int], rho: float) -> None:
    x1, n1, x2, n2 = table
    expected = anytime.log_mixture(x1, n1) + anytime.log_mixture(x2, n2) - _null_max_numerically(x1, n1, x2, n2, rho)
    assert anytime.log_e_value([((x1, n1), (x2, n2))], rho) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("rho, reference", [(1.0, 0.3), (1.0, 0.6), (0.2, 0.5), (1 / 3, 0.9), (0.2, 0.1)])
def test_under_its_null_the_e_process_ever_reaches_one_over_alpha_at_most_alpha_of_the_time(
        rho: float, reference: float) -> None:
    """Cell and reference attempts in turns (the blocks order), up to 60 each; the cell's rate
    exactly rho times the reference's (the null's hardest point). Exact, over every path."""
    cell = rho * reference
    alive, rejected = {(0, 0): 1.0}, 0.0
    for t in range(1, 121):
        step: dict[tuple[int, int], float] = {}
        for (x, y), q in alive.items():
            p = cell if t % 2 else reference
            up = (x + 1, y) if t % 2 else (x, y + 1)
            step[up] = step.get(up, 0.0) + q * p
            step[(x, y)] = step.get((x, y), 0.0) + q * (1 - p)
        alive = {}
        n1, n2 = (t + 1) // 2, t // 2
        for (x, y), q in step.items():
            if anytime.log_e_value([((x, n1), (y, n2))], rho) >= math.log(20):
                rejected += q
            else:
                alive[(x, y)] = q
    assert rejected <= 0.05


def test_hosts_multiply_and_the_ratio_bound_inverts_the_e_value() -> None:
    one, two = [((0, 36), (18, 36))], [((0, 36), (18, 36)), ((0, 20), (10, 20))]
    assert anytime.log_e_value(two, 0.3) == pytest.approx(anytime.log_e_value(one, 0.3)
                                                           + anytime.log_e_value([((0, 20), (10, 20))], 0.3))
    bound = anytime.ratio_upper(one).upper
    assert anytime.log_e_value(one, bound * 1.001) >= math.log(20) > anytime.log_e_value(one, bound * 0.999)
    assert math.isinf(anytime.ratio_upper([((0, 36), (0, 36))]).upper)


def test_anytime_is_dearer_than_fixed_n() -> None:
    from reprofleet.stats import ratio
    table = [((0, 36), (18, 36))]
    assert anytime.ratio_upper(table).upper > ratio.upper_bound(table).upper
