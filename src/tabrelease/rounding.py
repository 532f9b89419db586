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
from functools import lru_cache

import numpy as np

from . import _sparse as sp
from .errors import TabreleaseError
from .models import Margin
# The roundings' names are values (a mechanism names its default rounding without importing this module).
from .postprocessing import CONTROLLED, NEAREST, NO_ROUNDING, ROUNDINGS  # noqa: F401
from .tables import margin_counts

# Work limits of the rounding MILPs, in branch-and-bound nodes (never seconds: a wall-clock limit made the
# published margins depend on the machine's load). A rounding that has not proved optimality by then keeps its
# best integer table, and says so (its gap).
CONTROLLED_MAX_NODES = 500
INTEGRAL_TOLERANCE = 1e-6
SHORTLIST = 24  # cells per side the local search tries first
FULL_SEARCH_PAIRS = 250_000  # beyond this many pairs the search keeps to its shortlists (memory: pairs x margins)
CONTROLLED_EXACT_MAX_NODES = 20_000  # integer margins (no noise): every integer table is searched
# Above this many margin-cell x cell incidences the MILP is not run (its root alone takes seconds and improves
# little): the local search's table is kept, with its gap to the LP relaxation's bound. All 2-way margins of 2^8
# cells (7,168) are below it, every built-in table's model far below.
MILP_MAX_DESIGN_NONZEROS = 2**13


def round_table(table: np.ndarray) -> np.ndarray:
    """The nearest integer to each cell (halves up), never below 0.

    Parameters
    ----------
    table : numpy.ndarray
        A real-valued table (or margin).

    Returns
    -------
    numpy.ndarray
        The rounded counts (int64), of the same shape.
    """
    return np.maximum(np.floor(np.asarray(table, float) + 0.5), 0).astype(np.int64)


def round_table_signed(change: np.ndarray) -> np.ndarray:
    """The nearest integer to each value (halves up), negative values allowed (changes from an integer table).

    Parameters
    ----------
    change : numpy.ndarray
        Real values.

    Returns
    -------
    numpy.ndarray
        The rounded values (int64), of the same shape.
    """
    return np.floor(np.asarray(change, float) + 0.5).astype(np.int64)


def round_to_total(table: np.ndarray, total: int, base: np.ndarray | None = None) -> np.ndarray:
    """The integer table nearest to a non-negative real-valued one (in L1, and in L2) whose cells sum to `total`:
    each cell rounded down, then the cells with the largest fractions rounded up until the sum is `total` (largest
    remainders; ties to the earlier cell). Where the rounded-down cells already pass `total` (a fit's sum a little
    above it), the cells with the smallest fractions among those of at least 1 are lowered instead. What "nearest"
    rounding does where the release's total is exact (public, or n under replace neighbours): each cell to its
    nearest integer alone would publish margins that miss it.

    Parameters
    ----------
    table : numpy.ndarray
        Non-negative real values (cells below 0 count as 0); with `base`, the change from it.
    total : int
        The sum the result must have (at least 0).
    base : numpy.ndarray, optional
        An integer table of the same shape that `table` is a change from (counts a float cannot hold exactly).

    Returns
    -------
    numpy.ndarray
        int64, the shape of `table`, non-negative, summing to `total`.

    Raises
    ------
    TabreleaseError
        If `total` is negative, or positive for a table of no cells.
    """
    values = np.asarray(table, float)
    if total < 0 or (total > 0 and values.size == 0):
        raise TabreleaseError(f"a table of {values.size} cells cannot sum to a total of {total}")
    down = np.floor(values).astype(np.int64)
    fraction = values - down
    if base is not None:
        down = down + np.asarray(base, np.int64).reshape(values.shape)
    negative = down < 0
    down[negative], fraction[negative] = 0, 0.0
    flat, parts = down.ravel(), fraction.ravel()
    short = int(total) - int(flat.sum(dtype=object))
    if short > 0:
        order = np.argsort(-parts, kind="stable")
        # More to add than cells (a fit far below its total): every cell once per round, the largest fractions first.
        rounds, rest = divmod(short, flat.size)
        flat += rounds
        flat[order[:rest]] += 1
    while short < 0:  # one count from each cell of at least 1, the smallest fractions first, as long as needed
        lowered = np.flatnonzero(flat >= 1)
        taken = lowered[np.argsort(parts[lowered], kind="stable")][:-short]
        flat[taken] -= 1
        short += taken.size
    return flat.reshape(values.shape)


def _pins_hold(table: np.ndarray, pinned) -> bool:
    return all(np.array_equal(margin_counts(table, list(axes)) if axes else np.sum(table), np.asarray(m).reshape(
        np.shape(margin_counts(table, list(axes)) if axes else np.sum(table)))) for axes, m in pinned)


