"""The extended MLE: IPF from the facial set's indicator, finished by Newton's method on the facial set."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .. import _sparse as sp

from ..models import Margin
from .design import margin_design
from .ipf import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE, ipf, one_blas_thread


# --- the extended MLE: IPF, finished by Newton on the facial set -------------------------------------
# IPF converges linearly, and on some released tables (fitted cells near 0 on the facial set) the rate is close
# to 1: thousands of cycles, and in the paper's experiment 15 journey-to-work refits did not converge in 10,000.
# So IPF gets this many cycles, and a member still off by more than tol is finished by Newton's method on its
# facial set, which converges quadratically from IPF's point.
IPF_CYCLES_BEFORE_NEWTON = 100
NEWTON_MAX_ITERATIONS = 50


def fit_extended_mle(
    observed: np.ndarray,
    generators: Sequence[Margin],
    facial: np.ndarray,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
    batch_ndim: int = 0,
) -> tuple[np.ndarray, int | np.ndarray, bool | np.ndarray]:
    """The MLE on the facial set (0 off it) of each table of a stack: (fitted, iterations, converged).

    IPF from the facial set's indicator, then Newton for members IPF has not finished in
    `IPF_CYCLES_BEFORE_NEWTON` cycles (and IPF again, up to `max_iter`, should Newton fail).
    Each member is fitted on its own, so a stack gives exactly what one-by-one fits give.
    Iterations count IPF cycles plus Newton steps.

    Parameters
    ----------
    observed : numpy.ndarray
        Observed counts (`batch_ndim` leading batch axes, then the table's).
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.
    facial : numpy.ndarray of bool
        The facial set of each table, the shape of `observed`.
    tol : float, default DEFAULT_TOLERANCE
        Convergence tolerance on the fitted margins, in counts.
    max_iter : int, default DEFAULT_MAX_ITERATIONS
        Most IPF cycles plus Newton steps per table.
    batch_ndim : int, default 0
        Number of leading batch axes.

    Returns
    -------
    fitted : numpy.ndarray
        The fitted tables, the shape of `observed`.
    iterations : int or numpy.ndarray
        Iterations of each table (an array over the batch with batch axes).
    converged : bool or numpy.ndarray
        Whether each fit converged.
    """
    observed = np.asarray(observed, float)
    facial = np.asarray(facial, bool)
    if batch_ndim == 0:
        fitted, iterations, converged = fit_extended_mle(observed[None], generators, facial[None], tol=tol,
                                                         max_iter=max_iter, batch_ndim=1)
        return fitted[0], int(iterations[0]), bool(converged[0])
    cycles = min(IPF_CYCLES_BEFORE_NEWTON, max_iter)
    fitted, iterations, converged = ipf(observed, generators, start=facial.astype(float), tol=tol, max_iter=cycles,
                                        batch_ndim=batch_ndim)
    cell_shape = observed.shape[batch_ndim:]
    flat_obs = observed.reshape((-1,) + cell_shape)
    flat_fit = fitted.reshape((-1,) + cell_shape).copy()
    flat_facial = facial.reshape((-1,) + cell_shape)
    flat_its = np.asarray(iterations).ravel().copy()
    flat_ok = np.asarray(converged).ravel().copy()
    for i in np.flatnonzero(~flat_ok):
        flat_fit[i], its, flat_ok[i] = _finish(flat_obs[i], flat_fit[i], flat_facial[i], generators, tol,
                                               max_iter - cycles)
        flat_its[i] = cycles + its
    batch = observed.shape[:batch_ndim]
    return flat_fit.reshape(observed.shape), flat_its.reshape(batch), flat_ok.reshape(batch)


def _finish(observed, fitted, facial, generators, tol, iterations_left):
    """Newton, then (should it fail) IPF, within what is left of max_iter; returns (fitted, iterations, converged)."""
    if iterations_left <= 0:
        return fitted, 0, False
    with one_blas_thread():
        result = _newton_on_facial_set(observed, fitted, facial, tuple(tuple(g) for g in generators), tol,
                                       min(NEWTON_MAX_ITERATIONS, iterations_left))
    if result is not None:
        return result
    # Newton failed numerically (a singular Hessian on an ill-scaled facial set): IPF's slow road instead.
    return ipf(observed, generators, start=fitted, tol=tol, max_iter=iterations_left)


# Below this many entries (facial cells x generator margin cells) the design is held dense: on the paper's tables
# (256 cells, 56-144 margin cells) a dense Hessian X'WX is one BLAS product where the sparse one was several sparse
# conversions per step, and the step takes 0.16-0.52 of the time. The solve itself was dense already.
DENSE_NEWTON_MAX_ENTRIES = 2**20


@lru_cache(maxsize=16)
def _cell_design(shape: tuple[int, ...], generators: tuple[Margin, ...]) -> sp.SparseMatrix:
    """The margin design transposed: one row per cell, a 1 in the column of each generator margin cell it adds to."""
    return margin_design(shape, generators).T.tocsr()


@lru_cache(maxsize=16)
def _dense_cell_design(shape: tuple[int, ...], generators: tuple[Margin, ...]) -> np.ndarray:
    """`_cell_design` as a dense array (cells x generator margin cells; used only below DENSE_NEWTON_MAX_ENTRIES)."""
    return _cell_design(shape, generators).toarray()


def _newton_on_facial_set(observed, fitted, facial, generators, tol, max_steps, dense=None):
    """Newton's method for the Poisson log-likelihood on the facial set, from IPF's fitted table.

    log m on the facial set is X beta, X the margin design's rows for those cells (sparse:
    one 1 per generator), which is rank-deficient there and overparametrised everywhere. A
    ridge of 1e-9 of the Hessian's largest diagonal entry makes each step solvable by
    Cholesky; the gradient X'(f - m) has no component along X's null space, so the ridge only
    shortens steps and the fixed point is the MLE itself. Steps are halved until the
    likelihood rises. Returns (fitted, steps, True), or None when it does not reach the tolerance.

    X is dense when small (`dense=None` decides by DENSE_NEWTON_MAX_ENTRIES): the same arithmetic, and the
    same fit to rounding error.
    """
    cells = np.flatnonzero(facial.ravel())
    f = observed.ravel()[cells]
    design = _cell_design(observed.shape, generators)
    if dense is None:
        dense = design.shape[0] * design.shape[1] <= DENSE_NEWTON_MAX_ENTRIES
    if dense:
        X = _dense_cell_design(observed.shape, generators)[cells]
        XT = X.T

        def hessian(weights):
            return XT @ (X * weights[:, None])
    else:
        X = design[cells]
        XT = X.T.tocsr()

        def hessian(weights):
            return (XT @ X.multiply(weights[:, None])).toarray()

    def solve_ridged(weights, vector):
        matrix = hessian(weights)
        matrix[np.diag_indices_from(matrix)] += 1e-9 * max(float(matrix.diagonal().max()), 1e-300)
        return _cholesky_solve(matrix, vector)

    try:
        beta = solve_ridged(np.ones(len(cells)), XT @ np.log(np.maximum(fitted.ravel()[cells], 1e-300)))
    except (np.linalg.LinAlgError, ValueError):
        return None
    eta = X @ beta
    m = np.exp(eta)
    loglik = f @ eta - m.sum()
    for step in range(1, max_steps + 1):
        try:
            direction = solve_ridged(m, XT @ (f - m))
        except (np.linalg.LinAlgError, ValueError):
            return None
        scale = 1.0
        while True:
            new_eta = eta + scale * (X @ direction)
            with np.errstate(over="ignore"):
                new_loglik = f @ new_eta - np.exp(new_eta).sum()
            if np.isfinite(new_loglik) and new_loglik >= loglik - 1e-12 * abs(loglik):
                break
            scale /= 2
            if scale < 1e-10:
                return None
        eta, loglik = new_eta, new_loglik
        m = np.exp(eta)
        # The same test IPF uses: every generator margin of the fit within tol of the observed one.
        if np.abs(XT @ (f - m)).max() <= tol:
            out = np.zeros(observed.size)
            out[cells] = m
            return out.reshape(observed.shape), step, True
    return None


def _cholesky_solve(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The solution of matrix x = vector for a positive definite matrix: a numpy.linalg.LinAlgError where Cholesky's
    factorisation finds it is not, a ValueError where it is not finite (as scipy's cho_factor and cho_solve).

    numpy has no triangular solve, so the factorisation is the check and one LU solve gives x (a third more work
    than two triangular solves, on matrices of a few hundred rows at most)."""
    if not (np.all(np.isfinite(matrix)) and np.all(np.isfinite(vector))):
        raise ValueError("a Newton step's system is not finite")
    np.linalg.cholesky(matrix)
    return np.linalg.solve(matrix, vector)
