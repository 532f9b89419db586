import cvxpy as cp
import numpy as np
import pytest

from tabrelease import builtin_table, default_model
from tabrelease.bases import EFRON_STEIN, FOURIER, coefficient_basis, coefficients, sensitivity
from tabrelease.consistency import ConsistencyProblem
from tabrelease.rounding import round_table


def dense_rows(basis):
    """F: one row per coefficient, the coefficients of each one-record table (built only for small tables)."""
    cells = int(np.prod(basis.shape))
    return coefficients(basis, np.eye(cells).reshape((cells,) + basis.shape), batch_ndim=1).T


@pytest.mark.parametrize("name, kind", [("edwards", FOURIER), ("rochdale", FOURIER), ("journey_to_work", EFRON_STEIN)])
def test_lp_optimum_agrees_with_a_dense_cvxpy_formulation(name, kind):
    table = builtin_table(name)
    basis = coefficient_basis(kind, table.shape, default_model(table).generators)
    problem = ConsistencyProblem(basis)
    F = dense_rows(basis)
    rng = np.random.default_rng(3)
    exact = coefficients(basis, table.counts)
    for _ in range(3):
        noisy = exact + rng.laplace(0, sensitivity(basis) / 0.5, size=exact.shape)
        ours = problem.solve(noisy)
        w = cp.Variable(F.shape[1], nonneg=True)
        b = cp.Variable()
        # Clarabel, an interior-point solver: not HiGHS, which cvxpy might otherwise pick for an LP.
        cp.Problem(cp.Minimize(b), [cp.abs(noisy - F @ w) <= b]).solve(solver=cp.CLARABEL)
        assert ours.b == pytest.approx(b.value, rel=1e-4, abs=1e-6)
        # our table attains its b*
        assert np.abs(noisy - F @ ours.table.ravel()).max() == pytest.approx(ours.b, rel=1e-6, abs=1e-7)


def test_rounding_is_to_the_nearest_integer_halves_up():
    assert round_table(np.array([0.49, 0.5, 1.5, 2.4999, -1e-12])).tolist() == [0, 1, 2, 2, 0]


def test_a_solve_does_not_depend_on_earlier_solves():
    # The LP's optimum is not unique; a warm start from the previous solve would make the released
    # table depend on history (and across sweep workers, on scheduling). Every solve starts afresh.
    table = builtin_table("journey_to_work")
    basis = coefficient_basis(EFRON_STEIN, table.shape, default_model(table).generators)
    rng = np.random.default_rng(8)
    exact = coefficients(basis, table.counts)
    noisy = [exact + rng.laplace(0, 4 * sensitivity(basis), size=exact.shape) for _ in range(4)]
    first = ConsistencyProblem(basis).solve(noisy[0]).table
    problem = ConsistencyProblem(basis)
    for other in noisy[1:]:
        problem.solve(other)
    np.testing.assert_array_equal(problem.solve(noisy[0]).table, first)


def test_the_lp_solves_tables_of_a_trillion():
    # Counts of 1e12 per cell: HiGHS said "Unknown" on about half the draws before the LP was scaled. Every draw
    # must solve, and the solution must satisfy the LP's own constraints: each coefficient of w within b* of the
    # noisy one, and b* no larger than the largest noise (the true table is feasible with that b).
    shape = (4, 3, 2)
    counts = np.full(shape, 1e12)
    basis = coefficient_basis(EFRON_STEIN, shape, [(0, 1), (1, 2)])
    problem = ConsistencyProblem(basis)
    exact = coefficients(basis, counts)
    rng = np.random.default_rng(11)
    for _ in range(40):
        noise = rng.laplace(0, 2.0, exact.shape)
        solution = problem.solve(exact + noise)
        deviation = np.abs(coefficients(basis, solution.table) - (exact + noise)).max()
        # HiGHS's feasibility tolerance (1e-7), scaled back with the coefficients (by max |noisy| / 1e8), with room.
        tolerance = 1e-6 * np.abs(exact + noise).max() / 1e8
        assert deviation <= solution.b + tolerance
        assert solution.b <= np.abs(noise).max() + tolerance


