"""Step 5 of the papers' Tables 1-2: the non-negative table closest to the noisy coefficients.

    minimise b  subject to  w >= 0,  |phi - F w| <= b  (componentwise)

F w is never formed from a dense |B| x cells matrix. The LP carries the generator margins
m_g = C_g w as auxiliary columns (sparse 0/1 rows), and each coefficient is a small dense
row over one margin:

    rows  C_g w - m_g = 0                       for each generator g
          a_i . m_{parent(i)} + b >= phi_i       for each coefficient i
          a_i . m_{parent(i)} - b <= phi_i

Only the right-hand sides depend on the noise, so a `ConsistencyProblem` is built once per
basis and re-solved with new row bounds: HiGHS keeps its basis and warm-starts the dual
simplex, which is what makes sweeps of tens of thousands of releases affordable.
Structural zeros (binary encoding of multi-category variables) are columns fixed at 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .bases import CoefficientBasis
from .errors import TabreleaseError
from .loglinear import margin_design

# b* below this (in coefficient units) is taken as 0: a non-negative table has the noisy coefficients.
FEASIBILITY_TOLERANCE = 1e-7


@dataclass(frozen=True, eq=False)
class LPSolution:
    table: np.ndarray  # the fractional non-negative table w
    b: float  # optimal max deviation b*
    status: str
    seconds: float

    @property
    def infeasible(self) -> bool:
        """True when no non-negative real table has the noisy coefficients (the paper's 'infeasible')."""
        return self.b > FEASIBILITY_TOLERANCE


class ConsistencyProblem:
    """The consistency LP for one basis, built once and re-solved for each vector of noisy coefficients."""

    def __init__(self, basis: CoefficientBasis, structural_zeros: np.ndarray | None = None):
        import highspy

        self.basis = basis
        shape = basis.shape
        cells = int(np.prod(shape))
        C = margin_design(shape, basis.generators)
        n_margin = C.shape[0]
        starts = np.cumsum([0] + [int(np.prod([shape[j] for j in g])) for g in basis.generators])
        margin_start = {g: int(s) for g, s in zip(basis.generators, starts[:-1])}
        # coefficient rows over the margin columns
        rows, cols, vals = [], [], []
        for i, (parent, a) in enumerate(zip(basis.parents, basis.analysis)):
            lo = basis.offsets[i]
            r, c = np.nonzero(a)
            rows.append(lo + r)
            cols.append(margin_start[parent] + c)
            vals.append(a[r, c])
        d = basis.size
        M = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(d, n_margin))
        ones = sp.csr_matrix(np.ones((d, 1)))
        # columns: w (cells), m (n_margin), b (1)
        top = sp.hstack([C, -sp.identity(n_margin), sp.csr_matrix((n_margin, 1))])
        plus = sp.hstack([sp.csr_matrix((d, cells)), M, ones])
        minus = sp.hstack([sp.csr_matrix((d, cells)), M, -ones])
        A = sp.vstack([top, plus, minus]).tocsc()
        inf = highspy.kHighsInf
        n_col = cells + n_margin + 1
        col_upper = np.full(n_col, inf)
        if structural_zeros is not None:
            col_upper[:cells][np.asarray(structural_zeros).ravel()] = 0.0
        lp = highspy.HighsLp()
        lp.num_col_ = n_col
        lp.num_row_ = A.shape[0]
        lp.col_cost_ = np.concatenate([np.zeros(n_col - 1), [1.0]])
        lp.col_lower_ = np.zeros(n_col)
        lp.col_upper_ = col_upper
        lp.row_lower_ = np.concatenate([np.zeros(n_margin), np.zeros(d), np.full(d, -inf)])
        lp.row_upper_ = np.concatenate([np.zeros(n_margin), np.full(d, inf), np.zeros(d)])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data
        lp.a_matrix_.num_col_ = n_col
        lp.a_matrix_.num_row_ = A.shape[0]
        self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self._highs.passModel(lp)
        self._cells = cells
        self._n_margin = n_margin
        self._d = d
        self._plus_rows = np.arange(n_margin, n_margin + d, dtype=np.int32)
        self._minus_rows = np.arange(n_margin + d, n_margin + 2 * d, dtype=np.int32)
        # Fixed halves of the row bounds, kept so a solve allocates only the noisy side.
        self._plus_inf = np.full(d, inf)
        self._minus_inf = np.full(d, -inf)
        self._optimal = highspy.HighsModelStatus.kOptimal

    def solve(self, noisy: np.ndarray) -> LPSolution:
        noisy = np.asarray(noisy, float)
        if noisy.shape != (self._d,) or not np.all(np.isfinite(noisy)):
            raise TabreleaseError("the consistency LP needs one finite value per coefficient")
        start = time.perf_counter()
        h = self._highs
        h.changeRowsBounds(self._d, self._plus_rows, noisy, self._plus_inf)
        h.changeRowsBounds(self._d, self._minus_rows, self._minus_inf, noisy)
        h.run()
        status = h.getModelStatus()
        seconds = time.perf_counter() - start
        if status != self._optimal:
            raise TabreleaseError(f"the consistency LP did not solve: HiGHS says {h.modelStatusToString(status)}")
        x = np.asarray(h.getSolution().col_value)
        table = np.maximum(x[: self._cells], 0.0).reshape(self.basis.shape)
        return LPSolution(table=table, b=max(float(x[-1]), 0.0), status="optimal", seconds=seconds)


def round_table(table: np.ndarray) -> np.ndarray:
    """Step 6: the nearest integer to each cell (halves up), never below 0."""
    return np.maximum(np.floor(np.asarray(table, float) + 0.5), 0).astype(np.int64)
