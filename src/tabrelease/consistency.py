"""Step 5 of the papers' Tables 1-2: the non-negative table closest to the noisy coefficients.

    minimise b  subject to  w >= 0,  |phi - F w| <= b  (componentwise)

F w is never formed from a dense |B| x cells matrix. The LP carries the margin m_T of every T
in the closure B as auxiliary columns (sparse 0/1 rows tie generator margins to w and every
smaller margin to a generator's), and each coefficient is a short row over those margins:

    rows  C_g w - m_g = 0                               for each generator g
          P_T m_parent(T) - m_T = 0                     for each other T in B
          sum_T c_iT . m_T(x_T) + b >= phi_i            for each coefficient i
          sum_T c_iT . m_T(x_T) - b <= phi_i

A Fourier coefficient of S is a +-1 row over m_S. An Efron-Stein component f^S(x_S) is, by
inclusion-exclusion, sum over T in S of (-1)^|S-T| m_T(x_T) / prod_{j not in T} k_j: 2^|S|
entries, where the same row written over a generator margin would be dense (64 entries for
journey to work). The sparse form makes each simplex iteration several times cheaper.

Only the right-hand sides depend on the noise, so a `ConsistencyProblem` is built once per
basis and re-solved with new row bounds. The optimal table is rarely unique, and which optimum
the simplex method lands on depends on where it starts; so every solve starts from one fixed
basis (the optimum for the coefficients of the all-ones table, which depends on nothing
confidential). The released table is then a function of the noisy coefficients alone: pure
post-processing, the same whatever was solved before, and so replayable run by run. The fixed
start is also a warm start (Rochdale 2.3 ms against 4.8 ms cold at epsilon = 1).
Structural zeros (binary encoding of multi-category variables) are columns fixed at 0.
"""

from __future__ import annotations

import time
from itertools import combinations
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .bases import FOURIER, CoefficientBasis, coefficients
from ._highs import highs_model, quiet_highs
from .errors import TabreleaseError
from .loglinear import margin_design
from .models import Margin

# b* below this (in coefficient units) is taken as 0: a non-negative table has the noisy coefficients.
FEASIBILITY_TOLERANCE = 1e-7


