import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf

from tabrelease import builtin_table, default_model, parse_model, table_from_frame
from tabrelease.testing import plan_at
from tabrelease.loglinear import fit_loglinear, l1_distance, total_variation
from tabrelease.loglinear import design_rank, facial_set, ipf, is_decomposable, margin_design

from .helpers import as_scipy

# Independently computed (shared/tables/PROVENANCE.md): G2, nominal df, zero-adjusted df, MLE exists.
PROVENANCE = {
    "edwards": (17.26, 52, 37, False),
    "czech": (44.59, 42, 42, True),
    "rochdale": (149.58, 226, 168, False),
    "journey_to_work": (262.93, 135, 11, False),
}


@pytest.mark.parametrize("name", PROVENANCE)
def test_g2_and_df_of_the_paper_models_match_provenance(name):
    table = builtin_table(name)
    fit = fit_loglinear(table, default_model(table))
    g2, df, df_adjusted, exists = PROVENANCE[name]
    assert fit.converged
    assert round(fit.g2, 2) == g2
    assert fit.df == df
    assert fit.df_adjusted == df_adjusted
    assert fit.mle_exists is exists
    assert np.isclose(fit.fitted.sum(), table.n)


def _statsmodels_fit(table, spec):
    frame = table.to_frame()
    frame.columns = [f"v{i}" for i in range(table.k)] + ["count"]
    model = parse_model(spec, table)
    terms = " + ".join(":".join(f"C(v{a})" for a in g) for g in model.closure if g)
    result = smf.glm(f"count ~ {terms}", data=frame, family=sm.families.Poisson()).fit(tol=1e-12, maxiter=200)
    return result.fittedvalues.to_numpy().reshape(table.shape), result.deviance


def _random_positive_table(shape, seed):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rng.uniform(3, 40, size=shape)) + 1
    grids = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    frame = pd.DataFrame({f"X{i}": [f"l{v}" for v in g.ravel()] for i, g in enumerate(grids)})
    frame["count"] = counts.ravel()
    return table_from_frame(frame)


@pytest.mark.parametrize(
    "table, spec",
    [
        (builtin_table("czech"), "[BF][ADE][ABCE]"),
        (builtin_table("czech"), "[AB][AC][AD][AE][AF][BC][BD][BE][BF][CD][CE][CF][DE][DF][EF]"),
        (builtin_table("czech"), "[ABC][CDE][EF][AF]"),
        (_random_positive_table((3, 4, 2), 1), "[AB][AC][BC]"),
        (_random_positive_table((3, 3, 3, 2), 2), "[AB][BC][CD][AD]"),
        (_random_positive_table((2, 5, 3), 3), "[A][BC]"),
    ],
)
def test_fit_agrees_with_statsmodels_poisson_glm_where_the_mle_exists(table, spec):
    fit = fit_loglinear(table, parse_model(spec, table), tol=1e-10)
    assert fit.mle_exists and fit.converged
    fitted, deviance = _statsmodels_fit(table, spec)
    np.testing.assert_allclose(fit.fitted, fitted, rtol=1e-6)
    assert fit.g2 == pytest.approx(deviance, rel=1e-6)


def test_classic_non_existence_with_positive_margins():
    # 2x2x2 with zeros at (1,1,1) and (2,2,2) under no-three-way interaction: every two-way
    # margin is positive yet the MLE does not exist. By hand: the two-way margins of the six
    # remaining cells determine them, so the design has rank 6 on the facial set, the extended
    # MLE reproduces the table, G2 = 0 and the adjusted df is 0 (nominal df 1).
    counts = np.array([[[0, 3], [5, 2]], [[4, 6], [1, 0]]])
    frame = pd.DataFrame(
        [(a, b, c, counts[a, b, c]) for a in range(2) for b in range(2) for c in range(2)],
        columns=["A", "B", "C", "count"],
    )
    table = table_from_frame(frame)
    fit = fit_loglinear(table, "[AB][AC][BC]")
    assert not fit.mle_exists
    assert fit.facial_set_size == 6
    assert fit.df == 1 and fit.df_adjusted == 0
    assert fit.g2 == pytest.approx(0.0, abs=1e-8)
    np.testing.assert_allclose(fit.fitted, counts, atol=1e-8)


