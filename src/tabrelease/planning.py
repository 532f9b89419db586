"""Measurement planning: what to measure, and how much noise each block gets, before any count is read.

The released margins are determined by the residuals (ANOVA / Efron-Stein components) of their
downward closure. A measured block carries information about some residuals:

* a Fourier coefficient (binary tables) or an Efron-Stein block of a set S: about residual S only;
* the cells of the margin over S: about every residual T of a subset of S (summing over S \\ T).

With noise of variance v_B per value on block B, the linear unbiased reconstruction (generalised
least squares, before non-negativity and rounding) estimates residual T with information
I_T = sum_B lambda_(B,T) / v_B, independently of the other residuals, and the expected squared
error summed over the cells of a margin A is

    E || m_A_hat - m_A ||^2 = sum_(T subset of A)  K_out(A) dim(T) / I_T,

where dim(T) = prod_(j in T) (k_j - 1), K_out(A) = prod_(j not in A) k_j, and lambda is 1 for a
Fourier coefficient, 1 / K_out(S) for an Efron-Stein block and K_out(S) for the margin over S.
(Derivation: the information matrix sum_B Q_B' Q_B / v_B of the queries Q_B is diagonal in the
residual basis; see docs/method.md.) The privacy cost is exact: for Laplace noise of scale b_B on each
block, epsilon = max over neighbouring pairs of sum_B ||change_B||_1 / b_B; for Gaussian noise, the
whitened L2 sensitivity sqrt(max sum_B ||change_B||_2^2 / sigma_B^2) goes to the analytic Gaussian
mechanism (noise.gaussian_calibration): the blocks together are one Gaussian mechanism after whitening.

Planning chooses the relative scales beta_B (block scale = multiplier * beta_B) to minimise the total
expected squared error of the released margins at a fixed privacy cost:

* Gaussian: Efron-Stein (or Fourier) residual blocks only, the closed form of ResidualPlanner
  (Xiao, Kifer et al., NeurIPS 2023): 1 / sigma_T^2 proportional to sqrt(W_T / (lambda_T c_T)),
  total error (sum_T sqrt(W_T c_T / lambda_T))^2 / (sensitivity budget).
* Laplace: residual blocks and margin blocks together (for a non-binary axis a margin is cheaper per
  unit of information than its Efron-Stein block, and it informs every lower residual at once), and
  with `superset_cells` the margins of sets above the released ones, the full table included
  (`superset_candidates`); the cube-root closed form for residual blocks alone is one starting point of
  a numerical optimisation over the shares of epsilon (one variable per candidate block). The search is
  not convex: HDMM's OPT_M over every subset (`plan_marginals`) is compared, and the better design kept.

Every margin asked for weighs in the objective (`workload`), nested ones too: [A][B][AB] releases AB, and
the errors of A and B summed from it count beside AB's.

For the replace neighbour relation n is the same in every neighbouring table (sensitivity 0): the total
is released exactly, as with a public total. The shape is planned with each block's largest change and the
multiplier is then set from the exact maximum over every pattern of differing coordinates, so the
privacy is exact and the plan near-optimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import combinations
from math import prod, sqrt
from statistics import NormalDist

import numpy as np

from ._minimise import minimise
from .bases import EFRON_STEIN, FOURIER, MAX_REPLACE_VARIABLES, block_changes, coefficient_basis
from .errors import TabreleaseError
from .measurements import COEFFICIENTS, MARGIN_CELLS
from .models import Margin, downward_closure, maximal_margins

TOTAL_SQUARED_ERROR = "total-squared-error"
MAX_CELL_VARIANCE = "max-cell-variance"
OBJECTIVES = (TOTAL_SQUARED_ERROR, MAX_CELL_VARIANCE)



# A planned block's relative scale is kept to this many significant digits: the planner's search runs through BLAS,
# whose kernels (chosen by the CPU: OpenBLAS's Haswell and its Prescott fallback in virtual machines) round sums in
# different orders, and the published scales differed in their last digits between two machines (a reviewer's trial).
# The calibration is computed from the kept scales, so the guarantee is exact for what is published.
SCALE_DIGITS = 12


def canonical_scale(value: float) -> float:
    """A relative scale as the plan keeps it: `SCALE_DIGITS` significant digits, the same on machines whose searches
    agree to within their last few digits, except where the value falls within those digits of a rounding boundary
    (for a difference in the 16th digit, about one block in 10^4 to 10^5).

    Parameters
    ----------
    value : float
        The scale the search found.

    Returns
    -------
    float
    """
    return float(f"{float(value):.{SCALE_DIGITS}g}")


@dataclass(frozen=True)
class PlannedBlock:
    """One block to measure: the Fourier/Efron-Stein coefficients of a set, or the cells of its margin."""

    query: str  # COEFFICIENTS or MARGIN_CELLS
    variables: Margin
    relative_scale: float  # the block's noise scale is the plan's multiplier times this


@dataclass(frozen=True, eq=False)
class MeasurementDesign:
    """What is measured, with which relative scales, and how far a neighbouring record moves each block."""

    shape: tuple[int, ...]
    margins: tuple[Margin, ...]
    basis_kind: str  # of the coefficient blocks
    distribution: str
    neighbours: str
    blocks: tuple[PlannedBlock, ...]
    changes: np.ndarray  # rows: neighbouring pairs (patterns); columns: blocks; L1 (Laplace) or squared L2
    public_total: bool

    @property
    def norm(self) -> int:
        return 1 if self.distribution == "laplace" else 2

    def whitened_sensitivity(self) -> float:
        """The sensitivity of the blocks divided by their relative scales: with multiplier t, Laplace gives
        epsilon = this / t exactly; Gaussian has this L2 sensitivity against noise of standard deviation t.

        Returns
        -------
        float
            The largest row of sum_B change_B / beta_B (Laplace: L1), or the square root of the largest row of
            sum_B change_B / beta_B^2 (Gaussian: L2).
        """
        beta = np.array([b.relative_scale for b in self.blocks])
        worst = float((self.changes / beta**self.norm).sum(axis=1).max())
        return worst if self.norm == 1 else sqrt(worst)

    def scales(self, multiplier: float) -> dict[tuple[str, Margin], float]:
        """Each block's noise scale at a multiplier.

        Parameters
        ----------
        multiplier : float
            The plan's multiplier t (the calibration's scale).

        Returns
        -------
        dict
            Maps (query, variables) of each block to t times its relative scale.
        """
        return {(b.query, b.variables): multiplier * b.relative_scale for b in self.blocks}


@dataclass(frozen=True)
class MarginError:
    """The expected error of one released margin under the linear unbiased reconstruction."""

    total_variance: float  # E || m_hat - m ||^2 summed over the margin's cells
    cell_sd: float  # standard deviation of each cell (the same for every cell of the margin)
    expected_l1: float  # E || m_hat - m ||_1 under a normal approximation: cells * sd * sqrt(2 / pi)
    cells: int

    def l1_quantile(self, delta: float) -> float:
        """An upper (1 - delta) quantile of the L1 error, under the same normal approximation: each cell's error
        is below sd * z(1 - delta / (2 cells)) except with probability delta / cells, so the sum of their
        absolute values is below cells times that with probability >= 1 - delta, however the cells' errors are
        correlated (the reconstruction correlates them). Tight when they are, within a factor ~2-3 when not.

        Parameters
        ----------
        delta : float
            The failure probability, in (0, 1).

        Returns
        -------
        float
            The L1 error, in counts, exceeded with probability at most delta.
        """
        # The upper delta / (2 cells) point of the standard normal, as minus its lower point (no 1 - tiny rounding);
        # the standard library's inverse (Wichura's AS 241) rather than scipy.special, whose import is slow.
        return float(self.cells * self.cell_sd * -NormalDist().inv_cdf(delta / (2.0 * self.cells)))

    def as_dict(self) -> dict:
        """The expected error as a JSON-ready mapping.

        Returns
        -------
        dict
            ``expected_squared_error``, ``cell_sd``, ``expected_l1_normal_approx`` and ``cells``.
        """
        return {"expected_squared_error": self.total_variance, "cell_sd": self.cell_sd,
                "expected_l1_normal_approx": self.expected_l1, "cells": self.cells}


# --- the algebra ----------------------------------------------------------------------------------
def _k_out(shape: Sequence[int], s: Sequence[int]) -> int:
    return prod(k for j, k in enumerate(shape) if j not in s)


def _dim(shape: Sequence[int], t: Sequence[int]) -> int:
    return prod(shape[j] - 1 for j in t)


def information(shape: Sequence[int], query: str, s: Margin, kind: str, t: Margin) -> float:
    """lambda_(B, T): information about residual T per unit of inverse variance of block B over S.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    query : str
        The block's query: "coefficients" or "margin_cells".
    s : Margin
        The block's variables S.
    kind : {"fourier", "efron-stein"}
        The basis of a coefficient block.
    t : Margin
        The residual T.

    Returns
    -------
    float
        K_out(S) for a margin over S containing T; 1 (Fourier) or 1 / K_out(S) (Efron-Stein) for the coefficient
        block of T itself; otherwise 0.
    """
    if query == MARGIN_CELLS:
        return float(_k_out(shape, s)) if set(t) <= set(s) else 0.0
    if tuple(t) != tuple(s):
        return 0.0
    return 1.0 if kind == FOURIER else 1.0 / _k_out(shape, s)


def residual_weights(shape: Sequence[int], margins: Sequence[Margin], residuals: Sequence[Margin]) -> np.ndarray:
    """W_T = sum over released margins A containing T of K_out(A) dim(T): the total error is sum_T W_T / I_T.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of Margin
        The released margins A.
    residuals : sequence of Margin
        The residuals T.

    Returns
    -------
    numpy.ndarray
        Float array of W_T, one per residual, in the order given.
    """
    weights = dict.fromkeys(map(tuple, residuals), 0.0)
    for a in margins:
        k_out = _k_out(shape, a)
        for t in _subsets_among(a, weights):
            weights[t] += k_out * _dim(shape, t)
    return np.array([weights[tuple(t)] for t in residuals], float)


def _subsets_among(s: Sequence[int], wanted) -> list[tuple[int, ...]]:
    """The subsets of `s` (sorted tuples) that are keys of `wanted`: all 2^|s| of them looked up while that is
    small, else `wanted` scanned once. Replaces loops over every (block or margin, residual) pair, which at 100
    variables were 25 million each."""
    from itertools import combinations

    from .models import SUBSET_SCAN_MAX_SIZE

    s = tuple(sorted(s))
    if len(s) <= SUBSET_SCAN_MAX_SIZE:
        return [t for size in range(len(s) + 1) for t in combinations(s, size) if t in wanted]
    inside = set(s)
    return [tuple(t) for t in wanted if set(t) <= inside]


def expected_margin_errors(shape: Sequence[int], margins: Sequence[Margin],
                           blocks: Sequence[tuple[str, Margin, str, float]],
                           public_total: bool = False) -> dict[Margin, MarginError]:
    """Per released margin, the expected error of the linear unbiased reconstruction from `blocks`, given as
    (query, variables, basis kind, variance per value). A residual no block informs has infinite error.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of Margin
        The released margins.
    blocks : sequence of tuple
        The measured blocks, each (query, variables, basis kind, noise variance per value).
    public_total : bool, default False
        Whether n is released exactly (the empty residual then adds no error).

    Returns
    -------
    dict
        Maps each released margin (a tuple of axes) to its `MarginError`.
    """
    shape = tuple(shape)
    residuals = downward_closure(maximal_margins(margins)[0])
    # info[T] = sum over blocks of lambda_(B, T) / v_B: a margin block informs the residuals inside it, a coefficient
    # block its own (`information`); each block visits only those, not every residual.
    info = dict.fromkeys(map(tuple, residuals), 0.0)
    for q, s, kind, v in blocks:
        for t in (_subsets_among(s, info) if q == MARGIN_CELLS else [tuple(s)] if tuple(s) in info else []):
            info[t] += information(shape, q, s, kind, t) / v
    out = {}
    for a in margins:
        total = 0.0
        for t in _subsets_among(a, info):
            if public_total and not t:
                continue
            total += np.inf if info[t] <= 0 else _k_out(shape, a) * _dim(shape, t) / info[t]
        cells = prod(shape[j] for j in a)
        sd = sqrt(total / cells)
        out[tuple(a)] = MarginError(float(total), float(sd), float(cells * sd * sqrt(2 / np.pi)), int(cells))
    return out


# --- planning -------------------------------------------------------------------------------------
def margin_changes(shape: Sequence[int], s: Margin, neighbours: str) -> np.ndarray:
    """How far one record moves the margin over S, per neighbouring pattern.

    Add-remove: by 1 in one cell (one pattern). Replace: by 1 in two cells when the replaced record differs on a
    coordinate of S (L1 2, squared L2 2), else not at all; one pattern per non-empty set of differing coordinates.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    s : Margin
        The margin's variables.
    neighbours : {"add-remove", "replace"}
        The neighbour relation.

    Returns
    -------
    numpy.ndarray
        The change (L1, equal to the squared L2) per pattern.
    """
    if neighbours == "add-remove":
        return np.ones(1)
    patterns = np.arange(1, 2 ** len(shape), dtype=np.int64)
    mask = sum(1 << j for j in s)
    return np.where(patterns & mask, 2.0, 0.0)


def plan_measurements(shape: Sequence[int], margins: Sequence[Margin], *, distribution: str = "laplace",
                      neighbours: str = "add-remove", public_total: bool = False,
                      objective: str = TOTAL_SQUARED_ERROR, superset_cells: int = 0,
                      workload: Sequence[Margin] | None = None) -> MeasurementDesign:
    """Choose the blocks and their relative scales (counts are never read), minimising the total expected squared
    error of the released margins, or (objective "max-cell-variance") the largest variance of a released cell.
    The design does not depend on epsilon (errors scale as 1 / epsilon^2), so it is kept for the next release.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of Margin
        The margins to release.
    distribution : {"laplace", "gaussian"}
        The noise; Laplace plans may also measure margin cells, Gaussian plans residual blocks only.
    neighbours : {"add-remove", "replace"}
        The neighbour relation (replace makes the total public).
    public_total : bool, default False
        Whether n is public (released exactly, not measured).
    objective : {"total-squared-error", "max-cell-variance"}
        What the relative scales minimise.
    superset_cells : int, default 0
        Laplace plans may also measure the margins of sets above the released ones (the full table included), each
        with at most this many cells (0: only the margins' downward closure). Which sets are candidates is
        `superset_candidates`.
    workload : sequence of Margin or None
        Every margin asked for, nested ones included ([A][B][AB]: A and B are released through AB, and their errors
        count beside AB's); default: `margins`. Each must lie inside one of `margins`.

    Returns
    -------
    MeasurementDesign
        The blocks with their relative scales and their changes between neighbours (cached per arguments).

    Raises
    ------
    TabreleaseError
        If the objective or neighbour relation is unknown, or replace is asked for more than 22 variables.
    """
    if objective not in OBJECTIVES:
        raise TabreleaseError(f"unknown planning objective {objective!r}; choose {' or '.join(OBJECTIVES)}")
    margins = tuple(tuple(int(j) for j in g) for g in margins)
    asked = margins if workload is None else tuple(dict.fromkeys(tuple(int(j) for j in g) for g in workload))
    if not all(any(set(w) <= set(g) for g in margins) for w in asked):
        raise TabreleaseError("a margin of the workload lies inside none of the margins planned for")
    shape, workload = tuple(int(k) for k in shape), tuple(dict.fromkeys(margins + asked))
    design = _plan_measurements(shape, margins, distribution, neighbours, bool(public_total), objective,
                                int(superset_cells), workload)
    if public_total and neighbours != "replace" and objective == TOTAL_SQUARED_ERROR:
        # The plan made as if n were noisy is valid with n published too (its noisy total is then not used), and
        # can be the better one where the searches stall apart: Rochdale's planned with --public-total had a larger
        # total expected error than without (a new user's trial). The better of the two is kept.
        noisy = _plan_measurements(shape, margins, distribution, neighbours, False, objective, int(superset_cells),
                                   workload)
        # Its blocks of the empty set tell only n, which is published exactly: dropped, with their columns of the
        # changes (the noise is calibrated to what is measured; fewer blocks need no more of it).
        telling = np.array([bool(b.variables) for b in noisy.blocks])
        if telling.any():
            noisy = replace(noisy, blocks=tuple(b for b, k in zip(noisy.blocks, telling) if k),
                            changes=noisy.changes[:, telling].copy(), public_total=True)
            noisy.changes.setflags(write=False)
            if _total_error(noisy, workload) < _total_error(design, workload):
                return noisy
    return design


# Every subset of the variables is a candidate margin up to this many variables (2^8 candidates); past it, the
# closure's sets and each generator with one or two more variables, and the full table (see superset_candidates).
ALL_SUBSETS_MAX_VARIABLES = 8
SUPERSET_EXTRA_VARIABLES = 2


def superset_candidates(shape: Sequence[int], generators: Sequence[Margin], max_cells: int) -> tuple[Margin, ...]:
    """The sets above the released margins whose margins a Laplace plan may measure, besides the closure's.

    With few variables, every set not in the closure is a candidate (HDMM's marginals family: the full table and
    every marginal above the workload). With more, the candidates are each released margin with up to
    `SUPERSET_EXTRA_VARIABLES` more variables, and the full table. Either way a candidate has at most `max_cells`
    cells (the fit over the cells then holds it).

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    generators : sequence of Margin
        The maximal released margins.
    max_cells : int
        The most cells a candidate margin may have (0: none).

    Returns
    -------
    tuple of Margin
        The candidate sets, sorted by size then axes, none in the generators' downward closure.
    """
    from itertools import combinations

    d = len(shape)
    if max_cells <= 0 or d == 0:
        return ()
    closure = set(downward_closure(generators))
    if d <= ALL_SUBSETS_MAX_VARIABLES:
        pool = {c for r in range(1, d + 1) for c in combinations(range(d), r)}
    else:
        pool = {tuple(range(d))}
        for g in generators:
            rest = [j for j in range(d) if j not in g]
            for r in range(1, SUPERSET_EXTRA_VARIABLES + 1):
                pool.update(tuple(sorted(set(g) | set(c))) for c in combinations(rest, r))
    # A margin informs the residuals of the closure inside it; of two sets that inform the same ones, the smaller
    # informs each more (K_out is larger) at the same cost (one record, one cell): only the union of the residuals a
    # set informs is worth measuring. Every candidate is kept at that union (the pool's sets are replaced by it).
    informed = {}
    for s in pool:
        union = tuple(sorted({j for t in closure if set(t) <= set(s) for j in t}))
        informed[union] = True
    out = [s for s in informed if s and s not in closure and prod(shape[j] for j in s) <= max_cells]
    return tuple(sorted(out, key=lambda s: (len(s), s)))


@lru_cache(maxsize=64)
def _plan_measurements(shape, margins, distribution, neighbours, public_total, objective,
                       superset_cells=0, workload=None) -> MeasurementDesign:
    if neighbours == "replace" and len(shape) > MAX_REPLACE_VARIABLES:
        raise TabreleaseError(f"replace-one planning enumerates 2^{len(shape)} patterns; use add-remove")
    generators = tuple(maximal_margins(margins)[0])
    # No replaced record changes n (sensitivity 0): under replace the total is exact whatever is asked.
    public_total = public_total or neighbours == "replace"
    kind = FOURIER if all(k == 2 for k in shape) else EFRON_STEIN
    basis = coefficient_basis(kind, shape, generators, analysis=False)
    norm = 1 if distribution == "laplace" else 2
    coefficient_changes = block_changes(basis, neighbours, norm)
    residuals = [t for t in basis.closure if t or not public_total]
    # Candidates: the residual blocks, and (Laplace) the margins of every non-empty set of the closure.
    candidates: list[tuple[str, Margin]] = [(COEFFICIENTS, t) for t in residuals]
    columns = [coefficient_changes[:, basis.closure.index(t)] for t in residuals]
    if distribution == "laplace":
        for s in list(basis.closure) + list(superset_candidates(shape, generators, superset_cells)):
            if s:
                candidates.append((MARGIN_CELLS, s))
                columns.append(margin_changes(shape, s, neighbours))
    changes = np.column_stack(columns)
    proxy = changes.max(axis=0)  # each block's largest change: exact for add-remove (one row)
    lam = np.array([[information(shape, q, s, kind, t) for t in residuals] for q, s in candidates])
    # Every margin asked for counts, nested ones too ([A][B][AB] weighs A and B beside AB), each once.
    workload = tuple(workload or margins)
    weights = residual_weights(shape, workload, residuals)
    if distribution == "laplace":
        inverse_scale = _plan_laplace(proxy, lam, weights, [len(v) if q == MARGIN_CELLS else -1 for q, v in candidates])
    else:
        inverse_scale = _plan_gaussian(proxy, lam, weights)
    if objective == MAX_CELL_VARIANCE:
        per_cell = np.array([[_k_out(shape, a) * _dim(shape, t) / prod(shape[j] for j in a) if set(t) <= set(a)
                              else 0.0 for t in residuals] for a in workload])
        starts = [inverse_scale]
        if distribution == "laplace" and superset_cells > 0:
            # The total-error plan may be HDMM's (below), found by another search: its blocks are candidates here
            # too, so the search for the smallest worst cell also starts from it.
            total_plan = _plan_measurements(shape, margins, distribution, neighbours, public_total,
                                            TOTAL_SQUARED_ERROR, superset_cells, workload)
            scales = {(b.query, b.variables): b.relative_scale for b in total_plan.blocks}
            if all(key in candidates for key in scales):
                starts.append(np.array([1.0 / scales[c] if c in scales else 0.0 for c in candidates]))
        inverse_scale = min((_minimise_largest(proxy, lam, per_cell, x, norm) for x in starts),
                            key=lambda x: _largest_cell_variance(x, proxy, lam, per_cell, norm))
    keep = inverse_scale > 0
    blocks = tuple(PlannedBlock(q, s, canonical_scale(1 / x)) for (q, s), x, k in zip(candidates, inverse_scale, keep)
                   if k)
    kept = changes[:, keep].copy()
    kept.setflags(write=False)
    design = MeasurementDesign(shape, generators, kind, distribution, neighbours, blocks, kept, public_total)
    if (distribution == "laplace" and objective == TOTAL_SQUARED_ERROR and superset_cells > 0
            and len(shape) <= ALL_SUBSETS_MAX_VARIABLES):
        # HDMM's OPT_M over every subset is in the candidates, but the search above can stall in another local
        # optimum: its own design is compared, and the better kept (so the plan is never worse than HDMM's). With
        # n published under add-remove noise, OPT_M is searched without the total too: it had been skipped there,
        # and a public total gave a worse plan than none (a new user's trial).
        marginals = plan_marginals(shape, generators, neighbours, public_total)
        if _total_error(marginals, workload) < _total_error(design, workload):
            return marginals
    return design


def _total_error(design: MeasurementDesign, workload) -> float:
    """The design's total expected squared error over the workload at a whitened sensitivity of 1."""
    factor = 2.0 if design.distribution == "laplace" else 1.0
    sensitivity = design.whitened_sensitivity()
    blocks = [(b.query, b.variables, design.basis_kind, factor * (sensitivity * b.relative_scale) ** 2)
              for b in design.blocks]
    errors = expected_margin_errors(design.shape, workload, blocks, design.public_total)
    return float(sum(e.total_variance for e in errors.values()))


def _budget_shares(x, cost, norm) -> np.ndarray:
    """Each block's share p_B of the budget for 1 / scales x: p_B proportional to cost_B x_B^norm."""
    return cost * x**norm / (cost @ x**norm)


def _cell_variances(shares, cost, lam, per_cell, norm) -> np.ndarray:
    """Each released margin's per-cell variance for budget shares p_B (up to a factor common to every design):
    block B's precision is proportional to x_B^2 with x_B^norm = p_B / cost_B."""
    precision = (shares / cost) ** (2 / norm)
    return per_cell @ (1.0 / np.maximum(precision @ lam, 1e-300))


def _largest_cell_variance(x, cost, lam, per_cell, norm) -> float:
    """The largest per-cell variance of a released margin for 1 / scales x, at a unit privacy cost."""
    return float(_cell_variances(_budget_shares(x, cost, norm), cost, lam, per_cell, norm).max())


def _minimise_largest(cost, lam, per_cell, start, norm) -> np.ndarray:
    """From the total-error plan, minimise the largest per-cell variance of a released margin at the same
    privacy cost. The variables are shares p_B of the budget: sum_B cost_B x_B^norm = 1 with x_B = 1 / relative
    scale, so x_B^norm = p_B / cost_B, and block B's precision is proportional to x_B^2. Returns x."""
    from scipy.optimize import minimize

    n = len(cost)
    shares0 = _budget_shares(start, cost, norm)

    def variances(shares):
        return _cell_variances(shares, cost, lam, per_cell, norm)

    reference = float(variances(shares0).max())
    result = minimize(
        lambda v: v[-1], np.concatenate([np.maximum(shares0, 1e-9), [1.0]]),
        jac=lambda v: np.concatenate([np.zeros(n), [1.0]]), method="SLSQP",
        bounds=[(1e-12, 1.0)] * n + [(0.0, None)],
        constraints=[{"type": "eq", "fun": lambda v: v[:n].sum() - 1.0},
                     {"type": "ineq", "fun": lambda v: v[-1] - variances(v[:n]) / reference}],
        options={"maxiter": 500, "ftol": 1e-12},
    )
    shares = shares0
    # Its point is kept wherever it is better, whether or not SLSQP says it converged: scipy 1.17 stops on Rochdale's
    # Gaussian plan with "positive directional derivative for linesearch" at a point 23% below the start, which a
    # check of `success` threw away (the plan is then the total-error one).
    if np.all(np.isfinite(result.x[:n])) and result.x[:n].max() > 0:
        found = np.where(result.x[:n] < 1e-6 * result.x[:n].max(), 0.0, result.x[:n])
        found /= found.sum()
        if variances(found).max() < reference:
            shares = found
    return (shares / cost) ** (1 / norm)


LOG_WEIGHT_BOUNDS = (-16.0, 8.0)  # weights within e^24 of each other: e^-24 of the largest measures nothing


def marginal_weights(cost: np.ndarray, information: np.ndarray, weights: np.ndarray, seed: int = 20181101
                     ) -> np.ndarray:
    """HDMM's OPT_M (McKenna et al., VLDB 2018): weights theta_a >= 0 on marginals minimising
    (sum_a c_a theta_a)^2 sum_T W_T / sum_a theta_a^2 lambda_(a,T), the expected total squared error of Laplace
    noise on the weighted marginals, up to a constant.

    The search is L-BFGS within bounds (`_minimise`) over log theta, from even weights, the last marginal alone
    (the full table, when it is last) and seeded random weights; deterministic, no clock.

    Parameters
    ----------
    cost : numpy.ndarray
        Each marginal's largest change by one record, c_a.
    information : numpy.ndarray
        lambda_(a, T): marginals by residuals (K_out(a) where T is inside a, else 0).
    weights : numpy.ndarray
        W_T of each residual.
    seed : int
        Seed of the random starts.

    Returns
    -------
    numpy.ndarray
        theta, with the largest 1.
    """
    def error_and_gradient(u):
        theta = np.exp(u)
        info = (theta**2) @ information
        per = weights / np.maximum(info, 1e-300)
        spent = float(cost @ theta)
        f = spent**2 * float(per.sum())
        grad_theta = 2 * spent * cost * per.sum() - spent**2 * 2 * theta * (information @ (per / info))
        return f, grad_theta * theta

    n = len(cost)
    rng = np.random.default_rng(seed)
    last = np.full(n, LOG_WEIGHT_BOUNDS[0])
    last[-1] = 0.0
    starts = [np.zeros(n), last] + [rng.uniform(-4.0, 0.0, n) for _ in range(4)]
    best_u, best_f = None, np.inf
    for u0 in starts:
        result = minimise(error_and_gradient, u0, bounds=LOG_WEIGHT_BOUNDS, max_iter=2000)
        if result.fun < best_f:
            best_u, best_f = result.x, float(result.fun)
    theta = np.exp(best_u - best_u.max())
    return np.where(theta >= np.exp(-12.0), theta, 0.0)


@lru_cache(maxsize=32)
def plan_marginals(shape: tuple[int, ...], margins: tuple, neighbours: str,
                   public_total: bool = False) -> MeasurementDesign:
    """HDMM's OPT_M for these margins: the weighted marginals of every subset (cached per arguments) as a measurement
    design, relative scale 1 / theta_a (`marginal_weights`).

    Parameters
    ----------
    shape : tuple of int
        The table's levels per variable.
    margins : tuple of Margin
        The margins released.
    neighbours : {"add-remove", "replace"}
        The neighbour relation (a marginal moves by one record in one cell, or in two when replaced).
    public_total : bool, default False
        Whether n is published exactly under add-remove noise (`--public-total`); under replace it always is.

    Returns
    -------
    MeasurementDesign
        Margin blocks only, those of weight above e^-12 of the largest.
    """
    d = len(shape)
    generators = tuple(maximal_margins(margins)[0])
    # Where n is published exactly (always under replace, where no record changes it), neither the empty residual
    # nor the total's marginal is in the search; the changes stay those of the neighbour relation.
    public_total = bool(public_total) or neighbours == "replace"
    residuals = [t for t in downward_closure(generators) if t or not public_total]
    subsets = [c for r in range(0 if not public_total else 1, d + 1) for c in combinations(range(d), r)]
    k_out = np.array([prod(k for j, k in enumerate(shape) if j not in a) for a in subsets], float)
    contains = np.array([[set(t) <= set(a) for t in residuals] for a in subsets], float) * k_out[:, None]
    weights = residual_weights(shape, margins, residuals)
    changes = np.column_stack([margin_changes(shape, a, neighbours) for a in subsets])
    cost = changes.max(axis=0)  # one record's largest change of each marginal (exact for add-remove)

    theta = marginal_weights(cost, contains, weights)
    keep = theta > 0
    blocks = tuple(PlannedBlock(MARGIN_CELLS, a, canonical_scale(1.0 / t)) for a, t, k in zip(subsets, theta, keep)
                   if k)
    kept = changes[:, keep].copy()
    kept.setflags(write=False)
    kind = FOURIER if all(k == 2 for k in shape) else EFRON_STEIN
    return MeasurementDesign(shape, generators, kind, "laplace", neighbours, blocks, kept, public_total)


def _plan_gaussian(cost, lam, weights) -> np.ndarray:
    """ResidualPlanner's closed form: 1/sigma_T^2 proportional to sqrt(W_T / (lambda_T c_T)), residual blocks
    only; returns 1 / sigma_B up to a common factor."""
    n_res = lam.shape[1]
    precision = np.zeros(lam.shape[0])
    own = lam[np.arange(n_res), np.arange(n_res)]  # residual block T informs T alone
    precision[:n_res] = np.sqrt(weights / (own * cost[:n_res]))
    return np.sqrt(precision / (precision @ cost))  # normalised to a unit budget (only the shape counts)


def _plan_laplace(cost, lam, weights, levels=None) -> np.ndarray:
    """Shares p_B of epsilon (x_B = p_B / c_B is the block's 1 / scale): minimise sum_T W_T / I_T with
    I_T = sum_B lambda_(B,T) x_B^2 / 2 over the simplex; returns x_B = 1 / b_B.

    The problem is not convex, and a block whose share is near 0 has a gradient near 0 (the softmax), so the
    search starts from several points that each give every candidate a real share: the residual blocks'
    closed form, the margins alone, even shares, even shares over the margins of each size (`levels`: a margin
    block's number of variables, -1 for a residual block; the full table alone is one of them), and seeded random
    mixtures, each blended with even shares.
    """
    n_blocks, n_res = lam.shape

    def total(p):
        info = ((p / cost) ** 2 / 2) @ lam
        with np.errstate(divide="ignore"):
            return float(weights @ np.where(info > 0, 1.0 / np.where(info > 0, info, 1.0), np.inf))

    def value_and_gradient(theta):
        theta = theta - theta.max()
        p = np.exp(theta)
        p /= p.sum()
        x = p / cost
        info = np.maximum((x**2 / 2) @ lam, 1e-100)  # squared below: no overflow to inf (which stalled the search)
        inverse = 1.0 / info
        f = float(weights @ inverse)
        df_dx = -(lam @ (weights * inverse * inverse)) * x
        df_dp = df_dx / cost
        return f, p * (df_dp - p @ df_dp)

    even = np.full(n_blocks, 1.0 / n_blocks)
    own = lam[np.arange(n_res), np.arange(n_res)]
    residual_only = np.zeros(n_blocks)
    residual_only[:n_res] = cost[:n_res] * (weights / (own * cost[:n_res])) ** (1 / 3)
    residual_only /= residual_only.sum()
    starts = [residual_only, even]
    if n_blocks > n_res:
        margins_only = np.zeros(n_blocks)
        margins_only[n_res:] = 1.0 / (n_blocks - n_res)
        starts.append(margins_only)
    rng = np.random.default_rng(20261122)  # fixed: a plan is a function of the shape and margins alone
    starts += [rng.dirichlet(np.full(n_blocks, 0.5)) for _ in range(4)]
    blends = [(0.0, 0.3)] * len(starts)
    if levels is not None:  # each size of margin alone: a start of its own (the full table alone is one)
        levels = np.asarray(levels)
        for r in sorted(set(levels[levels > 0].tolist())):
            level = (levels == r).astype(float)
            starts.append(level / level.sum())
            blends.append((0.0,))
    best_p, best_f = None, np.inf
    for p0, start_blends in zip(starts, blends):
        for blend in start_blends:
            start = (1 - blend) * p0 + blend * even
            theta0 = np.log(np.maximum(start, 1e-12))
            result = minimise(value_and_gradient, theta0, max_iter=3000)
            theta = result.x - result.x.max()
            p = np.exp(theta) / np.exp(theta).sum()
            # Blocks with a negligible share are not worth a measurement of their own.
            p = np.where(p < 1e-4 * p.max(), 0.0, p)
            p /= p.sum()
            f = total(p)
            if f < best_f:
                best_p, best_f = p, f
    return best_p / cost
