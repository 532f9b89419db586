"""Fitting hierarchical log-linear models: IPF, the extended MLE, G², X² and degrees of freedom.

Three of the four reference tables have zero margins under their models, where the ordinary
MLE does not exist. Following Fienberg & Rinaldo (2012), we find the facial set F (the cells
that some non-negative table with the observed margins puts mass on) by one linear program,
fit by IPF on F (cells off F are fitted as exactly 0), finished by Newton's method on F where
IPF is slow (it converges linearly, at rates near 1 on some released tables), and count degrees of freedom as
|F| - rank of the design restricted to F. Where F is every cell this is the ordinary MLE and
its nominal degrees of freedom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from .errors import TabreleaseError
from .models import HierarchicalModel, Margin, free_parameters, parse_model
from .tables import ContingencyTable, margin_counts

DEFAULT_TOLERANCE = 1e-8
DEFAULT_MAX_ITERATIONS = 10_000


@dataclass(frozen=True, eq=False)
class LogLinearFit:
    """The (extended) MLE of a hierarchical log-linear model and the usual summaries of fit."""

    model: HierarchicalModel
    observed: np.ndarray
    fitted: np.ndarray
    g2: float
    pearson_x2: float
    df: int
    df_adjusted: int
    mle_exists: bool
    facial_set: np.ndarray
    iterations: int
    converged: bool

    @property
    def n(self) -> float:
        return float(self.observed.sum())

    @property
    def facial_set_size(self) -> int:
        return int(self.facial_set.sum())

    @property
    def probabilities(self) -> np.ndarray:
        return self.fitted / self.fitted.sum()


# --- distances between cell distributions ----------------------------------------------------------
def l1_distance(p: np.ndarray, q: np.ndarray) -> float:
    """sum |p - q|, between 0 and 2 for probability vectors (the paper's Figure 4 plots this)."""
    return float(np.abs(np.asarray(p, float) - np.asarray(q, float)).sum())


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """max over events |P(E) - Q(E)| = L1 / 2, between 0 and 1."""
    return 0.5 * l1_distance(p, q)


# --- goodness of fit ------------------------------------------------------------------------------
def g_squared(observed: np.ndarray, fitted: np.ndarray, batch_ndim: int = 0) -> np.ndarray | float:
    """2 sum f log(f / m) over cells with f > 0 (the paper's eq. (2)); zero cells contribute 0."""
    f = np.asarray(observed, float)
    m = np.asarray(fitted, float)
    positive = f > 0
    terms = np.where(positive, f * np.log(np.where(positive, f, 1.0) / np.where(positive, m, 1.0)), 0.0)
    axes = tuple(range(batch_ndim, f.ndim))
    out = 2.0 * terms.sum(axis=axes)
    return float(out) if batch_ndim == 0 else out


def pearson_x2(observed: np.ndarray, fitted: np.ndarray) -> float:
    """sum (f - m)^2 / m over cells with m > 0 (cells off the facial set have f = m = 0)."""
    f = np.asarray(observed, float)
    m = np.asarray(fitted, float)
    support = m > 0
    return float(((f[support] - m[support]) ** 2 / m[support]).sum())


# --- IPF ----------------------------------------------------------------------------------------
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


def _ipf_stack(fitted, targets, generators, tol, max_iter):
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
    OpenBLAS threads a 144 x 144 Cholesky took 6.5 ms on the reference machine, on one 0.2 ms."""
    if not _BLAS:
        import scipy.linalg  # noqa: F401  (scipy carries its own BLAS: load it so that the controller sees it)
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


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


@lru_cache(maxsize=16)
def _cell_design(shape: tuple[int, ...], generators: tuple[Margin, ...]) -> sp.csr_matrix:
    """The margin design transposed: one row per cell, a 1 in the column of each generator margin cell it adds to."""
    return margin_design(shape, generators).T.tocsr()


def _newton_on_facial_set(observed, fitted, facial, generators, tol, max_steps):
    """Newton's method for the Poisson log-likelihood on the facial set, from IPF's fitted table.

    log m on the facial set is X beta, X the margin design's rows for those cells (sparse:
    one 1 per generator), which is rank-deficient there and overparametrised everywhere. A
    ridge of 1e-9 of the Hessian's largest diagonal entry makes each step solvable by
    Cholesky; the gradient X'(f - m) has no component along X's null space, so the ridge only
    shortens steps and the fixed point is the MLE itself. Steps are halved until the
    likelihood rises. Returns (fitted, steps, True), or None when it does not reach the tolerance.
    """
    import scipy.linalg as la

    cells = np.flatnonzero(facial.ravel())
    f = observed.ravel()[cells]
    X = _cell_design(observed.shape, generators)[cells]
    XT = X.T.tocsr()

    def solve_ridged(weights, vector):
        matrix = (XT @ X.multiply(weights[:, None])).toarray()
        matrix[np.diag_indices_from(matrix)] += 1e-9 * max(float(matrix.diagonal().max()), 1e-300)
        return la.cho_solve(la.cho_factor(matrix), vector)

    try:
        beta = solve_ridged(np.ones(len(cells)), XT @ np.log(np.maximum(fitted.ravel()[cells], 1e-300)))
    except (la.LinAlgError, ValueError):
        return None
    eta = X @ beta
    m = np.exp(eta)
    loglik = f @ eta - m.sum()
    for step in range(1, max_steps + 1):
        try:
            direction = solve_ridged(m, XT @ (f - m))
        except (la.LinAlgError, ValueError):
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


# --- design and facial set ----------------------------------------------------------------------
def margin_design(shape: Sequence[int], generators: Sequence[Margin]) -> sp.csr_matrix:
    """Sparse 0/1 matrix mapping a flattened table to its stacked generator margins."""
    cells = int(np.prod(shape))
    coords = np.unravel_index(np.arange(cells), tuple(shape))
    blocks = []
    for g in generators:
        rows = np.ravel_multi_index(tuple(coords[j] for j in g), tuple(shape[j] for j in g))
        size = int(np.prod([shape[j] for j in g]))
        blocks.append(sp.csr_matrix((np.ones(cells), (rows, np.arange(cells))), shape=(size, cells)))
    return sp.vstack(blocks).tocsr()


def facial_set(observed: np.ndarray, generators: Sequence[Margin]) -> np.ndarray:
    """Boolean mask of the facial set: cells positive in some non-negative table with the observed margins.

    The facial set depends on the observed table only through its support: t = A w is a
    positive combination of the design columns of the positive cells, so it lies in the
    relative interior of the smallest face holding all of them. Between the support and the
    cells whose every generator margin is positive it is found without an LP when the two
    coincide, or when the model is decomposable (its extended MLE, the closed form
    prod clique margins / prod separator margins, is positive exactly there). Otherwise one LP
    on the support's indicator table decides, cached by support.
    """
    observed = np.asarray(observed, float)
    support = observed > 0
    if support.all():
        return support
    generators = tuple(tuple(g) for g in generators)
    positive_margins = _positive_margin_cells(support, generators)
    if np.array_equal(support, positive_margins) or is_decomposable(generators):
        return positive_margins
    mask = _facial_set_of_support(observed.shape, generators, np.packbits(support.ravel()).tobytes())
    return mask.copy()


def _positive_margin_cells(support: np.ndarray, generators: Sequence[Margin]) -> np.ndarray:
    """Cells whose every generator margin is positive: the facial set can hold no other cell."""
    cells = np.ones(support.shape, bool)
    for g in generators:
        positive = margin_counts(support, g) > 0
        cells &= positive.reshape(tuple(support.shape[j] if j in g else 1 for j in range(support.ndim)))
    return cells


def _unpack(packed: bytes, cells: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(packed, np.uint8))[:cells].astype(bool)


@lru_cache(maxsize=4096)
def _facial_set_of_support(shape: tuple[int, ...], generators: tuple[Margin, ...], packed: bytes) -> np.ndarray:
    support = _unpack(packed, int(np.prod(shape))).reshape(shape)
    candidates = _positive_margin_cells(support, generators)
    return _facial_set_program(shape, generators).solve(support.ravel(), candidates.ravel()).reshape(shape)


class _FacialSetProgram:
    """The facial-set LP for one design, built once; a support changes only column bounds.

        maximise sum y  subject to  A w = A z,  0 <= y <= w,  y <= 1,  w >= 0,
                                    z >= 1 on the support,  z = 0 off it.

    A z runs over the relative interior of the face spanned by the support's design columns
    (scaled without limit), so exactly the cells of the facial set can reach y = 1, all at once
    (feasible solutions add). This is Fienberg & Rinaldo's (2012) LP with the observed margins
    moved from the matrix into bounds, so HiGHS re-solves it warm for each new support.
    """

    def __init__(self, shape: tuple[int, ...], generators: tuple[Margin, ...]):
        import highspy

        A = margin_design(shape, generators)
        m, c = A.shape
        ident = sp.identity(c, format="csr")
        # columns: w (c), z (c), y (c)
        matrix = sp.vstack([
            sp.hstack([A, -A, sp.csr_matrix((m, c))]),
            sp.hstack([-ident, sp.csr_matrix((c, c)), ident]),
        ]).tocsc()
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_ = 3 * c
        lp.num_row_ = m + c
        lp.col_cost_ = np.concatenate([np.zeros(2 * c), -np.ones(c)])
        lp.col_lower_ = np.zeros(3 * c)
        lp.col_upper_ = np.concatenate([np.full(2 * c, inf), np.ones(c)])
        lp.row_lower_ = np.concatenate([np.zeros(m), np.full(c, -inf)])
        lp.row_upper_ = np.zeros(m + c)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
        lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
        lp.a_matrix_.value_ = matrix.data
        lp.a_matrix_.num_col_ = 3 * c
        lp.a_matrix_.num_row_ = m + c
        self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self._highs.passModel(lp)
        self._cells = c
        self._all_columns = np.arange(3 * c, dtype=np.int32)
        self._inf = inf
        self._optimal = highspy.HighsModelStatus.kOptimal

    def solve(self, support: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Facial set of a support; cells outside `candidates` (a zero margin) are known to be out
        and cells of the support known to be in, so only the rest are left to the simplex method."""
        c = self._cells
        lower = np.concatenate([np.zeros(c), support, support]).astype(float)
        upper = np.concatenate([
            np.where(candidates, self._inf, 0.0), np.where(support, self._inf, 0.0), candidates.astype(float)
        ])
        h = self._highs
        h.changeColsBounds(3 * c, self._all_columns, lower, upper)
        h.run()
        status = h.getModelStatus()
        if status != self._optimal:
            raise TabreleaseError(f"the facial-set linear program failed: HiGHS says {h.modelStatusToString(status)}")
        y = np.asarray(h.getSolution().col_value)[2 * self._cells :]
        # Cells with a positive count are in the facial set by definition.
        return (y > 0.5) | support