def test_facial_set_excludes_cells_in_zero_margins():
    table = builtin_table("journey_to_work")
    model = default_model(table)
    mask = facial_set(table.counts, model.generators)
    for g in model.generators:
        axes = tuple(j for j in range(3) if j not in g)
        zero_margin = table.counts.sum(axis=axes) == 0
        expanded = np.broadcast_to(np.expand_dims(zero_margin, axes), table.shape)
        assert not np.any(mask & expanded)
    assert mask.sum() == 88


def test_full_design_rank_equals_the_number_of_free_parameters():
    table = builtin_table("rochdale")
    model = default_model(table)
    assert design_rank(table.shape, model.generators) == model.free_parameters(table.shape) == 30


def test_l1_and_total_variation_by_hand():
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.0, 0.5, 0.5])
    assert l1_distance(p, q) == pytest.approx(1.0)
    assert total_variation(p, q) == pytest.approx(0.5)
    assert l1_distance(p, np.array([0.0, 0.0, 1.0])) == pytest.approx(2.0)


def test_iteration_cap_reports_non_convergence():
    table = builtin_table("journey_to_work")
    fit = fit_loglinear(table, default_model(table), max_iter=3)
    assert not fit.converged and fit.iterations == 3


def _facial_set_by_scaled_fibre_lp(observed, generators):
    """Fienberg & Rinaldo's LP as written (margins in the matrix), solved with scipy: an independent check."""
    from scipy.optimize import linprog
    import scipy.sparse as sp

    from tabrelease.loglinear import margin_design

    A = as_scipy(margin_design(observed.shape, generators))
    t = A @ observed.ravel()
    c, m = observed.size, A.shape[0]
    A_eq = sp.hstack([A, sp.csr_matrix((m, c)), sp.csr_matrix(-t.reshape(-1, 1))])
    A_ub = sp.hstack([-sp.identity(c), sp.identity(c), sp.csr_matrix((c, 1))])
    cost = np.concatenate([np.zeros(c), -np.ones(c), [0.0]])
    bounds = [(0, None)] * c + [(0, 1)] * c + [(0, None)]
    res = linprog(cost, A_ub=A_ub, b_ub=np.zeros(c), A_eq=A_eq, b_eq=np.zeros(m), bounds=bounds, method="highs")
    return ((res.x[c : 2 * c] > 0.5) | (observed.ravel() > 0)).reshape(observed.shape)


@pytest.mark.parametrize(
    "shape, spec",
    [((2, 2, 2), "[AB][AC][BC]"), ((3, 3, 2), "[AB][AC][BC]"), ((2, 2, 2, 2), "[AB][BC][CD][AD]"),
     ((2, 3, 2, 2), "[AB][BC][CD]"), ((2, 2, 2, 2), "[ABC][BD][CD]")],
)
def test_facial_set_agrees_with_the_lp_as_written_on_sparse_random_tables(shape, spec):
    rng = np.random.default_rng(11)
    letters = "ABCD"[: len(shape)]
    model = parse_model(spec, table_from_frame(pd.DataFrame(
        [(*idx, 1) for idx in np.ndindex(shape)], columns=[*letters, "count"])))
    checked_non_trivial = 0
    for _ in range(40):
        counts = rng.poisson(0.6, size=shape) * (rng.random(shape) < 0.6)
        if counts.sum() == 0:
            continue
        ours = facial_set(counts, model.generators)
        expected = _facial_set_by_scaled_fibre_lp(counts.astype(float), model.generators)
        np.testing.assert_array_equal(ours, expected)
        checked_non_trivial += int(ours.sum() > (counts > 0).sum())
    if shape != (2, 2, 2):  # some tables had facial-set cells beyond their positive cells
        assert checked_non_trivial > 0


@pytest.mark.parametrize(
    "spec, decomposable",
    [("[AB][BC]", True), ("[AB][AC][BC]", False), ("[AB][BC][CD][AD]", False), ("[ABC][BD][CD]", False),
     ("[ABC][BCD]", True), ("[AB][CD]", True)],
)
def test_decomposability_by_hand(spec, decomposable):
    table = table_from_frame(pd.DataFrame([(*idx, 1) for idx in np.ndindex((2,) * 4)], columns=[*"ABCD", "count"]))
    assert is_decomposable(parse_model(spec, table).generators) is decomposable


