"""The planned mechanism (release's default), checked against computations that do not use its code path:
margins and coefficients built by hand from the table, the least-squares fit against scipy on the dense
problem, noise-free exactness on every built-in table, and the plan never worse than equal scales."""

import json

import numpy as np
import pytest
from scipy.optimize import minimize

import tabrelease as tr
from tabrelease.pipeline import measure
from tabrelease.noise import SecureNoise, SimulationNoise
from tabrelease.cli import main
from tabrelease.mechanisms import get_mechanism, with_epsilon
from tabrelease.planner import with_post_processing
from tabrelease.testing import plan_at
from tabrelease.noise import NoNoise

from .helpers import RecordingNoise, true_margin

TABLES = ["edwards", "czech", "rochdale", "journey_to_work"]


def by_hand(counts, query, variables, kind):
    """A block's exact values from the definitions (margin cells; Fourier; Efron-Stein components)."""
    k = counts.ndim
    margin = counts.sum(axis=tuple(j for j in range(k) if j not in variables)) if variables else np.array(counts.sum())
    if query == "margin_cells":
        return np.ravel(margin).astype(float)
    if kind == "fourier":
        signs = np.ones(margin.shape)
        for i in range(len(variables)):
            shape = [1] * len(variables)
            shape[i] = 2
            signs = signs * np.array([1.0, -1.0]).reshape(shape)
        return np.array([float((signs * margin).sum()) * 2.0 ** (-k / 2)])
    centred = np.asarray(margin, float)
    for i in range(len(variables)):
        centred = centred - centred.mean(axis=i, keepdims=True)
    outside = np.prod([counts.shape[j] for j in range(k) if j not in variables])
    return centred.ravel() / outside


@pytest.mark.parametrize("name", TABLES)
def test_each_block_is_the_table_s_own_query_with_the_planned_scale(name):
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, tr.default_model(table).generators, 0.5)
    noise = RecordingNoise(11)
    release = tr.run_plan(plan, table.counts, noise)
    assert len(noise.calls) == len(plan.design.blocks)
    for block, (values, noisy), measured in zip(plan.design.blocks, noise.calls, release.measurements.blocks):
        np.testing.assert_allclose(values, by_hand(table.counts, block.query, block.variables, plan.design.basis_kind),
                                   atol=1e-9)
        assert measured.scale == pytest.approx(0.5 ** -1 * plan.design.whitened_sensitivity() * block.relative_scale)
        np.testing.assert_array_equal(measured.values, noisy)
    # What is released: integer, non-negative margins of one table, whose total is the rounded estimate.
    assert release.table.dtype.kind == "i" and release.table.min() >= 0 and release.consistent
    for g, m in zip(release.margins, release.released_margins):
        np.testing.assert_array_equal(m, true_margin(release.table, g))


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize("variant", ["laplace", "gaussian", "public-total", "replace"])
def test_without_noise_every_margin_comes_back_exactly(name, variant):
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, tr.default_model(table).generators, 1.0,
                        delta=1e-6 if variant == "gaussian" else None,
                        neighbours="replace" if variant == "replace" else "add-remove",
                        options={"public_total": True} if variant == "public-total" else None)
    release = tr.run_plan(plan, table.counts, NoNoise())
    for g, m in zip(release.margins, release.released_margins):
        np.testing.assert_array_equal(m, true_margin(table.counts, g))
    assert release.rounding_gap == 0.0 and release.table.sum() == table.n


def test_least_squares_on_mixed_blocks_agrees_with_scipy_on_the_dense_problem():
    """GLS over w >= 0 with the total pinned, on margin blocks of unequal scales, against SLSQP."""
    shape, margins = (3, 2, 3), [(0, 1), (1, 2), (0, 2)]
    rng = np.random.default_rng(4)
    counts = rng.poisson(3, size=shape)
    plan = plan_at(shape, margins, 0.3)
    release = tr.run_plan(plan, counts, SimulationNoise(9))
    blocks = release.measurements.blocks
    rows, values, weights = [], [], []
    eye = np.eye(counts.size).reshape((counts.size,) + shape)
    for b in blocks:
        rows.append(np.stack([by_hand(e, b.query, b.variables, b.basis) for e in eye], axis=1))
        values.append(b.values)
        weights.append(np.full(b.size, 1 / (2 * b.scale**2)))
    Q, y, wts = np.vstack(rows), np.concatenate(values), np.concatenate(weights)
    # The total: inverse-variance mean of the measured margins' sums.
    sums = [(b.values.sum(), 2 * b.scale**2 * b.size) for b in blocks if b.query == "margin_cells"]
    total = sum(s / v for s, v in sums) / sum(1 / v for s, v in sums)
    fit = minimize(lambda w: 0.5 * float(wts @ (y - Q @ w) ** 2), np.full(counts.size, total / counts.size),
                   jac=lambda w: -(Q.T @ (wts * (y - Q @ w))), method="SLSQP", bounds=[(0, None)] * counts.size,
                   constraints=[{"type": "eq", "fun": lambda w: w.sum() - total}], options={"ftol": 1e-14, "maxiter": 1000})
    ours = tr.release_from_measurements(with_post_processing(plan, rounding="none"), release.measurements)
    for g in margins:
        np.testing.assert_allclose(true_margin(ours.table, g), true_margin(fit.x.reshape(shape), g), atol=2e-3)