@lru_cache(maxsize=16)
def _facial_set_program(shape: tuple[int, ...], generators: tuple[Margin, ...]) -> _FacialSetProgram:
    return _FacialSetProgram(shape, generators)


def is_decomposable(generators: Sequence[Margin]) -> bool:
    """Whether a (reduced) generating class is decomposable: the GYO reduction of an acyclic hypergraph.

    Repeatedly remove a generator whose intersection with the union of the others lies inside
    one other generator (a leaf of a junction tree); decomposable iff one generator remains.
    """
    remaining = [frozenset(g) for g in generators]
    while len(remaining) > 1:
        for i, g in enumerate(remaining):
            others = remaining[:i] + remaining[i + 1 :]
            shared = g & frozenset().union(*others)
            if any(shared <= h for h in others):
                remaining = others
                break
        else:
            return False
    return True


def design_rank(shape: Sequence[int], generators: Sequence[Margin], cells: np.ndarray | None = None) -> int:
    """Rank of the margin design, restricted to a set of cells when given."""
    packed = None if cells is None else np.packbits(np.asarray(cells, bool).ravel()).tobytes()
    return _design_rank(tuple(int(k) for k in shape), tuple(tuple(g) for g in generators), packed)


@lru_cache(maxsize=1024)
def _design_rank(shape: tuple[int, ...], generators: tuple[Margin, ...], packed: bytes | None) -> int:
    A = margin_design(shape, generators)
    if packed is not None:
        A = A[:, np.flatnonzero(_unpack(packed, A.shape[1]))]
    if A.shape[1] == 0:
        return 0
    with one_blas_thread():
        return int(np.linalg.matrix_rank(A.toarray()))


