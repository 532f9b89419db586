"""Exact means exact: the least-squares fit and controlled rounding at counts up to 2^53 (9e15 in one cell), the
refusal above it, and what a mechanism measures without noise (a public total, n under randomized response, the
insensitive margins of sensitive-attributes) coming out exactly, whatever the noise on the rest."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import tabrelease as tr
from tabrelease.testing import plan_at
from tabrelease.pipeline import measure
from tabrelease.consistency import LeastSquaresProblem
from tabrelease.estimate import MAX_EXACT_COUNT, best_total, check_exact_range, noise_variance
from tabrelease.measurements import EXACT, MARGIN_CELLS
from tabrelease.noise import NoNoise, SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.rounding import controlled_round

from .helpers import true_margin

SHAPE, MARGINS = (3, 2, 2), [(0, 1), (1, 2)]
SMALL = np.array([[[5, 2], [0, 7]], [[1, 3], [4, 0]], [[2, 6], [1, 9]]], dtype=np.int64)
BIG = 9 * 10**15  # below 2^53 = 9.007e15


def _with_big_cell(value: int) -> np.ndarray:
    counts = SMALL.copy()
    counts[0, 0, 0] = value
    return counts


def _margins_exact(release, counts):
    return [np.asarray(m, object) - true_margin(counts.astype(object), g) for g, m in
            zip(release.margins, release.released_margins)]


@pytest.mark.parametrize("big", [10**6, 10**9, 10**12, BIG])
def test_a_huge_cell_comes_back_exactly_without_noise(big):
    # Before the refinement the fit moved released counts by 305 at 10^9 and by 2.9e9 at 9e15 (noise sd: 2.6).
    counts = _with_big_cell(big)
    plan = plan_at(SHAPE, MARGINS, 1.0)
    release = run_plan(plan, counts, NoNoise())
    for difference in _margins_exact(release, counts):
        assert not np.any(difference), difference
    assert int(release.table.sum()) == int(counts.sum())


def _dense_queries(shape, sets):
    """Each set's margin as rows over the cells, from the one-record tables (by hand: sums over the margin)."""
    cells = int(np.prod(shape))
    ones = np.eye(cells, dtype=np.int64).reshape((cells,) + tuple(shape))
    return [np.stack([true_margin(t, s).ravel() for t in ones], axis=1) for s in sets]


def test_with_noise_the_fit_at_9e15_is_the_fit_at_a_thousand_shifted():
    # The same noise on a table whose big cell holds 1000 or 9e15: no bound is active at that cell, so the fit
    # (a GLS over w >= 0 with the total pinned) moves by exactly the shift there. The small fit is checked against
    # cvxpy's, and the large one against it plus the shift: within float64's spacing at 9e15 (1) before
    # rounding, and within 1 of the shifted small release after it (the error of the release is that of the noise).
    plan = plan_at(SHAPE, MARGINS, 1.0)
    assert all(b.query == MARGIN_CELLS for b in plan.design.blocks)
    measured = _dense_queries(plan.shape, [b.variables for b in plan.design.blocks])
    queries = _dense_queries(plan.shape, MARGINS)  # the released margins'
    sd = max(np.sqrt(noise_variance(b)) for b in measure(plan, SMALL, NoNoise()).blocks)
    shift = BIG - 1000
    for seed in range(4):
        small, large = _with_big_cell(1000), _with_big_cell(BIG)
        m_small = measure(plan, small, SimulationNoise(seed))
        m_large = measure(plan, large, SimulationNoise(seed))
        # independent reference at n ~ 1000: cvxpy (Clarabel through cvxpy's own formulation) on the dense problem
        w = cp.Variable(SMALL.size, nonneg=True)
        total = best_total(m_small.blocks)
        cp.Problem(cp.Minimize(sum(cp.sum_squares(b.values - q @ w) / noise_variance(b)
                                   for b, q in zip(m_small.blocks, measured))), [cp.sum(w) == total]).solve(
            solver=cp.CLARABEL)
        e_small = plan.estimator.estimate(plan, m_small)
        e_large = plan.estimator.estimate(plan, m_large)
        for g, q in zip(MARGINS, queries):
            reference = (q @ w.value).reshape(-1)
            np.testing.assert_allclose(true_margin(e_small.table, g).ravel(), reference, atol=1e-4)
            expected = reference + q[:, 0] * shift  # the big cell is cell 0
            ours = (q.astype(object) @ (e_large.base.astype(object))) + q @ e_large.change
            assert np.abs((ours - expected.astype(object)).astype(float)).max() <= 1.0
        r_small = tr.release_from_measurements(plan, m_small)
        r_large = tr.release_from_measurements(plan, m_large)
        for g, a, b, q in zip(MARGINS, r_small.released_margins, r_large.released_margins, queries):
            moved = np.asarray(b, object).ravel() - np.asarray(a, object).ravel() - q[:, 0] * shift
            assert np.abs(moved.astype(float)).max() <= 1  # cells of the fit are not unique: ties may differ
            error = np.asarray(b, object).ravel() - true_margin(large.astype(object), g).ravel()
            assert np.abs(error.astype(float)).max() <= 10 * sd  # of the size of the noise, not of 1e9


