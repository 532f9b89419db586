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


def read_crosstab(sheet, total: str = "Total"):
    """A margin's workbook sheet read back: ({label tuple: value}, {label tuple with "Total" in it: value}).

    The sheet's layout is read as a person would: a title; a one-way margin as a header then levels down to
    "Total"; otherwise the column variable's label, the header of column levels, then (for three or more variables)
    blocks titled "label: level; label: level", each of rows down to "Total". Keys are the levels in the margin's
    variable order (outer variables, row, column); a total's key has "Total" in place of the summed levels. `total`:
    the word the sheet writes for a total (a metadata file's "words" may give one in the user's language)."""
    rows = [list(r) for r in sheet.iter_rows(values_only=True)]
    cells, totals = {}, {}
    if rows[1][0] is not None:  # one variable: [label, "count"] (a cross-tab: [None, column label])
        for level, value, *_ in rows[2:]:
            if level == total:
                totals[("Total",)] = value
                break
            cells[(level,)] = value
        return cells, totals
    header = rows[2]
    across = [h for h in header[1:] if h is not None]
    assert across[-1] == total
    across = across[:-1]
    outer = ()
    for row in rows[3:]:
        first = row[0]
        if first is None or (isinstance(first, str) and first.startswith("Margin of error")):
            continue
        if all(v is None for v in row[1:]):  # a block's title
            outer = tuple(part.split(": ", 1)[1] for part in first.split("; "))
            continue
        values = row[1:len(across) + 2]
        first = "Total" if first == total else first  # keys say "Total", whatever word the sheet uses
        for level, value in zip(across + ["Total"], values):
            key = outer + (first, level)
            (totals if "Total" in (first, level) else cells)[key] = value
    return cells, totals


def as_scipy(matrix):
    """A `tabrelease._sparse.SparseMatrix` as scipy's CSR matrix, for the checks that use scipy's solvers on it."""
    import scipy.sparse as sp

    return sp.csr_matrix((matrix.values, (matrix.row, matrix.col)), shape=matrix.shape)


def neighbouring_reference(table, path, cell=0):
    """A public stand-in for `table` as a `plan --reference`: its counts with one person added to one cell,
    written as a long CSV (a reference holding exactly the table's counts is refused). Returns the counts."""
    import numpy as np

    from tabrelease.tables.model import write_long_csv

    counts = np.array(table.counts, dtype=np.int64)
    counts.flat[cell] += 1
    write_long_csv(path, table.variables, table.levels, tuple(range(counts.ndim)), counts, digits=None)
    return counts