# --- the fit ------------------------------------------------------------------------------------
def fit_loglinear(
    table: ContingencyTable | np.ndarray,
    model: HierarchicalModel | str,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
) -> LogLinearFit:
    """The MLE (or, where it does not exist, the extended MLE) of a hierarchical model."""
    if isinstance(table, ContingencyTable):
        model = parse_model(model, table)
        observed = table.counts.astype(float)
    else:
        observed = np.asarray(table, float)
        if not isinstance(model, HierarchicalModel):
            raise TabreleaseError("fitting a bare array needs a HierarchicalModel, not a model string")
    if observed.sum() <= 0:
        raise TabreleaseError("the table is empty (n = 0); there is nothing to fit")
    shape = observed.shape
    generators = model.generators
    support = facial_set(observed, generators)
    mle_exists = bool(support.all())
    fitted, iterations, converged = fit_extended_mle(observed, generators, support, tol=tol, max_iter=max_iter)
    nominal_df = observed.size - free_parameters(generators, shape)
    if mle_exists:
        adjusted_df = nominal_df
    else:
        adjusted_df = int(support.sum()) - design_rank(shape, generators, support)
    return LogLinearFit(
        model=model,
        observed=observed,
        fitted=fitted,
        g2=g_squared(observed, fitted),
        pearson_x2=pearson_x2(observed, fitted),
        df=int(nominal_df),
        df_adjusted=int(adjusted_df),
        mle_exists=mle_exists,
        facial_set=support,
        iterations=iterations,
        converged=converged,
    )