@pytest.mark.e2e
def test_controlled_rounding_of_a_trillion_finishes():
    # The MILP on cells of 1e12 ran past its time limit for hours (integer variables beyond HiGHS's integrality
    # tolerance); it now solves for the change from its start. Run in a child process so that a hang fails.
    import subprocess
    import sys

    script = """
import numpy as np
from tabrelease.rounding import controlled_round
from tabrelease.tables import margin_counts
rng = np.random.default_rng(3)
for _ in range(15):
    estimate = 1e12 + rng.normal(0, 3, (4, 3, 2))
    total = int(round(estimate.sum()))
    table, gap = controlled_round(estimate, [(0, 1), (1, 2)], total)
    assert int(table.sum()) == total
    for g in [(0, 1), (1, 2)]:
        assert np.abs(margin_counts(table, g) - margin_counts(estimate, g)).max() < 2
print("done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr


def _fits(problem, draws, weights, total):
    return [np.concatenate(problem.fit(v, weights, total)) for v in draws]


def test_a_least_squares_solver_solved_again_with_new_data_gives_a_fresh_solvers_answer():
    # LeastSquaresProblem keeps its Clarabel solver and re-solves it with each new right-hand side: every fit must
    # equal the fit of a problem built afresh for it; in two threads at once too (a solver per thread); and a
    # problem must still pickle (plans travel to worker processes).
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    from tabrelease.consistency import LeastSquaresProblem
    from tabrelease.measurements import MARGIN_CELLS
    from tabrelease.tables import margin_counts

    table = builtin_table("rochdale")
    margins = [(0, 2, 4), (1, 5), (3, 6, 7)]
    blocks = tuple((MARGIN_CELLS, g, None) for g in margins)
    truth = np.concatenate([margin_counts(table.counts, g).ravel() for g in margins]).astype(float)
    rng = np.random.default_rng(11)
    draws = [truth + rng.laplace(0, 6.0, truth.size) for _ in range(6)]
    weights = np.ones(truth.size)
    total = float(table.counts.sum())
    shared = LeastSquaresProblem(table.shape, blocks)
    again = _fits(shared, draws, weights, total)
    fresh = [_fits(LeastSquaresProblem(table.shape, blocks), [v], weights, total)[0] for v in draws]
    assert all(np.array_equal(a, f) for a, f in zip(again, fresh))
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(lambda v: _fits(shared, [v], weights, total)[0], draws * 3))
    assert all(np.array_equal(t, f) for t, f in zip(threaded, fresh * 3))
    copy = pickle.loads(pickle.dumps(shared))
    assert np.array_equal(_fits(copy, draws[:1], weights, total)[0], fresh[0])


def test_a_clarabel_solve_does_not_depend_on_whether_its_solver_was_new():
    # Clarabel scales b in passes when it sets a solver up and in one product when it updates one, and these can
    # round differently where its equilibration rescales b (rows of A far from unit size). A new solver is therefore
    # set up with b = 0 and given b by an update, as a held one is: the same b gives the same bits either way.
    import scipy.sparse as sp

    from tabrelease.consistency import _ResidualQP

    rng = np.random.default_rng(4)
    unknowns, rows = 6, 9
    # Rows r = y - M u (equalities, the residuals as unknowns too), then u >= 0: M's entries span two decades.
    M = rng.normal(size=(rows, unknowns)) * 10.0 ** rng.uniform(-1, 1, size=(rows, 1))
    A = sp.csc_matrix(np.block([[M, np.eye(rows)], [-np.eye(unknowns), np.zeros((unknowns, rows))]]))
    weights = rng.uniform(0.2, 1.0, rows)
    bs = [np.concatenate([rng.normal(size=rows) * 5, np.zeros(unknowns)]) for _ in range(4)]
    held = _ResidualQP(unknowns, A, rows, unknowns)
    after_others = [np.asarray(held.solve(weights, b).x) for b in bs]  # one solver, updated with each b
    for b, x in zip(bs, after_others):
        new = np.asarray(_ResidualQP(unknowns, A, rows, unknowns).solve(weights, b).x)  # a solver set up for b
        assert np.array_equal(new, x)


def test_margins_that_sequential_controlled_rounding_cannot_round_are_rounded_jointly(tmp_path, capsys):
    """A new user's trial: the all-three-way margins of six of Cars93's variables (20,736 cells, past the fit over
    every cell) are estimated as margins alone, and rounding them one after another (the two-way margins first)
    left a three-way margin no integer table has, seed after seed; the release failed after its charge. They are
    now rounded jointly, as the margins of one table: integers, non-negative, agreeing on every shared
    sub-margin, and the release says how."""
    import itertools
    import json
    from pathlib import Path

    import pandas as pd

    from tabrelease.cli import main

    data = Path(__file__).parent / "data" / "MASS_Cars93.csv"
    out = tmp_path / "r"
    assert main(["release", str(data), "--microdata", "--missing-level", "None", "--epsilon", "1", "--margins",
                 "all-3-way", "--simulate", "--seed", "1", "--out", str(out)]) == 0, capsys.readouterr().err
    described = json.loads((out / "public" / "release.json").read_text())
    assert described["consistent"] and described["consistency"] == "global"
    assert any("rounded jointly" in w for w in described["warnings"])
    released = {}
    for margin in described["margins"]:
        frame = pd.read_csv(out / "public" / margin["file"], keep_default_na=False)
        assert (frame["count"] >= 0).all() and frame["count"].dtype.kind == "i"
        released[tuple(margin["variables"])] = frame
    totals = {int(f["count"].sum()) for f in released.values()}
    assert len(totals) == 1
    for (a, fa), (b, fb) in itertools.combinations(released.items(), 2):
        shared = [v for v in a if v in b]
        if shared:
            left = fa.groupby(shared)["count"].sum().sort_index()
            right = fb.groupby(shared)["count"].sum().sort_index()
            assert left.equals(right), (a, b)
