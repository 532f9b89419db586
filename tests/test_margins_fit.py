"""Fits from margins alone (loglinear.margins_fit) against the cell path (fit_loglinear), and at 10^12 cells."""

import itertools
import math

import numpy as np
import pytest

from tabrelease import builtin_table, default_model, parse_model
from tabrelease.errors import TabreleaseError
from tabrelease.junction import junction_tree
from tabrelease.loglinear import fit_loglinear, l1_distance
from tabrelease.loglinear import margins_fit as mf
from tabrelease.loglinear.design import _positive_margin_cells
from tabrelease.loglinear.facial import _facial_set_program
from tabrelease.loglinear.margins_fit import (
    fit_loglinear_from_margins,
    margins_fit_kl_divergence,
    margins_fit_l1_distance,
    margins_of_microdata,
    margins_of_table,
    sum_n_log_n_of_microdata,
)
from tabrelease.models import make_model

TOL = 1e-11  # both paths fitted this tightly, so that their fits agree to 1e-8


def _sum_n_log_n(counts):
    c = np.asarray(counts, float)
    c = c[c > 0]
    return float((c * np.log(c)).sum())


def _both(counts, generators, **kwargs):
    counts = np.asarray(counts, float)
    model = make_model(generators, counts.ndim)
    reference = fit_loglinear(counts, model, tol=TOL)
    fit = fit_loglinear_from_margins(model.generators, counts.shape, margins_of_table(counts),
                                     sum_n_log_n=_sum_n_log_n(counts), tol=TOL, max_iter=100_000, **kwargs)
    return fit, reference


def _assert_same(fit, reference):
    assert fit.converged and reference.converged
    scale = max(1.0, float(reference.fitted.max()))
    np.testing.assert_allclose(fit.fitted_table(), reference.fitted, rtol=0, atol=1e-8 * scale)
    assert fit.g2 == pytest.approx(reference.g2, rel=1e-8, abs=1e-8)
    assert fit.df == reference.df
    assert fit.df_adjusted == reference.df_adjusted
    assert fit.mle_exists is reference.mle_exists
    assert fit.facial_set_size == reference.facial_set_size
    assert fit.facial_set_exact
    # The fit is held as clique margins: its generator margins are the observed ones.
    for g in fit.generators:
        np.testing.assert_allclose(fit.margin(g), reference.observed.sum(
            axis=tuple(j for j in range(reference.observed.ndim) if j not in g)), atol=1e-8 * scale)


@pytest.mark.parametrize("name", ["edwards", "czech", "rochdale", "journey_to_work"])
def test_paper_models_of_the_builtin_tables_match_the_cell_path(name):
    table = builtin_table(name)
    fit, reference = _both(table.counts, default_model(table).generators)
    _assert_same(fit, reference)
    # Decomposable models take the closed form, the others IPF on the triangulation's tree.
    assert fit.closed_form == junction_tree(fit.generators, table.shape).decomposable


def _other_models(k):
    letters = "ABCDEFGH"[:k]
    pairs = "".join(f"[{a}{b}]" for a, b in itertools.combinations(letters, 2))
    chain = "".join(f"[{letters[i]}{letters[i + 1]}]" for i in range(k - 1))
    cycle = chain + f"[{letters[0]}{letters[-1]}]"
    star = "".join(f"[A{b}]" for b in letters[1:])
    models = [pairs, chain, cycle, star, "".join(f"[{a}]" for a in letters)]
    if k >= 5:
        models += ["[ABC][CDE][AE]", "[ABC][BCD][DE]", "[AB][BC][CD]"]  # non-decomposable; decomposable; uncovered
    return models


@pytest.mark.parametrize(
    "name, spec",
    [(name, spec) for name in ["edwards", "czech", "rochdale", "journey_to_work"]
     for spec in _other_models(builtin_table(name).k)],
)
def test_other_models_of_the_builtin_tables_match_the_cell_path(name, spec):
    table = builtin_table(name)
    fit, reference = _both(table.counts, parse_model(spec, table).generators)
    _assert_same(fit, reference)