def test_reference_models_decomposable_or_not():
    # Edwards' and the Czech models are decomposable (a junction tree exists); Rochdale's and [AB][AC][BC] are not.
    expected = {"edwards": True, "czech": True, "rochdale": False, "journey_to_work": False}
    for name, value in expected.items():
        table = builtin_table(name)
        assert is_decomposable(default_model(table).generators) is value


def test_batched_ipf_stops_each_member_on_its_own_and_matches_single_fits():
    table = builtin_table("journey_to_work")
    model = default_model(table)
    rng = np.random.default_rng(5)
    stack = np.stack([np.maximum(table.counts + rng.integers(-2, 3, table.shape), 0) for _ in range(6)]).astype(float)
    starts = np.stack([facial_set(s, model.generators) for s in stack]).astype(float)
    fitted, iterations, converged = ipf(stack, model.generators, start=starts, batch_ndim=1)
    assert converged.all() and len(set(iterations.tolist())) > 1
    for i in range(len(stack)):
        single, its, ok = ipf(stack[i], model.generators, start=starts[i])
        assert ok and its == iterations[i]
        np.testing.assert_allclose(fitted[i], single, rtol=1e-12, atol=1e-12)


def test_refit_ipf_cannot_finish_is_finished_by_newton_and_agrees_with_statsmodels():
    # A journey-to-work release (exact calibration, epsilon 0.015, noise seed below: a run of the first reference
    # reproduction) whose refit IPF had not converged after 10,000 cycles. statsmodels' IRLS does not converge on it
    # either (500 iterations, margins off by 277), so the fit is checked against Birch's conditions, which fix
    # the extended MLE uniquely: the fitted table has the observed generator margins, is 0 off the facial set,
    # and its logarithm on the facial set lies in the span of the model's design there.
    from tabrelease import evaluate_release, run_plan
    from tabrelease.noise import SimulationNoise
    from tabrelease.loglinear import IPF_CYCLES_BEFORE_NEWTON

    table = builtin_table("journey_to_work")
    model = default_model(table)
    plan = plan_at(table.shape, model.generators, 0.015, mechanism="efron-stein")
    release = run_plan(plan, table.counts, SimulationNoise(959383796038602949))
    assert release.n_released == 48234
    evaluation = evaluate_release(table, release, model)
    released = release.table.astype(float)
    facial = facial_set(released, model.generators)
    _, _, ipf_converged = ipf(released, model.generators, start=facial.astype(float), max_iter=10_000)
    assert not ipf_converged

    fit = fit_loglinear(released, model)
    assert fit.converged and fit.iterations > IPF_CYCLES_BEFORE_NEWTON
    assert evaluation.released_fit_converged and evaluation.g2_released == pytest.approx(fit.g2, abs=1e-6)

    design = margin_design(table.shape, model.generators)
    assert np.abs(design @ (released - fit.fitted).ravel()).max() < 1e-6
    on_facial = design[:, np.flatnonzero(facial.ravel())].T.toarray()
    log_fitted = np.log(fit.fitted[facial])
    coefficients = np.linalg.lstsq(on_facial, log_fitted, rcond=None)[0]
    assert np.abs(on_facial @ coefficients - log_fitted).max() < 1e-8
    assert np.all(fit.fitted[~facial] == 0)


def test_g_squared_of_a_fit_that_is_zero_or_negative_where_counts_are_not_says_so_without_warnings():
    """2 sum f log(f / m): inf where m = 0 < f, nan where m < 0 < f (an unrounded release's cells as measured), by
    hand 2 * 3 * log(3 / 1.5) otherwise; numpy's divide and log warnings (which a release printed on stderr) are
    not raised."""
    import math
    import warnings

    from tabrelease.loglinear.distances import g_squared

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g_squared(np.array([3.0, 0.0]), np.array([1.5, 2.0])) == pytest.approx(6 * math.log(2))
        assert g_squared(np.array([3.0, 1.0]), np.array([1.5, 0.0])) == math.inf
        assert math.isnan(g_squared(np.array([3.0, 1.0]), np.array([1.5, -0.5])))