# Coefficients larger than this are scaled down before the LP is solved (and its solution scaled back).
LP_SCALE = 1e8


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
        A, n_margin = _sparse_constraints(basis)
        d = basis.size
        inf = highspy.kHighsInf
        n_col = cells + n_margin + 1
        col_upper = np.full(n_col, inf)
        if structural_zeros is not None:
            col_upper[:cells][np.asarray(structural_zeros).ravel()] = 0.0
        self._highs, self._lp = highs_model(
            A, np.concatenate([np.zeros(n_col - 1), [1.0]]), np.zeros(n_col), col_upper,
            np.concatenate([np.zeros(n_margin), np.zeros(d), np.full(d, -inf)]),
            np.concatenate([np.zeros(n_margin), np.full(d, inf), np.zeros(d)]),
        )
        self._range_highs = None  # built on first use by total_range
        self._cells = cells
        self._n_margin = n_margin
        self._d = d
        self._plus_rows = np.arange(n_margin, n_margin + d, dtype=np.int32)
        self._minus_rows = np.arange(n_margin + d, n_margin + 2 * d, dtype=np.int32)
        # Fixed halves of the row bounds, kept so a solve allocates only the noisy side.
        self._plus_inf = np.full(d, inf)
        self._minus_inf = np.full(d, -inf)
        self._optimal = highspy.HighsModelStatus.kOptimal
        self._start_basis = None
        self.solve(coefficients(basis, np.ones(shape)))
        self._start_basis = self._highs.getBasis()

    def solve(self, noisy: np.ndarray) -> LPSolution:
        noisy = np.asarray(noisy, float)
        if noisy.shape != (self._d,) or not np.all(np.isfinite(noisy)):
            raise TabreleaseError("the consistency LP needs one finite value per coefficient")
        start = time.perf_counter()
        # The LP is homogeneous (w and b scale with the coefficients), so it is solved on coefficients brought
        # below LP_SCALE and the solution scaled back: with counts of 1e12, HiGHS returned "Unknown" on half the
        # draws. Tables whose coefficients are below it (every realistic one) are solved exactly as given.
        scale = max(1.0, float(np.abs(noisy).max(initial=0.0)) / LP_SCALE)
        noisy = noisy / scale
        h = self._highs
        if self._start_basis is not None:
            h.clearSolver()
            h.setBasis(self._start_basis)
        h.changeRowsBounds(self._d, self._plus_rows, noisy, self._plus_inf)
        h.changeRowsBounds(self._d, self._minus_rows, self._minus_inf, noisy)
        h.run()
        status = h.getModelStatus()
        seconds = time.perf_counter() - start
        if status != self._optimal:
            raise TabreleaseError(f"the consistency LP did not solve: HiGHS says {h.modelStatusToString(status)}")
        x = np.asarray(h.getSolution().col_value) * scale
        table = np.maximum(x[: self._cells], 0.0).reshape(self.basis.shape)
        return LPSolution(table=table, b=max(float(x[-1]), 0.0), status="optimal", seconds=seconds)


    def total_range(self, noisy: np.ndarray, b_star: float) -> tuple[np.ndarray, np.ndarray]:
        """The optimal tables with the smallest and the largest total: min and max of sum w subject to the
        same constraints with b held at its optimum b* (the paper's Remark 3: the optimum is rarely unique).

        A measurement of what the LP leaves open, not part of any release: the released table is
        whichever optimum `solve` returns. b is allowed 1e-9 (relative) above b* for the solver's
        tolerances.
        """
        import highspy

        noisy = np.asarray(noisy, float)
        if self._range_highs is None:
            self._range_highs = quiet_highs()
            self._range_highs.setOptionValue("output_flag", False)
            self._range_highs.passModel(self._lp)  # the same model, solved with another objective
        h = self._range_highs
        b_col = self._cells + self._n_margin
        h.changeColBounds(b_col, 0.0, float(b_star) * (1 + 1e-9) + 1e-9)
        h.changeRowsBounds(self._d, self._plus_rows, noisy, self._plus_inf)
        h.changeRowsBounds(self._d, self._minus_rows, self._minus_inf, noisy)
        tables = []
        for sense in (1.0, -1.0):
            cost = np.zeros(b_col + 1)
            cost[: self._cells] = sense
            h.changeColsCost(b_col + 1, np.arange(b_col + 1, dtype=np.int32), cost)
            h.clearSolver()
            h.run()
            status = h.getModelStatus()
            if status != self._optimal:
                raise TabreleaseError(f"the LP over the optimal set did not solve: HiGHS says {h.modelStatusToString(status)}")
            x = np.asarray(h.getSolution().col_value)
            tables.append(np.maximum(x[: self._cells], 0.0).reshape(self.basis.shape))
        return tables[0], tables[1]


def block_operator(domain: tuple[int, ...], query: str, variables: Margin, kind: str | None) -> sp.csr_matrix:
    """The sparse linear map from a table's cells (flattened) to one measured block's values."""
    from .measurements import MARGIN_CELLS

    cells = int(np.prod(domain))
    if not variables:
        total = sp.csr_matrix(np.ones((1, cells)))
        if query == MARGIN_CELLS:
            return total
        return total * (2.0 ** (-len(domain) / 2) if kind == FOURIER else 1.0 / cells)
    margin = margin_design(domain, [variables])
    if query == MARGIN_CELLS:
        return margin
    from .bases import coefficient_basis

    basis = coefficient_basis(kind, domain, [variables])
    analysis = basis.analysis[basis.closure.index(tuple(variables))]  # parent is `variables` itself
    return (sp.csr_matrix(analysis) @ margin).tocsr()


def _residual_qp(unknowns: int, weights: np.ndarray, A, b: np.ndarray, equalities: int, inequalities: int):
    """Clarabel on min 1/2 r' diag(weights) r over x = (unknowns, r) with A x + s = b, s in the zero cone
    (`equalities` rows) then the non-negative cone: the shape both least-squares problems take."""
    import clarabel

    hessian = sp.diags(np.concatenate([np.zeros(unknowns), weights])).tocsc()
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    # Tight: the margins of the fit are what is released (after rounding), to well under one count.
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    cones = [clarabel.ZeroConeT(equalities), clarabel.NonnegativeConeT(inequalities)]
    solution = clarabel.DefaultSolver(hessian, np.zeros(unknowns + len(weights)), A, b, cones, settings).solve()
    if str(solution.status) in ("NumericalError", "InsufficientProgress", "MaxIterations"):
        # Unmeasured residuals (a junction tree's fill-in, sparse data at small epsilon) leave the KKT system
        # nearly singular: once more with the tolerances Clarabel defaults to and stronger regularisation.
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-8
        settings.static_regularization_constant = 1e-7
        settings.max_iter = 400
        solution = clarabel.DefaultSolver(hessian, np.zeros(unknowns + len(weights)), A, b, cones, settings).solve()
    return solution


