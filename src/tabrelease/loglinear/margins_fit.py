"""Fitting a hierarchical log-linear model from its generator margins alone, on a junction tree.

The (extended) MLE of a hierarchical model depends on the table only through its generator margins, and it is
Markov with respect to any triangulation of the model's interaction graph: it is the product of its clique margins
over the product of its separator margins (0/0 = 0), on a junction tree of that triangulation. So a fit is held as
calibrated fitted clique margins, and nothing of the size of the table is ever built; a table of 10^20 cells with
cliques of 10^5 cells costs what the cliques cost.

- Decomposable models (the generators are the cliques): closed form, fitted clique margins = observed ones. Its
  zeros are the extended MLE's: the facial set of a decomposable model is the set of cells whose generator margins
  are all positive (Fienberg & Rinaldo 2012; `facial.py` relies on the same fact and the tests check it by LP).
- Other models: IPF over the generators with the fit kept as Hugin clique and separator potentials on the
  triangulation's junction tree. The tree is walked depth first; at each clique its generators are fitted (which
  changes only that clique's potential) and moving along an edge passes one Hugin message, which keeps the current
  clique equal to its true margin (every clique farther away stays consistent with its separator). A last
  distribution pass calibrates every clique. This is the cell path's IPF cycle for cycle, only in another
  generator order, so it converges to the same point.
- The facial set factorises over the cliques (the extended MLE is Markov, so its support is the set of cells whose
  clique margins are all positive), and its clique projections are decided by one LP over the clique cells, not
  the table's cells: the fitted clique margins of any non-negative table with the observed margins form exactly
  the locally consistent non-negative clique tables with those margins (the tree is chordal), so Fienberg &
  Rinaldo's LP can be written on them. It is skipped where it is known: decomposable models, or (when the caller
  can give the observed clique margins) when every clique cell the generator margins allow is observed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from .. import _sparse as sp

from .._highs import highs_model
from ..errors import TabreleaseError
from ..junction import JunctionTree, junction_tree
from ..models import Margin, free_parameters, maximal_margins
from .ipf import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE

MarginFunction = Callable[[Margin], np.ndarray]

# Exact L1 distances enumerate cells (in blocks of BLOCK_CELLS): 2^24 cells take about a second.
DENSE_CELL_LIMIT = 2**24
BLOCK_CELLS = 2**20
# The facial-set LP has a column per clique cell, and HiGHS's simplex is slow on it: 8 cliques of 3125 cells took
# 37 s (interior point 16 s), 8 of 1024 cells about a second. Past this the facial set is not decided by LP.
FACIAL_LP_CLIQUE_CELL_LIMIT = 2**13
# The zero-adjusted df of a non-decomposable model with zeros needs the rank of the design on the facial set,
# which we only know how to get densely (design.design_rank): limited to tables this small.
RANK_CELL_LIMIT = 2**14


@dataclass(frozen=True, eq=False)
class MarginsFit:
    """A hierarchical log-linear (extended) MLE held as calibrated fitted clique margins of a junction tree.

    The fitted table is prod(cliques) / prod(separator_margins) (0/0 = 0; an empty separator's margin is n).
    `g2` is None without sum_n_log_n. `mle_exists`, `df_adjusted` and `facial_set_size` are None where they
    could not be decided (`facial_set_exact` False: the facial set was taken to be the cells with every generator
    margin positive, without proof; the fit still converges to the extended MLE, only more slowly).
    """

    generators: tuple[Margin, ...]
    shape: tuple[int, ...]
    tree: JunctionTree
    cliques: tuple[np.ndarray, ...]
    separator_margins: tuple[np.ndarray, ...]
    n: float
    converged: bool
    iterations: int
    g2: float | None
    df: int
    df_adjusted: int | None
    mle_exists: bool | None
    facial_set_size: int | None
    facial_set_exact: bool
    closed_form: bool

    @property
    def cells(self) -> int:
        return math.prod(self.shape)

    def margin(self, axes: Sequence[int]) -> np.ndarray:
        """The fitted margin over `axes` (sorted), which must lie inside one clique of the tree.

        Parameters
        ----------
        axes : sequence of int
            Axes of the table (sorted here).

        Returns
        -------
        numpy.ndarray
            The fitted counts of the margin (float), one axis per entry of `axes` in increasing order.

        Raises
        ------
        TabreleaseError
            If the axes lie in no clique of the junction tree.
        """
        axes = tuple(sorted(axes))
        try:
            i = self.tree.clique_of(axes)
        except StopIteration:
            raise TabreleaseError(f"axes {axes} lie in no clique of the fit's junction tree") from None
        return _sum_to(self.cliques[i], self.tree.cliques[i], axes)

    def fitted_table(self, cell_limit: int = DENSE_CELL_LIMIT) -> np.ndarray:
        """The dense fitted table, for tables of at most `cell_limit` cells.

        Parameters
        ----------
        cell_limit : int, default DENSE_CELL_LIMIT
            The most cells built.

        Returns
        -------
        numpy.ndarray
            The fitted counts (float), of the table's shape.

        Raises
        ------
        TabreleaseError
            If the table has more than `cell_limit` cells.
        """
        if self.cells > cell_limit:
            raise TabreleaseError(f"the table has {self.cells} cells, more than the limit {cell_limit}")
        return self.n * _probability_block(self, ())


def fit_loglinear_from_margins(
    generators: Sequence[Sequence[int]],
    shape: Sequence[int],
    margin: MarginFunction,
    *,
    sum_n_log_n: float | None = None,
    tol: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITERATIONS,
    clique_margins: bool = False,
    facial_lp_limit: int = FACIAL_LP_CLIQUE_CELL_LIMIT,
) -> MarginsFit:
    """The (extended) MLE of the hierarchical model with these generators, from the table's margins alone.

    `margin(axes)` returns the count margin over a sorted axes tuple (shape: those axes' sizes); it is asked for
    the generators only, unless `clique_margins` says it can also give the triangulation's clique margins of the
    same table (a caller with microdata can), which settles most facial sets of non-decomposable models without
    the LP. `sum_n_log_n` (sum of n log n over the cells) gives G². Convergence is the cell path's: a full IPF
    cycle in which no generator margin was more than `tol` (in counts) off.

    Parameters
    ----------
    generators : sequence of sequence of int
        The model's generators (axes; reduced to the maximal ones here).
    shape : sequence of int
        The table's shape.
    margin : callable
        ``margin(axes)`` gives the observed count margin over a sorted tuple of axes (see `margins_of_table`,
        `margins_of_microdata`).
    sum_n_log_n : float, optional
        Sum of n log n over the observed cells; without it `g2` is None.
    tol : float, default DEFAULT_TOLERANCE
        Convergence tolerance on the generator margins, in counts.
    max_iter : int, default DEFAULT_MAX_ITERATIONS
        Most IPF cycles.
    clique_margins : bool, default False
        Whether `margin` may also be asked for the clique margins of the triangulation.
    facial_lp_limit : int, default FACIAL_LP_CLIQUE_CELL_LIMIT
        The most clique cells for which the facial set is decided by LP; past it the facial set is taken to be the
        cells whose generator margins are all positive (`facial_set_exact` False) unless the clique margins settle it.

    Returns
    -------
    MarginsFit
        The fit as calibrated clique margins, with G², df and what is known of the facial set.

    Raises
    ------
    TabreleaseError
        If the shape or generators are bad, a margin has the wrong shape, the table is empty, or the margins do not
        share one total.
    """
    shape = tuple(int(s) for s in shape)
    if not shape or min(shape) < 1:
        raise TabreleaseError(f"bad table shape {shape}")
    generators, _ = maximal_margins(tuple(g) for g in generators)
    if not generators or any(not g or g[0] < 0 or g[-1] >= len(shape) for g in generators):
        raise TabreleaseError(f"generators {generators} do not fit a table with {len(shape)} variables")
    tree = junction_tree(generators, shape)
    targets = {g: _checked_margin(margin, g, shape) for g in generators}
    n = float(next(iter(targets.values())).sum())
    if n <= 0:
        raise TabreleaseError("the table is empty (n = 0); there is nothing to fit")
    for g, t in targets.items():
        if not np.isclose(t.sum(), n, rtol=1e-9, atol=0):
            raise TabreleaseError(f"margin {g} totals {t.sum()}, not n = {n}: the margins are not of one table")
    edges = _edges(tree)
    nominal_df = math.prod(shape) - free_parameters(generators, shape)
    if tree.decomposable:
        return _closed_form(generators, shape, tree, edges, targets, n, sum_n_log_n, nominal_df)

    assigned = _assign(tree, generators)
    candidates = _candidate_cliques(tree, shape, edges, targets)
    facial, exact, known_in = candidates, False, None
    if clique_margins:
        # Cells of positive observed clique margins are in the facial set (the observed table puts mass there);
        # if they cover every candidate, the facial set is the candidates and no LP is needed.
        known_in = [_checked_margin(margin, c, shape) > 0 for c in tree.cliques]
        exact = all((k | ~c).all() for k, c in zip(known_in, candidates))
    if not exact and sum(c.size for c in candidates) <= facial_lp_limit:
        facial = _facial_cliques_by_lp(tree, shape, edges, assigned, targets, candidates, known_in)
        exact = True
    fitted, separators, iterations, converged, log_lik = _ipf_on_tree(
        tree, shape, edges, assigned, targets, facial, tol, max_iter
    )
    mle_exists = all(f.all() for f in facial) if exact else None
    size = _count_cells(tree, shape, edges, facial) if exact else None
    if mle_exists:
        df_adjusted = nominal_df
    elif exact and math.prod(shape) <= RANK_CELL_LIMIT:
        from .design import design_rank

        mask = _indicator_table(tree, shape, facial)
        df_adjusted = int(mask.sum()) - design_rank(shape, generators, mask)
    else:
        df_adjusted = None
    g2 = None if sum_n_log_n is None else 2.0 * (float(sum_n_log_n) - log_lik)
    return MarginsFit(
        generators=generators, shape=shape, tree=tree, cliques=tuple(fitted), separator_margins=tuple(separators),
        n=n, converged=converged, iterations=iterations, g2=g2, df=int(nominal_df), df_adjusted=df_adjusted,
        mle_exists=mle_exists, facial_set_size=size, facial_set_exact=exact, closed_form=False,
    )


# --- distances between two fits ---------------------------------------------------------------------------------
def margins_fit_l1_distance(a: MarginsFit, b: MarginsFit, *, cell_limit: int = DENSE_CELL_LIMIT) -> float | None:
    """sum |p_a - p_b| over the cells of the two fits' probability tables, exactly by enumerating the cells in
    blocks; None above `cell_limit` cells (no closed form over a junction tree: |.| does not factorise).

    Parameters
    ----------
    a, b : MarginsFit
        Fits of tables of one shape.
    cell_limit : int, default DENSE_CELL_LIMIT
        The most cells enumerated.

    Returns
    -------
    float or None
        The L1 distance between the two fitted probability tables (between 0 and 2); None past `cell_limit`.

    Raises
    ------
    TabreleaseError
        If the fits' shapes differ.
    """
    if a.shape != b.shape:
        raise TabreleaseError(f"fits of tables of shapes {a.shape} and {b.shape} cannot be compared")
    if a.cells > cell_limit:
        return None
    split = _block_split(a.shape)
    total = 0.0
    for prefix in np.ndindex(*a.shape[:split]):
        total += float(np.abs(_probability_block(a, prefix) - _probability_block(b, prefix)).sum())
    return total


def margins_fit_kl_divergence(a: MarginsFit, b: MarginsFit) -> float | None:
    """KL(p_a || p_b) in nats, exactly from the clique margins, when both fits share one junction tree (fits of
    one model to two tables); inf when p_a puts mass where p_b has none; None for fits on different trees.

    Both tables factorise over the same cliques, so log p_a - log p_b is a sum of clique terms minus separator
    terms, and its p_a-expectation needs only p_a's clique and separator margins.

    Parameters
    ----------
    a, b : MarginsFit
        The two fits.

    Returns
    -------
    float or None
        KL(p_a || p_b) in nats (at least 0, or inf); None when the shapes or junction trees differ.
    """
    if a.shape != b.shape or a.tree.cliques != b.tree.cliques or a.tree.separators != b.tree.separators:
        return None
    total = 0.0
    for sign, pa_tables, pb_tables in ((1.0, a.cliques, b.cliques), (-1.0, a.separator_margins, b.separator_margins)):
        for ta, tb in zip(pa_tables, pb_tables):
            p, q = ta / a.n, tb / b.n
            mass = p > 0
            if np.any(mass & (q <= 0)):
                return math.inf
            total += sign * float((p[mass] * np.log(p[mass] / q[mass])).sum())
    return max(total, 0.0)


# --- margins of a table or of microdata ------------------------------------------------------------------------
def margins_of_table(counts: np.ndarray) -> MarginFunction:
    """margin(axes) of a dense table (for tests and small tables).

    Parameters
    ----------
    counts : numpy.ndarray
        A dense table of counts.

    Returns
    -------
    callable
        ``margin(axes)``: the float margin over a sorted tuple of axes.
    """
    counts = np.asarray(counts, float)
    return lambda axes: _sum_to(counts, tuple(range(counts.ndim)), tuple(axes))


def margins_of_microdata(records: np.ndarray, shape: Sequence[int]) -> MarginFunction:
    """margin(axes) of the table of microdata `records` (one row per record, level codes per column), by
    np.bincount of the needed columns only.

    Parameters
    ----------
    records : numpy.ndarray
        Records x variables, each entry a level code (0-based, below the variable's size).
    shape : sequence of int
        The number of levels of each variable.

    Returns
    -------
    callable
        ``margin(axes)``: the float margin over a tuple of axes (the total as a 0-d array for no axes).
    """
    records = np.asarray(records)
    shape = tuple(int(s) for s in shape)

    def margin(axes: Margin) -> np.ndarray:
        axes = tuple(axes)
        sizes = tuple(shape[j] for j in axes)
        if not axes:
            return np.array(float(len(records)))
        index = np.ravel_multi_index(tuple(records[:, j] for j in axes), sizes)
        return np.bincount(index, minlength=math.prod(sizes)).astype(float).reshape(sizes)

    return margin


def sum_n_log_n_of_microdata(records: np.ndarray, shape: Sequence[int]) -> float:
    """Sum of n log n over the cells of the microdata's table, from its distinct records (cells with n = 0 add 0).

    Parameters
    ----------
    records : numpy.ndarray
        Records x variables, each entry a level code.
    shape : sequence of int
        The number of levels of each variable.

    Returns
    -------
    float
        Sum of n log n (natural logarithm) over the table's cells.
    """
    records = np.asarray(records)
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) < 2**63:
        _, counts = np.unique(np.ravel_multi_index(tuple(records.T), shape), return_counts=True)
    else:
        _, counts = np.unique(records, axis=0, return_counts=True)
    counts = counts.astype(float)
    return float((counts * np.log(counts)).sum())


# --- array helpers over clique axes ---------------------------------------------------------------------------
def _sizes(axes: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(shape[j] for j in axes)


def _sum_to(table: np.ndarray, axes: Margin, keep: Margin) -> np.ndarray:
    """Sum a table over `axes` down to the sorted subset `keep` (its axes keep their order)."""
    keep_set = set(keep)
    drop = tuple(i for i, a in enumerate(axes) if a not in keep_set)
    return table.sum(axis=drop) if drop else table


def _spread(table: np.ndarray, keep: Margin, axes: Margin) -> np.ndarray:
    """A table over `keep` reshaped to broadcast against a table over `axes` (keep a sorted subset of axes)."""
    keep_set = set(keep)
    return np.reshape(table, tuple(np.shape(table)[keep.index(a)] if a in keep_set else 1 for a in axes))


def _checked_margin(margin: MarginFunction, axes: Margin, shape: tuple[int, ...]) -> np.ndarray:
    table = np.asarray(margin(tuple(axes)), float)
    if table.shape != _sizes(axes, shape):
        raise TabreleaseError(f"margin {axes} has shape {table.shape}, expected {_sizes(axes, shape)}")
    if not np.all(np.isfinite(table)) or np.any(table < 0):
        raise TabreleaseError(f"margin {axes} has negative or non-finite counts")
    return table


# --- the tree -------------------------------------------------------------------------------------------------
def _edges(tree: JunctionTree) -> tuple[tuple[int, int, Margin], ...]:
    """(child, parent, separator) for every clique but the first. A component's root (parent None) hangs from
    clique 0 by an empty separator, whose margin is n: the product formula and the messages then need no forest."""
    return tuple(
        (i, 0 if p is None else p, () if p is None else tree.separators[i])
        for i, p in enumerate(tree.parents) if i > 0
    )


def _assign(tree: JunctionTree, generators: Sequence[Margin]) -> tuple[tuple[Margin, ...], ...]:
    """Each generator to the first clique holding it."""
    assigned: list[list[Margin]] = [[] for _ in tree.cliques]
    for g in generators:
        assigned[tree.clique_of(g)].append(g)
    return tuple(tuple(a) for a in assigned)


def _hugin(tables, separators, cliques, source, target, edge, sep_axes) -> None:
    """Pass a Hugin message from clique `source` to the adjacent clique `target` along `edge` (in place). The joint
    prod(tables) / prod(separators) is unchanged; `target` becomes consistent with `source` on the separator."""
    new = _sum_to(tables[source], cliques[source], sep_axes)
    old = separators[edge]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(old > 0, new / np.where(old > 0, old, 1.0), 0.0)
    tables[target] = tables[target] * _spread(ratio, sep_axes, cliques[target])
    separators[edge] = np.asarray(new, float)


def _calibrate(tree, shape, edges, potentials) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Hugin collect (children to parents, in reverse running-intersection order) and distribute: clique tables
    whose product over separators is the product of the potentials, each equal to its margin of that product."""
    tables = [np.asarray(p, float).copy() for p in potentials]
    separators = [np.ones(_sizes(s, shape)) for _, _, s in edges]
    for e in reversed(range(len(edges))):
        child, parent, s = edges[e]
        _hugin(tables, separators, tree.cliques, child, parent, e, s)
    for e, (child, parent, s) in enumerate(edges):
        _hugin(tables, separators, tree.cliques, parent, child, e, s)
    return tables, separators


def _candidate_cliques(tree, shape, edges, targets) -> list[np.ndarray]:
    """Clique cells that extend to a cell with every generator margin positive (the projections of the cells
    outside every zero of a generator margin): boolean calibration of the generators' positivity indicators."""
    potentials = []
    for c in tree.cliques:
        indicator = np.ones(_sizes(c, shape), bool)
        for g, t in targets.items():
            if set(g) <= set(c):
                indicator &= _spread(t > 0, g, c)
        potentials.append(indicator.astype(float))
    tables, _ = _calibrate(tree, shape, edges, potentials)
    return [t > 0 for t in tables]


def _count_cells(tree, shape, edges, indicators) -> int:
    """The number of cells x with every clique indicator true at x_C, exactly: sum-product messages towards the
    root in int64 (a message counts completions of a subtree, so it never exceeds the table's cells) or, for
    tables of 2^63 cells or more, in Python integers."""
    dtype = np.int64 if math.prod(shape) < 2**63 else object
    tables = [np.asarray(f).astype(np.int64).astype(dtype) for f in indicators]
    for child, parent, s in reversed(edges):
        message = _sum_to(tables[child], tree.cliques[child], s)
        tables[parent] = tables[parent] * _spread(np.asarray(message), s, tree.cliques[parent])
    return int(tables[0].sum())


# --- decomposable: the closed form ------------------------------------------------------------------------------
def _closed_form(generators, shape, tree, edges, targets, n, sum_n_log_n, nominal_df) -> MarginsFit:
    # A clique that is not a generator is a variable no generator holds: the model fits it uniform.
    cliques = tuple(
        targets[c] if c in targets else np.full(_sizes(c, shape), n / math.prod(_sizes(c, shape)))
        for c in tree.cliques
    )
    separators = []
    for child, parent, s in edges:
        from_parent = _sum_to(cliques[parent], tree.cliques[parent], s)
        from_child = _sum_to(cliques[child], tree.cliques[child], s)
        if not np.allclose(from_parent, from_child, rtol=1e-9, atol=1e-9 * n):
            raise TabreleaseError(
                f"the margins {tree.cliques[parent]} and {tree.cliques[child]} disagree on {s}: not of one table"
            )
        separators.append(np.asarray(from_parent, float))
    # log m = sum of clique log-margins - separator log-margins: its n-weighted sum needs only those margins.
    log_lik = _sum_m_log_m(cliques) - _sum_m_log_m(separators)
    g2 = None if sum_n_log_n is None else 2.0 * (float(sum_n_log_n) - log_lik)
    positive = [c > 0 for c in cliques]
    mle_exists = all(p.all() for p in positive)
    size = _count_cells(tree, shape, edges, positive)
    if mle_exists:
        df_adjusted = nominal_df
    else:
        # The design on the facial set spans sum_C f_C(x_C) restricted to it; peeling leaf cliques off the tree,
        # each adds its positive cells and shares with the rest exactly the functions of its positive separator
        # cells, so rank = sum |C+| - sum |S+| (a clique holding an uncovered variable adds only the constant,
        # which its empty separator takes away again).
        def positive_cells(table):
            return int((np.asarray(table) > 0).sum())

        rank = sum(positive_cells(t) if c in targets else 1 for c, t in zip(tree.cliques, cliques))
        rank -= sum(positive_cells(t) if s else 1 for (_, _, s), t in zip(edges, separators))
        df_adjusted = size - rank
    return MarginsFit(
        generators=generators, shape=shape, tree=tree, cliques=cliques, separator_margins=tuple(separators), n=n,
        converged=True, iterations=0, g2=g2, df=int(nominal_df), df_adjusted=int(df_adjusted),
        mle_exists=mle_exists, facial_set_size=size, facial_set_exact=True, closed_form=True,
    )


def _sum_m_log_m(tables) -> float:
    total = 0.0
    for t in tables:
        t = np.asarray(t, float)
        positive = t[t > 0]
        total += float((positive * np.log(positive)).sum())
    return total


# --- non-decomposable: IPF on the tree --------------------------------------------------------------------------
def _tour(tree, edges, assigned) -> list[tuple]:
    """A closed depth-first walk from clique 0 through every clique whose subtree holds a generator: ("fit", i) at
    a clique's first visit, ("move", source, target, edge) along each edge walked (twice per edge)."""
    children: list[list[tuple[int, int]]] = [[] for _ in tree.cliques]
    for e, (child, parent, _) in enumerate(edges):
        children[parent].append((child, e))
    needed = [bool(a) for a in assigned]
    for child, parent, _ in reversed(edges):  # children come after their parents
        needed[parent] = needed[parent] or needed[child]
    walk: list[tuple] = []

    def visit(i: int) -> None:
        walk.append(("fit", i))
        for child, e in children[i]:
            if needed[child]:
                walk.append(("move", i, child, e))
                visit(child)
                walk.append(("move", child, i, e))

    visit(0)
    return walk


def _ipf_on_tree(tree, shape, edges, assigned, targets, facial, tol, max_iter):
    """IPF from the facial set's indicator (as the cell path starts), on calibrated clique tables.

    Returns (clique tables, separator margins, cycles, converged, sum n log m). The last is tracked exactly for the
    returned fit: log m = log(n / |F|) + sum_g lambda_g(x_g) on the facial set F, where lambda_g adds up the log of
    every adjustment of generator g, so sum n log m = n log(n / |F|) + sum_g <t_g, lambda_g>.
    """
    cliques = tree.cliques
    n = float(next(iter(targets.values())).sum())  # every target totals n (checked by the caller)
    tables, separators = _calibrate(tree, shape, edges, [f.astype(float) for f in facial])
    start_total = float(tables[0].sum())
    scale = n / start_total
    tables = [t * scale for t in tables]
    separators = [s * scale for s in separators]
    log_terms = {g: np.zeros(targets[g].shape) for a in assigned for g in a}
    walk = _tour(tree, edges, assigned)
    converged, iterations = False, max_iter
    for iteration in range(1, max_iter + 1):
        gap = 0.0
        for step in walk:
            if step[0] == "move":
                _, source, target, e = step
                _hugin(tables, separators, cliques, source, target, e, edges[e][2])
                continue
            i = step[1]
            for g in assigned[i]:
                current = _sum_to(tables[i], cliques[i], g)
                target = targets[g]
                gap = max(gap, float(np.abs(current - target).max()))
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(current > 0, target / np.where(current > 0, current, 1.0), 0.0)
                    log_terms[g] += np.where(ratio > 0, np.log(np.where(ratio > 0, ratio, 1.0)), 0.0)
                tables[i] *= _spread(ratio, g, cliques[i])
        if gap <= tol:
            converged, iterations = True, iteration
            break
    # The walk ends at clique 0, the only clique known to be its true margin: distribute from there.
    for e, (child, parent, s) in enumerate(edges):
        _hugin(tables, separators, cliques, parent, child, e, s)
    log_lik = n * math.log(scale) + sum(float((targets[g] * lam).sum()) for g, lam in log_terms.items())
    return tables, separators, iterations, converged, log_lik


# --- the facial set by one LP over clique cells -----------------------------------------------------------------
def _facial_cliques_by_lp(tree, shape, edges, assigned, targets, candidates, known_in=None) -> list[np.ndarray]:
    """The facial set's projection on each clique, by Fienberg & Rinaldo's LP written on clique tables:

        maximise sum y  subject to  mu_C >= 0 locally consistent on the tree, generator margins of mu = s t,
                                    0 <= y <= mu, y <= 1, s >= 0.

    Locally consistent non-negative clique tables on a junction tree are exactly the clique margins of
    non-negative tables (glue them), so a clique cell can reach y = 1 exactly when some table with margins
    proportional to t puts mass under it; feasible solutions add, so all such cells reach 1 at once. Cells outside
    `candidates` are known to be out; cells of `known_in` (observed clique cells) to be in.
    """
    offsets = np.cumsum([0] + [c.size for c in candidates])
    cells = int(offsets[-1])
    s_col = cells  # columns: mu (one per clique cell), the scale s, then y (one per undecided cell)
    rows, cols, vals = [], [], []
    row = 0

    def sub_index(i: int, keep: Margin) -> np.ndarray:
        c = tree.cliques[i]
        coords = np.unravel_index(np.arange(candidates[i].size), candidates[i].shape)
        return np.ravel_multi_index(tuple(coords[c.index(a)] for a in keep), _sizes(keep, shape)) if keep else \
            np.zeros(candidates[i].size, np.int64)

    for i, gens in enumerate(assigned):
        for g in gens:
            r = sub_index(i, g)
            rows += [row + r, row + np.arange(targets[g].size)]
            cols += [offsets[i] + np.arange(candidates[i].size), np.full(targets[g].size, s_col)]
            vals += [np.ones(candidates[i].size), -targets[g].ravel()]
            row += targets[g].size
    for child, parent, s in edges:
        size = math.prod(_sizes(s, shape))
        for i, sign in ((child, 1.0), (parent, -1.0)):
            rows.append(row + sub_index(i, s))
            cols.append(offsets[i] + np.arange(candidates[i].size))
            vals.append(np.full(candidates[i].size, sign))
        row += size
    equality_rows = row
    candidate = np.concatenate([c.ravel() for c in candidates])
    known = np.zeros(cells, bool) if known_in is None else np.concatenate([k.ravel() for k in known_in]) & candidate
    # y only for the cells left to decide: a y column and a y <= mu row per known cell only slow the simplex down.
    open_cells = np.flatnonzero(candidate & ~known)
    y_cols = s_col + 1 + np.arange(len(open_cells))
    rows += [row + np.arange(len(open_cells)), row + np.arange(len(open_cells))]
    cols += [y_cols, offsets[0] + open_cells]
    vals += [np.ones(len(open_cells)), -np.ones(len(open_cells))]
    row += len(open_cells)
    columns = s_col + 1 + len(open_cells)
    matrix = sp.from_entries(np.concatenate(vals), np.concatenate(rows), np.concatenate(cols), (row, columns), "csc")
    lower = np.zeros(columns)
    upper = np.concatenate([np.where(candidate, np.inf, 0.0), [np.inf], np.ones(len(open_cells))])
    cost = np.concatenate([np.zeros(s_col + 1), -np.ones(len(open_cells))])
    row_lower = np.concatenate([np.zeros(equality_rows), np.full(len(open_cells), -np.inf)])
    row_upper = np.zeros(row)
    import highspy

    highs, _ = highs_model(matrix, cost, lower, upper, row_lower, row_upper)
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise TabreleaseError(f"the facial-set linear program failed: HiGHS says {highs.modelStatusToString(status)}")
    inside = known.copy()
    inside[open_cells] = np.asarray(highs.getSolution().col_value)[s_col + 1 :] > 0.5
    return [inside[offsets[i] : offsets[i + 1]].reshape(c.shape) for i, c in enumerate(candidates)]


# --- cells, block by block --------------------------------------------------------------------------------------
def _block_split(shape: tuple[int, ...]) -> int:
    """How many leading axes to enumerate so that a block over the rest has at most BLOCK_CELLS cells."""
    split = 0
    while split < len(shape) and math.prod(shape[split:]) > BLOCK_CELLS:
        split += 1
    return split


def _probability_block(fit: MarginsFit, prefix: tuple[int, ...]) -> np.ndarray:
    """Fitted probabilities of the cells whose leading axes are `prefix`, over the remaining axes:
    exp(sum of clique log-margins - separator log-margins - log n), 0 where a clique margin is 0 (a zero separator
    margin lies under zero clique margins, so its log is taken as 0 rather than making -inf + inf)."""
    split = len(prefix)
    inner = fit.shape[split:]
    log_p = np.full(inner, -math.log(fit.n))

    def add(table, axes, sign, zero_log):
        index = tuple(prefix[a] if a < split else slice(None) for a in axes)
        sub = np.asarray(table, float)[index]
        with np.errstate(divide="ignore"):
            logs = np.where(sub > 0, np.log(np.where(sub > 0, sub, 1.0)), zero_log)
        kept = tuple(a for a in axes if a >= split)
        return sign * np.reshape(logs, tuple(fit.shape[a] if a in kept else 1 for a in range(split, len(fit.shape))))

    for axes, table in zip(fit.tree.cliques, fit.cliques):
        log_p = log_p + add(table, axes, 1.0, -np.inf)
    for (_, _, s), table in zip(_edges(fit.tree), fit.separator_margins):
        log_p = log_p + add(table, s, -1.0, 0.0)
    return np.exp(log_p)


def _indicator_table(tree, shape, indicators) -> np.ndarray:
    """The dense facial set (small tables only): cells whose every clique indicator holds."""
    mask = np.ones(shape, bool)
    all_axes = tuple(range(len(shape)))
    for c, f in zip(tree.cliques, indicators):
        mask &= _spread(f, c, all_axes)
    return mask