def test_controlled_rounding_of_an_exact_integer_part_plus_a_change_is_the_rounding_of_the_change_shifted():
    # At 2^60 a float cannot hold a fraction; given the integer part, rounding works on the change alone.
    change = np.array([[2.4, 0.7], [1.6, 3.3]])
    alone, gap = controlled_round(change, [(0,), (1,)], 8)
    base = np.array([[2**60, 0], [0, 0]], dtype=np.int64)
    shifted, gap_shifted = controlled_round(change, [(0,), (1,)], 8 + 2**60, base=base)
    assert shifted.dtype == np.int64 and gap == gap_shifted == 0.0
    np.testing.assert_array_equal(shifted - base, alone)


def test_a_table_above_2_to_the_53_is_refused_before_the_charge_in_one_line():
    table = tr.builtin_table("czech")
    counts = table.counts.astype(np.int64).copy()
    check_exact_range(table.with_counts(counts))
    counts.flat[0] = MAX_EXACT_COUNT  # n now just above 2^53
    with pytest.raises(tr.TabreleaseError, match=r"above 2\^53 .*nothing was charged") as info:
        check_exact_range(table.with_counts(counts))
    assert "\n" not in str(info.value) and str(MAX_EXACT_COUNT) not in str(info.value)
    # and the fit itself refuses rather than return an estimate that cannot be exact
    problem = LeastSquaresProblem((2, 2), ((MARGIN_CELLS, (0,), None),))
    with pytest.raises(tr.TabreleaseError, match="2\\^53"):
        problem.solve(np.array([2.0**54, 3.0]), np.ones(2), 2.0**54 + 3)


# --- what was measured exactly is released exactly ------------------------------------------------------------
SENSITIVE = [((2, 3, 2), [(0, 1), (1, 2), (0, 2)], (0,)), ((3, 2, 2), [(0, 1), (1, 2)], (1,)),
             ((2, 2, 2, 2), [(0, 1, 2), (1, 2, 3)], (3,))]


@pytest.mark.parametrize("shape, margins, sensitive", SENSITIVE)
def test_sensitive_attributes_releases_n_and_every_insensitive_margin_exactly(shape, margins, sensitive):
    # Their coefficients are released exactly; the LP treated them as noisy and published n = 59 as 19.
    rng = np.random.default_rng(len(shape) + sensitive[0])
    counts = rng.poisson(5, size=shape)
    plan = plan_at(shape, margins, 1.0, mechanism="sensitive-attributes", neighbours="replace",
                           options={"sensitive": sensitive})
    for seed in range(6):
        release = run_plan(plan, counts, SimulationNoise(seed))
        assert int(release.table.sum()) == int(counts.sum())
        for g, m in zip(release.margins, release.released_margins):
            insensitive = tuple(j for j in g if j not in sensitive)
            if insensitive:
                np.testing.assert_array_equal(true_margin(m, [g.index(j) for j in insensitive]),
                                              true_margin(counts, insensitive))
        # the noisy part is still noisy: something published differs from the truth
        assert any(not np.array_equal(m, true_margin(counts, g)) for g, m in
                   zip(release.margins, release.released_margins) if set(g) & set(sensitive))


