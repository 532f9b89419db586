"""The relaxed synthetic dataset of RAP (relaxed adaptive projection; lecture notes' Algorithm 2): post-processing.

A relaxed dataset has n' rows; row r holds, for every variable i, a probability vector p_{r,i} over its k_i levels
(the one-hot coding of a record, relaxed to the simplex). It is parameterised by logits, p_{r,i} = softmax(theta_{r,i}),
so that plain unconstrained optimisation keeps every row on the simplices.

The relaxed answer of the margin over the variables S at the cell c is the mean over rows of the product of the
relaxations of S's variables at c's levels:

    a_S(c) = (1/n') sum_r prod_{i in S} p_{r,i}[c_i].

For a one-hot row this is the record's indicator of c, so a_S of a relaxed dataset that is one-hot is the proportion
of its records in c. The relaxed dataset also defines a whole non-negative table, (n/n') sum_r (outer product of the
p_{r,i} over every variable): a mixture of n' product distributions, whose margins are the a_S times n. So margins
read from it are the margins of one table: consistent by construction.

Fitting ("RP" in the notes): least squares between the relaxed answers and the noisy answers (proportions: the noisy
counts over the estimated total), by L-BFGS on the logits with the analytic gradient:

    L = 1/2 sum_S w_S sum_c (a_S(c) - y_S(c))^2,
    dL/dp_{r,i}[l] = (1/n') sum_{S contains i} w_S sum_{c: c_i = l} R_S(c) prod_{j in S, j != i} p_{r,j}[c_j],

R_S = a_S - y_S, then through the softmax: dL/dtheta = p * (g - sum(p * g)). Vectorised as matrix products: per
margin, the row-wise outer product of the other variables' relaxations times the residual with axis i first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import minimize

DEFAULT_ROWS = 500  # n': the notes leave it to the user (the RAP paper uses 1000); see the timings in docs/mechanisms.md
DEFAULT_ITERATIONS = 400  # L-BFGS iterations of the final fit
ROUND_ITERATIONS = 100  # L-BFGS iterations of each intermediate fit of the adaptive variant (only drives selection)
INITIAL_LOGIT_SD = 0.1  # near-uniform rows: larger starts saturate the softmax and stall (seen at 1 and 3)
# Above this many cells the relaxed table is not formed (its margins are computed directly: the same numbers).
MAX_TABLE_CELLS = 2**16
# How many of the fit's steps (a synthetic row x an L-BFGS iteration x a margin cell) cost about as much as least
# squares fitting one cell in an audit's simulated run (`estimate.RelaxedProjection.simulation_work`): a scratch
# timing of stop 44 (2 CPUs, under load) put the fit at about 80 ns a step on Edwards' and Rochdale's margins (20 ns on
# journey to work's larger ones) and least squares at 10-27 microseconds a cell; 1 cell fit is 125-340 steps. The
# lower figure, rounded down, counts the fit's work high.
STEPS_PER_CELL_FIT = 100
_CHUNK_ENTRIES = 2**22  # rows x cells formed at once when summing the relaxed table


def initial_logits(shape: Sequence[int], rows: int, rng: np.random.Generator) -> np.ndarray:
    """Random logits, all variables' blocks (rows x k_i, C order) one after another.

    Parameters
    ----------
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.
    rng : numpy.random.Generator
        The post-processing randomness.

    Returns
    -------
    numpy.ndarray
        rows x sum(k_i) logits, normal of standard deviation `INITIAL_LOGIT_SD`, flat.
    """
    return rng.normal(0.0, INITIAL_LOGIT_SD, size=rows * int(sum(shape)))


def split_logits(theta: np.ndarray, shape: Sequence[int], rows: int) -> list[np.ndarray]:
    """The rows x k_i logit block of each variable (views into theta).

    Parameters
    ----------
    theta : numpy.ndarray
        The flat logits (see `initial_logits`).
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.

    Returns
    -------
    list of numpy.ndarray
        One rows x k_i array per variable.
    """
    ends = np.cumsum([rows * int(k) for k in shape])
    return [block.reshape(rows, int(k)) for block, k in zip(np.split(theta, ends[:-1]), shape)]


def softmax(logits: np.ndarray) -> np.ndarray:
    """The softmax of each row: probabilities proportional to exp(logit), computed stably.

    Parameters
    ----------
    logits : numpy.ndarray
        A rows x k array.

    Returns
    -------
    numpy.ndarray
        rows x k, each row summing to 1.
    """
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def probabilities(theta: np.ndarray, shape: Sequence[int], rows: int) -> list[np.ndarray]:
    """p_{r,i} for every variable i: a rows x k_i array whose rows lie on the simplex.

    Parameters
    ----------
    theta : numpy.ndarray
        The flat logits (see `initial_logits`).
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.

    Returns
    -------
    list of numpy.ndarray
        One rows x k_i array per variable.
    """
    return [softmax(block) for block in split_logits(theta, shape, rows)]


def row_products(factors: Sequence[np.ndarray]) -> np.ndarray:
    """Row-wise outer products: rows x prod(k) (C order over the factors), ones for no factor.

    Parameters
    ----------
    factors : sequence of numpy.ndarray
        rows x k_j arrays with the same number of rows.

    Returns
    -------
    numpy.ndarray
        rows x prod(k_j) (1 x 1 of ones for no factor).
    """
    rows = factors[0].shape[0] if factors else 1
    out = np.ones((rows, 1))
    for f in factors:
        out = (out[:, :, None] * f[:, None, :]).reshape(out.shape[0], -1)
    return out


def relaxed_answers(probs: Sequence[np.ndarray], margin: Sequence[int]) -> np.ndarray:
    """a_S: the relaxed answers of the margin over `margin` (sorted axes), as an array over S's levels.

    Parameters
    ----------
    probs : sequence of numpy.ndarray
        p_{r,i}: one rows x k_i array per variable, each row on the simplex.
    margin : sequence of int
        The margin's axes (sorted here).

    Returns
    -------
    numpy.ndarray
        Proportions (summing to 1), of the margin's shape.
    """
    axes = sorted(margin)
    return row_products([probs[j] for j in axes]).mean(axis=0).reshape([probs[j].shape[1] for j in axes])


def loss_and_probability_gradient(probs: Sequence[np.ndarray], targets: Mapping[tuple, np.ndarray],
                                  weights: Mapping[tuple, float] | None = None) -> tuple[float, list[np.ndarray]]:
    """L and dL/dp_i (rows x k_i per variable) for targets {sorted margin axes: target proportions over S}.

    Parameters
    ----------
    probs : sequence of numpy.ndarray
        p_{r,i}: one rows x k_i array per variable, each row on the simplex.
    targets : mapping of tuple of int to numpy.ndarray
        Sorted margin axes -> target proportions over the margin's cells (any shape with that many cells, C order).
    weights : mapping of tuple of int to float, optional
        Sorted margin axes -> the margin's weight w_S in the loss (all 1 by default).

    Returns
    -------
    loss : float
        L.
    gradient : list of numpy.ndarray
        dL/dp_i, one rows x k_i array per variable.
    """
    rows = probs[0].shape[0]
    grads = [np.zeros_like(p) for p in probs]
    loss = 0.0
    for axes, target in targets.items():
        w = 1.0 if weights is None else float(weights[axes])
        factors = [probs[j] for j in axes]
        residual = relaxed_answers(probs, axes) - np.reshape(target, [f.shape[1] for f in factors])
        loss += 0.5 * w * float(np.sum(residual**2))
        for i, j in enumerate(axes):
            others = row_products(factors[:i] + factors[i + 1:])  # rows x (cells of S without j), C order
            residual_i = np.moveaxis(residual, i, 0).reshape(factors[i].shape[1], -1)
            grads[j] += (w / rows) * (others @ residual_i.T)
    return loss, grads


def loss_and_gradient(theta: np.ndarray, shape: Sequence[int], rows: int, targets, weights=None):
    """L and dL/dtheta (flat, as theta), through the softmax of each row's block.

    Parameters
    ----------
    theta : numpy.ndarray
        The flat logits (see `initial_logits`).
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.
    targets : mapping of tuple of int to numpy.ndarray
        Sorted margin axes -> target proportions over the margin's cells (any shape with that many cells, C order).
    weights : mapping of tuple of int to float, optional
        Sorted margin axes -> the margin's weight w_S in the loss (all 1 by default).

    Returns
    -------
    loss : float
        L.
    gradient : numpy.ndarray
        dL/dtheta, flat, laid out as `theta`.
    """
    probs = probabilities(theta, shape, rows)
    loss, grads = loss_and_probability_gradient(probs, targets, weights)
    pieces = [p * (g - np.sum(p * g, axis=1, keepdims=True)) for p, g in zip(probs, grads)]
    return loss, np.concatenate([piece.ravel() for piece in pieces])


def fit(theta: np.ndarray, shape: Sequence[int], rows: int, targets, weights=None,
        iterations: int = DEFAULT_ITERATIONS) -> np.ndarray:
    """The notes' RP: the logits (from `theta`) whose relaxed answers are closest to the targets in least squares.

    The loss is scaled by 1/L(theta0) so that L-BFGS's tolerances are relative; the tolerances are set at the floor:
    `iterations` is the stopping rule (a run's time is predictable).

    Parameters
    ----------
    theta : numpy.ndarray
        The starting logits (flat; see `initial_logits`).
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.
    targets : mapping of tuple of int to numpy.ndarray
        Sorted margin axes -> target proportions over the margin's cells (any shape with that many cells, C order).
    weights : mapping of tuple of int to float, optional
        Sorted margin axes -> the margin's weight w_S in the loss (all 1 by default).
    iterations : int, default DEFAULT_ITERATIONS
        L-BFGS iterations.

    Returns
    -------
    numpy.ndarray
        The fitted logits (flat); a copy of `theta` when there are no targets.
    """
    from .loglinear.ipf import one_blas_thread

    if not targets:
        return np.array(theta, float)
    # One BLAS thread: on products of a few hundred rows threads only contend (10x slower with two), and a thread
    # count that varies with the machine's load would change the rounding, so the iterates, of a seeded run.
    with one_blas_thread():
        start, _ = loss_and_gradient(np.asarray(theta, float), shape, rows, targets, weights)
        scale = 1.0 / max(start, 1e-300)

        def objective(x):
            value, gradient = loss_and_gradient(x, shape, rows, targets, weights)
            return value * scale, gradient * scale

        result = minimize(objective, np.asarray(theta, float), jac=True, method="L-BFGS-B",
                          options={"maxiter": int(iterations), "gtol": 1e-14, "ftol": 1e-16, "maxcor": 10})
    return np.asarray(result.x, float)


def relaxed_table(probs: Sequence[np.ndarray], total: float) -> np.ndarray:
    """The whole table the relaxed dataset defines, scaled to `total`: (total/n') sum_r outer(p_{r,0}, ..., p_{r,k-1}).

    Parameters
    ----------
    probs : sequence of numpy.ndarray
        p_{r,i}: one rows x k_i array per variable, each row on the simplex.
    total : float
        The table's total n.

    Returns
    -------
    numpy.ndarray
        The non-negative table (float), of shape (k_0, ..., k_{k-1}), summing to `total`.
    """
    rows = probs[0].shape[0]
    shape = tuple(p.shape[1] for p in probs)
    cells = int(np.prod(shape))
    table = np.zeros(cells)
    step = max(1, _CHUNK_ENTRIES // cells)
    for lo in range(0, rows, step):
        table += row_products([p[lo:lo + step] for p in probs]).sum(axis=0)
    return (float(total) / rows) * table.reshape(shape)


def targets_from_blocks(blocks, total: float) -> tuple[dict, dict]:
    """{sorted axes: target proportions} and {sorted axes: weight} from noisy margin-cell blocks.

    A margin measured more than once gets the inverse-variance mean of its measurements; weights are
    1 / variance relative to the most precise margin (all 1 for RAP's equal-scale blocks).

    Parameters
    ----------
    blocks : sequence of Measurement
        Noisy margin-cell blocks.
    total : float
        The estimated n that turns counts into proportions (at least 1 is used).

    Returns
    -------
    targets : dict
        Sorted axes -> target proportions (flat, C order over the margin's cells).
    weights : dict
        Sorted axes -> weight in (0, 1].
    """
    from .measurements import noise_variance

    sums, precisions = {}, {}
    for b in blocks:
        axes = tuple(sorted(b.variables))
        precision = 1.0 / noise_variance(b)
        sums[axes] = sums.get(axes, 0.0) + precision * np.asarray(b.values, float)
        precisions[axes] = precisions.get(axes, 0.0) + precision
    divisor = max(float(total), 1.0)  # a noisy total below 1 (tiny n, large noise): proportions stay finite
    targets = {axes: sums[axes] / precisions[axes] / divisor for axes in sums}
    best = max(precisions.values(), default=1.0)
    return targets, {axes: p / best for axes, p in precisions.items()}


def noisy_total(blocks) -> float:
    """n as the release estimates it: an exactly given (public) total, else the best linear unbiased estimate from the
    noisy margins' sums (measurements.best_total: post-processing, no budget of its own), never below 0.

    Parameters
    ----------
    blocks : sequence of Measurement
        Margin-cell blocks, noisy or exact.

    Returns
    -------
    float
        The estimate of n, at least 0.
    """
    from .measurements import EXACT, best_total

    exact = [b for b in blocks if b.distribution == EXACT and not b.variables]
    total = float(exact[0].values[0]) if exact else best_total([b for b in blocks if b.distribution != EXACT])
    return max(total, 0.0)


def fit_to_blocks(theta, shape, rows: int, blocks, iterations: int) -> tuple[np.ndarray, float]:
    """RP on the noisy blocks measured so far: (fitted logits, the estimated total).

    Parameters
    ----------
    theta : numpy.ndarray
        The starting logits (flat).
    shape : sequence of int
        The number of levels k_i of each variable.
    rows : int
        n', the number of relaxed rows.
    blocks : sequence of Measurement
        The margin-cell blocks measured so far (an exact total among them pins n).
    iterations : int
        L-BFGS iterations.

    Returns
    -------
    theta : numpy.ndarray
        The fitted logits (flat).
    total : float
        The estimated n.
    """
    from .measurements import EXACT

    total = noisy_total(blocks)
    targets, weights = targets_from_blocks([b for b in blocks if b.distribution != EXACT], total)
    return fit(theta, shape, rows, targets, weights, iterations), total


def project(plan, measurements, rng: np.random.Generator):
    """The estimator's step: fit a relaxed dataset (n' rows from the plan, DEFAULT_ROWS if it has none) to every
    measured answer from a random start; its table times the estimated n (or, above MAX_TABLE_CELLS cells, its
    released margins).

    Parameters
    ----------
    plan : MechanismPlan
        The plan (its shape, margins, and ``parameters["synthetic_rows"]``).
    measurements : Measurements
        Margin-cell blocks of one run.
    rng : numpy.random.Generator
        The post-processing randomness that draws the starting logits.

    Returns
    -------
    Estimate
        The relaxed table (float, non-negative, of the plan's shape), or the plan's margins above
        `MAX_TABLE_CELLS`; a note says the release is relaxed synthetic data.
    """
    import time

    from .postprocessing import Estimate

    start = time.perf_counter()
    shape = tuple(plan.shape)
    rows = int(plan.parameters.get("synthetic_rows", DEFAULT_ROWS))
    theta, total = fit_to_blocks(initial_logits(shape, rows, rng), shape, rows, measurements.blocks,
                                 DEFAULT_ITERATIONS)
    probs = probabilities(theta, shape, rows)
    notes = (f"relaxed synthetic data: {rows} rows of per-variable probability vectors fitted to the noisy margins; "
             "the released margins are its margins times n estimated from the noisy margins",)
    if int(np.prod(shape, dtype=object)) <= MAX_TABLE_CELLS:
        return Estimate(table=relaxed_table(probs, total), margins=None, seconds=time.perf_counter() - start,
                        notes=notes)
    margins = tuple(total * relaxed_answers(probs, g) for g in plan.margins)
    return Estimate(table=None, margins=margins, seconds=time.perf_counter() - start, notes=notes)
