"""Test helpers: a noise source that records what it perturbed, and dense reference computations."""

from itertools import combinations

import numpy as np

from tabrelease.bases import FOURIER, coefficients
from tabrelease.noise import SimulationNoise


class RecordingNoise:
    """Seeded simulation noise that keeps every (values, noisy values) pair it handled."""

    mode = "simulation"

    def __init__(self, seed):
        self._inner = SimulationNoise(seed)
        self.calls = []

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        noisy = self._inner.perturb(values, calibration, integer_scale, integers)
        self.calls.append((np.array(values, float), np.array(noisy, float)))
        return noisy


def dense_rows(basis):
    """F: row i is coefficient i as a function of the cells (the coefficients of each one-record table)."""
    cells = int(np.prod(basis.shape))
    return coefficients(basis, np.eye(cells).reshape((cells,) + basis.shape), batch_ndim=1).T


def true_margin(counts, g):
    return np.asarray(counts).sum(axis=tuple(j for j in range(np.ndim(counts)) if j not in g))


def margin_by_hand(basis, coeffs, g):
    """The margin over g that coefficients give, from the definitions (not `bases.margin_from_coefficients`).

    Fourier: m_g(x_g) = 2^{k/2 - |g|} sum_{S in g} c_S (-1)^{sum_{j in S} x_j}.
    Efron-Stein: m_g(x_g) = prod_{j not in g} k_j * sum_{S in g} f^S(x_S), each f^S broadcast over g's axes.
    """
    shape, k = basis.shape, len(basis.shape)
    g_shape = tuple(shape[j] for j in g)
    grid = np.indices(g_shape)
    total = np.zeros(g_shape)
    for r in range(len(g) + 1):
        for s in combinations(g, r):
            block = np.asarray(coeffs)[basis.offsets[basis.closure.index(s)]:basis.offsets[basis.closure.index(s) + 1]]
            if basis.kind == FOURIER:
                total += block[0] * (-1.0) ** sum(grid[g.index(j)] for j in s) * 2.0 ** (k / 2 - len(g))
            else:
                index = tuple(slice(None) if j in s else None for j in g)
                total += block.reshape(tuple(shape[j] for j in s))[index] * np.prod([shape[j] for j in range(k) if j not in g])
    return total