def test_sensitive_attributes_lp_holds_the_exact_coefficients_as_equalities():
    shape, margins, sensitive = (2, 3, 2), [(0, 1), (1, 2), (0, 2)], (0,)
    counts = np.random.default_rng(4).poisson(5, size=shape)
    plan = plan_at(shape, margins, 1.0, mechanism="sensitive-attributes", neighbours="replace",
                           options={"sensitive": sensitive})
    measurements = measure(plan, counts, SimulationNoise(2))
    estimate = plan.estimator.estimate(plan, measurements)
    from tabrelease.bases import coefficients

    ours = coefficients(plan.basis, estimate.table)
    for block, lo, hi in zip(measurements.blocks, plan.basis.offsets[:-1], plan.basis.offsets[1:]):
        if block.distribution == EXACT:
            np.testing.assert_allclose(ours[lo:hi], block.values, atol=1e-6)
    assert estimate.total == int(counts.sum())


def test_randomized_response_releases_n_exactly():
    table = tr.builtin_table("czech")
    plan = plan_at(table.shape, [(0, 1), (2, 3)], 1.0, mechanism="randomized-response")
    for seed in range(4):
        release = run_plan(plan, table.counts, SimulationNoise(seed))
        assert int(release.table.sum()) == table.n
        for m in release.released_margins:
            assert int(m.sum()) == table.n


@pytest.mark.parametrize("shape", [(3, 2, 2), (4, 4, 4, 4, 4, 4, 2)])
def test_a_public_total_is_released_exactly(shape):
    # (3, 2, 2): the fit over cells; 4^6 x 2 (8192 cells, above the cell fit's limit): the fit on the margins. Both
    # pin n, and rounding keeps it.
    rng = np.random.default_rng(1)
    counts = rng.poisson(3, size=shape)
    margins = [(0, 1), (1, 2)]
    plan = plan_at(shape, margins, 0.3, options={"public_total": True})
    for seed in range(4):
        release = run_plan(plan, counts, SimulationNoise(seed))
        for m in release.released_margins:
            assert int(m.sum()) == int(counts.sum())


def test_rounding_an_estimate_takes_its_exact_integer_part_where_a_float_loses_the_fraction():
    # Between 2^52 and 2^53 a float's spacing is 1: base + change as one float has lost the change's fraction.
    from tabrelease.estimate import Estimate
    from tabrelease.rounding import round_estimate

    change = np.array([[1.45, 0.1], [0.1, 0.1]])
    alone, _ = controlled_round(change, [(0,), (1,)], 2)
    np.testing.assert_array_equal(alone, [[2, 0], [0, 0]])  # by hand: L1 1.3 against 2.0 for any other table
    base = np.array([[2**52 + 1, 0], [0, 0]], dtype=np.int64)
    estimate = Estimate(table=base + change, margins=None, seconds=0.0, base=base.ravel(), change=change.ravel(),
                        total=2 + 2**52 + 1)
    rounded = round_estimate(estimate, [(0,), (1,)], "controlled", 1.0)
    np.testing.assert_array_equal(rounded.table - base, alone)


@pytest.mark.parametrize("big", [10**9, 10**12, 10**15])
def test_the_fit_on_margins_is_exact_at_any_count_too(big):
    """Tables above 4096 cells are fitted on their margins (local least squares, no cells): before its refinement
    that fit moved released counts by 47 at 10^9, 65,531 at 10^12 and 7.2e7 at 10^15 (noise sd: a few counts)."""
    shape = (2,) * 13
    margins = [(i, i + 1) for i in range(12)]
    counts = np.random.default_rng(0).integers(0, 5, size=shape).astype(np.int64)
    counts.flat[17] = big
    plan = plan_at(shape, margins, 1.0)
    assert plan.estimator.name == "local-least-squares"
    exact = run_plan(plan, counts, NoNoise())
    for difference in _margins_exact(exact, counts):
        assert not np.any(difference), difference
    # With noise: the error is the noise's, the same as at a small count (the same seed, the big cell shifted).
    small = counts.copy()
    small.flat[17] = 1000
    noisy_big, noisy_small = run_plan(plan, counts, SimulationNoise(3)), run_plan(plan, small, SimulationNoise(3))
    sd = max(np.sqrt(noise_variance(b)) for b in measure(plan, counts, NoNoise()).blocks)
    for a, b in zip(_margins_exact(noisy_big, counts), _margins_exact(noisy_small, small)):
        assert np.abs(a.astype(float)).max() <= 10 * sd
        assert np.abs((a - b).astype(float)).max() <= 2  # ties in rounding aside, the same release shifted