class LeastSquaresProblem:
    """Generalised least squares over non-negative tables with the total pinned, for any linear measurements.

        minimise  1/2 sum_B (y_B - Q_B w)' (y_B - Q_B w) / v_B   subject to  w >= 0,  sum w = total

    Q_B is block B's sparse query operator (margin cells, Fourier or Efron-Stein coefficients) and
    v_B its noise variance per value. A convex QP, solved by Clarabel's interior-point method
    (HiGHS's active-set QP solver cycled on these degenerate problems for 500,000 iterations and
    more). The fitted margins are unique: the objective is strictly convex in the measured
    queries, and the released margins are determined by them.
    """

    def __init__(self, domain: tuple[int, ...], blocks: tuple[tuple[str, Margin, str | None], ...],
                 structural_zeros: np.ndarray | None = None):
        self.domain = tuple(domain)
        self.blocks = tuple(blocks)
        cells = int(np.prod(self.domain))
        operators = [block_operator(self.domain, q, v, kind) for q, v, kind in self.blocks]
        self._Q = sp.vstack(operators).tocsr() if operators else sp.csr_matrix((0, cells))
        self._sizes = [op.shape[0] for op in operators]
        free = np.ones(cells, bool)
        if structural_zeros is not None:
            free = ~np.asarray(structural_zeros, bool).ravel()
        m = self._Q.shape[0]
        # Variables x = (w, r) with r = Q w - y: the objective 1/2 r' diag(weights) r keeps the KKT system as
        # sparse as Q (the dense Q'WQ made every interior-point step a dense factorisation).
        # Clarabel's form: A x + s = b with s in cones: equalities (zero cone) first, then -w <= 0.
        residual = sp.hstack([self._Q, -sp.identity(m)])
        pad = lambda block: sp.hstack([block, sp.csr_matrix((block.shape[0], m))])  # noqa: E731
        total = pad(sp.csr_matrix(np.ones((1, cells))))
        fixed = pad(sp.identity(cells, format="csr")[~free])  # structural zeros: w = 0
        nonneg = pad(-sp.identity(cells, format="csr")[free])
        self._A = sp.vstack([residual, total, fixed, nonneg]).tocsc()
        self._equalities = m + 1 + int((~free).sum())
        self._inequalities = int(free.sum())
        self._cells, self._m = cells, m

    @property
    def size(self) -> int:
        return int(self._Q.shape[0])

    def solve(self, values: np.ndarray, weights: np.ndarray, total: float) -> tuple[np.ndarray, float]:
        """(the non-negative table, seconds); `weights` are 1 / variance per measured value."""
        values = np.asarray(values, float)
        if values.shape != (self.size,) or not np.all(np.isfinite(values)):
            raise TabreleaseError("the least-squares fit needs one finite value per measured query")
        start = time.perf_counter()
        # Scaled to counts of order 1 and weights of at most 1 (the minimiser is unchanged): at n of 1e8-1e12 the
        # raw problem is ill-conditioned enough for the interior-point method to call it infeasible.
        unit = max(1.0, abs(float(total)) / self._cells, float(np.abs(values).max(initial=0.0)) / 1e3)
        weights = np.asarray(weights, float)
        weights = weights / weights.max()
        values = values / unit
        b = np.zeros(self._A.shape[0])
        b[: self._m] = values
        b[self._m] = max(float(total), 0.0) / unit
        solution = _residual_qp(self._cells, weights, self._A, b, self._equalities, self._inequalities)
        if str(solution.status) not in ("Solved", "AlmostSolved"):
            raise TabreleaseError(f"the least-squares fit did not solve: Clarabel says {solution.status}")
        table = np.maximum(np.asarray(solution.x)[: self._cells], 0.0).reshape(self.domain) * unit
        return table, time.perf_counter() - start