def _random_table(rng, max_cells=2**12):
    k = int(rng.integers(3, 7))
    shape = tuple(int(s) for s in rng.integers(2, 5, size=k))
    while math.prod(shape) > max_cells:
        shape = shape[:-1]
    cells = math.prod(shape)
    # From dense to very sparse (n < cells / 4, Dirichlet 0.1): zeros everywhere, MLEs that do not exist.
    n = int(rng.choice([cells // 4, cells // 2, 2 * cells, 10 * cells])) + 1
    p = rng.dirichlet(np.full(cells, float(rng.choice([0.1, 0.5, 2.0]))))
    return rng.multinomial(n, p).reshape(shape).astype(float)


def _random_models(k):
    pairs = list(itertools.combinations(range(k), 2))
    models = {
        "all 2-way": pairs,
        "chain": [(i, i + 1) for i in range(k - 1)],
        "cycle": [(i, (i + 1) % k) for i in range(k)],
        "3-way": list(itertools.combinations(range(k), 3))[:4],
        "partial": [(0, 1), (1, 2)],
    }
    return {name: [tuple(sorted(g)) for g in gens] for name, gens in models.items()}


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_with_zeros_match_the_cell_path(seed):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        counts = _random_table(rng)
        for generators in _random_models(counts.ndim).values():
            fit, reference = _both(counts, generators)
            _assert_same(fit, reference)


def test_random_tables_include_facial_sets_that_need_the_lp():
    # The comparison above is only a test of the clique-cell LP if some facial sets are smaller than the cells
    # outside every zero generator margin (the classic non-existence with positive margins).
    rng = np.random.default_rng(0)
    found = 0
    for _ in range(40):
        counts = _random_table(rng)
        if counts.size > 2**9:
            # Of these 40 tables, every one with such a case has at most 512 cells; the cell path's facial set of a
            # larger one takes seconds, to find nothing, and nothing is compared.
            continue
        for generators in _random_models(counts.ndim).values():
            reference = fit_loglinear(counts, make_model(generators, counts.ndim))
            if not np.array_equal(reference.facial_set, _positive_margin_cells(counts > 0, generators)):
                found += 1
                fit, reference = _both(counts, generators)
                _assert_same(fit, reference)
    assert found >= 3


def test_classic_non_existence_with_positive_margins():
    counts = np.array([[[0, 3], [5, 2]], [[4, 6], [1, 0]]], float)
    fit, reference = _both(counts, [(0, 1), (0, 2), (1, 2)])
    _assert_same(fit, reference)
    assert fit.facial_set_size == 6 and fit.df_adjusted == 0 and not fit.mle_exists


@pytest.mark.parametrize("seed", range(6))
def test_decomposable_extended_mle_is_the_closed_form_on_positive_margin_cells(seed):
    # The claim the closed form rests on (and facial.py's shortcut): for a decomposable model the facial set is
    # the set of cells whose generator margins are all positive. Checked here by the cell path's LP, which
    # facial_set itself skips for decomposable models, and by the clique-cell LP.
    rng = np.random.default_rng(100 + seed)
    for _ in range(5):
        counts = _random_table(rng)
        k = counts.ndim
        for generators in ([(i, i + 1) for i in range(k - 1)], [(0, i) for i in range(1, k)],
                           [(0, 1, 2)] + [(2, i) for i in range(3, k)]):
            support = counts > 0
            positive = _positive_margin_cells(support, generators)
            by_lp = _facial_set_program(counts.shape, tuple(generators)).solve(support.ravel(), positive.ravel())
            assert np.array_equal(by_lp.reshape(counts.shape), positive)
            tree = junction_tree(generators, counts.shape)
            assert tree.decomposable
            edges = mf._edges(tree)
            targets = {g: margins_of_table(counts)(g) for g in generators}
            candidates = mf._candidate_cliques(tree, counts.shape, edges, targets)
            by_tree_lp = mf._facial_cliques_by_lp(tree, counts.shape, edges, mf._assign(tree, generators), targets,
                                                  candidates)
            assert np.array_equal(mf._indicator_table(tree, counts.shape, by_tree_lp), positive)
            fit, reference = _both(counts, generators)
            assert fit.closed_form
            _assert_same(fit, reference)
            assert np.array_equal(fit.fitted_table() > 0, positive)


@pytest.mark.parametrize("name", ["edwards", "czech", "rochdale", "journey_to_work"])
def test_l1_distance_and_kl_between_fits_match_the_cell_path(name):
    # The audit compares the MLE of the original table with the MLE of a released one.
    table = builtin_table(name)
    generators = default_model(table).generators
    rng = np.random.default_rng(7)
    released = table.counts + rng.poisson(2.0, size=table.shape)
    fit_a, ref_a = _both(table.counts, generators)
    fit_b, ref_b = _both(released, generators)
    assert margins_fit_l1_distance(fit_a, fit_b) == pytest.approx(
        l1_distance(ref_a.probabilities, ref_b.probabilities), rel=1e-8, abs=1e-10)
    p, q = ref_a.probabilities, ref_b.probabilities
    mass = p > 0
    kl = float((p[mass] * np.log(p[mass] / q[mass])).sum()) if np.all(q[mass] > 0) else math.inf
    assert margins_fit_kl_divergence(fit_a, fit_b) == pytest.approx(kl, rel=1e-7, abs=1e-10)
    # The other way round the released table's positive cells outside the original's facial set give inf.
    p, q = q, ref_a.probabilities
    mass = p > 0
    kl = float((p[mass] * np.log(p[mass] / q[mass])).sum()) if np.all(q[mass] > 0) else math.inf
    assert margins_fit_kl_divergence(fit_b, fit_a) == pytest.approx(kl, rel=1e-7, abs=1e-10)


def test_observed_clique_margins_settle_the_facial_set_without_the_lp():
    rng = np.random.default_rng(3)
    counts = rng.poisson(5.0, size=(3, 3, 3, 3, 2)).astype(float)
    generators = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4)]
    model = make_model(generators, 5)
    reference = fit_loglinear(counts, model, tol=TOL)
    fit = fit_loglinear_from_margins(model.generators, counts.shape, margins_of_table(counts),
                                     sum_n_log_n=_sum_n_log_n(counts), tol=TOL, clique_margins=True,
                                     facial_lp_limit=0)
    _assert_same(fit, reference)


def test_without_lp_or_clique_margins_the_facial_set_is_reported_undecided():
    table = builtin_table("rochdale")
    generators = default_model(table).generators
    fit = fit_loglinear_from_margins(generators, table.shape, margins_of_table(table.counts), facial_lp_limit=0,
                                     max_iter=20)
    assert not fit.facial_set_exact
    assert fit.mle_exists is None and fit.df_adjusted is None and fit.facial_set_size is None
    assert fit.g2 is None and fit.df == 226


def test_inconsistent_or_malformed_margins_are_refused():
    counts = np.arange(12.0).reshape(3, 4)
    good = margins_of_table(counts)
    with pytest.raises(TabreleaseError, match="not of one table"):
        fit_loglinear_from_margins([(0,), (1,)], (3, 4), lambda axes: good(axes) * (2 if axes == (1,) else 1))
    with pytest.raises(TabreleaseError, match="shape"):
        fit_loglinear_from_margins([(0, 1)], (3, 4), lambda axes: np.ones(5))
    with pytest.raises(TabreleaseError, match="negative"):
        fit_loglinear_from_margins([(0, 1)], (3, 4), lambda axes: -good(axes))


def _markov_records(n, k, levels, seed):
    """Microdata with dependence between neighbouring variables."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, k), np.int64)
    x[:, 0] = rng.integers(0, levels, n)
    for j in range(1, k):
        stay = rng.random(n) < 0.5
        x[:, j] = np.where(stay, (x[:, j - 1] + rng.integers(0, 2, n)) % levels, rng.integers(0, levels, n))
    return x


def test_a_table_of_10_to_the_12_cells_from_microdata_fits_from_its_margins():
    # No clock here (a loaded machine is not a failure): benchmarks/bench_margins_fit.py times it; that the fit
    # works at all shows no dense table (8 TB) was made.
    k, levels, records = 12, 10, 200_000
    shape = (levels,) * k
    data = _markov_records(records, k, levels, 0)
    other = _markov_records(records, k, levels, 1)
    margin = margins_of_microdata(data, shape)
    snl = sum_n_log_n_of_microdata(data, shape)
    chain = fit_loglinear_from_margins([(i, i + 1) for i in range(k - 1)], shape, margin, sum_n_log_n=snl)
    cycle = fit_loglinear_from_margins([(i, (i + 1) % k) for i in range(k)], shape, margin, sum_n_log_n=snl,
                                       clique_margins=True)
    cycle_other = fit_loglinear_from_margins([(i, (i + 1) % k) for i in range(k)], shape,
                                             margins_of_microdata(other, shape), clique_margins=True)
    assert chain.cells == 10**12 and chain.df == 10**12 - (1 + k * 9 + (k - 1) * 81)
    assert chain.closed_form and chain.mle_exists and chain.df_adjusted == chain.df
    assert cycle.converged and not cycle.closed_form and cycle.facial_set_exact and cycle.mle_exists
    assert cycle.df == 10**12 - (1 + k * 9 + k * 81)
    for g in cycle.generators:
        np.testing.assert_allclose(cycle.margin(g), margin(g), atol=1e-6)
    # The cycle adds one interaction to the chain: it fits at least as well, and both G2 are finite.
    assert 0 < cycle.g2 <= chain.g2 < math.inf
    assert margins_fit_l1_distance(cycle, cycle_other) is None  # too many cells to enumerate
    kl = margins_fit_kl_divergence(cycle, cycle_other)
    assert 0 < kl < 1.0
    assert margins_fit_kl_divergence(cycle, chain) is None  # different trees


def test_fits_from_microdata_equal_fits_from_the_dense_table():
    # The same microdata path at a size the cell path can take.
    shape = (3, 4, 2, 3, 2)
    data = _markov_records(500, 5, 2, 4) % np.array(shape)
    counts = np.zeros(shape)
    np.add.at(counts, tuple(data.T), 1)
    generators = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4)]
    fit = fit_loglinear_from_margins(generators, shape, margins_of_microdata(data, shape),
                                     sum_n_log_n=sum_n_log_n_of_microdata(data, shape), tol=TOL)
    reference = fit_loglinear(counts, make_model(generators, 5), tol=TOL)
    _assert_same(fit, reference)
