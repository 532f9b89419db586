"""Fitting a hierarchical log-linear model to a table: the (extended) MLE and the usual summaries of fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TabreleaseError
from ..models import HierarchicalModel, free_parameters, margin_label, parse_model
from ..tables import MAX_TABLE_CELLS, ContingencyTable, margin_title, people_names
from .design import design_rank
from .distances import g_squared, l1_distance, pearson_x2
from .facial import facial_set
from .ipf import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE
from .newton import fit_extended_mle


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

    def _repr_html_(self) -> str:
        from .._display import html_for

        return html_for(self)  # the renderer is registered by the presentation layer (tabrelease.notebook)

    @property
    def facial_set_size(self) -> int:
        return int(self.facial_set.sum())

    @property
    def probabilities(self) -> np.ndarray:
        return self.fitted / self.fitted.sum()


# --- the fit ------------------------------------------------------------------------------------
def fit_loglinear(
    table: ContingencyTable | np.ndarray,
    model: HierarchicalModel | str,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
) -> LogLinearFit:
    """The MLE (or, where it does not exist, the extended MLE) of a hierarchical model.

    Parameters
    ----------
    table : ContingencyTable or numpy.ndarray
        The table, or an array of counts.
    model : HierarchicalModel or str
        The model; a string (such as ``"AB,BC"``) only with a `ContingencyTable`.
    tol : float, default DEFAULT_TOLERANCE
        Convergence tolerance on the fitted margins, in counts.
    max_iter : int, default DEFAULT_MAX_ITERATIONS
        Most IPF cycles plus Newton steps.

    Returns
    -------
    LogLinearFit
        Fitted counts (0 off the facial set), G², X², nominal and facial-set-adjusted degrees of freedom, whether
        the MLE exists, the facial set, iterations and convergence.

    Raises
    ------
    TabreleaseError
        If the table is empty, the model does not parse, or a bare array comes with a model string.
    """
    if isinstance(table, ContingencyTable) or hasattr(table, "held_as_cells"):
        if getattr(table, "held_as_file", False) or table.cells > MAX_TABLE_CELLS:
            held = "counted from its file as margins" if getattr(table, "held_as_file", False) else "held as records"
            raise TabreleaseError(f"a log-linear fit is over every cell, and the table has {table.cells:.3g} cells "
                                  f"({held}; cells are held up to {MAX_TABLE_CELLS:,})")
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
    """The uniform distribution over the cells of a table of this shape.

    Parameters
    ----------
    shape : sequence of int
        The table's shape.

    Returns
    -------
    numpy.ndarray
        Every cell 1 / cells.
    """
    return np.full(tuple(shape), 1.0 / int(np.prod(shape)))


def fit_summary(
    table: ContingencyTable,
    model: HierarchicalModel | str | None = None,
    *,
    tol: float | None = None,
    max_iter: int | None = None,
) -> dict:
    """Everything `tabrelease fit --json` prints, with the paper's values beside a built-in table's.

    Parameters
    ----------
    table : ContingencyTable
        The table.
    model : HierarchicalModel or str, optional
        The model (the table's default model by default).
    tol : float, optional
        Convergence tolerance (DEFAULT_TOLERANCE by default).
    max_iter : int, optional
        Most iterations (DEFAULT_MAX_ITERATIONS by default).

    Returns
    -------
    dict
        JSON-ready: the table's name, variables, shape, n, cells and zero cells; the model's names, dropped
        generators and free parameters; G², X², df, adjusted df, whether the MLE exists, the facial set's size,
        iterations, convergence and the L1 distance to uniform; and ``"paper"`` (the printed values) for a built-in
        table fitted with its paper's model.

    Raises
    ------
    TabreleaseError
        If the model does not parse or the table is empty.
    """
    from ..models import default_model

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
        # The model as the public files would name it (the variables' names for people: Rochdale's wife_active).
        "model_named": "".join(margin_title(people_names(table)[0], g) for g in model.generators),
        "dropped_generators": [
            margin_label(g, table.letters) for g in model.dropped
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