def _cells_of_sub_margin(coords: tuple, within: Margin, sub: Margin, shape: tuple[int, ...]) -> np.ndarray:
    """For each cell of the margin over `within` (given by its coordinates), its cell in the margin over `sub`."""
    if not sub:
        return np.zeros(np.size(coords[0]) if coords else 1, np.int64)
    return np.ravel_multi_index(tuple(coords[within.index(j)] for j in sub), tuple(shape[j] for j in sub))


def _sparse_constraints(basis: CoefficientBasis) -> tuple[sp.csc_matrix, int]:
    """The LP's rows over columns [w (cells), m_T for T in the closure, b]; returns (A, number of margin columns)."""
    shape = basis.shape
    cells = int(np.prod(shape))
    size = {t: int(np.prod([shape[j] for j in t])) for t in basis.closure}
    start, col = {}, cells
    for t in basis.closure:
        start[t] = col
        col += size[t]
    n_margin = col - cells
    n_col = col + 1
    rows, cols, vals = [], [], []

    def add(r, c, v):
        rows.append(np.asarray(r, np.int64).ravel())
        cols.append(np.asarray(c, np.int64).ravel())
        vals.append(np.broadcast_to(np.asarray(v, float), np.shape(r)).ravel())

    gen_start = np.cumsum([0] + [size[g] for g in basis.generators])
    Ccoo = margin_design(shape, basis.generators).tocoo()
    add(Ccoo.row, Ccoo.col, Ccoo.data)
    for g, lo in zip(basis.generators, gen_start[:-1]):
        r = np.arange(size[g]) + lo
        add(r, start[g] + np.arange(size[g]), -1.0)
    row = int(gen_start[-1])
    for t in basis.closure:
        if t in basis.generators:
            continue
        parent = next(g for g in basis.generators if set(t) <= set(g))
        # Each cell of the parent margin adds to one cell of m_T.
        parent_shape = tuple(shape[j] for j in parent)
        coords = np.unravel_index(np.arange(size[parent]), parent_shape)
        target = _cells_of_sub_margin(coords, parent, t, shape)
        add(row + target, start[parent] + np.arange(size[parent]), 1.0)
        add(row + np.arange(size[t]), start[t] + np.arange(size[t]), -1.0)
        row += size[t]
    # One definition row per margin cell: generator margins from w, the others from a generator's.
    assert row == n_margin
    d = basis.size
    k = len(shape)
    # Coefficient rows (the + and - copies share their entries).
    coef_rows, coef_cols, coef_vals = [], [], []
    for i, s in enumerate(basis.closure):
        lo = basis.offsets[i]
        s_shape = tuple(shape[j] for j in s)
        s_coords = np.unravel_index(np.arange(size[s]), s_shape) if s else ()
        if basis.kind == FOURIER:
            sign = (-1.0) ** np.sum(s_coords, axis=0) if s else np.ones(1)
            coef_rows.append(np.full(size[s], lo))
            coef_cols.append(start[s] + np.arange(size[s]))
            coef_vals.append(sign * 2.0 ** (-k / 2))
            continue
        for r in range(len(s) + 1):
            for t in combinations(s, r):
                target = _cells_of_sub_margin(s_coords, s, t, shape)
                coef = (-1.0) ** (len(s) - len(t)) / np.prod([shape[j] for j in range(k) if j not in t])
                coef_rows.append(lo + np.arange(size[s]))
                coef_cols.append(start[t] + target)
                coef_vals.append(np.full(size[s], coef))
    cr, cc, cv = (np.concatenate(x) for x in (coef_rows, coef_cols, coef_vals))
    for base, sign in ((n_margin, 1.0), (n_margin + d, -1.0)):
        add(base + cr, cc, cv)
        add(base + np.arange(d), np.full(d, n_col - 1), sign)
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_margin + 2 * d, n_col)
    )
    A.sum_duplicates()
    return A.tocsc(), n_margin


