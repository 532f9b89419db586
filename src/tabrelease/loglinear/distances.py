"""Distances between cell distributions, and the fit statistics G² and X²."""

from __future__ import annotations

import numpy as np


def l1_distance(p: np.ndarray, q: np.ndarray) -> float:
    """sum |p - q|, between 0 and 2 for probability vectors (the paper's Figure 4 plots this).

    Parameters
    ----------
    p, q : numpy.ndarray
        Arrays of the same shape (cell probabilities, say).

    Returns
    -------
    float
        The L1 distance.
    """
    return float(np.abs(np.asarray(p, float) - np.asarray(q, float)).sum())


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """max over events |P(E) - Q(E)| = L1 / 2, between 0 and 1.

    Parameters
    ----------
    p, q : numpy.ndarray
        Probability arrays of the same shape.

    Returns
    -------
    float
        The total variation distance.
    """
    return 0.5 * l1_distance(p, q)


# --- goodness of fit ------------------------------------------------------------------------------
def g_squared(observed: np.ndarray, fitted: np.ndarray, batch_ndim: int = 0) -> np.ndarray | float:
    """2 sum f log(f / m) over cells with f > 0 (the paper's eq. (2)); zero cells contribute 0.

    Parameters
    ----------
    observed : numpy.ndarray
        Observed counts f (`batch_ndim` leading batch axes, then the table's).
    fitted : numpy.ndarray
        Fitted counts m, the same shape (positive wherever f is, else G² is inf, or nan where m < 0).
    batch_ndim : int, default 0
        Number of leading batch axes.

    Returns
    -------
    float or numpy.ndarray
        G², a float, or one per table of the batch.
    """
    f = np.asarray(observed, float)
    m = np.asarray(fitted, float)
    positive = f > 0
    # A fit of 0 where f > 0 gives G^2 = inf, and a negative one (an unrounded release's cells as measured) nan: the
    # value says so, and numpy's warnings are not printed to the user's terminal besides.
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(positive, f * np.log(np.where(positive, f, 1.0) / np.where(positive, m, 1.0)), 0.0)
    axes = tuple(range(batch_ndim, f.ndim))
    out = 2.0 * terms.sum(axis=axes)
    return float(out) if batch_ndim == 0 else out


def pearson_x2(observed: np.ndarray, fitted: np.ndarray) -> float:
    """sum (f - m)^2 / m over cells with m > 0 (cells off the facial set have f = m = 0).

    Parameters
    ----------
    observed : numpy.ndarray
        Observed counts f.
    fitted : numpy.ndarray
        Fitted counts m, the same shape.

    Returns
    -------
    float
        Pearson's X².
    """
    f = np.asarray(observed, float)
    m = np.asarray(fitted, float)
    support = m > 0
    return float(((f[support] - m[support]) ** 2 / m[support]).sum())


# --- IPF ----------------------------------------------------------------------------------------