def mutually_consistent(released: Sequence[np.ndarray], margins: Sequence[Margin], atol: float = 0.0) -> bool:
    """Do the margins agree on every shared sub-margin (exactly, or within atol for real-valued margins)?

    Two margins agree on their shared axes exactly when, for every set S of axes, all the margins holding S have
    the same sub-margin over S (marginalising equal sub-margins keeps them equal, and a pair's shared axes are
    such a set). So each margin's sub-margins are compared with the first seen over the same axes, never margin
    against margin: 4,950 two-way margins of 100 variables take milliseconds, where the pairs were 12 million.
    A margin of more than `SUBSET_SCAN_MAX_SIZE` variables checks the sets it shares with each other margin instead
    of all its subsets. With a tolerance, a sub-margin that sums c cells of a margin is compared within c * atol (the
    rounding error of a sum grows with its terms); atol = 0 is exact equality.

    Parameters
    ----------
    released : sequence of numpy.ndarray
        The margins' values, each of its margin's shape.
    margins : sequence of tuple of int
        The axes of each margin (sorted), in the same order.
    atol : float, default 0.0
        The absolute tolerance of a comparison of single cells.

    Returns
    -------
    bool
        True when every pair of margins has the same sub-margin over their shared axes (the same total when they
        share none).
    """
    from itertools import combinations

    from .models import SUBSET_SCAN_MAX_SIZE

    margins = [tuple(a) for a in margins]
    low: dict = {}  # axes S -> elementwise least and greatest sub-margin over S seen so far, and the most terms summed
    high: dict = {}
    terms: dict = {}
    for i, (a, values) in enumerate(zip(margins, released)):
        values = np.asarray(values, float)
        if len(a) <= SUBSET_SCAN_MAX_SIZE:
            shared = (s for size in range(len(a) + 1) for s in combinations(a, size))
        else:
            shared = {tuple(sorted(set(a) & set(b))) for j, b in enumerate(margins) if j != i}
        for s in shared:
            sub = np.asarray(margin_counts(values, [a.index(j) for j in s]) if s else values.sum(), float)
            summed = max(values.size // max(sub.size, 1), 1)
            if s not in low:
                low[s], high[s], terms[s] = sub, sub, summed
                continue
            if sub.shape != low[s].shape:
                return False
            low[s], high[s] = np.minimum(low[s], sub), np.maximum(high[s], sub)
            terms[s] = max(terms[s], summed)
            if np.any(high[s] - low[s] > atol * terms[s]):
                return False
    return True


@dataclass(frozen=True, eq=False)
class Rounded:
    table: np.ndarray | None  # the released table w' (None when only margins were estimated)
    margins: tuple[np.ndarray, ...]
    consistent: bool
    seconds: float
    gap: float | None = None  # controlled rounding: the MILP's relative gap (0 when proved optimal)
    # "global": the margins of one non-negative table; "local": they agree on every shared sub-margin; "none".
    consistency: str = "global"
    note: str | None = None  # how the rounding departed from its usual way, for the release's notes


def controlled_round(table: np.ndarray, margins: Sequence[Margin], total: int, *, base: np.ndarray | None = None,
                     pinned: Sequence[tuple[Margin, np.ndarray]] = (),
                     max_nodes: int | None = None) -> tuple[np.ndarray, float]:
    """Controlled rounding (Cox's sense): each cell to an integer next to its estimate, the total given, and
    the margins as close as possible (L1, summed over the margins) to those of the real-valued table.

    A deterministic local search (best exchange of one unit between two cells, until none helps) gives a
    table in milliseconds; a HiGHS MILP started from it then proves it closest or improves it within
    `max_nodes` branch-and-bound nodes (a count of work, not of seconds: the result is the same on any machine
    and under any load). Returns (table, relative gap): 0 when proved closest, else the MILP's gap at the
    limit (the table is then the best found, never worse than the local search's).

    The estimate is `base + table` when an integer `base` is given (an estimator's exact integer part: at
    counts above 2^52 a float cannot hold the fraction), else `table`; everything is computed on the change
    from an integer table, so counts of any size are rounded as exactly as small ones. `pinned` margins (axes,
    integer cells: what was measured exactly) are held exactly. The margins of one integer table are integer and
    mutually consistent by construction. With an exact (noise-free) estimate every cell is fixed at its value:
    the released margins are exact.

    Parameters
    ----------
    table : numpy.ndarray
        The real-valued estimate (or, with `base`, its change from `base`), of the table's shape.
    margins : sequence of tuple of int
        The released margins' axes, whose L1 distance is minimised.
    total : int
        The total the rounded table must have.
    base : numpy.ndarray, optional
        An integer table (flat or of the table's shape) the estimate is a change from.
    pinned : sequence of (tuple of int, numpy.ndarray), default ()
        Margins held exactly: axes and integer cells.
    max_nodes : int, optional
        The MILP's branch-and-bound node limit (`CONTROLLED_EXACT_MAX_NODES` when the margins are integral,
        `CONTROLLED_MAX_NODES` otherwise).

    Returns
    -------
    table : numpy.ndarray
        The rounded table (int64, non-negative), of the estimate's shape.
    gap : float
        The MILP's relative gap: 0 when the table is proved closest.

    Raises
    ------
    TabreleaseError
        If HiGHS cannot solve the relaxation or finds no integer table.
    """
    import highspy

    from ._highs import highs_model

    table = np.asarray(table, float)
    shape = table.shape
    cells = table.size
    flat = table.ravel()
    if base is None:
        base = np.rint(flat)
        flat = flat - base
        base = base.astype(np.int64)
    else:
        base = np.asarray(base, np.int64).ravel()
    # From here on every count is a change from `base` (of the size of the noise): `base` is added back at the end.
    design, milp_rows = _rounding_operators(tuple(shape), tuple(tuple(m) for m in margins))
    targets = design @ flat
    near = np.rint(flat)
    # The estimate is a solver's: within 1e-6 of an integer counts as that integer (an exact fit is exact).
    integral = np.abs(flat - near) <= INTEGRAL_TOLERANCE
    lower = np.where(integral, near, np.floor(flat))
    upper = np.where(integral, near, np.ceil(flat))
    floor = -base.astype(float)  # w = base + change >= 0
    lower, upper = np.maximum(lower, floor), np.maximum(upper, floor)
    change_total = int(total) - int(base.sum())
    pin_rows, pin_values = _pins(shape, pinned, base)
    start = local_search_round(design, flat, lower, upper, change_total, len(margins))
    # A solver's fit reproduces margins to about 1e-5: a table within 1e-3 per margin cell of them is exact.
    exact_enough = 1e-3 * design.shape[0]
    pins_hold = pin_rows is None or np.array_equal(pin_rows @ start, pin_values)
    if pins_hold and np.abs(design @ start - targets).sum() <= exact_enough:
        return (base + start.astype(np.int64)).reshape(shape), 0.0  # cost 0: nothing can be closer
    integer_margins = np.abs(targets - np.rint(targets)).max() <= 1e-3
    if integer_margins or not _box_has_pins(pin_rows, pin_values, lower, upper, change_total):
        # Integer margins (an exact fit: no noise, or a public table) may belong to an integer table outside the
        # box of adjacent integers (a non-unique fit is any point of the fibre), and pinned margins may have no
        # table in that box: search every integer table.
        lower, upper = floor, np.full(cells, np.inf)
    if integer_margins:
        exact = _exact_table(design, np.rint(targets), change_total, pin_rows, pin_values, floor, max_nodes)
        if exact is not None:
            return (base + exact).reshape(shape), 0.0  # cost 0: nothing can be closer
    if max_nodes is None:
        max_nodes = CONTROLLED_EXACT_MAX_NODES if integer_margins else CONTROLLED_MAX_NODES
    rows = design.shape[0]
    # Each margin cell's distance |design w - target| is written as the convex hull of its values at the integers
    # (design w is an integer): with target = floor + frac, y = design w - floor costs frac - y below 0,
    # frac + (1 - 2 frac) y on [0, 1] and y - frac above 1. Columns c in [0, 1] (the unit from floor to ceil),
    # a >= 0 (above the ceiling) and b >= 0 (below the floor): design w - c - a + b = floor, cost
    # (1 - 2 frac) c + a + b, plus the constant sum of frac. The integer optimum is the same as with |.|, but the
    # relaxation's bound is no longer 0 (the estimate itself is in the box): the search proves a rounding
    # closest in a fraction of the nodes.
    floors = np.floor(targets)
    frac = targets - floors
    bounds = [floors, [float(change_total)]]
    matrix = milp_rows
    if pin_rows is not None:
        matrix = sp.stack(0, [milp_rows, sp.stack(1, [pin_rows, sp.zeros((pin_rows.shape[0], 3 * rows))])]).tocsc()
        bounds.append(pin_values)
    cost = np.concatenate([np.zeros(cells), 1.0 - 2.0 * frac, np.ones(2 * rows)])
    constant = float(frac.sum())
    # The MILP solves for the change from the local search's table, not for w: with counts of 1e11 and more,
    # integer variables of that size sit beyond HiGHS's integrality tolerance (a 4 x 3 x 2 table of 1e12 per
    # cell ran for hours). Every quantity it sees is then of the size of the noise.
    offset = start.astype(float)
    shift = np.concatenate([design @ offset, [offset.sum()]] + ([pin_rows @ offset] if pin_rows is not None else []))
    rhs = np.concatenate([np.asarray(v, float) for v in bounds]) - shift
    h, _ = highs_model(matrix, cost,
                       np.concatenate([lower - offset, np.zeros(3 * rows)]),
                       np.concatenate([upper - offset, np.ones(rows), np.full(2 * rows, np.inf)]), rhs, rhs)
    if pins_hold and not integer_margins and design.nnz > MILP_MAX_DESIGN_NONZEROS:
        # Too large for the MILP to add much (on all 2-way margins of 2^10 cells its root alone took 3 s and
        # closed no gap): the local search's table, its gap measured against the LP relaxation's bound.
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise TabreleaseError(f"controlled rounding's relaxation did not solve: HiGHS says "
                                  f"{h.modelStatusToString(h.getModelStatus())}")
        distance = float(np.abs(design @ start - targets).sum())
        bound = max(float(h.getInfo().objective_function_value) + constant, 0.0)
        gap = 0.0 if distance - bound <= exact_enough else (distance - bound) / distance
        return (base + start.astype(np.int64)).reshape(shape), gap
    h.changeColsIntegrality(cells, np.arange(cells, dtype=np.int32),
                            np.full(cells, highspy.HighsVarType.kInteger))
    _milp_limits(h, max_nodes)
    if pins_hold:
        y = np.rint(design @ offset - floors)  # the warm start is a change of 0; y is an integer
        warm = highspy.HighsSolution()
        warm.col_value = list(np.concatenate([np.zeros(cells), np.clip(y, 0, 1), np.maximum(y - 1, 0),
                                              np.maximum(-y, 0)]))
        h.setSolution(warm)
    h.run()
    solution = np.asarray(h.getSolution().col_value)
    if h.getInfo().primal_solution_status != 2:  # 2: feasible
        raise TabreleaseError(f"controlled rounding found no integer table: HiGHS says "
                              f"{h.modelStatusToString(h.getModelStatus())}")
    found = offset + np.rint(solution[:cells])
    if pins_hold and np.abs(design @ found - targets).sum() > np.abs(design @ start - targets).sum():
        found = start
    # The gap of the table kept against the MILP's lower bound: 0 when it is proved closest (a stop at the node
    # limit keeps its best table and says how far from proved it is).
    distance = float(np.abs(design @ found - targets).sum())
    if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
        bound = distance
    else:
        bound = max(float(h.getInfo().mip_dual_bound) + constant, 0.0)
    gap = 0.0 if distance - bound <= exact_enough else (distance - bound) / distance
    return (base + found.astype(np.int64)).reshape(shape), gap


@lru_cache(maxsize=32)
def _rounding_operators(shape: tuple[int, ...], margins: tuple[Margin, ...]):
    """The stacked margin design (CSC, margin cells x cells) and the L1 rounding MILP's rows over the columns
    (w: cells; c, a, b: margin cells each): design w - c - a + b = floor(targets), then sum w = total.
    They depend on the shape and margins alone, so a sweep's releases build them once (scipy's sparse stacking
    was a fifth of a small table's release). Callers never modify them."""
    from .loglinear.design import margin_design

    design = margin_design(shape, margins).tocsc()
    rows, cells = design.shape
    matrix = sp.stack(0, [sp.stack(1, [design, -sp.identity(rows), -sp.identity(rows), sp.identity(rows)]),
                        sp.stack(1, [sp.from_dense(np.ones((1, cells))), sp.zeros((1, 3 * rows))])]).tocsc()
    return design, matrix


def _exact_table(design, targets, total, pin_rows, pin_values, floor, max_nodes):
    """An integer table (a change >= floor) with exactly these integer margins, total and pins, found as a
    feasibility MILP (no objective: any such table is closest), or None. Much faster than the L1 MILP when the
    margins are those of an integer table (a noise-free fit whose cells are not integers: Rochdale's model, 0.1 s
    against 6 s)."""
    import highspy

    from ._highs import highs_model

    cells = design.shape[1]
    blocks, bounds = [design, sp.from_dense(np.ones((1, cells)))], [targets, [float(total)]]
    if pin_rows is not None:
        blocks.append(pin_rows)
        bounds.append(pin_values)
    matrix = sp.stack(0, blocks).tocsc()
    rhs = np.concatenate([np.asarray(b, float) for b in bounds])
    h, _ = highs_model(matrix, np.zeros(cells), floor, np.full(cells, np.inf), rhs, rhs)
    h.changeColsIntegrality(cells, np.arange(cells, dtype=np.int32), np.full(cells, highspy.HighsVarType.kInteger))
    _milp_limits(h, CONTROLLED_EXACT_MAX_NODES if max_nodes is None else max_nodes)
    h.run()
    if h.getInfo().primal_solution_status != 2:
        return None
    found = np.rint(np.asarray(h.getSolution().col_value)).astype(np.int64)
    if not (np.array_equal(design @ found, targets) and found.sum() == total and np.all(found >= floor)):
        return None
    return found


def _milp_limits(h, max_nodes: int) -> None:
    """A rounding MILP's options: optimality proved to a zero gap, within `max_nodes` branch-and-bound nodes. The
    sub-MIP heuristics (RINS, RENS) are off: on all 2-way margins of 2^8 cells they spent 2 of the root's 2.7 s
    for no better table than the nodes find."""
    for option, value in MILP_OPTIONS.items():
        h.setOptionValue(option, value)
    h.setOptionValue("mip_max_nodes", int(max_nodes))


MILP_OPTIONS = {"mip_rel_gap": 0.0, "mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False}


def _pins(shape, pinned, base):
    """(rows, values) of the pinned margins as constraints on the change from `base` (None: nothing pinned)."""
    from .loglinear.design import margin_design

    if not pinned:
        return None, None
    rows, values = [], []
    for axes, margin in pinned:
        design = margin_design(shape, [tuple(axes)]) if axes else sp.from_dense(np.ones((1, int(np.prod(shape)))))
        rows.append(design)
        values.append(np.asarray(margin, np.int64).ravel() - np.asarray(design @ base, np.int64))
    return sp.stack(0, rows).tocsr(), np.concatenate(values).astype(float)


def _box_has_pins(pin_rows, pin_values, lower, upper, total) -> bool:
    """Is there a real table in the box of adjacent integers with the pinned margins and the total (an LP)?
    Where there is, the MILP keeps to the box; where there is none, it searches every integer table."""
    if pin_rows is None:
        return True

    from ._highs import highs_model

    matrix = sp.stack(0, [pin_rows, sp.from_dense(np.ones((1, pin_rows.shape[1])))]).tocsc()
    rhs = np.concatenate([pin_values, [float(total)]])
    h, _ = highs_model(matrix, np.zeros(pin_rows.shape[1]), lower, upper, rhs, rhs)
    h.run()
    return h.getInfo().primal_solution_status == 2


def local_search_round(design, flat, lower, upper, total: int, n_margins: int) -> np.ndarray:
    """Cells rounded between `lower` and `upper` (adjacent integers) with the given total: up in order of the
    fractional part, then the exchange of one unit between two cells that most reduces the margins' L1
    distance to `design @ flat`, repeated while one helps. Deterministic; O(cells^2) per exchange.

    Parameters
    ----------
    design : tabrelease._sparse.SparseMatrix
        The stacked margin design (margin cells x cells; see `loglinear.margin_design`).
    flat : numpy.ndarray
        The real-valued estimate, flat over the cells.
    lower, upper : numpy.ndarray
        Each cell's integer bounds (equal, or adjacent integers).
    total : int
        The total of the result (reached as far as the bounds allow).
    n_margins : int
        The number of margins stacked in `design`.

    Returns
    -------
    numpy.ndarray
        The rounded cells (flat), each between its bounds.
    """
    targets = design @ flat
    w = lower.copy()
    free = np.flatnonzero(upper > lower)
    order = free[np.argsort(-(flat[free] - lower[free]), kind="stable")]
    w[order[: max(total - int(lower.sum()), 0)]] += 1
    # Each cell lies in exactly one cell of each margin: its rows, margin by margin (CSC indices are sorted).
    rows = design.indices.reshape(-1, n_margins)
    residual = design @ w - targets
    for _ in range(10 * flat.size):
        r = residual[rows]
        gain_up = np.abs(r + 1) - np.abs(r)
        gain_down = np.abs(r - 1) - np.abs(r)
        up = np.flatnonzero(w < upper)
        down = np.flatnonzero(w > lower)
        if not up.size or not down.size:
            break
        # The most promising cells first (a shortlist by their own gains); every pair when that finds nothing.
        pair = _best_exchange(up[np.argsort(gain_up[up].sum(1), kind="stable")[:SHORTLIST]],
                              down[np.argsort(gain_down[down].sum(1), kind="stable")[:SHORTLIST]],
                              rows, gain_up, gain_down)
        if pair is None and (up.size > SHORTLIST or down.size > SHORTLIST) and up.size * down.size <= FULL_SEARCH_PAIRS:
            pair = _best_exchange(up, down, rows, gain_up, gain_down)
        if pair is None:
            break
        a, b = pair
        w[a] += 1
        w[b] -= 1
        residual[rows[a]] += 1
        residual[rows[b]] -= 1
    return w


def _best_exchange(up, down, rows, gain_up, gain_down):
    """The pair (cell up by 1, cell down by 1) that most reduces the L1 distance, or None if none does."""
    change = gain_up[up].sum(1)[:, None] + gain_down[down].sum(1)[None, :]
    # Where both cells share a margin cell, the +1 and -1 cancel there.
    shared = rows[up][:, None, :] == rows[down][None, :, :]
    change -= np.where(shared, gain_up[up][:, None, :] + gain_down[down][None, :, :], 0.0).sum(2)
    best = np.unravel_index(np.argmin(change), change.shape)
    if change[best] >= -1e-9:
        return None
    return up[best[0]], down[best[1]]


def controlled_round_margins(estimates: Sequence[np.ndarray], generators: Sequence[Margin], total: int,
                             max_nodes: int = CONTROLLED_MAX_NODES,
                             first: Sequence[Margin] = ()) -> tuple[tuple[np.ndarray, ...], float]:
    """Controlled rounding of locally consistent margins, without cells. The margins must agree where they
    overlap: on the intersections of the generators (and their subsets follow). So the intersections are
    rounded first, smallest first (the total before all), each given the rounded intersections inside it, and
    then each generator given those inside it: every cell to an integer next to its estimate (wider only if no
    such table exists), as close as possible in L1. With disjoint or nested fixed sub-margins (all 2-way
    margins, say) this is a transportation problem, totally unimodular: the LP's vertex is integral; otherwise
    a MILP within its node limit. Sets in `first` (inside generators) are rounded with the intersections.
    Returns (rounded generator margins, largest MILP gap).

    Parameters
    ----------
    estimates : sequence of numpy.ndarray
        The real-valued margins, one per generator, each of its generator's shape.
    generators : sequence of tuple of int
        The margins' axes (sorted).
    total : int
        The total every rounded margin has.
    max_nodes : int, default CONTROLLED_MAX_NODES
        The node limit of each MILP.
    first : sequence of tuple of int, default ()
        Further sets, each inside a generator, rounded before the generators.

    Returns
    -------
    margins : tuple of numpy.ndarray
        The rounded generator margins (int64), agreeing on every shared sub-margin.
    gap : float
        The largest relative gap of the MILPs (0 when each was proved closest).

    Raises
    ------
    TabreleaseError
        If no integer margin agrees with the rounded sub-margins inside it.
    """
    generators = [tuple(g) for g in generators]
    shared = {()} | {tuple(sorted(f)) for f in first}
    for i, a in enumerate(generators):
        for b in generators[i + 1:]:
            shared.add(tuple(sorted(set(a) & set(b))))
    def target(s):
        g, m = next((g, m) for g, m in zip(generators, estimates) if set(s) <= set(g))
        return np.asarray(margin_counts(np.asarray(m, float), [g.index(j) for j in s]) if s else np.sum(m), float)

    rounded = {(): np.asarray(int(total), dtype=np.int64)}
    gap = 0.0
    for s in sorted(shared - {()} - set(generators), key=len):
        inside = {t: rounded[t] for t in rounded if set(t) < set(s)}
        rounded[s], step_gap = _round_given(target(s), s, inside, max_nodes)
        gap = max(gap, step_gap)
    out = []
    for g in generators:
        inside = {t: rounded[t] for t in rounded if set(t) < set(g)}
        margin, step_gap = _round_given(target(g), g, inside, max_nodes)
        out.append(margin)
        gap = max(gap, step_gap)
    return tuple(out), gap


def _round_given(target: np.ndarray, s: Margin, fixed: dict, max_nodes: int) -> tuple[np.ndarray, float]:
    """The integer margin over s, cells adjacent to `target`, whose margins over the sets in `fixed` are given."""
    import highspy

    from ._highs import highs_model
    from .loglinear.design import margin_design

    flat = target.ravel()
    shape = target.shape
    near = np.rint(flat)
    integral = np.abs(flat - near) <= INTEGRAL_TOLERANCE
    lower = np.where(integral, near, np.floor(flat))
    upper = np.where(integral, near, np.ceil(flat))
    rows, bounds = [], []
    for t, values in fixed.items():
        if t:
            rows.append(margin_design(shape, [[s.index(j) for j in t]]))
        else:
            rows.append(sp.from_dense(np.ones((1, flat.size))))
        bounds.append(np.ravel(values).astype(float))
    matrix = sp.stack(0, rows).tocsc()
    rhs = np.concatenate(bounds)
    # |x - t| over {floor, ceil} is linear: frac + (x - floor)(1 - 2 frac).
    cost = 1.0 - 2.0 * (flat - lower)
    for attempt in ("lp", "milp", "wide"):
        if attempt == "wide":
            # No table of adjacent integers has these sub-margins: any non-negative integers, L1 to the target.
            n = flat.size
            matrix = sp.stack(0, [sp.stack(1, [matrix, sp.zeros((matrix.shape[0], 2 * n))]),
                                sp.stack(1, [sp.identity(n), -sp.identity(n), sp.identity(n)])]).tocsc()
            cost = np.concatenate([np.zeros(n), np.ones(2 * n)])
            lower, upper = np.zeros(3 * n), np.full(3 * n, np.inf)
            rhs = np.concatenate([rhs, flat])
        h, _ = highs_model(matrix, cost, lower, upper, rhs, rhs)
        if attempt != "lp":
            h.changeColsIntegrality(flat.size, np.arange(flat.size, dtype=np.int32),
                                    np.full(flat.size, highspy.HighsVarType.kInteger))
            _milp_limits(h, max_nodes)
        h.run()
        if h.getInfo().primal_solution_status != 2:
            continue
        x = np.asarray(h.getSolution().col_value)[: flat.size]
        if np.all(np.abs(x - np.rint(x)) <= 1e-6):
            optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
            gap = 0.0 if optimal or attempt == "lp" else float(h.getInfo().mip_gap)
            return np.rint(x).astype(np.int64).reshape(shape), gap
    raise TabreleaseError(f"controlled rounding found no integer margin over axes {list(s)} that agrees with its "
                          "rounded sub-margins")


# The most cells of the table `round_margins_through_a_table` fits and rounds (a few seconds at most; past it the
# margins are left to the caller's refusal, with --rounding nearest to fall back on).
JOINT_ROUNDING_MAX_CELLS = 2**21
JOINT_ROUNDING_IPF_CYCLES = 200


def round_margins_through_a_table(estimates: Sequence[np.ndarray], generators: Sequence[Margin],
                                  total: int) -> tuple[tuple[np.ndarray, ...], float]:
    """Integer margins that agree, from real-valued margins: the margins of the controlled rounding of the table
    IPF fits to them (their negative cells taken as 0). The table's axes are those the margins cover.

    Parameters
    ----------
    estimates : sequence of numpy.ndarray
        The real-valued margins, one per generator, each of its generator's shape.
    generators : sequence of tuple of int
        The margins' axes (sorted).
    total : int
        The total every rounded margin has.

    Returns
    -------
    margins : tuple of numpy.ndarray
        The rounded margins (int64): those of one non-negative integer table.
    gap : float
        The controlled rounding's relative gap.

    Raises
    ------
    TabreleaseError
        If the table would have more than `JOINT_ROUNDING_MAX_CELLS` cells.
    """
    from .loglinear.ipf import ipf_to_margins

    generators = [tuple(g) for g in generators]
    axes = sorted({a for g in generators for a in g})
    sizes = {}
    for g, m in zip(generators, estimates):
        sizes.update(zip(g, np.shape(m)))
    shape = tuple(sizes[a] for a in axes)
    cells = int(np.prod(shape, dtype=object))
    if cells > JOINT_ROUNDING_MAX_CELLS:
        raise TabreleaseError(f"controlled rounding found no integer margins that agree, and a table of their "
                              f"{cells:,} cells is more than the {JOINT_ROUNDING_MAX_CELLS:,} it rounds jointly: "
                              "give --rounding nearest")
    position = {a: i for i, a in enumerate(axes)}
    local = [tuple(position[a] for a in g) for g in generators]
    # Each margin non-negative and of the total (its cells below 0 set to 0 leave it above): IPF fits margins of
    # one total; one with nothing left is spread evenly.
    targets = []
    for m in estimates:
        t = np.maximum(np.asarray(m, float), 0.0)
        mass = float(t.sum())
        targets.append(t * (total / mass) if mass > 0 else np.full(t.shape, total / max(t.size, 1)))
    # A start for the rounding, not a fit to publish: margins no table has (a least-squares fit's, some of their
    # cells below 0) keep IPF from converging, and it moves little after a few hundred cycles (on Cars93's the
    # largest departure from a target went from 20.4 after 50 cycles to 20.1 after 1,000). A count of cycles, so
    # the result is the same on any machine.
    fitted, _, _ = ipf_to_margins(targets, local, shape, tol=1e-6, max_iter=JOINT_ROUNDING_IPF_CYCLES)
    table, gap = controlled_round(fitted, local, int(total))
    return tuple(margin_counts(table, g).astype(np.int64) for g in local), gap


def round_estimate(estimate, margins: Sequence[Margin], rounding: str, scale: float) -> Rounded:
    """Round an estimate as the plan says and take the released margins from it.

    Parameters
    ----------
    estimate : Estimate
        The estimator's output: a table, margins, or a junction tree's clique margins (with its exact integer part,
        total and pinned margins where it has them).
    margins : sequence of tuple of int
        The released margins' axes.
    rounding : str
        ``"nearest"``, ``"controlled"`` or ``"none"``.
    scale : float
        The noise scale, which sets the tolerance of the consistency check of real-valued margins.

    Returns
    -------
    Rounded
        The released table (when there is one) and margins, whether they are consistent and how ("global",
        "local" or "none"), the seconds taken and the controlled rounding's gap.

    Raises
    ------
    TabreleaseError
        If controlled rounding cannot solve.
    """
    start = time.perf_counter()
    pinned = tuple(getattr(estimate, "pinned", ()) or ())
    given_total = getattr(estimate, "total", None)
    # The total "nearest" rounding keeps too: only an exactly measured one (controlled rounding keeps any given).
    exact_total = given_total if getattr(estimate, "total_exact", False) else None
    if estimate.table is not None:
        gap = None
        base, change = getattr(estimate, "base", None), getattr(estimate, "change", None)
        if base is not None:  # the estimate exactly: an integer table plus a change of the size of the noise
            body = np.asarray(change, float).reshape(estimate.table.shape)
        if rounding == CONTROLLED:
            total = given_total
            if total is None:
                total = int(np.floor(float(np.sum(estimate.table)) + 0.5))
            if base is None:
                table, gap = controlled_round(estimate.table, margins, total, pinned=pinned)
            else:
                table, gap = controlled_round(body, margins, total, base=base, pinned=pinned)
        elif rounding == NEAREST:
            # Cell by cell, the nearest integers may miss an exact total (public, or n under replace): then the
            # nearest with it (exact pinned margins, which hold the total, are kept below instead).
            keep = None if pinned else exact_total
            if base is None:
                table = round_nearest(estimate.table, keep)
            else:
                table = np.maximum(np.asarray(base, np.int64).reshape(body.shape) + round_table_signed(body), 0)
                if keep is not None and int(table.sum(dtype=object)) != keep:
                    table = round_to_total(body, keep, base=base)
            if pinned and not _pins_hold(table, pinned):
                # Cell by cell, the nearest integers may move an exactly measured margin: the nearest integer table
                # (L1 over cells) that keeps every one of them.
                table, gap = _round_given(np.asarray(estimate.table, float), tuple(range(table.ndim)),
                                          {tuple(axes): m for axes, m in pinned}, CONTROLLED_MAX_NODES)
        else:
            table = np.asarray(estimate.table)
        released = tuple(margin_counts(table, g) for g in margins)
        # Margins of one table, but of a non-negative one only where no cell is negative: an estimator without
        # non-negativity left unrounded (`--estimator as-measured`, the margins mechanism, `--rounding none`)
        # publishes negative counts, and the audit had called them the margins of one non-negative table. (A table
        # with a negative cell may still have non-negative margins, decomposable ones another table's: `_guarantee`.)
        return Rounded(table, released, True, time.perf_counter() - start, gap,
                       "global" if _non_negative(table) else _guarantee(True, margins, released))
    pieces = estimate.margins
    cliques = getattr(estimate, "cliques", None)
    if cliques is not None:
        # Clique margins of a junction tree: rounded as margins (integers that agree on every separator are the
        # margins of one integer table), then each released margin is summed from the clique that holds it.
        total = given_total if given_total is not None else int(np.floor(float(np.sum(pieces[0])) + 0.5))
        rounded, gap = tuple(pieces), None
        if rounding == CONTROLLED:
            try:
                # The released margins first (what is published is closest to the fit; exact when that is
                # integral, as without noise), then each clique given them ...
                rounded, gap = controlled_round_margins(pieces, cliques, total, first=margins)
            except TabreleaseError:
                # ... unless released margins that agree pairwise have no clique table (a cycle inside a clique):
                # then the cliques alone, which always glue into one table.
                rounded, gap = controlled_round_margins(pieces, cliques, total)
        released = tuple(_from_clique(rounded, cliques, g) for g in margins)
        if rounding == NEAREST:
            # Each released cell to its nearest integer (keeping an exact total), as without cliques: rounded apart,
            # the margins may no longer agree, and the check below says so.
            released = tuple(round_nearest(m, exact_total) for m in released)
            consistent = mutually_consistent(released, margins)
            return Rounded(None, released, consistent, time.perf_counter() - start,
                           consistency=_guarantee(consistent, margins))
        consistent = rounding == CONTROLLED or mutually_consistent(rounded, cliques, 1e-9 * max(1.0, scale))
        return Rounded(None, released, consistent, time.perf_counter() - start, gap,
                       ("global" if all(map(_non_negative, rounded)) else "local") if consistent else "none")
    if rounding == CONTROLLED:
        total = given_total if given_total is not None else int(np.floor(float(np.sum(pieces[0])) + 0.5))
        note = None
        try:
            released, gap = controlled_round_margins(pieces, margins, total)
        except TabreleaseError:
            # Rounded one after another, margins that do not form a tree can leave a margin no integer table has
            # (all three-way margins of Cars93's six variables: the rounded two-way margins inside [ABF] had no
            # three-way table, seed after seed), and the release failed after its charge. Rounded jointly, as the
            # margins of one table fitted to them, they always exist: rounding is post-processing.
            released, gap = round_margins_through_a_table(pieces, margins, total)
            note = ("controlled rounding found no integer margins, rounded one after another, that agree: they were "
                    "rounded jointly, as the margins of one table fitted to them by IPF")
        consistent = mutually_consistent(released, margins)
        # Rounded jointly, they are the margins of one non-negative integer table by construction.
        how = "global" if note and consistent else _guarantee(consistent, margins)
        return Rounded(None, released, consistent, time.perf_counter() - start, gap, how, note)
    released = tuple(round_nearest(m, exact_total) for m in pieces) if rounding == NEAREST else tuple(pieces)
    # Real-valued margins agree up to floating-point error at best.
    atol = 0.0 if rounding == NEAREST else 1e-9 * max(1.0, scale)
    consistent = mutually_consistent(released, margins, atol)
    return Rounded(None, released, consistent, time.perf_counter() - start,
                   consistency=_guarantee(consistent, margins, released))


def round_nearest(margin: np.ndarray, exact_total: int | None = None) -> np.ndarray:
    """A table's or margin's cells to their nearest integers (`round_table`), or, where the total is exact and that
    misses it, the nearest integer cells with that total (`round_to_total`): "nearest" rounding.

    Parameters
    ----------
    margin : numpy.ndarray
        Real values (a table or a margin).
    exact_total : int, optional
        The total to keep, where it is exact.

    Returns
    -------
    numpy.ndarray
        int64, non-negative, of the same shape.
    """
    rounded = round_table(margin)
    if exact_total is None or int(rounded.sum(dtype=object)) == exact_total:
        return rounded
    return round_to_total(margin, exact_total)


def _guarantee(consistent: bool, margins: Sequence[Margin], released: Sequence[np.ndarray] = ()) -> str:
    """Non-negative margins that agree pairwise are the margins of one non-negative table exactly when they are
    decomposable (an acyclic hypergraph: Beeri, Fagin, Maier & Yannakakis 1983); integers then glue into an
    integer table along the junction tree. Margins with a negative cell (`released`) are no non-negative table's."""
    if not consistent:
        return "none"
    if not all(map(_non_negative, released)):
        return "local"
    return "global" if _decomposable(tuple(tuple(g) for g in margins)) else "local"


def _non_negative(values) -> bool:
    values = np.asarray(values)
    return bool(values.size == 0 or values.min() >= 0)


@lru_cache(maxsize=256)
def _decomposable(margins: tuple) -> bool:
    # Once per set of margins, not per release (sweeps round tens of thousands).
    from .junction import junction_tree

    k = 1 + max(j for g in margins for j in g)
    return junction_tree(margins, (2,) * k).decomposable


def _from_clique(clique_margins, cliques: Sequence[Margin], margin: Margin) -> np.ndarray:
    i = next(i for i, c in enumerate(cliques) if set(margin) <= set(c))
    return margin_counts(np.asarray(clique_margins[i]), [cliques[i].index(j) for j in margin])
