"""Measurements: the only hand-off from the privacy step to everything after it.

A mechanism's `measure` draws noise once and returns `Measurements`: which linear queries of the
table were answered (a block of Fourier or Efron-Stein coefficients of a set S, or the cells of a
margin), the noisy answers, and the noise distribution and scale of each block. Estimation,
rounding, evaluation, reports and sweeps read these records and the plan, never the mechanism's
name, so an estimator can be run again on the same noisy data (private-pgm's LinearMeasurement
is the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import TabreleaseError

COEFFICIENTS = "coefficients"
MARGIN_CELLS = "margin_cells"
LINEAR = (COEFFICIENTS, MARGIN_CELLS)
# Dummy-coded tables (the Gaussian copula's): for variables (i,) the counts (n0, n1) of each of its k_i dummies,
# values in C order over (level, bit); for (i, j) the 2x2 table of each pair of dummies, over (l_i, l_j, bit_i, bit_j).
# Linear in the table but not margin cells or coefficients: only the copula-synthesis estimator reads them.
DUMMY_TABLES = "dummy_tables"
# k-ary randomized response (local DP): the cell counts of the randomised records over the full table (variables: all
# axes), before any unbiasing; only the randomized-response estimator reads them.
RANDOMIZED_REPORTS = "randomized_reports"
# A block measured without noise: only a public total (an invariant the release treats as public).
EXACT = "exact"


@dataclass(frozen=True, eq=False)
class Measurement:
    """One block of noisy answers to linear queries of the table.

    `query` is "coefficients" (a block of `basis` coefficients of the set `variables`, on a table
    of shape `domain`), "margin_cells" (the cells of the margin over `variables`) or "dummy_tables"
    (the dummy-coded one- or two-way tables of `variables`, see DUMMY_TABLES). `domain` is
    the shape the queries are defined on: the table's own, or its binary encoding's.
    """

    query: str
    variables: tuple[int, ...]
    values: np.ndarray
    distribution: str
    scale: float
    domain: tuple[int, ...]
    basis: str | None = None

    def __post_init__(self) -> None:
        values = np.array(self.values, dtype=float)
        values.setflags(write=False)
        object.__setattr__(self, "values", values)

    @property
    def size(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True, eq=False)
class Measurements:
    """Every block one run of a mechanism measured, with how the noise was drawn."""

    blocks: tuple[Measurement, ...]
    noise_mode: str
    seed: int | None  # the simulation seed that replays them; None for secure noise

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)

    def vector(self) -> np.ndarray:
        """All noisy answers, block after block (the order of the plan's queries).

        Returns
        -------
        numpy.ndarray
            1-d float array of length `size` (empty when there are no blocks).
        """
        if not self.blocks:
            return np.zeros(0)
        return np.concatenate([b.values for b in self.blocks])


def measured(blocks: Sequence[Measurement], noise) -> Measurements:
    """The blocks one noise source drew, with its mode and (for simulation only) the seed that replays them.

    Parameters
    ----------
    blocks : sequence of Measurement
        The measured blocks, in the order of the plan's queries.
    noise : NoiseSource
        The source that drew them (its `mode`, and `seed` in simulation).

    Returns
    -------
    Measurements
        The blocks, the noise mode, and the seed (None unless simulated).
    """
    seed = getattr(noise, "seed", None) if noise.mode == "simulation" else None
    return Measurements(tuple(blocks), noise.mode, seed)


def coefficient_blocks(basis, noisy: np.ndarray, distribution: str, scale: float) -> tuple[Measurement, ...]:
    """Split a vector of noisy coefficients into one measurement per set S of the basis's closure.

    Parameters
    ----------
    basis : CoefficientBasis
        The basis the coefficients are in (its closure, offsets, shape and kind).
    noisy : numpy.ndarray
        The noisy coefficients, 1-d of length `basis.size`, in the basis's order.
    distribution : str
        "laplace" or "gaussian".
    scale : float
        The noise scale of every block.

    Returns
    -------
    tuple of Measurement
        One "coefficients" block per set of the closure.
    """
    return tuple(
        Measurement(COEFFICIENTS, tuple(s), noisy[lo:hi], distribution, scale, tuple(basis.shape), basis.kind)
        for s, lo, hi in zip(basis.closure, basis.offsets[:-1], basis.offsets[1:])
    )


def margin_blocks(margins: Sequence[tuple[int, ...]], noisy: Sequence[np.ndarray], distribution: str, scale: float,
                  domain: tuple[int, ...]) -> tuple[Measurement, ...]:
    """One "margin_cells" measurement per margin, from its noisy cells.

    Parameters
    ----------
    margins : sequence of tuple of int
        The measured margins (axes of the table).
    noisy : sequence of numpy.ndarray
        Each margin's noisy cells (flattened in C order).
    distribution : str
        "laplace" or "gaussian".
    scale : float
        The noise scale of every block.
    domain : tuple of int
        The shape the margins are defined on.

    Returns
    -------
    tuple of Measurement
        One block per margin, in the order given.
    """
    return tuple(
        Measurement(MARGIN_CELLS, tuple(g), np.ravel(values), distribution, scale, domain)
        for g, values in zip(margins, noisy)
    )


# Functions of the measurements alone, read by estimators and by the relaxed fit (estimate.py re-exports them).
def noise_variance(block) -> float:
    """The variance of each noisy value of a block: 2 b^2 for Laplace scale b, sigma^2 for Gaussian noise.

    Parameters
    ----------
    block : Measurement
        A measured block (its distribution and scale).

    Returns
    -------
    float
        The per-value noise variance.
    """
    return variance_per_value(block.distribution, block.scale)


def variance_per_value(distribution: str, scale: float) -> float:
    """The variance of one noisy value: 2 b^2 for Laplace noise of scale b, sigma^2 for Gaussian noise.

    Parameters
    ----------
    distribution : {"laplace", "gaussian"}
    scale : float
        b, or sigma.

    Returns
    -------
    float
    """
    return 2.0 * scale**2 if distribution == "laplace" else scale**2


def best_total(blocks) -> float:
    """The best linear unbiased estimate of n from the blocks that carry it: the sums of measured margins and
    the empty set's coefficient (the total is the only thing these share), weighted by 1 / variance. Where the plan
    encodes levels in bits, other blocks can tell n too (the encoding's impossible cells are known to be empty), and
    this estimate is unbiased but not the best.

    Parameters
    ----------
    blocks : iterable of Measurement
        The measured blocks; those of margin cells and the empty set's coefficient are used.

    Returns
    -------
    float
        The inverse-variance weighted estimate of the number of records n.

    Raises
    ------
    TabreleaseError
        If no block carries the total.
    """
    estimates, variances = _totals_carried(blocks)
    precision = 1.0 / variances
    return float(precision @ estimates / precision.sum())


def best_total_variance(blocks) -> float:
    """The variance of `best_total`'s estimate: 1 over the sum of the carrying blocks' precisions (their noise's
    variance in the total each carries). A function of the scales alone, not of the values.

    Parameters
    ----------
    blocks : iterable of Measurement
        The measured blocks, as for `best_total`.

    Returns
    -------
    float

    Raises
    ------
    TabreleaseError
        If no block carries the total.
    """
    return float(1.0 / (1.0 / _totals_carried(blocks)[1]).sum())


def _totals_carried(blocks) -> tuple[np.ndarray, np.ndarray]:
    """Each block's estimate of n and its noise's variance in it: a margin's sum (its cells' variances added), the
    empty set's coefficient times its basis factor (its variance times the factor squared)."""
    estimates, variances = [], []
    for b in blocks:
        if b.query == MARGIN_CELLS:
            estimates.append(float(np.sum(b.values)))
            variances.append(noise_variance(b) * b.size)
        elif not b.variables:
            factor = 2.0 ** (len(b.domain) / 2) if b.basis == "fourier" else float(np.prod(b.domain))
            estimates.append(float(b.values[0]) * factor)
            variances.append(noise_variance(b) * factor**2)
    if not estimates:
        raise TabreleaseError("no measurement carries the total")
    return np.asarray(estimates), np.asarray(variances)
