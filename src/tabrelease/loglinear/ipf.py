"""Iterative proportional fitting on a stack of tables, each member stopping on its own; BLAS on one thread."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import numpy as np

from ..models import Margin
from ..tables import margin_counts

DEFAULT_TOLERANCE = 1e-8
DEFAULT_MAX_ITERATIONS = 10_000


def ipf(
    observed: np.ndarray,
    generators: Sequence[Margin],
    *,
    start: np.ndarray | None = None,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
    batch_ndim: int = 0,
) -> tuple[np.ndarray, int, bool]:
    """Iterative proportional fitting of the generators' margins of `observed`.

    Works on a stack of tables at once (leading `batch_ndim` axes), which is how sweeps refit
    all repetitions of a grid point together. Converged means that in the last full cycle no
    fitted margin was more than `tol` (in counts) from the observed one before its adjustment. Returns (fitted, iterations, converged).

    Parameters
    ----------
    observed : numpy.ndarray
        The tables whose margins are fitted (`batch_ndim` leading batch axes, then the table's).
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.
    start : numpy.ndarray, optional
        The starting table(s), the shape of `observed` (all ones by default).
    tol : float, default DEFAULT_TOLERANCE
        Convergence tolerance, in counts.
    max_iter : int, default DEFAULT_MAX_ITERATIONS
        Most cycles.
    batch_ndim : int, default 0
        Number of leading batch axes.

    Returns
    -------
    fitted : numpy.ndarray
        The fitted tables, the shape of `observed`.
    iterations : int or numpy.ndarray
        Cycles run (of each table, with batch axes).
    converged : bool or numpy.ndarray
        Whether each fit converged within `max_iter`.
    """
    observed = np.asarray(observed, float)
    targets = [margin_counts(observed, g, batch_ndim) for g in generators]
    return ipf_to_margins(targets, generators, observed.shape, start=start, tol=tol, max_iter=max_iter, batch_ndim=batch_ndim)


def ipf_to_margins(
    targets: Sequence[np.ndarray],
    generators: Sequence[Margin],
    shape: Sequence[int],
    *,
    start: np.ndarray | None = None,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
    batch_ndim: int = 0,
) -> tuple[np.ndarray, int | np.ndarray, bool | np.ndarray]:
    """IPF to given margins (the MLE from released margins alone, when no table is released).

    With batch axes, each table stops as soon as it has converged, so one slow member of a
    stack does not hold the others (iterations and converged are then arrays over the batch).

    Parameters
    ----------
    targets : sequence of numpy.ndarray
        One target margin per generator (the batch axes, then the generator's axes in increasing order).
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.
    shape : sequence of int
        The fitted array's shape, batch axes included.
    start : numpy.ndarray, optional
        The starting table(s), of `shape` (all ones by default).
    tol : float, default DEFAULT_TOLERANCE
        Convergence tolerance, in counts.
    max_iter : int, default DEFAULT_MAX_ITERATIONS
        Most cycles.
    batch_ndim : int, default 0
        Number of leading batch axes.

    Returns
    -------
    fitted : numpy.ndarray
        The fitted tables, of `shape`.
    iterations : int or numpy.ndarray
        Cycles run (an array over the batch with batch axes).
    converged : bool or numpy.ndarray
        Whether each fit converged within `max_iter`.
    """
    shape = tuple(shape)
    fitted = np.ones(shape) if start is None else np.array(start, float, copy=True)
    targets = [np.asarray(t, float) for t in targets]
    if batch_ndim == 0:
        fitted, iterations, converged = _ipf_stack(fitted[None], [t[None] for t in targets], generators, tol, max_iter)
        return fitted[0], int(iterations[0]), bool(converged[0])
    batch = shape[:batch_ndim]
    flat = fitted.reshape((-1,) + shape[batch_ndim:])
    flat_targets = [t.reshape((-1,) + t.shape[batch_ndim:]) for t in targets]
    fitted, iterations, converged = _ipf_stack(flat, flat_targets, generators, tol, max_iter)
    return fitted.reshape(shape), iterations.reshape(batch), converged.reshape(batch)


# Small tables of many axes are fitted on the flattened tables by matrix products: each margin is one BLAS product
# with the 0/1 cell-to-margin-cell matrix, and the adjustment one gather by margin cell. numpy's reductions over
# many axes of a small table cost more in their set-up than in their arithmetic: on Rochdale (2^8 cells, 8
# generators, stacks of 50) a cycle takes 0.4x the time. With few axes and large margins (journey to work,
# 4x4x16) the reductions are faster (the products 1.4x), so they stay. The dense matrices are cells x margin
# cells, never cells x cells.
PRODUCT_IPF_MAX_CELLS = 2**12
PRODUCT_IPF_MIN_AXES = 4


def _ipf_stack(fitted, targets, generators, tol, max_iter, product=None):
    cells = int(np.prod(fitted.shape[1:]))
    if product is None:
        product = cells <= PRODUCT_IPF_MAX_CELLS and fitted.ndim - 1 >= PRODUCT_IPF_MIN_AXES
    if product:
        with one_blas_thread():  # products this small only slow down on threads (and starve other workers)
            return _ipf_stack_product(fitted, targets, generators, tol, max_iter)
    return _ipf_stack_axes(fitted, targets, generators, tol, max_iter)


def _margin_cell_index(shape: tuple[int, ...], generator: Margin) -> np.ndarray:
    """For each cell of a table (C order), the index of its cell in the margin over `generator` (C order)."""
    coords = np.unravel_index(np.arange(int(np.prod(shape))), shape)
    return np.ravel_multi_index(tuple(coords[j] for j in generator), tuple(shape[j] for j in generator)) \
        if generator else np.zeros(int(np.prod(shape)), np.intp)


def _ipf_stack_product(fitted, targets, generators, tol, max_iter):
    """`_ipf_stack_axes` on flattened tables, margins by matrix products: the same cycles, the same stopping rule."""
    n = fitted.shape[0]
    shape = tuple(fitted.shape[1:])
    # Margins keep the table's axis order (as margin_counts gives them), whatever the generator's order.
    indices = [_margin_cell_index(shape, tuple(sorted(g))) for g in generators]
    sums = []
    for index, target in zip(indices, targets):
        design = np.zeros((index.size, int(np.prod(target.shape[1:], dtype=int))))
        design[np.arange(index.size), index] = 1.0
        sums.append(design)
    flat = fitted.reshape(n, -1).copy()
    iterations = np.full(n, max_iter, dtype=np.int64)
    converged = np.zeros(n, dtype=bool)
    active = np.arange(n)
    work = flat.copy()
    work_targets = [t.reshape(n, -1) for t in targets]
    for iteration in range(1, max_iter + 1):
        gap = np.zeros(len(active))
        for design, index, target in zip(sums, indices, work_targets):
            current = work @ design
            gap = np.maximum(gap, np.abs(current - target).max(axis=1))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(current > 0, target / current, 0.0)
            work *= ratio[:, index]
        done = gap <= tol
        if done.any():
            flat[active[done]] = work[done]
            iterations[active[done]] = iteration
            converged[active[done]] = True
            if done.all():
                return flat.reshape(fitted.shape), iterations, converged
            still = ~done
            active, work = active[still], work[still]
            work_targets = [t[still] for t in work_targets]
    flat[active] = work
    return flat.reshape(fitted.shape), iterations, converged


def _ipf_stack_axes(fitted, targets, generators, tol, max_iter):
    n = fitted.shape[0]
    k = fitted.ndim - 1
    keep_shapes = [(-1,) + tuple(fitted.shape[1 + j] if j in g else 1 for j in range(k)) for g in generators]
    iterations = np.full(n, max_iter, dtype=np.int64)
    converged = np.zeros(n, dtype=bool)
    active = np.arange(n)
    work, work_targets = fitted, targets
    for iteration in range(1, max_iter + 1):
        # The gap is measured on the margins each step adjusts: a cycle in which no margin was
        # off by more than tol ends the fit (one margin computation per step, not two).
        gap = np.zeros(len(active))
        for g, target, keep in zip(generators, work_targets, keep_shapes):
            current = margin_counts(work, g, 1)
            gap = np.maximum(gap, np.abs(current - target).reshape(len(active), -1).max(axis=1))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(current > 0, target / current, 0.0)
            work *= ratio.reshape(keep)
        done = gap <= tol
        if done.any():
            fitted[active[done]] = work[done]
            iterations[active[done]] = iteration
            converged[active[done]] = True
            if done.all():
                return fitted, iterations, converged
            still = ~done
            active, work = active[still], work[still]
            work_targets = [t[still] for t in work_targets]
    fitted[active] = work
    return fitted, iterations, converged


_BLAS: list = []


def one_blas_thread():
    """A context with BLAS on one thread. Our matrices (Newton steps and ranks over a few hundred
    cells) are too small for threads to pay, and sweeps already run one worker per CPU: with two
    OpenBLAS threads a 144 x 144 Cholesky took 6.5 ms on the reference machine, on one 0.2 ms.

    Returns
    -------
    contextlib.AbstractContextManager
        Limits BLAS to one thread while entered (a no-op when the command line already did, through
        ``TABRELEASE_SINGLE_THREAD_BLAS=1``).
    """
    if os.environ.get("TABRELEASE_SINGLE_THREAD_BLAS") == "1":
        # The command line set one BLAS thread before numpy loaded (cli.entry): nothing to limit.
        return contextlib.nullcontext()
    if not _BLAS:
        # numpy's BLAS: the fits' products, ranks and Cholesky solves are numpy's (scipy's own BLAS is not used here).
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


