"""HDMM's marginals strategy (McKenna, Miklau, Hay & Machanavajjhala, VLDB 2018, section 6, OPT_M): Laplace noise
on a weighted stack of marginals, every subset of the variables a candidate (the total and the full table
included), the weights chosen to minimise the released margins' expected total squared error; then least squares
over non-negative tables with the total pinned and controlled rounding, as the planned release is fitted.

A comparison preset: the frontier runs it beside `planned`, whose candidates include this family. The weights are
found here by HDMM's own parametrisation (theta_a >= 0 on every marginal, L1 sensitivity sum_a theta_a c_a),
not by the planner's search over shares of epsilon, so the two are a check on each other.

With strategy A = [theta_a M_a] and Laplace noise of scale 1 / epsilon per row (sensitivity folded into the
weights), the Gram matrix A'A = sum_a theta_a^2 M_a'M_a is diagonal in the residual (Efron-Stein) basis with
eigenvalue sum_(a containing T) theta_a^2 K_out(a) on residual T, so the error of the released margins is

    2 (sum_a theta_a c_a / epsilon)^2  sum_T W_T / sum_(a containing T) theta_a^2 K_out(a)

(W_T as in `tabrelease.planning.residual_weights`; HDMM computes the same inverse in its algebra of Kronecker
products of I and J). The search is L-BFGS over log theta from even weights, the full table alone and seeded
random weights (HDMM restarts from random points too): deterministic, no wall-clock limit.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations
from math import prod

import numpy as np

from ..bases import EFRON_STEIN, FOURIER
from ..errors import TabreleaseError
from ..measurements import MARGIN_CELLS
from ..models import downward_closure, maximal_margins
from ..planning import MeasurementDesign, PlannedBlock, margin_changes, residual_weights
from ..postprocessing import CONTROLLED, LEAST_SQUARES
from ._base import MechanismPlan, no_paper_calibration
from .planned import Planned, _calibrate

# Every subset is a candidate: 2^d of them. Past this many variables, or this many cells (the fit is over them),
# the strategy is refused before anything is read.
MAX_VARIABLES = 14
MAX_CELLS = 2**16
# Weights within e^24 of each other: a weight e^-24 of the largest measures nothing worth its cost.
LOG_BOUNDS = (-16.0, 8.0)


class HDMMMarginals(Planned):
    name = "hdmm-marginals"
    summary = ("HDMM's marginals strategy (OPT_M): Laplace noise on weighted marginals of every subset, least squares "
               "with the total pinned, controlled rounding (a comparison preset)")
    accepts_delta = False
    options = ()
    reads_margins = False  # may measure the full table

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        shape = tuple(int(k) for k in shape)
        if len(shape) > MAX_VARIABLES or prod(shape) > MAX_CELLS:
            raise TabreleaseError(f"the hdmm-marginals strategy weighs all 2^{len(shape)} marginals and fits the "
                                  f"{prod(shape)} cells: at most {MAX_VARIABLES} variables and {MAX_CELLS} cells")
        design = opt_marginals(shape, tuple(tuple(g) for g in margins), neighbours)
        return MechanismPlan(self.name, shape, tuple(margins), _calibrate(design, epsilon, None, neighbours),
                             LEAST_SQUARES, rounding=CONTROLLED, design=design)


@lru_cache(maxsize=32)
def opt_marginals(shape: tuple[int, ...], margins: tuple, neighbours: str) -> MeasurementDesign:
    """HDMM's OPT_M for these margins: the weighted marginals as a measurement design (relative scale 1 / theta_a).

    Parameters
    ----------
    shape : tuple of int
        The table's levels per variable.
    margins : tuple of Margin
        The margins released.
    neighbours : {"add-remove", "replace"}
        The neighbour relation (a marginal moves by one record in one cell, or in two when replaced).

    Returns
    -------
    MeasurementDesign
        Margin blocks only, those of weight above e^-12 of the largest.
    """
    d = len(shape)
    generators = tuple(maximal_margins(margins)[0])
    # Under replace no record changes n: the total is released exactly (as the planned release does), and neither
    # the empty residual nor the total's marginal is in the search.
    public_total = neighbours == "replace"
    residuals = [t for t in downward_closure(generators) if t or not public_total]
    subsets = [c for r in range(0 if not public_total else 1, d + 1) for c in combinations(range(d), r)]
    k_out = np.array([prod(k for j, k in enumerate(shape) if j not in a) for a in subsets], float)
    contains = np.array([[set(t) <= set(a) for t in residuals] for a in subsets], float) * k_out[:, None]
    weights = residual_weights(shape, margins, residuals)
    changes = np.column_stack([margin_changes(shape, a, neighbours) for a in subsets])
    cost = changes.max(axis=0)  # one record's largest change of each marginal (exact for add-remove)

    def error_and_gradient(u):
        theta = np.exp(u)
        info = (theta**2) @ contains
        per = weights / info
        spent = float(cost @ theta)
        f = spent**2 * float(per.sum())
        # d/d theta_a: 2 spent c_a sum per - spent^2 sum_T W_T / info_T^2 * 2 theta_a contains[a, T]
        grad_theta = 2 * spent * cost * per.sum() - spent**2 * 2 * theta * (contains @ (per / info))
        return f, grad_theta * theta

    from scipy.optimize import minimize

    rng = np.random.default_rng(20181101)  # fixed: a plan is a function of the shape and margins alone
    full = np.full(len(subsets), LOG_BOUNDS[0])
    full[-1] = 0.0
    starts = [np.zeros(len(subsets)), full] + [rng.uniform(-4.0, 0.0, len(subsets)) for _ in range(4)]
    best_u, best_f = None, np.inf
    for u0 in starts:
        result = minimize(error_and_gradient, u0, jac=True, method="L-BFGS-B",
                          bounds=[LOG_BOUNDS] * len(subsets), options={"maxiter": 2000})
        if result.fun < best_f:
            best_u, best_f = result.x, float(result.fun)
    theta = np.exp(best_u)
    keep = theta >= np.exp(-12.0) * theta.max()
    blocks = tuple(PlannedBlock(MARGIN_CELLS, a, float(1.0 / t)) for a, t, k in zip(subsets, theta, keep) if k)
    kept = changes[:, keep].copy()
    kept.setflags(write=False)
    kind = FOURIER if all(k == 2 for k in shape) else EFRON_STEIN
    return MeasurementDesign(shape, generators, kind, "laplace", neighbours, blocks, kept, public_total)
