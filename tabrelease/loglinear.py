"""Fitting hierarchical log-linear models: IPF, the extended MLE, G², X² and degrees of freedom.

Three of the four reference tables have zero margins under their models, where the ordinary
MLE does not exist. Following Fienberg & Rinaldo (2012), we find the facial set F (the cells
that some non-negative table with the observed margins puts mass on) by one linear program,
fit by IPF on F (cells off F are fitted as exactly 0), and count degrees of freedom as
|F| - rank of the design restricted to F. Where F is every cell this is the ordinary MLE and
its nominal degrees of freedom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

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
    all repetitions of a grid point together. Converged means every fitted margin is within
    `tol` (in counts) of the observed one. Returns (fitted, iterations, converged).
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
) -> tuple[np.ndarray, int, bool]:
    """IPF to given margins (the MLE from released margins alone, when no table is released)."""
    shape = tuple(shape)
    fitted = np.ones(shape) if start is None else np.array(start, float, copy=True)
    targets = [np.asarray(t, float) for t in targets]
    k = len(shape) - batch_ndim
    keep_shapes = [
        shape[:batch_ndim] + tuple(shape[batch_ndim + j] if j in g else 1 for j in range(k)) for g in generators
    ]
    for iteration in range(1, max_iter + 1):
        for g, target, keep in zip(generators, targets, keep_shapes):
            current = margin_counts(fitted, g, batch_ndim)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(current > 0, target / current, 0.0)
            fitted *= ratio.reshape(keep)
        gap = max(float(np.max(np.abs(margin_counts(fitted, g, batch_ndim) - t))) for g, t in zip(generators, targets))
        if gap <= tol:
            return fitted, iteration, True
    return fitted, max_iter, False


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

    One LP (Fienberg & Rinaldo 2012): maximise sum y subject to A w = s t, 0 <= y <= w, y <= 1,
    w >= 0, s >= 0. Scaling s lets every cell that can be positive reach y = 1; a cell that no
    table in the fibre can make positive is held at 0.
    """
    observed = np.asarray(observed, float)
    if np.all(observed > 0):
        return np.ones(observed.shape, bool)
    A = margin_design(observed.shape, generators)
    t = A @ observed.ravel()
    c = observed.size
    m = A.shape[0]
    ident = sp.identity(c, format="csr")
    # variables: w (c), y (c), s (1)
    A_eq = sp.hstack([A, sp.csr_matrix((m, c)), sp.csr_matrix(-t.reshape(-1, 1))]).tocsr()
    A_ub = sp.hstack([-ident, ident, sp.csr_matrix((c, 1))]).tocsr()
    cost = np.concatenate([np.zeros(c), -np.ones(c), [0.0]])
    bounds = [(0, None)] * c + [(0, 1)] * c + [(0, None)]
    res = linprog(cost, A_ub=A_ub, b_ub=np.zeros(c), A_eq=A_eq, b_eq=np.zeros(m), bounds=bounds, method="highs")
    if res.status != 0:
        raise TabreleaseError(f"the facial-set linear program failed: {res.message}")
    mask = res.x[c : 2 * c] > 0.5
    # Cells with a positive count are in the fibre's support by definition.
    return (mask | (observed.ravel() > 0)).reshape(observed.shape)


def design_rank(shape: Sequence[int], generators: Sequence[Margin], cells: np.ndarray | None = None) -> int:
    """Rank of the margin design, restricted to a set of cells when given."""
    A = margin_design(shape, generators)
    if cells is not None:
        A = A[:, np.flatnonzero(np.asarray(cells).ravel())]
    if A.shape[1] == 0:
        return 0
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
    fitted, iterations, converged = ipf(observed, generators, start=support.astype(float), tol=tol, max_iter=max_iter)
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
