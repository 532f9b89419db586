"""Step 6: from a real-valued estimate to the released counts, and whether the margins agree.

`nearest` rounds each cell to the nearest integer (halves up) and never below 0 (the paper's step
6); `none` releases the estimate as it is (nonneg's lifted margins are not counts). Released
margins come from the rounded table when there is one, so they are consistent by construction;
margins estimated on their own are checked on every shared sub-margin.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import TabreleaseError
from .models import Margin
from .tables import margin_counts

NEAREST = "nearest"
CONTROLLED = "controlled"
NO_ROUNDING = "none"
ROUNDINGS = (NEAREST, CONTROLLED, NO_ROUNDING)
# A controlled rounding that has not proved optimality by then keeps its best integer table, and says so.
CONTROLLED_TIME_LIMIT_SECONDS = 10.0


def round_table(table: np.ndarray) -> np.ndarray:
    """The nearest integer to each cell (halves up), never below 0."""
    return np.maximum(np.floor(np.asarray(table, float) + 0.5), 0).astype(np.int64)


def mutually_consistent(released: Sequence[np.ndarray], margins: Sequence[Margin], atol: float = 0.0) -> bool:
    """Do the margins agree on every shared sub-margin (exactly, or within atol for real-valued margins)?"""
    for i, (a, ma) in enumerate(zip(margins, released)):
        for b, mb in zip(margins[i + 1 :], released[i + 1 :]):
            shared = tuple(sorted(set(a) & set(b)))
            sa = margin_counts(ma, [a.index(j) for j in shared]) if shared else ma.sum()
            sb = margin_counts(mb, [b.index(j) for j in shared]) if shared else mb.sum()
            if not np.allclose(sa, sb, rtol=0.0, atol=atol):
                return False
    return True


@dataclass(frozen=True, eq=False)
class Rounded:
    table: np.ndarray | None  # the released table w' (None when only margins were estimated)
    margins: tuple[np.ndarray, ...]
    consistent: bool
    seconds: float
    gap: float | None = None  # controlled rounding: the MILP's relative gap (0 when proved optimal)


def controlled_round(table: np.ndarray, margins: Sequence[Margin], total: int,
                     time_limit: float = CONTROLLED_TIME_LIMIT_SECONDS) -> tuple[np.ndarray, float]:
    """A non-negative integer table with the given total whose margins are as close as possible (L1, summed
    over the margins) to those of a real-valued table: HiGHS MILP. Returns (table, relative gap).

    The margins of one integer table are integer and mutually consistent by construction. With an exact
    (noise-free) estimate the true table is feasible at cost 0, so the released margins are exact.
    """
    import highspy
    import scipy.sparse as sp

    from ._highs import highs_model
    from .loglinear.design import margin_design

    table = np.asarray(table, float)
    cells = table.size
    design = margin_design(table.shape, margins)  # stacked margins x cells
    targets = design @ table.ravel()
    rows = design.shape[0]
    # columns: w (integer, cells), over (rows), under (rows);  design w - over + under = targets
    matrix = sp.vstack([
        sp.hstack([design, -sp.identity(rows), sp.identity(rows)]),
        sp.hstack([sp.csr_matrix(np.ones((1, cells))), sp.csr_matrix((1, 2 * rows))]),
    ]).tocsc()
    cost = np.concatenate([np.zeros(cells), np.ones(2 * rows)])
    bounds = np.concatenate([targets, [float(total)]])
    h, _ = highs_model(matrix, cost, np.zeros(cells + 2 * rows), np.full(cells + 2 * rows, np.inf), bounds, bounds)
    h.changeColsIntegrality(cells, np.arange(cells, dtype=np.int32),
                            np.full(cells, highspy.HighsVarType.kInteger))
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    solution = np.asarray(h.getSolution().col_value)
    if h.getInfo().primal_solution_status != 2:  # 2: feasible
        raise TabreleaseError(f"controlled rounding found no integer table: HiGHS says "
                              f"{h.modelStatusToString(h.getModelStatus())}")
    # Proved optimal (HiGHS's tolerances) is a gap of 0; a time-limited stop keeps its best table and its gap.
    optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    gap = 0.0 if optimal else float(h.getInfo().mip_gap)
    return np.rint(solution[:cells]).astype(np.int64).reshape(table.shape), gap


def round_estimate(estimate, margins: Sequence[Margin], rounding: str, scale: float) -> Rounded:
    """Round an estimate as the plan says and take the released margins from it."""
    start = time.perf_counter()
    if estimate.table is not None:
        gap = None
        if rounding == CONTROLLED:
            total = int(np.floor(float(np.sum(estimate.table)) + 0.5))
            table, gap = controlled_round(estimate.table, margins, total)
        elif rounding == NEAREST:
            table = round_table(estimate.table)
        else:
            table = np.asarray(estimate.table)
        released = tuple(margin_counts(table, g) for g in margins)
        return Rounded(table, released, True, time.perf_counter() - start, gap)
    pieces = estimate.margins
    released = tuple(round_table(m) for m in pieces) if rounding == NEAREST else tuple(pieces)
    # Real-valued margins agree up to floating-point error at best.
    atol = 0.0 if rounding == NEAREST else 1e-9 * max(1.0, scale)
    return Rounded(None, released, mutually_consistent(released, margins, atol), time.perf_counter() - start)
