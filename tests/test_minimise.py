"""The planner's own L-BFGS (`tabrelease._minimise`) against optima known in closed form and against scipy's
L-BFGS-B, and a command-line release that plans without importing scipy.optimize."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize

from tabrelease._minimise import ARMIJO, CURVATURE, _wolfe_step, minimise


def rosenbrock(x):
    value = 100.0 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2
    gradient = np.array([-400.0 * x[0] * (x[1] - x[0] ** 2) - 2 * (1 - x[0]), 200.0 * (x[1] - x[0] ** 2)])
    return value, gradient


def test_rosenbrock_reaches_its_minimum_at_one_one():
    found = minimise(rosenbrock, np.array([-1.2, 1.0]))
    assert found.converged
    np.testing.assert_allclose(found.x, [1.0, 1.0], atol=1e-4)
    assert found.fun < 1e-8


def test_a_quadratic_within_a_box_stops_at_the_projection_of_its_centre():
    """min ||x - c||^2 over [0, 1]^n is the clip of c (by hand); c has components below, inside and above. The
    function is never evaluated outside the box, even from a start outside it."""
    centre = np.array([-2.0, 0.3, 1.7, 0.9, 5.0, -0.1])

    def value_and_gradient(x):
        assert np.all((x >= 0.0) & (x <= 1.0)), "evaluated outside the box"
        return float(((x - centre) ** 2).sum()), 2 * (x - centre)

    for start in (np.full(6, 0.5), np.array([3.0, -1.0, 0.5, 0.5, 2.0, 0.0])):  # the second starts outside the box
        found = minimise(value_and_gradient, start, bounds=(0.0, 1.0))
        np.testing.assert_allclose(found.x, np.clip(centre, 0.0, 1.0), atol=1e-6)
        assert found.converged


@pytest.mark.parametrize("bounds, start, expected", [((-np.inf, 1.0), -2.0, 1.0), ((5.0, np.inf), 8.0, 5.0)])
def test_a_bound_on_one_side_only_is_kept(bounds, start, expected):
    """min (x - 3)^2 for x <= 1 is at 1, and for x >= 5 at 5 (by hand), never evaluated past the bound."""
    def value_and_gradient(x):
        assert bounds[0] <= x[0] <= bounds[1], "evaluated outside the bound"
        return float((x[0] - 3.0) ** 2), 2 * (x - 3.0)

    found = minimise(value_and_gradient, np.array([start]), bounds=bounds)
    assert found.x[0] == pytest.approx(expected)


@pytest.mark.parametrize("first", [1.0, 150.0])
def test_the_line_search_returns_a_step_meeting_the_strong_wolfe_conditions(first):
    """phi(t) = (t - 100)^2 from t = 0: a first step of 1 decreases enough but its slope is still steep, so the
    search must go on to a step with |phi'(t)| <= 0.9 |phi'(0)| (extrapolating), and one of 150 overshoots (a zoom)."""
    def phi(t):
        return (t - 100.0) ** 2, 2 * (t - 100.0), None

    t, value, _ = _wolfe_step(phi, 10_000.0, -200.0, first, np.inf)
    assert value <= 10_000.0 + ARMIJO * t * -200.0
    assert abs(2 * (t - 100.0)) <= CURVATURE * 200.0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("bounded", [False, True])
def test_a_convex_quadratic_reaches_the_value_scipy_s_l_bfgs_b_reaches(seed, bounded):
    """A random positive-definite quadratic (one minimum): the same value as scipy's L-BFGS-B, to 1e-7."""
    rng = np.random.default_rng(seed)
    n = 12
    root = rng.normal(size=(n, n))
    hessian = root @ root.T + 0.1 * np.eye(n)
    linear = rng.normal(size=n) * 5

    def value_and_gradient(x):
        return float(0.5 * x @ hessian @ x + linear @ x), hessian @ x + linear

    start = rng.uniform(-1, 1, n)
    bounds = (-1.0, 1.0) if bounded else None
    ours = minimise(value_and_gradient, start, bounds=bounds)
    theirs = minimize(value_and_gradient, start, jac=True, method="L-BFGS-B",
                      bounds=[bounds] * n if bounded else None, options={"ftol": 1e-15, "gtol": 1e-10})
    assert ours.fun == pytest.approx(theirs.fun, rel=1e-7, abs=1e-7)
    if bounded:
        assert np.all(ours.x >= -1.0) and np.all(ours.x <= 1.0)


def test_a_function_without_a_decrease_stops_where_it_started():
    found = minimise(lambda x: (float(np.abs(x).sum()), np.zeros_like(x)), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(found.x, [1.0, 2.0])


@pytest.mark.e2e
def test_a_release_plans_without_importing_scipy_optimize(tmp_path):
    argv = ["release", "rochdale", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path)]
    script = (f"import json, sys\nfrom tabrelease.cli import main\nmain({argv!r})\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scipy.optimize'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