def uniform_probabilities(shape: Sequence[int]) -> np.ndarray:
    return np.full(tuple(shape), 1.0 / int(np.prod(shape)))


def fit_summary(
    table: ContingencyTable,
    model: HierarchicalModel | str | None = None,
    *,
    tol: float | None = None,
    max_iter: int | None = None,
) -> dict:
    """Everything `tabrelease fit --json` prints, with the paper's values beside a built-in table's."""
    from .models import default_model

    model = default_model(table) if model is None else parse_model(model, table)
    result = fit_loglinear(
        table, model, tol=tol or DEFAULT_TOLERANCE, max_iter=max_iter or DEFAULT_MAX_ITERATIONS
    )
    summary = {
        "table": table.name,
        "variables": list(table.variables),
        "shape": list(table.shape),
        "n": table.n,
        "cells": table.cells,
        "zero_cells": table.zero_cells,
        "model": model.names(table.variables),
        "dropped_generators": [
            "[" + "".join(table.letters[a] for a in g) + "]" for g in model.dropped
        ],
        "free_parameters": model.free_parameters(table.shape),
        "g2": result.g2,
        "pearson_x2": result.pearson_x2,
        "df": result.df,
        "df_adjusted": result.df_adjusted,
        "mle_exists": result.mle_exists,
        "facial_set_size": result.facial_set_size,
        "iterations": result.iterations,
        "converged": result.converged,
        "l1_to_uniform": l1_distance(result.probabilities, uniform_probabilities(table.shape)),
    }
    paper = table.metadata.get("paper") if table.metadata else None
    if paper and model.letters() == parse_model(table.metadata["model"], table).letters():
        summary["paper"] = {
            "source": "Yang, Fienberg & Rinaldo, Table 7 (G2, df) and Section 6 (L1 to uniform)",
            "g2": paper["g2"],
            "df": paper["df"],
            "l1_to_uniform": paper["l1_to_uniform"],
            "note": "printed values; the verified counts do not reproduce the printed G2 (tables/PROVENANCE.md)",
        }
    return summary
