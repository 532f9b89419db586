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

import threading
import time
from itertools import combinations
from dataclasses import dataclass

import numpy as np

from . import _sparse as sp

from .bases import FOURIER, CoefficientBasis, coefficients
from ._highs import highs_model, quiet_highs
from .errors import TabreleaseError
from .loglinear import margin_design
from .measurements import MARGIN_CELLS
from .models import Margin

# b* below this (in coefficient units) is taken as 0: a non-negative table has the noisy coefficients.
FEASIBILITY_TOLERANCE = 1e-7


# Refinement rounds of the least-squares fit (each a solve for the change from an integer table); two or three are
# needed at 9e15 in one cell, one elsewhere.
REFINEMENT_ROUNDS = 8
# The non-negativity of a cell far above the data of a refinement round is capped at this many times that data.
CHANGE_BOUND_CAP = 1e6
# A refinement round's fit is flat along the changes that move no measured query (the cells a margin does not tell
# apart), and the interior-point method ends near the centre of that flat set, which capped bounds pull far from
# the data: with a million per cell, a change reached its cap in 7 of 60 fits (`tests/test_least_squares.py`).
# Such a round is solved again with this ridge on the change (in the round's scaled units): the change of least size
# among the best fits, whose measured queries differ from the best fit's by about this fraction of the change.
CHANGE_RIDGE = 1e-9

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

    def __init__(self, basis: CoefficientBasis, structural_zeros: np.ndarray | None = None,
                 exact: np.ndarray | None = None):
        """`exact`: per coefficient, was it measured without noise? Those rows lose their b: F_i w = phi_i
        exactly (their + and - rows together), so the table has every exactly measured coefficient."""
        import highspy

        self.basis = basis
        self.structural_zeros = structural_zeros
        self._exact = exact
        shape = basis.shape
        cells = int(np.prod(shape))
        A, n_margin = _sparse_constraints(basis)
        d = basis.size
        if exact is not None and np.any(exact):
            exact = np.asarray(exact, bool)
            if exact.shape != (d,):
                raise TabreleaseError("internal error: one exactness flag per coefficient is needed")
            rows = np.concatenate([n_margin + np.flatnonzero(exact), n_margin + d + np.flatnonzero(exact)])
            kept = ~(np.isin(A.row, rows) & (A.col == A.shape[1] - 1))  # those rows' entries in b's column go
            A = sp.SparseMatrix(A.shape, A.row[kept], A.col[kept], A.values[kept], "csc")
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

    def __reduce__(self):
        # A HiGHS model cannot be pickled: a plan sent to another process rebuilds its LP there, from the same
        # inputs, to the same start basis (so its solutions are the same).
        return type(self), (self.basis, self.structural_zeros, self._exact)

    def solve(self, noisy: np.ndarray) -> LPSolution:
        """Solve the LP for one vector of noisy coefficients, from the fixed start basis.

        Parameters
        ----------
        noisy : numpy.ndarray
            The noisy coefficients phi, one per coefficient of the basis (in its order), finite.

        Returns
        -------
        LPSolution
            The non-negative table w (float, of the basis's shape), the optimal deviation b* (in coefficient units) and
            the solve's wall-clock seconds.

        Raises
        ------
        TabreleaseError
            If `noisy` has the wrong length or a non-finite value, or HiGHS does not reach an optimum.
        """
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

        Parameters
        ----------
        noisy : numpy.ndarray
            The noisy coefficients, as given to `solve`.
        b_star : float
            The optimal deviation `solve` found for them.

        Returns
        -------
        smallest : numpy.ndarray
            An optimal table of the smallest total (float, of the basis's shape).
        largest : numpy.ndarray
            One of the largest total.

        Raises
        ------
        TabreleaseError
            If HiGHS does not solve either LP.
        """
        import highspy

        noisy = np.asarray(noisy, float)
        if self._range_highs is None:
            self._range_highs = quiet_highs()
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


def block_operator(domain: tuple[int, ...], query: str, variables: Margin, kind: str | None) -> sp.SparseMatrix:
    """The sparse linear map from a table's cells (flattened) to one measured block's values.

    Parameters
    ----------
    domain : tuple of int
        The shape of the table the block is measured on.
    query : str
        The block's query kind: ``MARGIN_CELLS``, or a coefficient kind.
    variables : tuple of int
        The block's axes (empty for the total or the constant coefficient).
    kind : str or None
        The coefficient basis (``FOURIER`` or Efron-Stein) for coefficient blocks.

    Returns
    -------
    tabrelease._sparse.SparseMatrix
        Shape (the block's values, cells): the block's values of a table are this times its flattened cells (C order).
    """
    from .measurements import MARGIN_CELLS

    cells = int(np.prod(domain))
    if not variables:
        total = sp.from_dense(np.ones((1, cells)))
        if query == MARGIN_CELLS:
            return total
        return total * (2.0 ** (-len(domain) / 2) if kind == FOURIER else 1.0 / cells)
    margin = margin_design(domain, [variables])
    if query == MARGIN_CELLS:
        return margin
    from .bases import coefficient_basis

    basis = coefficient_basis(kind, domain, [variables])
    analysis = basis.analysis[basis.closure.index(tuple(variables))]  # parent is `variables` itself
    return sp.from_dense(analysis) @ margin


# Clarabel's settings, tried in turn while it fails: (tolerance, static regularisation or None for Clarabel's
# default, most iterations or None for Clarabel's default). Tight first: the fit's margins are what is released
# (after rounding), to well under one count. Then the tolerances Clarabel defaults to, with stronger regularisation.
# Last, regularisation of 1e-4, which Clarabel's iterative refinement of each KKT solve corrects (the tolerances
# are checked on the problem itself): on a degenerate refinement problem (found in the audit's simulation of Edwards
# at epsilon 0.05, `tests/data/clarabel_stall.json`) Clarabel 0.11 stalled with the first two settings (at an objective
# of 31,780 after 400 iterations, 31,735 when allowed 2,000) where OSQP and SCS find 29,192.69; this setting takes 13.
# Last, shorter steps (at most 0.9 of the way to the cone's boundary, against Clarabel's 0.99): on a refinement of a
# 2 x 3 table with every cell measured at epsilon 0.05 (`tests/data/clarabel_stall_short_steps.json`) the three
# settings before stalled at an objective of 1,373.41, and this one solves it in 10 iterations (1,257.18).
# (tolerance, static regularisation or None for Clarabel's default, most iterations or None, step fraction or None)
SOLVER_ATTEMPTS = ((1e-10, None, None, None), (1e-8, 1e-7, 400, None), (1e-8, 1e-4, 400, None),
                   (1e-8, None, 400, 0.9))


class _ResidualQP:
    """Clarabel on min 1/2 r' diag(weights) r over x = (unknowns, r) with A x + s = b, s in the zero cone
    (`equalities` rows) then the non-negative cone: the shape both least-squares problems take.

    A and the cones are fixed; the weights rarely change (one set per plan) and b changes with every solve. So the
    solver is set up once per weights and solved again with a new b (Clarabel's data update keeps the KKT pattern,
    its symbolic factorisation and the equilibration, which depend on P and A alone): a third of a fit's time. A new
    solver is set up with b = 0 and given b the same way (`_given`), so that every solve takes one path. One solver
    per thread: a solver object is not thread-safe.
    """

    def __init__(self, unknowns: int, A, equalities: int, inequalities: int, *, ridged: int | None = None):
        self.unknowns, self.A, self.equalities, self.inequalities = unknowns, A, equalities, inequalities
        # The ridge's unknowns: the first `ridged` (the table's cells, not the margins `_over_margins` adds).
        self.ridged = unknowns if ridged is None else ridged
        self._local = threading.local()

    def __getstate__(self):  # a plan travels to worker processes: the solvers stay behind
        return {k: v for k, v in self.__dict__.items() if k != "_local"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("ridged", self.unknowns)
        self._local = threading.local()

    def _solver(self, weights: np.ndarray, b: np.ndarray, attempt: int = 0, ridge: float = 0.0):
        import clarabel

        # diag(0, or the ridge, for the unknowns; weights for r), built as CSC directly.
        n = self.unknowns + len(weights)
        if ridge:
            diagonal = np.concatenate([np.arange(self.ridged), np.arange(self.unknowns, n)])
            values = np.concatenate([np.full(self.ridged, float(ridge)), np.asarray(weights, float)])
        else:
            diagonal = np.arange(self.unknowns, n)
            values = np.asarray(weights, float)
        hessian = sp.SparseMatrix((n, n), diagonal, diagonal, values, "csc")
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        # Deterministic: stopped by its iteration count only, never by a clock (Clarabel's default, made explicit).
        settings.time_limit = float("inf")
        tolerance, regularisation, iterations, step_fraction = SOLVER_ATTEMPTS[attempt]
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tolerance
        if regularisation is not None:
            settings.static_regularization_constant = regularisation
        if iterations is not None:
            settings.max_iter = iterations
        if step_fraction is not None:
            settings.max_step_fraction = step_fraction
        cones = [clarabel.ZeroConeT(self.equalities), clarabel.NonnegativeConeT(self.inequalities)]
        return clarabel.DefaultSolver(hessian, np.zeros(n), self.A, b, cones, settings)

    def solve(self, weights: np.ndarray, b: np.ndarray, ridge: float = 0.0):
        """Clarabel's solution for these weights and right-hand side.

        Parameters
        ----------
        weights : numpy.ndarray
            The residuals' weights (the diagonal of P past the unknowns).
        b : numpy.ndarray
            The constraints' right-hand side.
        ridge : float, default 0
            A ridge on the unknowns (the diagonal of P before the residuals); 0: none.

        Returns
        -------
        clarabel.DefaultSolution
        """
        weights = np.asarray(weights, float)
        key = weights.tobytes() + np.float64(ridge).tobytes()
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == key and _updatable(held[1]):
            solver = held[1]
            solver.update(b=b)
        else:
            solver = self._given(weights, b, ridge=ridge)
            self._local.held = (key, solver)
        solution = solver.solve()
        for attempt in range(1, len(SOLVER_ATTEMPTS)):
            if str(solution.status) not in ("NumericalError", "InsufficientProgress", "MaxIterations"):
                break
            # Unmeasured residuals (a junction tree's fill-in, sparse data at small epsilon) leave the KKT system
            # nearly singular: again with looser tolerances and stronger regularisation (`SOLVER_ATTEMPTS`).
            solution = self._given(weights, b, attempt, ridge).solve()
        return solution

    def _given(self, weights: np.ndarray, b: np.ndarray, attempt: int = 0, ridge: float = 0.0):
        """A solver set up with b = 0 and given b by Clarabel's data update, as a held solver is given each new b:
        every solve takes the same path, so its result never depends on whether its solver was new (which run of a
        simulation's share a thread solves first). Clarabel scales b in passes when it sets up and in one product
        when it updates, and the two can round differently wherever its equilibration rescales b."""
        solver = self._solver(weights, np.zeros_like(b), attempt, ridge)
        if _updatable(solver):
            solver.update(b=b)
            return solver
        return self._solver(weights, b, attempt, ridge)  # a Clarabel without data updates: set up with b itself


# Where a least-squares problem's coefficient blocks hold more entries than this over the table's cells (each
# Efron-Stein coefficient is a dense row over every cell of its margin: a Gaussian plan's residual blocks of a 42 x 22
# table, 861 rows over 924 cells, took 38-59 s a fit in scratch timings), the fit writes them over margins of the
# table (`_over_margins`), where that holds a quarter of the entries or fewer (`benchmarks/bench_dense_residual_fit.py`
# times both forms). Below it the cells' form stands: the fits of small
# problems, every frontier table's among them (at most 43,264 entries; a test checks), are those the committed
# reports were computed with.
DENSE_QUERY_ENTRIES = 2**16


def _over_margins(domain: tuple[int, ...], blocks, operators) -> tuple[sp.SparseMatrix, sp.SparseMatrix]:
    """The measured queries written over the table's cells w and its margins z (columns: w, then z_T for each proper
    set T in the downward closure of the coefficient blocks' sets, smallest first: `_margins_below`), and the
    definitions of z as rows M_T w - z_T (each to equal 0). Used where `fits_over_margins` says.

    An Efron-Stein coefficient of the set S at x_S is sum over T in S of (-1)^|S - T| / prod_(j not in T) k_j times
    the margin over T at x_T (`bases`: the same expansion the LP's constraints use, `_sparse_constraints`): 2^|S|
    entries over margins, where over cells it has one per cell. A Fourier coefficient is a signed sum of its margin's
    cells. Margin cells and the constant coefficient keep their rows over w. The fit is the same problem: z is
    determined by w, and the objective reads only the queries' values.

    Parameters
    ----------
    domain : tuple of int
        The table's shape.
    blocks : sequence of (str, tuple of int, str or None)
        Each measured block's query kind, axes and basis kind.
    operators : sequence of tabrelease._sparse.SparseMatrix or None
        Each block's operator over the cells (`block_operator`), in the same order: read for margin cells and the
        constant coefficient only (None will do for the others).

    Returns
    -------
    tuple of (tabrelease._sparse.SparseMatrix, tabrelease._sparse.SparseMatrix)
        The queries (rows as the operators', stacked) and the definitions, both over the columns (w, z).
    """
    from math import prod

    k = len(domain)
    cells = prod(domain)
    every = tuple(range(k))
    sets = _margins_below(domain, blocks)
    start, column = {every: 0}, cells  # the margin over every variable is w itself
    for t in sets:
        start[t] = column
        column += prod(domain[j] for j in t)
    values, rows, cols = [], [], []
    row = 0
    for (query, variables, kind), op in zip(blocks, operators):
        if query == MARGIN_CELLS or not variables:
            values.append(op.values), rows.append(op.row + row), cols.append(op.col)
            row += op.shape[0]
            continue
        s = tuple(variables)
        shape = tuple(domain[j] for j in s)
        size = prod(shape)
        coords = np.unravel_index(np.arange(size), shape)
        if kind == FOURIER:
            values.append((-1.0) ** np.sum(coords, axis=0) * 2.0 ** (-k / 2))
            rows.append(np.full(size, row)), cols.append(start[s] + np.arange(size))
            row += 1
            continue
        for r in range(len(s) + 1):
            for t in combinations(s, r):
                coefficient_of_t = (-1.0) ** (len(s) - len(t)) / prod(domain[j] for j in every if j not in t)
                values.append(np.full(size, coefficient_of_t)), rows.append(row + np.arange(size))
                cols.append(start[t] + _cells_of_sub_margin(coords, s, t, domain))
        row += size
    queries = sp.from_entries(np.concatenate(values), np.concatenate(rows), np.concatenate(cols), (row, column))
    values, rows, cols = [], [], []
    row = 0
    cell_coords = np.unravel_index(np.arange(cells), domain)
    for t in sets:
        size = prod(domain[j] for j in t)
        values += [np.ones(cells), np.full(size, -1.0)]
        rows += [row + _cells_of_sub_margin(cell_coords, every, t, domain), row + np.arange(size)]
        cols += [np.arange(cells), start[t] + np.arange(size)]
        row += size
    definitions = sp.from_entries(np.concatenate(values), np.concatenate(rows), np.concatenate(cols), (row, column))
    return queries, definitions


def fits_over_margins(domain, blocks) -> bool:
    """Whether the least-squares fit of these measured blocks writes its queries over margins of the table
    (`_over_margins`): where, counted from the blocks' sizes, the queries over the cells hold more than
    `DENSE_QUERY_ENTRIES` entries and the margins' form a quarter of them or fewer.

    Parameters
    ----------
    domain : sequence of int
        The table's shape.
    blocks : sequence of (str, tuple of int, str or None)
        Each measured block's query kind, axes and basis kind.

    Returns
    -------
    bool
    """
    from math import prod

    domain = tuple(int(k) for k in domain)
    cells = prod(domain)
    coefficient = [tuple(v) for q, v, _ in blocks if q != MARGIN_CELLS and v]
    if not coefficient or any(v != tuple(sorted(v)) for v in coefficient):
        return False
    direct = over_margins = 0
    for query, variables, kind in blocks:
        size = prod(domain[j] for j in variables)
        if query == MARGIN_CELLS or not variables:
            direct += cells
            over_margins += cells
        elif kind == FOURIER:
            direct += cells
            over_margins += size
        else:  # an Efron-Stein block: a row over every cell per coefficient, or 2^|S| margin cells
            direct += size * cells
            over_margins += size * 2 ** len(variables)
    over_margins += sum(cells + prod(domain[j] for j in t) for t in _margins_below(domain, blocks))
    return direct > DENSE_QUERY_ENTRIES and 4 * over_margins <= direct


def _margins_below(domain, blocks) -> list[Margin]:
    """The margins the fit over margins adds as unknowns: the downward closure of the coefficient blocks' sets
    (smallest first), but the full table's, which is the cells themselves."""
    from .models import downward_closure

    coefficient = [tuple(v) for q, v, _ in blocks if q != MARGIN_CELLS and v]
    return [t for t in downward_closure(coefficient) if t != tuple(range(len(domain)))]


def _updatable(solver) -> bool:
    """Whether Clarabel can take a new b into this solver (a version with data updates, nothing presolved away)."""
    return getattr(solver, "update", None) is not None and solver.is_data_update_allowed()


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
        # Where the fit is over margins (`fits_over_margins`), a coefficient block's dense operator over the cells is
        # never built: it held 17 million entries on 64 x 64 (1.9 GB at its peak, a review's measurement), and the
        # fit, the refinement's exact residuals included, reads the margins' form alone.
        sparse_form = fits_over_margins(self.domain, self.blocks)
        operators = [block_operator(self.domain, q, v, kind) if not sparse_form or q == MARGIN_CELLS or not v
                     else None for q, v, kind in self.blocks]
        self._sizes = [op.shape[0] if op is not None else (1 if kind == FOURIER else
                                                           int(np.prod([self.domain[j] for j in v])))
                       for op, (_, v, kind) in zip(operators, self.blocks)]
        self._Q = None if sparse_form else (sp.stack(0, operators) if operators else sp.zeros((0, cells)))
        free = np.ones(cells, bool)
        if structural_zeros is not None:
            free = ~np.asarray(structural_zeros, bool).ravel()
        m = int(sum(self._sizes))
        # Variables x = (w, z, r) with r = Q w - y: the objective 1/2 r' diag(weights) r keeps the KKT system as
        # sparse as Q (the dense Q'WQ made every interior-point step a dense factorisation). Where coefficient
        # blocks make Q's rows dense, they are written over margins z of the table instead (`_over_margins`), with
        # z = its margins of w as equalities; else z is empty and x = (w, r).
        # Clarabel's form: A x + s = b with s in cones: equalities (zero cone) first, then -w <= 0.
        over_margins = _over_margins(self.domain, self.blocks, operators) if sparse_form else None
        if over_margins is None:
            queries, definitions, aux = self._Q, sp.zeros((0, cells)), 0
        else:
            queries, definitions = over_margins
            aux = queries.shape[1] - cells
        residual = sp.stack(1, [queries, -sp.identity(m)])

        def pad(block):  # to the columns (w, z, r)
            return sp.stack(1, [block, sp.zeros((block.shape[0], cells + aux + m - block.shape[1]))])

        total = pad(sp.from_dense(np.ones((1, cells))))
        fixed = pad(sp.identity(cells)[~free])  # structural zeros: w = 0
        nonneg = pad(-sp.identity(cells)[free])
        self._A = sp.stack(0, [residual, total, fixed, pad(definitions), nonneg]).tocsc()
        self._equalities = m + 1 + int((~free).sum()) + definitions.shape[0]
        self._inequalities = int(free.sum())
        self._qp = _ResidualQP(cells + aux, self._A, self._equalities, self._inequalities, ridged=cells)
        self._cells, self._m = cells, m
        self._free = free
        # For the refinement: each block's operator times its integer scale (1 for margin cells, 2^(k/2) or
        # prod k_j for coefficients) is a small-integer matrix, so the measured queries of an integer table are
        # computed exactly in integer arithmetic.
        scales = [_integer_scale(self.domain, q, kind) for q, _, kind in self.blocks]
        self._row_scale = np.concatenate([np.full(n, s) for n, s in zip(self._sizes, scales)]) if scales else np.zeros(0)
        # Over margins, the integer operator reads (x, its margins) and the margins are counted in integers too
        # (`_integer_queries`): a margin's coefficient times its scale is an integer (prod of k_j over T, or 1).
        if over_margins is None:
            scaled, self._margins_of = (sp.stack(0, [op * s for op, s in zip(operators, scales)]) if operators
                                        else sp.zeros((0, cells))), None
        else:
            scaled = sp.from_entries(queries.values * self._row_scale[queries.row], queries.row, queries.col,
                                     queries.shape)
            cut = definitions.col < cells  # the definitions' rows over w: each margin cell's 0/1 sum of cells
            self._margins_of = sp.SparseMatrix((definitions.shape[0], cells), definitions.row[cut],
                                               definitions.col[cut], np.rint(definitions.values[cut]).astype(np.int64))
        if scaled.nnz and np.abs(scaled.values - np.rint(scaled.values)).max() > 1e-9:
            raise TabreleaseError("internal error: a scaled query operator is not integral")
        self._Qi = sp.SparseMatrix(scaled.shape, scaled.row, scaled.col, np.rint(scaled.values).astype(np.int64))
        self._row_bound = int(abs(self._Qi).sum(axis=1).max()) if m else 0
        # The blocks that carry the total (margin cells: their sum; the empty set's coefficient: times its scale),
        # as the estimator's best linear unbiased total weighs them.
        self._total_blocks = [(lo, hi, q == MARGIN_CELLS) for (q, v, _), lo, hi in
                              zip(self.blocks, np.cumsum([0] + self._sizes[:-1]), np.cumsum(self._sizes))
                              if q == MARGIN_CELLS or not v]

    @property
    def size(self) -> int:
        return int(self._m)

    def _with_margins(self, x: np.ndarray) -> np.ndarray:
        """An integer table x (flat), with its margins after it where the queries are over margins: what the
        integer operator `_Qi` reads."""
        return x if self._margins_of is None else np.concatenate([x, self._margins_of @ x])

    def solve(self, values: np.ndarray, weights: np.ndarray, total: float, *,
              exact_total: bool = False) -> tuple[np.ndarray, float]:
        """(the non-negative table, seconds); `weights` are 1 / variance per measured value. `total` is pinned: an
        integer given exactly when `exact_total` (a public total), else the estimate the blocks give.

        An interior-point solve is accurate relative to the size of its data: with a million in one cell its
        fit of the small cells was off by a hundredth, with 10^9 by hundreds of counts, with 9e15 by billions,
        while the noise is a few counts. So the fit is refined: the problem is solved again for the change d
        from an integer table x (the previous fit, rounded), with the residuals y - Q x computed exactly in
        integer arithmetic (see `_residuals`) and w = x + d >= 0; each round's data are the size of the
        previous round's error plus the noise, so the error shrinks by the solver's relative accuracy per round,
        until a round moves no measured query by an integer. The fit is then accurate to the solver's relative
        accuracy times the noise, whatever n (up to 2^53, where float64 stops holding every count exactly:
        estimate.check_exact_range refuses larger tables before any charge).

        Parameters
        ----------
        values : numpy.ndarray
            The noisy measured values, block after block in the order of the problem's blocks (one per measured query).
        weights : numpy.ndarray
            1 / noise variance of each value (only their ratios matter).
        total : float
            The total to pin (the blocks' best estimate of n, or the exact n).
        exact_total : bool, default False
            Whether `total` is an exactly known integer; otherwise the refinement re-estimates it from the residuals.

        Returns
        -------
        table : numpy.ndarray
            The non-negative fitted table (float, of the problem's domain).
        seconds : float
            Wall-clock time of the fit.

        Raises
        ------
        TabreleaseError
            If a value is missing or non-finite, the total is above 2^53, or Clarabel does not solve.
        """
        start = time.perf_counter()
        base, change = self.fit(values, weights, total, exact_total=exact_total)
        return np.maximum(base + change, 0.0).reshape(self.domain), time.perf_counter() - start

    def fit(self, values: np.ndarray, weights: np.ndarray, total: float, *,
            exact_total: bool = False, refine: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The fit as (integer table x, change d), x + d the fitted table (flat): at counts above 2^52 a float
        cannot hold x + d to a fraction, so rounding takes the two parts.

        Parameters
        ----------
        values : numpy.ndarray
            The noisy measured values, block after block in the order of the problem's blocks (one per measured query).
        weights : numpy.ndarray
            1 / noise variance of each value (only their ratios matter).
        total : float
            The total to pin.
        exact_total : bool, default False
            Whether `total` is an exactly known integer.
        refine : bool, default True
            Refine the fit to integer exactness (see `solve`); without, the one solve's fit, accurate relative to
            the size of the data (what a simulation of unrounded errors may use where that is a fraction of a count).

        Returns
        -------
        base : numpy.ndarray
            The integer part x (int64, flat over the domain's cells, 0 on structural zeros).
        change : numpy.ndarray
            The fractional change d (float, flat; x + d >= 0).

        Raises
        ------
        TabreleaseError
            If a value is missing or non-finite, the total is above 2^53, or Clarabel does not solve.
        """
        values = np.asarray(values, float)
        if values.shape != (self.size,) or not np.all(np.isfinite(values)):
            raise TabreleaseError("the least-squares fit needs one finite value per measured query")
        weights = np.asarray(weights, float)
        weights = weights / weights.max()
        if abs(float(total)) > 2.0**53:
            raise TabreleaseError("the least-squares fit cannot be exact above a total of 2^53 (float64 stops holding "
                                  "every count)")
        pinned = max(float(total), 0.0)
        table = self._solve_change(values, weights, pinned, np.zeros(self._cells))
        x = np.where(self._free, np.rint(table), 0.0).astype(np.int64)
        if not refine:
            change = table - x
            return x, np.where(self._free, np.maximum(change, -x), 0.0)
        scaled = values * self._row_scale  # the measured values in integer units (what the sampler perturbed)
        for _ in range(REFINEMENT_ROUNDS):
            residual = self._residuals(scaled, x)
            if exact_total:
                change_total = float(int(total) - int(x.sum()))
            else:
                change_total = max(self._total_of_residuals(residual, weights) + float(x.sum()), 0.0) - float(x.sum())
            change = self._solve_change(residual / np.where(self._row_scale > 0, self._row_scale, 1.0), weights,
                                        change_total, x.astype(float))
            step = np.where(self._free, np.rint(change), 0.0).astype(np.int64)
            x, change = x + step, change - step
            if not np.any(self._Qi @ self._with_margins(step)):
                break  # this round moved no measured query by an integer: the fit is x + change
        return x, np.where(self._free, np.maximum(change, -x), 0.0)

    def _residuals(self, scaled: np.ndarray, x: np.ndarray) -> np.ndarray:
        """scaled - Qi x for an integer table x, in integer units, without cancellation error: Qi x is computed
        exactly in int64 (in two halves of x's bits where one product could overflow), and the float difference
        is taken from the high half first (y and Qi x agree in their leading digits, so that subtraction is
        exact), then the low half."""
        full = self._with_margins(x)  # its margins at most n each, below 2^53 (`fit` refuses more)
        if self._row_bound * max(int(np.abs(full).max(initial=0)), 1) < 2**62:
            q = self._Qi @ full
            high = q.astype(float)
            low = (q - high.astype(np.int64)).astype(float)
        else:
            shift = 2**26
            q_high, q_low = self._Qi @ self._with_margins(x // shift), self._Qi @ self._with_margins(x % shift)
            high = q_high.astype(float) * shift
            low = q_low.astype(float)
        return (scaled - high) - low

    def _total_of_residuals(self, residual: np.ndarray, weights: np.ndarray) -> float:
        """The best linear unbiased estimate of n - sum(x) from the residuals (measurements.best_total on y - Q x):
        each block that carries the total, weighted by 1 / the variance of its estimate."""
        estimates, precisions = [], []
        for lo, hi, cells in self._total_blocks:
            variance = 1.0 / weights[lo]  # weights are 1 / variance, up to one common factor
            if cells:
                estimates.append(float(residual[lo:hi].sum()))
                precisions.append(1.0 / (variance * (hi - lo)))
            else:
                scale = self._row_scale[lo]
                estimates.append(float(residual[lo]))
                precisions.append(1.0 / (variance * scale**2))
        precisions = np.asarray(precisions)
        return float(precisions @ np.asarray(estimates) / precisions.sum())

    def _solve_change(self, values: np.ndarray, weights: np.ndarray, total: float, base: np.ndarray) -> np.ndarray:
        """The fit of the change d from `base`: min 1/2 sum weights (values - Q d)^2 over base + d >= 0,
        sum d = total. Returns base + d where base is 0, else d (the caller adds it in integers)."""
        # Scaled to data of order 1 (the minimiser is unchanged): at n of 1e8-1e12 the raw problem is
        # ill-conditioned enough for the interior-point method to call it infeasible.
        unit = max(1.0, abs(total) / self._cells, float(np.abs(values).max(initial=0.0)) / 1e3)
        b = np.zeros(self._A.shape[0])
        b[: self._m] = values / unit
        b[self._m] = total / unit
        # base + d >= 0 as -d + s = base, s >= 0. A bound far beyond the data cannot bind: it is capped (a huge
        # slack next to ones of the size of the noise would spoil the solver's scaling) and checked below.
        cap = CHANGE_BOUND_CAP * max(1.0, abs(total) / unit, float(np.abs(b[: self._m]).max(initial=0.0)))
        lower = base[self._free] / unit
        capped = lower > cap
        b[self._A.shape[0] - self._inequalities:] = np.minimum(lower, cap)
        for ridge in (0.0, CHANGE_RIDGE):
            solution = self._qp.solve(weights, b, ridge)
            if str(solution.status) not in ("Solved", "AlmostSolved"):
                raise TabreleaseError(f"the least-squares fit did not solve: Clarabel says {solution.status}")
            change = np.asarray(solution.x)[: self._cells]
            if not (np.any(capped) and np.any(change[self._free][capped] <= -0.5 * cap)):
                return change * unit
            # The change drifted to a capped bound along what no query measures (`CHANGE_RIDGE`): again with the ridge.
        raise TabreleaseError("internal error: the least-squares refinement reached its capped bound")


def _integer_scale(domain, query: str, kind: str | None) -> float:
    """What one block's queries are multiplied by to make an integer table's answers integers."""
    from .measurements import MARGIN_CELLS

    if query == MARGIN_CELLS:
        return 1.0
    return 2.0 ** (len(domain) / 2) if kind == FOURIER else float(np.prod(domain))


def _cells_of_sub_margin(coords: tuple, within: Margin, sub: Margin, shape: tuple[int, ...]) -> np.ndarray:
    """For each cell of the margin over `within` (given by its coordinates), its cell in the margin over `sub`."""
    if not sub:
        return np.zeros(np.size(coords[0]) if coords else 1, np.int64)
    return np.ravel_multi_index(tuple(coords[within.index(j)] for j in sub), tuple(shape[j] for j in sub))


def _sparse_constraints(basis: CoefficientBasis) -> tuple[sp.SparseMatrix, int]:
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
    design = margin_design(shape, basis.generators)
    add(design.row, design.col, design.values)
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
    A = sp.from_entries(np.concatenate(vals), np.concatenate(rows), np.concatenate(cols), (n_margin + 2 * d, n_col),
                        "csc")
    return A, n_margin


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
            rows.append(lift if query == "margin_cells" else self.coefficient_rows(tuple(variables), kind))
        self._Q = sp.stack(0, rows)
        m = self._Q.shape[0]
        nonneg = sp.stack(0, [-self._lift[g] for g in self.generators])
        pin = sp.from_entries([1.0], [0], [self._offsets[()]], (1, self._p))
        pad = lambda block: sp.stack(1, [block, sp.zeros((block.shape[0], m))])  # noqa: E731
        self._A = sp.stack(0, [sp.stack(1, [self._Q, -sp.identity(m)]), pad(pin), pad(nonneg)]).tocsc()
        self._m, self._inequalities = m, nonneg.shape[0]
        self._qp = _ResidualQP(self._p, self._A, m + 1, self._inequalities)

    def coefficient_rows(self, s: Margin, kind: str) -> sp.SparseMatrix:
        """The sparse map from the residuals theta to the coefficients of the set `s` (`bases`: the analysis of the
        margin over `s`, applied to its lift). Only theta_s enters: each lower set's term in the margin is constant
        along some axis of `s`, which the analysis's factor for that axis annihilates (I - J/k_j, or [1, -1]); so the
        map is the Kronecker product over `s`'s axes of the analysis factor times C_j, times the basis's scale
        (1 / prod of the other axes' levels, or 2^(-k/2)), at theta_s's columns. The product of the dense analysis
        with the lift, the same map in exact arithmetic, left rounding residue in every column of the lower sets'
        (a Gaussian plan's fit of a 100 x 50 table took 146 s, a scratch profile).

        Parameters
        ----------
        s : tuple of int
            A set of the closure (sorted axes).
        kind : str
            The coefficient basis (``FOURIER`` or Efron-Stein).

        Returns
        -------
        tabrelease._sparse.SparseMatrix
            Shape (the block's coefficients, the number of residuals).
        """
        k = len(self.shape)
        if kind == FOURIER:
            scale = 2.0 ** (-k / 2)
        else:
            scale = 1.0 / float(np.prod([self.shape[j] for j in range(k) if j not in s]))
        block = sp.from_dense(np.full((1, 1), scale))
        for j in s:
            k_j = self.shape[j]
            contrast = np.vstack([np.eye(k_j - 1), -np.ones((1, k_j - 1))])
            analysis = np.array([[1.0, -1.0]]) if kind == FOURIER else np.eye(k_j) - 1.0 / k_j
            factor = analysis @ contrast
            factor[np.abs(factor) < 1e-12] = 0.0  # in exact arithmetic: C_j itself (Efron-Stein), or [2] (Fourier)
            block = sp.kron(block, sp.from_dense(factor))
        return sp.from_entries(block.values, block.row, block.col + self._offsets[s], (block.shape[0], self._p))

    def lift(self, a: Margin) -> sp.SparseMatrix:
        """The sparse map from the residuals theta to the margin over `a` (its cells in C order).

        Parameters
        ----------
        a : tuple of int
            A set of the closure (sorted axes).

        Returns
        -------
        tabrelease._sparse.SparseMatrix
            Shape (the margin's cells, the number of residuals).
        """
        rows, cols, vals = [], [], []
        for t in self.closure:
            if not set(t) <= set(a):
                continue
            block = sp.from_dense(np.ones((1, 1)))
            for j in a:  # sparse Kronecker factors, placed by shifting columns (no hstack of empty blocks)
                k_j = self.shape[j]
                factor = (np.vstack([np.eye(k_j - 1), -np.ones((1, k_j - 1))]) if j in t
                          else np.full((k_j, 1), 1.0 / k_j))
                block = sp.kron(block, sp.from_dense(factor))
            rows.append(block.row)
            cols.append(block.col + self._offsets[t])
            vals.append(block.values)
        cells = int(np.prod([self.shape[j] for j in a]))
        return sp.from_entries(np.concatenate(vals), np.concatenate(rows), np.concatenate(cols), (cells, self._p))

    @property
    def size(self) -> int:
        return int(self._Q.shape[0])

    def solve(self, values: np.ndarray, weights: np.ndarray, total: float) -> tuple[dict, float]:
        """({set in the closure: its margin}, seconds).

        As the fit over cells (`LeastSquaresProblem.solve`), the interior-point solve is accurate relative to the
        size of its data (off by 47 counts at n = 10^9, 65,531 at 10^12, with a few counts of noise), so it is
        refined: solved again for the change d from the previous fit theta, with the residuals y - Q theta and
        the non-negativity of theta + d, until a round moves no measured value by half a count.

        Parameters
        ----------
        values : numpy.ndarray
            The noisy measured values, block after block in the order of the problem's blocks (one per measured query).
        weights : numpy.ndarray
            1 / noise variance of each value (only their ratios matter).
        total : float
            The total to pin (theta of the empty set; negative values are taken as 0).

        Returns
        -------
        margins : dict
            Each set of the closure (tuple of axes) mapped to its fitted margin (float, clipped at 0, of the margin's
            shape).
        seconds : float
            Wall-clock time of the fit.

        Raises
        ------
        TabreleaseError
            If a value is missing or non-finite, or Clarabel does not solve.
        """
        values = np.asarray(values, float)
        if values.shape != (self.size,) or not np.all(np.isfinite(values)):
            raise TabreleaseError("the least-squares fit needs one finite value per measured query")
        start = time.perf_counter()
        weights = np.asarray(weights, float) / np.max(weights)
        pinned = max(float(total), 0.0)
        theta = self._solve_change(values, weights, pinned, np.zeros(self._inequalities))
        nonneg = self._A[self._m + 1:, : self._p]  # -(the generators' margins) as a function of theta
        for _ in range(REFINEMENT_ROUNDS):
            residual = values - self._Q @ theta
            change = self._solve_change(residual, weights, pinned - theta[self._offsets[()]], -(nonneg @ theta))
            theta = theta + change
            if not np.any(np.abs(self._Q @ change) >= 0.5):
                break  # this round moved no measured value by half a count
        margins = {a: np.maximum(self._lift[a] @ theta, 0.0).reshape([self.shape[j] for j in a]) for a in self.closure}
        return margins, time.perf_counter() - start

    def _solve_change(self, values: np.ndarray, weights: np.ndarray, total: float, base: np.ndarray) -> np.ndarray:
        """The change d of the residuals: min 1/2 sum weights (values - Q d)^2 with the total's change pinned and
        every generator's margin of theta + d non-negative (`base`: the generators' margins of theta)."""
        unit = max(1.0, abs(float(total)) / 1e3, float(np.abs(values).max(initial=0.0)) / 1e3)
        b = np.zeros(self._A.shape[0])
        b[: self._m] = values / unit
        b[self._m] = float(total) / unit
        # A bound far beyond the data cannot bind: capped (a huge bound beside ones of the size of the noise would
        # spoil the solver's scaling) and checked below, as in the fit over cells.
        cap = CHANGE_BOUND_CAP * max(1.0, abs(b[self._m]), float(np.abs(b[: self._m]).max(initial=0.0)))
        lower = np.asarray(base, float) / unit
        capped = lower > cap
        b[self._m + 1:] = np.minimum(lower, cap)
        solution = self._qp.solve(weights, b)
        if str(solution.status) not in ("Solved", "AlmostSolved"):
            raise TabreleaseError(f"the local least-squares fit did not solve: Clarabel says {solution.status}")
        change = np.asarray(solution.x)[: self._p]
        if np.any(capped):
            margins = -(self._A[self._m + 1:, : self._p] @ change)
            if np.any(margins[capped] <= -0.5 * cap):
                raise TabreleaseError("internal error: the local least-squares refinement reached its capped bound")
        return change * unit