class LocalLeastSquaresProblem:
    """Least squares on the released margins themselves, never on the cells (ReM-style, with local
    non-negativity as in GReM-LNN): the unknowns are the residuals theta_T of every set T in the closure,
    in a contrast basis (prod_(j in T) (k_j - 1) numbers each), and the margin over A is

        m_A = sum_(T subset of A)  (tensor over A's axes of: C_j for j in T, 1 / k_j for j not in T) theta_T,

    C_j = [I; -1'] (k_j x (k_j - 1)), theta_empty = n. Margins built from shared residuals agree on every shared
    sub-margin (local consistency) by construction; m_A >= 0 for every generator A (local non-negativity);
    theta_empty is pinned to the total. Each measured block's query is applied to the margin it lives on. The
    margins are those of some real table only where the closure is decomposable: the release says "locally
    consistent", never "one table".
    """

    def __init__(self, shape: tuple[int, ...], generators: tuple[Margin, ...],
                 blocks: tuple[tuple[str, Margin, str | None], ...]):
        from .models import downward_closure

        self.shape = tuple(shape)
        self.generators = tuple(generators)
        self.closure = tuple(downward_closure(self.generators))
        sizes = [int(np.prod([self.shape[j] - 1 for j in t])) for t in self.closure]
        self._offsets = dict(zip(self.closure, np.cumsum([0] + sizes[:-1]).tolist()))
        self._p = int(sum(sizes))
        self._lift = {a: self.lift(a) for a in self.closure}
        rows = []
        for query, variables, kind in blocks:
            lift = self._lift[tuple(variables)]
            if query == "margin_cells":
                rows.append(lift)
            else:
                from .bases import coefficient_basis

                basis = coefficient_basis(kind, self.shape, [tuple(variables)])
                rows.append(sp.csr_matrix(basis.analysis[basis.closure.index(tuple(variables))]) @ lift)
        self._Q = sp.vstack(rows).tocsr()
        m = self._Q.shape[0]
        nonneg = sp.vstack([-self._lift[g] for g in self.generators])
        pin = sp.csr_matrix(([1.0], ([0], [self._offsets[()]])), shape=(1, self._p))
        pad = lambda block: sp.hstack([block, sp.csr_matrix((block.shape[0], m))])  # noqa: E731
        self._A = sp.vstack([sp.hstack([self._Q, -sp.identity(m)]), pad(pin), pad(nonneg)]).tocsc()
        self._m, self._inequalities = m, nonneg.shape[0]

    def lift(self, a: Margin) -> sp.csr_matrix:
        """The sparse map from the residuals theta to the margin over `a` (its cells in C order)."""
        rows, cols, vals = [], [], []
        for t in self.closure:
            if not set(t) <= set(a):
                continue
            block = sp.coo_matrix(np.ones((1, 1)))
            for j in a:  # sparse Kronecker factors, placed by shifting columns (no hstack of empty blocks)
                k_j = self.shape[j]
                factor = (np.vstack([np.eye(k_j - 1), -np.ones((1, k_j - 1))]) if j in t
                          else np.full((k_j, 1), 1.0 / k_j))
                block = sp.kron(block, sp.coo_matrix(factor), format="coo")
            rows.append(block.row)
            cols.append(block.col + self._offsets[t])
            vals.append(block.data)
        cells = int(np.prod([self.shape[j] for j in a]))
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(cells, self._p))

    @property
    def size(self) -> int:
        return int(self._Q.shape[0])

    def solve(self, values: np.ndarray, weights: np.ndarray, total: float) -> tuple[dict, float]:
        """({set in the closure: its margin}, seconds)."""
        values = np.asarray(values, float)
        if values.shape != (self.size,) or not np.all(np.isfinite(values)):
            raise TabreleaseError("the least-squares fit needs one finite value per measured query")
        start = time.perf_counter()
        unit = max(1.0, abs(float(total)) / 1e3, float(np.abs(values).max(initial=0.0)) / 1e3)
        weights = np.asarray(weights, float) / np.max(weights)
        b = np.zeros(self._A.shape[0])
        b[: self._m] = values / unit
        b[self._m] = max(float(total), 0.0) / unit
        solution = _residual_qp(self._p, weights, self._A, b, self._m + 1, self._inequalities)
        if str(solution.status) not in ("Solved", "AlmostSolved"):
            raise TabreleaseError(f"the local least-squares fit did not solve: Clarabel says {solution.status}")
        theta = np.asarray(solution.x)[: self._p] * unit
        margins = {a: np.maximum(self._lift[a] @ theta, 0.0).reshape([self.shape[j] for j in a]) for a in self.closure}
        return margins, time.perf_counter() - start
