"""The reproduction report states only what the run computed: verdicts follow the numbers, and the LP's
optimal set is measured by an LP that an independent dense formulation confirms."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linprog

from tabrelease.bases import EFRON_STEIN, coefficient_basis, coefficients
from tabrelease.consistency import ConsistencyProblem
from tabrelease.paper.reproduce import compare_with_paper


def _frames(n_released_small, infeasible, g2_slope):
    """A one-table run summary (paper and exact calibration, three epsilons) with chosen numbers."""
    rows = []
    for calibration in ("paper", "exact"):
        for i, eps in enumerate((0.005, 0.5, 1.995)):
            rows.append({
                "table": "edwards", "calibration": calibration, "epsilon": eps, "runs": 50, "n": 70,
                "n_released_mean": [n_released_small, 100, 72][i], "n_released_sd": [300, 20, 10][i],
                "max_l1_error_mean": [900, 80, 20][i], "max_l1_error_sd": 1.0,
                "g2_abs_difference_mean": 100 + g2_slope * eps, "g2_abs_difference_sd": 1.0,
                "mle_l1_mean": [1.9, 1.0, 0.4][i], "mle_l1_sd": 0.1,
                "lp_infeasible_mean": infeasible, "lp_infeasible_sd": 0.0,
                "lp_b_mean": [50, 5, 1][i], "lp_b_sd": 1.0, "noise_scale": 1.0, "epsilon_actual": eps,
            })
    summary = pd.DataFrame(rows)
    runs = pd.DataFrame([
        {"table": "edwards", "calibration": "paper", "epsilon": 1.0, "noise_scale": 3.0, "epsilon_holds": True,
         "epsilon_actual": 0.5, "neighbours": "add-remove", "refit_converged": True, "mechanism": "fourier"},
        {"table": "edwards", "calibration": "exact", "epsilon": 1.0, "noise_scale": 1.5, "epsilon_holds": True,
         "epsilon_actual": 1.0, "neighbours": "add-remove", "refit_converged": False, "mechanism": "fourier"},
    ])
    table7 = pd.DataFrame([{"table": "edwards", "shape": "2x2x2x2x2x2", "n": 70, "model": "[AD]", "g2_tool": 17.26,
                            "g2_paper": 22.96, "df_tool_nominal": 52, "df_tool_adjusted": 37, "df_paper": 52,
                            "l1_to_uniform_tool": 1.34, "l1_to_uniform_paper": 0.83}])
    noise_free = pd.DataFrame([{"table": "edwards", "max_l1_error": 0.0, "g2_abs_difference": 92.0, "mle_l1": 0.0,
                                "coefficient_integer_scale": 8.0}])
    return summary, runs, table7, noise_free


def _verdicts(*args):
    return {(f.subject, f.table): f.verdict for f in compare_with_paper(*_frames(*args))}


def test_verdicts_follow_the_numbers_of_the_run():
    agree = _verdicts(5000, 0.9, -50)
    disagree = _verdicts(300, 0.1, +50)
    assert agree[("Figure 1", "edwards")].startswith("agrees: mean n' is 71.4 n at epsilon 0.005")
    assert disagree[("Figure 1", "edwards")].startswith("disagrees: mean n' is 4.3 n")
    assert agree[("Figure 5", "edwards")] == "agrees: b* > 0 in 90% of the runs"
    assert disagree[("Figure 5", "edwards")] == "disagrees: b* > 0 in 10% of the runs"
    assert agree[("Figure 3", "edwards")].startswith("agrees: rho = -1.00")
    assert disagree[("Figure 3", "edwards")].startswith("disagrees: rho = 1.00")
    # b* of 50 in coefficient units is 400 records at 2^{6/2} = 8: more than n = 70.
    assert "is 400 in counts (n = 70)" in agree[("Figure 6", "edwards")]
    # The paper's printed values come from the table's metadata, and a refit that failed is counted.
    assert "0.83 printed" in agree[("Figure 4", "edwards")]
    assert "1 did NOT converge" in agree[("Refits", "all")]
    assert "2.00 times the noise" in agree[("Calibration", "edwards")]


def _dense_coefficient_matrix(basis, shape):
    cells = int(np.prod(shape))
    return coefficients(basis, np.eye(cells).reshape((cells,) + shape), batch_ndim=1).T  # d x cells


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_total_range_matches_an_independent_dense_lp(seed):
    shape = (3, 2, 3)
    rng = np.random.default_rng(seed)
    basis = coefficient_basis(EFRON_STEIN, shape, [(0, 1), (1, 2)])
    counts = rng.poisson(3, size=shape)
    noisy = coefficients(basis, counts) + rng.laplace(0, 1.0, basis.size)
    problem = ConsistencyProblem(basis)
    b_star = problem.solve(noisy).b
    low, high = problem.total_range(noisy, b_star)
    # The same question asked of scipy's solver on the dense formulation: min / max sum w subject to
    # |noisy - F w| <= b*, w >= 0.
    F = _dense_coefficient_matrix(basis, shape)
    slack = b_star * (1 + 1e-9) + 1e-9
    A = np.vstack([F, -F])
    ub = np.concatenate([noisy + slack, slack - noisy])
    for sense, table in ((1, low), (-1, high)):
        ref = linprog(sense * np.ones(F.shape[1]), A_ub=A, b_ub=ub, bounds=(0, None), method="highs-ipm")
        assert ref.status == 0
        assert table.sum() == pytest.approx(ref.x.sum(), abs=1e-5)
        # Both extremes are optimal tables: within b* of every noisy coefficient.
        assert np.abs(noisy - F @ table.ravel()).max() <= b_star + 1e-6
    assert low.sum() <= problem.solve(noisy).table.sum() + 1e-6 <= high.sum() + 2e-6
