"""One place that turns a sparse LP into a HiGHS model (the consistency LP, the facial-set LP and the rounding MILPs),
with the options that make its result deterministic."""

from __future__ import annotations

import os

import numpy as np


_BANNER_SILENCED = False


def quiet_highs():
    """A `highspy.Highs` that prints nothing and whose result depends on the model and options alone: one thread,
    no parallel search or simplex, a fixed random seed. No wall-clock limit is ever set (HiGHS's default time
    limit is infinite): where a solve must stop early, its limit is counted in work (nodes, iterations), which is
    the same on a fast machine and a busy one.

    HiGHS (1.16 and later) prints a banner on standard output when the first solver of a process is made, before
    any option can be set: that first one is made with the process's standard output pointed at /dev/null, so
    that `--json` output stays clean whatever the version installed.

    Returns
    -------
    highspy.Highs
        A new solver with `DETERMINISTIC_OPTIONS` set.
    """
    import highspy

    global _BANNER_SILENCED
    if not _BANNER_SILENCED:
        import sys

        # Standard output may be closed (`1>&-`, a daemon: sys.stdout is then None), which had failed every default
        # release after its charge, at its rounding (a reviewer's trial). Then /dev/null is left on descriptor 1, so
        # that no file opened later takes it and receives what is printed.
        if sys.stdout is not None:
            try:
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
        try:
            saved = os.dup(1)
        except OSError:
            saved = None
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            highspy.Highs()
        finally:
            if saved is not None:
                os.dup2(saved, 1)
                os.close(saved)
            if saved is not None or devnull != 1:  # with 1 closed, the open took 1 itself: kept there
                os.close(devnull)
        _BANNER_SILENCED = True
    highs = highspy.Highs()
    for option, value in DETERMINISTIC_OPTIONS.items():
        highs.setOptionValue(option, value)
    return highs


def highs_model(matrix, cost, col_lower, col_upper, row_lower, row_upper):
    """A quiet `highspy.Highs` holding: min cost.x subject to row_lower <= matrix x <= row_upper, col bounds.

    `matrix` is a sparse matrix (`tabrelease._sparse`, read in CSC); infinite bounds may be given as +-numpy.inf.

    Parameters
    ----------
    matrix : tabrelease._sparse.SparseMatrix
        The constraint matrix, rows x columns.
    cost : array_like
        The objective's coefficients, one per column.
    col_lower, col_upper : array_like
        Bounds on the columns (variables).
    row_lower, row_upper : array_like
        Bounds on the rows (constraints).

    Returns
    -------
    tuple
        (highs, lp): the `highspy.Highs` with the model passed, and the `highspy.HighsLp` it holds.
    """
    import highspy

    matrix = matrix.tocsc()
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_ = matrix.shape[1]
    lp.num_row_ = matrix.shape[0]
    lp.col_cost_ = np.asarray(cost, float)
    lp.col_lower_ = np.clip(np.asarray(col_lower, float), -inf, inf)
    lp.col_upper_ = np.clip(np.asarray(col_upper, float), -inf, inf)
    lp.row_lower_ = np.clip(np.asarray(row_lower, float), -inf, inf)
    lp.row_upper_ = np.clip(np.asarray(row_upper, float), -inf, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data.astype(float)
    lp.a_matrix_.num_col_ = matrix.shape[1]
    lp.a_matrix_.num_row_ = matrix.shape[0]
    highs = quiet_highs()
    highs.passModel(lp)
    return highs, lp


DETERMINISTIC_OPTIONS = {"output_flag": False, "threads": 1, "parallel": "off", "random_seed": 0,
                         "time_limit": float("inf")}