@pytest.mark.parametrize("seed", range(12))
def test_the_plan_is_never_worse_than_equal_scales(seed):
    """The planned expected error against the same reconstruction of the paper's equal-scale measurements."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    shape = tuple(int(v) for v in (np.full(k, 2) if seed % 3 == 0 else rng.integers(2, 5, size=k)))
    margins = list({tuple(sorted(rng.choice(k, size=int(rng.integers(1, min(k, 3) + 1)), replace=False).tolist()))
                    for _ in range(int(rng.integers(1, 4)))})
    planned = plan_at(shape, margins, 1.0)
    paper = plan_at(shape, margins, 1.0, mechanism="auto")
    ours = get_mechanism("planned").expected_errors(planned)
    theirs = get_mechanism(paper.mechanism).expected_errors(paper)
    assert sum(e.total_variance for e in ours.values()) <= sum(e.total_variance for e in theirs.values()) * (1 + 1e-9)
    # Epsilon scales the error by 1 / epsilon^2 and changes nothing else.
    tenth = get_mechanism("planned").expected_errors(with_epsilon(planned, 0.1))
    for g in ours:
        assert tenth[g].total_variance == pytest.approx(100 * ours[g].total_variance)


@pytest.mark.e2e
def test_public_total_releases_n_exactly_and_says_so(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["release", "czech", "--epsilon", "0.2", "--public-total", "--simulate", "--seed", "3",
                 "--out", str(out)]) == 0
    headline = capsys.readouterr().out.splitlines()[0]
    # The first line states the guarantee that holds (a replacement is two add-remove steps: 2 x 0.2), not the
    # settings the noise was calibrated to, which alone would read as a stronger, add-remove guarantee.
    assert "(epsilon=0.4 (pure) for one record changed (n public); its noise calibrated to epsilon 0.2 per " \
           "add-remove step;" in headline, headline
    release = json.loads((out / "public" / "release.json").read_text())
    assert release["plan"]["total"] == "public" and release["parameters"]["total_is_public"] == 1
    margins = [np.loadtxt(out / "public" / m["file"], delimiter=",", skiprows=1, usecols=-1) for m in release["margins"]]
    assert all(m.sum() == tr.builtin_table("czech").n for m in margins)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert any("treated as public" in w for w in release["warnings"])
    assert audit["release"]["plan"]["total"] == "public" and audit["evaluation"]["n_released"] == audit["evaluation"]["n"]
    assert main(["release", "czech", "--epsilon", "0.2", "--simulate", "--seed", "3", "--out", str(tmp_path / "a")]) == 0
    assert "(epsilon=0.2 (pure) for one record added or removed; laplace" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.e2e
def test_plan_command_shows_the_expected_errors_the_release_records(tmp_path, capsys):
    assert main(["plan", "rochdale", "--epsilon", "0.1,1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["question"], printed["mechanism"], printed["noise"]) == ("expected_errors", "planned", "laplace")
    rows = printed["margins"]
    assert sorted({r["epsilon"] for r in rows}) == [0.1, 1.0]
    table = tr.builtin_table("rochdale")
    planned = plan_at(table.shape, tr.default_model(table).generators, 1.0)
    expected = get_mechanism("planned").expected_errors(planned)
    at_one = {r["letters"]: r for r in rows if r["epsilon"] == 1.0}
    for g, e in expected.items():
        row = at_one[tr.models.margin_label(g, table.letters)]
        assert row["expected_l1"] == pytest.approx(e.expected_l1)
        # normal approximation: cells * sd * sqrt(2 / pi)
        assert row["expected_l1"] == pytest.approx(row["cells"] * row["cell_sd"] * np.sqrt(2 / np.pi))
        assert row["paper_expected_l1"] > row["expected_l1"]
        # Noise on every cell, by hand: Laplace(1 / epsilon) on each of the 256 cells, a margin cell sums
        # 256 / cells of them (variance 2 each), the L1 error of `cells` such normals.
        k_out = table.cells // row["cells"]
        assert row["cells_expected_l1"] == pytest.approx(row["cells"] * np.sqrt(2.0 * k_out) * np.sqrt(2 / np.pi))
    # The planner has the full table as a candidate: its total squared error is no more than every cell's.
    every_cell = sum(r["cells"] * 2.0 * table.cells // r["cells"] for r in at_one.values())
    assert sum(r["expected_squared_error"] for r in at_one.values()) <= every_cell * (1 + 1e-9)
    assert main(["release", "rochdale", "--epsilon", "1", "--simulate", "--seed", "2", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    for item in public["plan"]["expected_error"]:
        assert item["expected_l1_normal_approx"] == pytest.approx(at_one[item["margin"]]["expected_l1"])
        assert audit["evaluation"]["expected_l1_by_margin"][item["margin"]] == pytest.approx(
            item["expected_l1_normal_approx"])


@pytest.mark.parametrize("delta", [None, 1e-6])
@pytest.mark.parametrize("name", ["rochdale", "journey_to_work"])
def test_the_max_cell_variance_objective_trades_total_error_for_the_worst_cell(name, delta):
    table = tr.builtin_table(name)
    margins = tr.default_model(table).generators
    total = get_mechanism("planned").expected_errors(plan_at(table.shape, margins, 1.0, delta=delta))
    worst = get_mechanism("planned").expected_errors(
        plan_at(table.shape, margins, 1.0, delta=delta, options={"plan_objective": "max-cell-variance"}))
    # Strictly smaller unless the total-error plan already has the smallest worst cell (journey to work: the full
    # table alone, where every cell of a margin has the same variance and no other design lowers it).
    assert max(e.cell_sd for e in worst.values()) <= max(e.cell_sd for e in total.values()) * (1 + 1e-9)
    if name == "rochdale":
        assert max(e.cell_sd for e in worst.values()) < max(e.cell_sd for e in total.values()) * (1 - 1e-3)
    assert sum(e.total_variance for e in worst.values()) >= sum(e.total_variance for e in total.values()) * (1 - 1e-9)
    with pytest.raises(tr.TabreleaseError, match="--plan-objective does not apply to the fourier mechanism"):
        plan_at(table.shape, margins, 1.0, mechanism="fourier", options={"plan_objective": "max-cell-variance"})


@pytest.mark.parametrize("name", ["edwards", "journey_to_work"])
def test_release_mode_noise_of_every_block_has_its_planned_scale(name):
    """Through `measure` (run_plan's privacy step: its release keeps these measurements) with OpenDP's sampler: per
    block, the mean |noisy - true| over 120 draws against the exact mean of a discrete Laplace on the block's lattice
    (1 for margins, 1/I for coefficients): 2q/(1 - q^2) lattice steps, q = exp(-1 / (b I)). Within 12%: a scale
    halved or dropped is far outside. (The estimate and the rounding after the noise do not change the measurements;
    running them 120 times took most of this test's time.)"""
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, tr.default_model(table).generators, 0.5)
    deviations = {b.variables: [] for b in plan.design.blocks}
    exact = {b.variables: by_hand(table.counts, b.query, b.variables, plan.design.basis_kind) for b in plan.design.blocks}
    for _ in range(120):
        measurements = measure(plan, table.counts, SecureNoise())
        for block, measured in zip(plan.design.blocks, measurements.blocks):
            deviations[block.variables].append(np.abs(measured.values - exact[block.variables]))
    for block in plan.design.blocks:
        lattice = 1.0 if block.query == "margin_cells" else (2.0 ** (table.k / 2) if plan.design.basis_kind == "fourier"
                                                            else float(np.prod(table.shape)))
        b = plan.block_scale(block.query, block.variables)
        assert b == pytest.approx(block.relative_scale * plan.design.whitened_sensitivity() / 0.5)
        q = np.exp(-1.0 / (b * lattice))
        expected = 2 * q / (1 - q**2) / lattice
        # |Laplace| has sd about its mean: 4.5 standard errors, at least 12% (a halved scale is 50% off)
        draws = np.concatenate(deviations[block.variables])
        assert np.mean(draws) == pytest.approx(expected, rel=max(0.12, 4.5 / np.sqrt(draws.size)))


@pytest.mark.e2e
def test_plan_gives_the_epsilon_a_target_error_needs(capsys, tmp_path):
    """Laplace scales fall as 1/epsilon, so the expected L1 at epsilon e is L1(1) / e: the epsilon a target needs is
    L1(1) / target, checked against the bisection for every margin of Czech, and through the command line."""
    from tabrelease.cli import main
    from tabrelease.forecast import epsilon_for_target, expected_errors_table

    table = tr.builtin_table("czech")
    margins = tr.default_model(table).generators
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0))  # the planned mechanism (its epsilon is not used)
    at_one = {tuple(r["axes"]): r["expected_l1"] for r in expected_errors_table(table.shape, margins, [1.0], spec)}
    needed = epsilon_for_target(table.shape, margins, 20.0, spec)
    for g, epsilon in needed.items():
        assert epsilon == pytest.approx(at_one[g] / 20.0, rel=1e-6)
    assert main(["plan", "czech", "--target-l1", "20", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["epsilon_needed_for_all"] == pytest.approx(max(needed.values()))
    assert (printed["question"], printed["error_model"], printed["target_l1"]) == ("epsilon_for_target", "unbiased",
                                                                                   20.0)
    assert {r["letters"]: r["epsilon_needed"] for r in printed["margins"]} == pytest.approx(
        {tr.models.margin_label(g, tr.builtin_table("czech").letters): e for g, e in needed.items()})
    # In words, the unbiased figure is called an upper one, and the way to the fitted release's epsilon is named.
    assert main(["plan", "czech", "--target-l1", "20"]) == 0
    words = capsys.readouterr().out
    assert f"all margins at once: epsilon {max(needed.values()):.4g}" in words
    last = words.splitlines()[-1]
    assert last.startswith("an upper figure: the normal approximation is one for Laplace noise") and "--reference TABLE" in last
    from tests.helpers import neighbouring_reference

    neighbouring_reference(tr.builtin_table("czech"), tmp_path / "ref.csv")
    assert main(["plan", "czech", "--target-l1", "20", "--reference", str(tmp_path / "ref.csv")]) == 0
    assert "an upper figure" not in capsys.readouterr().out
    # The confidential table itself is no reference (a review's trial: figures simulated on its true counts).
    assert main(["plan", "czech", "--target-l1", "20", "--reference", "czech"]) == 2
    assert "holds exactly czech's counts: a reference is public data" in capsys.readouterr().err
    assert main(["plan", "czech"]) == 2
    assert "give --epsilon (the errors it gives) or --target-l1" in capsys.readouterr().err
    # A target met at the smallest epsilon a release takes: the search stops there, and says so (a new user read the
    # figure as the epsilon the target needs), as it says "beyond" the largest.
    assert "at most 1e-06" not in words
    assert main(["plan", "czech", "--target-l1", "1e12"]) == 0
    words = capsys.readouterr().out
    assert "all margins at once: epsilon at most 1e-06" in words
    assert "at most 1e-06: the smallest epsilon a release takes meets the target" in words
    assert main(["plan", "czech", "--target-l1", "1e12", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["epsilon_needed_for_all"] == pytest.approx(1e-6)
    assert any(n.startswith("a margin's epsilon_needed of 1e-06 is the smallest a release takes") for n in
               printed["notes"])


@pytest.mark.unit
def test_the_plan_says_which_candidates_it_did_not_consider():
    from itertools import combinations

    from tabrelease.mechanisms.planned import CANDIDATES_NOT_ABOVE_NOTE

    small = plan_at((2,) * 6, list(combinations(range(6), 2)), 1.0)
    assert not [n for n in small.notes if "candidate" in n]  # every subset's margin was one
    wide = plan_at((2,) * 10, list(combinations(range(10), 2)), 1.0)
    assert any("with more than 8 variables not every set's margin was a candidate" in n for n in wide.notes)
    large = plan_at((3,) * 8, list(combinations(range(8), 2)), 1.0)  # 6561 cells: the fit is not over the cells
    assert CANDIDATES_NOT_ABOVE_NOTE in large.notes
    assert all(len(b.variables) <= 2 for b in large.design.blocks)
    closure = plan_at((2,) * 6, list(combinations(range(6), 2)), 1.0, options={"plan_candidates": "closure"})
    assert all(len(b.variables) <= 2 for b in closure.design.blocks) and not [n for n in closure.notes
                                                                            if "candidate" in n]


def test_a_cell_level_estimator_past_its_size_is_refused_in_one_line_before_it_is_built():
    # 2^23 binary cells: the paper's LP would be over every one of them; refused by name, not attempted.
    shape = (2,) * 23
    with pytest.raises(tr.TabreleaseError, match=r"solves over every cell of the table: 8\.39e\+06 cells, more than "
                                                 r"the 4,194,304"):
        plan_at(shape, [(0, 1), (1, 2)], 1.0, mechanism="auto")
    # The planned mechanism fits the margins themselves at this size.
    assert plan_at(shape, [(0, 1), (1, 2)], 1.0).margins == ((0, 1), (1, 2))


def test_plan_of_a_wide_table_skips_the_paper_column_with_a_note(tmp_path, capsys):
    import pandas as pd

    names = [f"v{i:02d}" for i in range(23)]
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.integers(0, 2, size=(40, 23)).astype(str), columns=names).to_csv(tmp_path / "wide.csv",
                                                                                      index=False)
    (tmp_path / "levels.json").write_text(json.dumps({n: ["0", "1"] for n in names}))
    common = ["plan", str(tmp_path / "wide.csv"), "--microdata", "--levels", str(tmp_path / "levels.json"),
              "--margins", "[v00,v01][v01,v02]", "--epsilon", "1"]
    assert main(common) == 0
    out = capsys.readouterr().out
    assert "note: the paper's mechanism is not compared: the linf-lp estimator solves over every cell" in out
    assert "nothing was charged" not in out
    assert main(common + ["--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = printed["margins"]
    assert len(rows) == 2 and all(r["paper_expected_l1"] is None and "8.39e+06 cells" in r["paper_note"] for r in rows)
    assert any("8.39e+06 cells" in note for note in printed["notes"])
    assert all(r["expected_l1"] > 0 for r in rows)


@pytest.mark.parametrize("scan_max", [12, 0])
def test_expected_errors_visit_each_blocks_residuals_as_the_pairs_did(scan_max, monkeypatch):
    # expected_margin_errors and residual_weights look up each block's and margin's subsets among the residuals; the
    # definitions loop over every (block, residual) and (margin, residual) pair. On 60 random designs (margin and
    # coefficient blocks of both bases, a public total or not) they agree; scan_max 0 takes the other branch.
    import itertools
    from math import prod

    from tabrelease import models
    from tabrelease.measurements import MARGIN_CELLS
    from tabrelease.models import downward_closure, maximal_margins
    from tabrelease.planning import expected_margin_errors, information, residual_weights

    monkeypatch.setattr(models, "SUBSET_SCAN_MAX_SIZE", scan_max)
    rng = np.random.default_rng(23)
    for trial in range(60):
        shape = tuple(int(x) for x in rng.integers(2, 5, size=5))
        every = [c for size in range(1, 4) for c in itertools.combinations(range(5), size)]
        margins = [every[i] for i in rng.choice(len(every), size=rng.integers(1, 6), replace=False)]
        closure = downward_closure(maximal_margins(margins)[0])
        blocks = []
        for s in [every[i] for i in rng.choice(len(every), size=rng.integers(1, 8), replace=False)] + [()]:
            query = MARGIN_CELLS if rng.random() < 0.6 else "coefficients"
            blocks.append((query, s, "fourier" if rng.random() < 0.5 else "efron-stein", float(rng.uniform(0.5, 9))))
        public = bool(rng.random() < 0.3)
        info = {t: sum(information(shape, q, s, kind, t) / v for q, s, kind, v in blocks) for t in closure}
        found = expected_margin_errors(shape, margins, blocks, public)
        for a in margins:
            total = sum(np.inf if info[t] <= 0 else prod(shape[j] for j in range(5) if j not in a)
                        * prod(shape[j] - 1 for j in t) / info[t]
                        for t in closure if set(t) <= set(a) and not (public and not t))
            assert found[tuple(a)].total_variance == pytest.approx(total, rel=1e-12), (trial, a)
        weights = [sum(prod(shape[j] for j in range(5) if j not in a) * prod(shape[j] - 1 for j in t)
                       for a in margins if set(t) <= set(a)) for t in closure]
        assert np.allclose(residual_weights(shape, margins, closure), weights, rtol=1e-12)


@pytest.mark.parametrize("workload", ["model", "all-2-way"])
@pytest.mark.parametrize("name", ["rochdale", "edwards", "czech", "minn38", "housing", "titanic"])
def test_the_default_plan_measures_nothing_it_drowns_in_noise(name, workload):
    """A block with a thousand times the noise of another buys a millionth of its information for a thousandth of
    its share of the budget: the search's gradient for such a weight vanishes with it, so it can stop short of zero,
    so the search must carry it to its bound (a search that held only the gradient, not the pairs, to the free
    variables left such blocks in two of these plans)."""
    from tabrelease import frontier

    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), 1.0)
    scales = [b.relative_scale for b in plan.design.blocks]
    assert max(scales) <= 1e3 * min(scales), scales


@pytest.mark.parametrize("name", ["czech", "rochdale", "edwards", "housing"])
def test_a_public_total_never_makes_the_plan_worse(name):
    """A total published exactly is information for free: the plan made as if it were noisy stays valid, so the
    plan with it must be at least as good (total expected squared error of the released margins). Rochdale's had
    been worse with it (a new user's trial: 2585 against 2155 at epsilon 1)."""
    import tabrelease as tr
    from tabrelease import frontier
    from tabrelease.planning import _total_error, plan_measurements

    table = tr.builtin_table(name)
    for workload in frontier.WORKLOADS:
        margins = frontier.workload_margins(table, workload)
        plans = [plan_measurements(table.shape, margins, public_total=public, superset_cells=2**14)
                 for public in (False, True)]
        noisy, public = (_total_error(p, margins) for p in plans)
        assert plans[1].public_total and public <= noisy * (1 + 1e-9), (workload, public, noisy)


def test_a_plan_with_a_public_total_measures_no_block_of_the_empty_set():
    """The plan made as if n were noisy, kept where better with n published, had kept its noisy total block (a
    review found one in 7,356 random plans: this shape and these margins): it only tells n, published exactly.
    Dropped, with its column of the changes, so the noise is calibrated to what is measured."""
    from tabrelease.planning import _total_error, plan_measurements

    margins = [(1, 2), (3,), (2, 3), (0, 1)]
    design = plan_measurements((3, 4, 2, 3), margins, public_total=True, superset_cells=2**14)
    noisy = plan_measurements((3, 4, 2, 3), margins, public_total=False, superset_cells=2**14)
    assert design.public_total and all(b.variables for b in design.blocks)
    assert design.changes.shape[1] == len(design.blocks)
    assert _total_error(design, margins) <= _total_error(noisy, margins)


def test_rounding_to_a_total_is_the_nearest_integer_table_with_that_total_by_brute_force():
    """`round_to_total` against every integer vector near the values with the given sum: its L1 distance is the
    least (and it is integer, non-negative, of that sum), with and without an integer base."""
    import itertools

    from tabrelease.rounding import round_to_total

    rng = np.random.default_rng(11)
    for trial in range(300):
        size = int(rng.integers(1, 6))
        values = rng.exponential(1.5, size) * (rng.random(size) < 0.8)
        total = max(0, int(round(values.sum())) + int(rng.integers(-3, 4)))
        # With a base, the change may be negative (a cell below its base), and a cell's value below 0 counts as 0.
        base = rng.integers(0, 3, size) if trial % 3 == 0 else None
        change = values if base is None else values - rng.integers(0, 4, size)
        real = np.maximum(change + (0 if base is None else base), 0.0)
        got = round_to_total(change, total, base=base)
        assert got.dtype == np.int64 and got.min() >= 0 and got.sum() == total
        ranges = [range(0, int(np.ceil(v)) + total + 1) for v in real]
        candidates = [np.array(c) for c in itertools.product(*ranges) if sum(c) == total]
        for norm in (1, 2):  # the nearest in L1 and in L2 at once
            best = min(np.sum(np.abs(c - real) ** norm) for c in candidates)
            assert np.sum(np.abs(got - real) ** norm) == pytest.approx(best, abs=1e-9), (real, total, got, norm)


@pytest.mark.parametrize("variant", ["public-total", "replace", "randomized-response", "cliques", "local"])
def test_rounding_to_the_nearest_integer_keeps_an_exact_total(variant):
    """`--rounding nearest` published margins that missed n (1840 for czech's 1841) where the release says its
    total is exact: public, n under replace neighbours, or randomized response's count of reports; on the cells, on
    a junction tree's cliques and on margins fitted with local consistency only (past the cell limit)."""
    if variant in ("cliques", "local"):
        shape = (3,) * 8
        counts = np.random.default_rng(2).poisson(1.5, size=shape)
        margins = ([(0, 1), (1, 2), (2, 3), (0, 3), (4, 5)] if variant == "cliques" else
                   [(a, b) for a in range(8) for b in range(a + 1, 8)])
        options = {"public_total": True}
    else:
        table = tr.builtin_table("czech")
        shape, counts, margins = table.shape, table.counts, tr.default_model(table).generators
        options = {"public_total": True} if variant == "public-total" else None
    n = int(counts.sum())
    missed = 0
    for seed in range(6):
        plan = plan_at(shape, margins, 0.5, rounding="nearest", options=options,
                       neighbours="replace" if variant == "replace" else "add-remove",
                       **({"mechanism": variant} if variant == "randomized-response" else {}))
        release = tr.run_plan(plan, counts, SimulationNoise(seed))
        assert [int(np.sum(m)) for m in release.released_margins] == [n] * len(margins)
        unrounded = tr.run_plan(with_post_processing(plan, rounding="none"), counts, SimulationNoise(seed))
        missed += any(int(np.floor(np.asarray(m) + 0.5).sum()) != n for m in unrounded.released_margins)
    assert missed  # cell by cell, the nearest integers would have missed n


@pytest.mark.e2e
def test_the_published_scales_are_the_same_whichever_blas_kernel_planned_them(tmp_path):
    """A reviewer's trial: a Gaussian release of Titanic's two-way margins published noise scales that differed in
    their last digits under OpenBLAS's Prescott kernel (its fallback on CPUs it cannot name, common in virtual
    machines), with the same seed. The plan keeps each relative scale to `SCALE_DIGITS` significant digits, and the
    public files are byte for byte the same under both kernels (where the BLAS is not OpenBLAS, the setting does
    nothing and the two runs agree all the same)."""
    import os
    import subprocess
    import sys

    from tabrelease.planning import SCALE_DIGITS, canonical_scale

    assert canonical_scale(12.992382895568502) == canonical_scale(12.9923828955685) == 12.9923828956
    assert SCALE_DIGITS == 12
    plan = plan_at((2, 2, 2, 4), [(0, 1), (0, 2), (1, 3)], 0.3, delta=1e-6)
    assert all(b.relative_scale == canonical_scale(b.relative_scale) for b in plan.design.blocks)
    public = []
    for kernel in (None, "Prescott"):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        if kernel:
            env["OPENBLAS_CORETYPE"] = kernel
        out = tmp_path / (kernel or "default")
        done = subprocess.run([sys.executable, "-m", "tabrelease", "release", "titanic", "--epsilon", "0.3", "--delta",
                               "1e-6", "--margins", "all-2-way", "--simulate", "--seed", "5", "--out", str(out)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        public.append({p.name: p.read_bytes() for p in sorted((out / "public").iterdir())})
    assert public[0] == public[1]



def test_the_normal_figure_of_a_margin_measured_by_one_laplace_draw_a_cell_is_13_percent_above_the_exact_one():
    """plan calls its E L1 an upper figure for Laplace noise: where each released cell is one Laplace draw of scale
    b (one margin, its cells measured), the exact mean absolute error is b a cell and the normal approximation says
    sd sqrt(2 / pi) = 2 b / sqrt(pi), 12.8% more (a new user's trial measured 24.4 against the plan's 27.1 on a dense
    table). A sum of independent Laplace draws is a scale mixture of normals, so the normal figure is never below
    the exact one (Jensen)."""
    from tabrelease.testing import plan_at

    plan = plan_at((4, 3, 5), [(0, 1)], 1.0)
    (block,) = plan.design.blocks
    b = plan.calibration.scale * block.relative_scale
    figure = get_mechanism("planned").expected_errors(plan)[(0, 1)]
    assert figure.expected_l1 == pytest.approx(12 * 2 * b / np.sqrt(np.pi))
    draws = np.random.default_rng(5).laplace(0, b, size=(20000, 12))
    assert np.abs(draws).sum(axis=1).mean() == pytest.approx(12 * b, rel=0.01)
    assert figure.expected_l1 / (12 * b) == pytest.approx(1.128, abs=0.001)


@pytest.mark.parametrize("name, workload, delta, neighbours", [
    ("rochdale", None, None, "add-remove"), ("edwards", "all-2-way", None, "add-remove"),
    ("czech", None, 1e-6, "add-remove"), ("titanic", None, None, "replace")])
def test_plan_states_the_noise_in_the_released_total(name, workload, delta, neighbours):
    """The plan's figure for the noise in the released total (`forecast.total_noise_sds`, from the design's scales)
    against the sample standard deviation of the total the estimator pins over 400
    seeded draws of the plan's own noise on the table: within 10% (a Laplace variance without its factor 2 is 29%
    low); 0 under replace neighbours, where no record changes n."""
    from tabrelease.forecast import total_noise_sds

    table = tr.builtin_table(name)
    margins = (tr.default_model(table) if workload is None else tr.parse_model(workload, table)).generators
    spec = tr.ReleaseSpec(loss=tr.loss_of(0.5, delta), unit=tr.unit_of(neighbours))
    (row,) = total_noise_sds(table.shape, margins, [0.5], spec)
    assert row["epsilon"] == 0.5
    plan = plan_at(table.shape, margins, 0.5, delta=delta, neighbours=neighbours)
    # The total the least-squares estimator pins for each draw (`LeastSquares.prepared`), as the audit reads it.
    totals = [float(plan.estimator.prepared(measure(plan, table.counts, SimulationNoise(seed=s)))[3])
              for s in range(400)]
    if neighbours == "replace":
        assert row["total_noise_sd"] == 0 and np.ptp(totals) < 1e-6
        return
    assert np.std(totals, ddof=1) == pytest.approx(row["total_noise_sd"], rel=0.10)
    if name == "edwards":  # the plan measures the full table alone: 64 cells of Laplace(1 / 0.5), variance 2 b^2 each
        assert [(b.query, b.variables) for b in plan.design.blocks] == [("margin_cells", tuple(range(6)))]
        assert row["total_noise_sd"] == pytest.approx(np.sqrt(64 * 2 * 2.0**2))


@pytest.mark.e2e
def test_plan_command_says_how_noisy_the_released_total_is(capsys):
    from tabrelease.forecast import total_noise_sds

    table = tr.builtin_table("rochdale")
    expected = total_noise_sds(table.shape, tr.default_model(table).generators, [0.1, 1.0],
                               tr.ReleaseSpec(loss=tr.loss_of(1.0)))
    assert main(["plan", "rochdale", "--epsilon", "0.1,1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_noise"] == expected
    assert main(["plan", "rochdale", "--epsilon", "0.1,1"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("total:")]
    assert line and (f"standard deviation {expected[0]['total_noise_sd']:.4g} at epsilon 0.1, "
                     f"{expected[1]['total_noise_sd']:.4g} at epsilon 1 (counts)") in line[0]
    assert main(["plan", "rochdale", "--epsilon", "1", "--public-total"]) == 0
    assert "total: released exactly, with no noise" in capsys.readouterr().out


@pytest.mark.parametrize("neighbours, public_total, note", [
    ("replace", False, "replace"), ("add-remove", True, "public"), ("replace", True, "public"),
    ("add-remove", False, None)])
def test_the_plan_says_why_its_total_is_exact(neighbours, public_total, note):
    """A plan whose total is measured exactly says why: replace neighbours never change n (sensitivity 0), or n was
    asked to be public; a plan of add-remove neighbours without a public total says neither (its total is noisy)."""
    from tabrelease.mechanisms.planned import PUBLIC_TOTAL_NOTE, REPLACE_TOTAL_NOTE

    plan = get_mechanism("planned").plan((2, 3, 2), ((0, 1), (1, 2)), 1.0, neighbours=neighbours, delta=None,
                                         calibration="exact", options={"public_total": public_total})
    said = {REPLACE_TOTAL_NOTE: "replace", PUBLIC_TOTAL_NOTE: "public"}
    assert [said[n] for n in plan.notes if n in said] == ([note] if note else [])
    assert plan.design.public_total == (note is not None)


def test_a_plan_of_microdata_takes_a_published_table_of_counts_for_its_reference(tmp_path, capsys):
    """A new user's trial: --microdata applied to --reference too, so a published count table could not be the
    reference of a plan of microdata (and the advice, to drop --microdata, would have broken the table's own
    reading). A reference that is no table of the table's variables is refused in one line."""
    from tabrelease.cli import main

    rows = ["sex,area"] + ["male,urban"] * 30 + ["female,rural"] * 25 + ["male,rural"] * 12 + ["female,urban"] * 8
    (tmp_path / "people.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"], "area": ["rural", "urban"]}')
    (tmp_path / "published.csv").write_text("sex,area,count\nmale,urban,29\nfemale,rural,27\nmale,rural,11\n")
    argv = ["plan", str(tmp_path / "people.csv"), "--microdata", "--levels", str(tmp_path / "lv.json"), "--margins",
            "[AB]", "--target-l1", "20", "--json", "--reference"]
    assert main([*argv, str(tmp_path / "published.csv")]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["margins"][0]["epsilon_needed"] > 0
    (tmp_path / "other.csv").write_text("age,count\nold,3\nyoung,4\n")
    assert main([*argv, str(tmp_path / "other.csv")]) == 2
    assert "does not have the variables and levels of people" in capsys.readouterr().err
    assert main([*argv, str(tmp_path / "people.csv")]) == 2  # the table itself
    assert "holds exactly people's counts" in capsys.readouterr().err
