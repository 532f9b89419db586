"""Releases past the cell-based engine (issue 12, first part): least squares on the margins themselves, controlled
rounding of margins without cells, and an audit that leaves out (and says so) what it cannot do at a size."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import tabrelease as tr
from tabrelease.noise import SimulationNoise
from tabrelease.models import HierarchicalModel
from tabrelease.loglinear import fit_loglinear
from tabrelease.planner import with_post_processing
from tabrelease.testing import plan_at
from tabrelease.loglinear.design import is_decomposable
from tabrelease.noise import NoNoise
from tabrelease.rounding import mutually_consistent
from tabrelease.tables import margin_counts

TABLES = ["edwards", "czech", "rochdale", "journey_to_work"]


@pytest.mark.parametrize("name", TABLES)
def test_local_fit_without_noise_returns_every_margin_exactly(name):
    table = tr.builtin_table(name)
    plan = with_post_processing(plan_at(table.shape, tr.default_model(table).generators, 1.0),
                                "local-least-squares")
    release = tr.run_plan(plan, table.counts, NoNoise())
    assert release.table is None and release.consistent and release.rounding_gap == 0.0
    for g, m in zip(release.margins, release.released_margins):
        np.testing.assert_array_equal(m, margin_counts(table.counts, g))


def _random_case(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 6))
    shape = tuple(int(v) for v in rng.integers(2, 4, size=k))
    margins = sorted({tuple(sorted(rng.choice(k, size=int(rng.integers(1, 4)), replace=False).tolist()))
                      for _ in range(int(rng.integers(2, 5)))})
    counts = rng.poisson(rng.uniform(0.5, 6), size=shape)
    return shape, margins, counts


@pytest.mark.parametrize("seed", range(16))
def test_local_margins_are_integer_non_negative_and_agree_on_every_shared_sub_margin(seed):
    shape, margins, counts = _random_case(seed)
    plan = with_post_processing(plan_at(shape, margins, 0.5), "local-least-squares")
    release = tr.run_plan(plan, counts, SimulationNoise(seed))
    released = release.released_margins
    assert all(m.dtype.kind == "i" and m.min() >= 0 for m in released)
    assert release.consistent and mutually_consistent(released, release.margins)
    assert len({int(m.sum()) for m in released}) == 1


@pytest.mark.parametrize("seed", range(16))
def test_on_a_decomposable_model_the_local_fit_is_the_fit_over_cells(seed):
    """Locally consistent non-negative margins of a decomposable model are the margins of a non-negative table:
    the two fits solve the same problem and give the same real-valued margins (to solver tolerance)."""
    shape, margins, counts = _random_case(seed)
    if not is_decomposable(plan_at(shape, margins, 1.0).margins):
        k = len(shape)  # a chain instead: [0..k-2][k-2, k-1] is decomposable
        margins = [tuple(range(k - 1)), (k - 2, k - 1)]
    assert is_decomposable(plan_at(shape, margins, 1.0).margins)
    plan = with_post_processing(plan_at(shape, margins, 0.5), rounding="none")
    measurements = tr.run_plan(plan, counts, SimulationNoise(seed)).measurements
    cells = tr.release_from_measurements(with_post_processing(plan, "least-squares"), measurements)
    local = tr.release_from_measurements(with_post_processing(plan, "local-least-squares"), measurements)
    scale = max(1.0, counts.sum())
    for g, m in zip(local.margins, local.released_margins):
        np.testing.assert_allclose(m, margin_counts(cells.table, g), atol=1e-5 * scale)


@pytest.mark.e2e
def test_the_planned_release_goes_local_past_its_cell_limit_and_says_so(tmp_path):
    k = 13  # 8192 cells
    rng = np.random.default_rng(1)
    counts = rng.poisson(4, size=(2,) * k)
    table = tr.ContingencyTable(tuple(f"V{i}" for i in range(k)), tuple(("0", "1") for _ in range(k)), counts, "wide")
    margins = list(itertools.combinations(range(k), 2))
    done = tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=margins, mode="simulation", seed=2),
                              tmp_path / "r")
    release = done.release
    assert release.estimator == "local-least-squares" and release.table is None and release.consistent
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert public["consistency"] == "local"
    assert any("locally consistent" in w for w in public["warnings"])
    assert audit["evaluation"]["max_l1_error"] > 0  # the margin errors are there
    # Past the cell-by-cell refit, the refit is from the margins on the model's junction tree: the same G², df
    # and MLE distance as the cell path (computed here independently, cell by cell).
    note = audit["evaluation"]["refit_note"]
    assert "computed from the generator margins on the model's junction tree" in note
    cell_fit = fit_loglinear(table, HierarchicalModel(tuple(margins), k))
    assert audit["evaluation"]["g2_original"] == pytest.approx(cell_fit.g2, rel=1e-8)
    assert audit["evaluation"]["df_original"] == cell_fit.df
    from tabrelease.evaluation import _margin_for
    from tabrelease.loglinear import ipf_to_margins, l1_distance

    targets = [_margin_for(g, release) for g in margins]
    fitted, _, _ = ipf_to_margins(targets, margins, table.shape, tol=1e-11)
    assert audit["evaluation"]["mle_l1"] == pytest.approx(l1_distance(cell_fit.probabilities, fitted / fitted.sum()),
                                                          rel=1e-6, abs=1e-9)


@pytest.mark.e2e
def test_an_audit_refit_that_fails_does_not_fail_the_release(tmp_path, monkeypatch):
    import tabrelease.evaluation as evaluation

    def broken(*args, **kwargs):
        raise tr.TabreleaseError("the facial-set LP did not solve: HiGHS says Unknown")

    monkeypatch.setattr(evaluation, "fit_loglinear", broken)
    done = tr.publish_release(tr.builtin_table("czech"),
                              tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1), tmp_path / "r")
    assert "refit failed (TabreleaseError)" in done.evaluation.refit_note
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert audit["evaluation"]["g2_original"] is None and (tmp_path / "r" / "public" / "release.json").exists()


@pytest.mark.e2e
def test_a_table_too_large_to_hold_as_cells_is_refused_in_one_line_before_any_work(tmp_path, capsys):
    import pandas as pd

    from tabrelease.cli import main

    people = pd.DataFrame({f"V{j}": ["0", "1"] * 5 for j in range(30)})
    with pytest.raises(tr.TabreleaseError, match=r"has 1.07e\+09 cells; tables are held as cells up to"):
        tr.table_from_microdata(people, as_records=False)
    # A long table listing its cells as complete cannot be one at 2^30 cells: refused, naming --sparse. Listed as
    # sparse, it is kept as its rows with their counts (tests/test_long_counts.py), and in release mode its levels
    # must be declared (read from a sparse listing they would reveal which values occur).
    frame = people.assign(count=1).drop_duplicates(subset=[f"V{j}" for j in range(30)])
    frame.to_csv(tmp_path / "wide.csv", index=False)
    code = main(["release", str(tmp_path / "wide.csv"), "--epsilon", "1", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "held as cells up to" in err and "--sparse" in err
    code = main(["release", str(tmp_path / "wide.csv"), "--epsilon", "1", "--sparse", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "declare every variable's levels" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.csv"]


def _table_with_margins_exists(margins, released, shape) -> bool:
    """An independent check of global consistency: scipy's LP looks for a non-negative table over every cell with
    exactly these margins."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    cells = int(np.prod(shape))
    index = np.arange(cells).reshape(shape)
    rows, rhs = [], []
    for g, m in zip(margins, released):
        labels = margin_counts(np.zeros(shape), g).shape
        flat = np.ravel_multi_index(tuple(np.indices(shape)[list(g)].reshape(len(g), -1)), labels)
        rows.append(sp.csr_matrix((np.ones(cells), (flat, index.ravel())), shape=(int(np.prod(labels)), cells)))
        rhs.append(np.ravel(m))
    result = linprog(np.zeros(cells), A_eq=sp.vstack(rows), b_eq=np.concatenate(rhs).astype(float),
                     bounds=(0, None), method="highs")
    return result.status == 0


CYCLE = [(0, 1), (1, 2), (2, 3), (0, 3), (4, 5), (5, 6), (6, 7)]  # a 4-cycle (not decomposable) and a chain


@pytest.mark.parametrize("seed", range(4))
def test_past_the_cell_limit_a_non_decomposable_model_is_fitted_on_a_junction_tree_and_is_globally_consistent(seed):
    shape = (3,) * 8  # 6561 cells: past the cell fit
    counts = np.random.default_rng(seed).poisson(1.5, size=shape)
    release = tr.run_plan(plan_at(shape, CYCLE, 0.3), counts, SimulationNoise(seed))
    assert release.plan.estimator.cliques is not None and release.consistency == "global"
    assert any("clique margins of a junction tree" in note for note in release.notes)
    assert all(m.dtype.kind == "i" and m.min() >= 0 for m in release.released_margins)
    assert _table_with_margins_exists(release.margins, release.released_margins, shape)


@pytest.mark.parametrize("seed", range(3))
def test_a_junction_tree_release_rounded_to_the_nearest_integer_publishes_each_fitted_cell_s_nearest_integer(seed):
    # Asked for rounding "nearest", the clique fit once published its real-valued margins as they were.
    shape = (3,) * 8
    counts = np.random.default_rng(seed).poisson(1.5, size=shape)
    releases = {r: tr.run_plan(plan_at(shape, CYCLE, 0.3, rounding=r), counts, SimulationNoise(seed))
                for r in ("nearest", "none")}
    nearest, unrounded = releases["nearest"], releases["none"]
    assert nearest.plan.estimator.cliques is not None
    assert any(not np.allclose(m, np.round(m)) for m in unrounded.released_margins)
    for m, fitted in zip(nearest.released_margins, unrounded.released_margins):
        assert m.dtype.kind == "i"
        np.testing.assert_array_equal(m, np.floor(np.asarray(fitted, float) + 0.5).astype(np.int64))
    assert nearest.consistent == mutually_consistent(nearest.released_margins, nearest.margins)


def test_the_junction_tree_fit_without_noise_returns_every_margin_exactly():
    shape = (3,) * 8
    counts = np.random.default_rng(5).poisson(1.5, size=shape)
    release = tr.run_plan(plan_at(shape, CYCLE, 1.0), counts, NoNoise())
    for g, m in zip(release.margins, release.released_margins):
        np.testing.assert_array_equal(m, margin_counts(counts, g))


def test_margins_that_only_agree_pairwise_are_called_local_and_can_have_no_table():
    """The classic counterexample: three 2-way margins of binary variables that agree pairwise (every one-way
    margin is (1, 1)) yet no table has them all; the release path must call such margins local, never global."""
    from tabrelease.rounding import _guarantee

    x_eq_y = np.array([[1, 0], [0, 1]])
    x_ne_y = np.array([[0, 1], [1, 0]])
    margins = [(0, 1), (1, 2), (0, 2)]
    released = (x_eq_y, x_eq_y, x_ne_y)
    assert mutually_consistent(released, margins)
    assert not _table_with_margins_exists(margins, released, (2, 2, 2))
    assert _guarantee(True, margins) == "local"
    assert _guarantee(True, [(0, 1), (1, 2)]) == "global"


def _records(seed, k=6, levels=3, n=4000):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, levels, size=(n, k))
    codes[:, 1] = np.where(rng.random(n) < 0.7, codes[:, 0], codes[:, 1])  # some association
    import pandas as pd

    frame = pd.DataFrame({f"V{j}": codes[:, j].astype(str) for j in range(k)})
    declared = {f"V{j}": [str(i) for i in range(levels)] for j in range(k)}
    return frame, declared


def test_a_table_held_as_records_gives_every_margin_its_cells_would():
    frame, declared = _records(0)
    cells = tr.table_from_microdata(frame, levels=declared, as_records=False)
    records = tr.table_from_microdata(frame, levels=declared, as_records=True)
    assert type(records).__name__ == "MicrodataTable" and not records.held_as_cells
    for r in range(0, 4):
        for axes in itertools.combinations(range(6), r):
            np.testing.assert_array_equal(records.margin_counts(axes), margin_counts(cells.counts, axes))
    np.testing.assert_array_equal(records.counts, cells.counts)
    assert (records.n, records.cells, records.zero_cells) == (cells.n, cells.cells, cells.zero_cells)
    rows, counts = records.distinct_records()
    assert [cells.counts[tuple(r)] for r in rows] == counts.tolist() and len(rows) == np.count_nonzero(cells.counts)


@pytest.mark.parametrize("margins", [[(0, 1), (1, 2), (3, 4, 5)], list(itertools.combinations(range(6), 2))])
def test_the_release_of_records_is_the_release_of_their_cells(margins):
    """Same plan, same seed: the planned mechanism reads the same margins from records as from cells, and what
    follows (fit, rounding, audit errors) is the same."""
    frame, declared = _records(1)
    cells = tr.table_from_microdata(frame, levels=declared, as_records=False)
    records = tr.table_from_microdata(frame, levels=declared, as_records=True)
    a = tr.release_margins(cells, tr.ReleaseSpec(loss=tr.loss_of(0.7), margins=margins, mode="simulation", seed=3))
    b = tr.release_margins(records, tr.ReleaseSpec(loss=tr.loss_of(0.7), margins=margins, mode="simulation", seed=3))
    for x, y in zip(a.released_margins, b.released_margins):
        np.testing.assert_array_equal(x, y)
    from tabrelease.evaluation import evaluate_release

    assert evaluate_release(cells, a).l1_error_by_margin == evaluate_release(records, b).l1_error_by_margin


@pytest.mark.parametrize("extra, message", [
    (["--mechanism", "efron-stein", "--margins", "[AB]"],
     "the efron-stein mechanism needs every cell of the table, and it has 1e+10 cells (held as records)"),
    (["--margins", "[ABCDEFGH]"],
     "the margin V0 (10) x V1 (10) x V2 (10) x V3 (10) x V4 (10) x V5 (10) x V6 (10) x V7 (10) has 1e+08 cells, "
     "more than the 67,108,864 (2^26) a released margin may have"),
])
@pytest.mark.e2e
def test_past_the_engine_s_limits_one_line_exit_2_nothing_charged_nothing_written(tmp_path, capsys, monkeypatch,
                                                                                 extra, message):
    import pandas as pd

    from tabrelease.cli import main
    from tabrelease.ledger import budget_status, init_ledger

    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    frame = pd.DataFrame({f"V{j}": np.arange(50) % 10 for j in range(10)}).astype(str)  # 10^10 cells
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "levels.json").write_text(json.dumps({f"V{j}": [str(i) for i in range(10)] for j in range(10)}))
    ledger = init_ledger(tmp_path / "ledger.json")
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["release", str(tmp_path / "people.csv"), "--microdata", "--levels", str(tmp_path / "levels.json"),
                 "--epsilon", "1", "--ledger", str(ledger), "--out", str(tmp_path / "r"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err and "nothing was charged" in err
    records = json.loads(Path(ledger).read_text())["records"]
    assert not [r for r in records if r.get("kind") in ("release", "failure")] and budget_status(ledger, "people").releases == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.e2e
def test_twenty_variables_of_ten_levels_release_from_records_with_integer_locally_consistent_margins(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(4)
    codes = rng.integers(0, 10, size=(20000, 20))
    frame = pd.DataFrame({f"V{j}": codes[:, j].astype(str) for j in range(20)})
    table = tr.table_from_microdata(frame, levels={f"V{j}": [str(i) for i in range(10)] for j in range(20)})
    margins = [(j, j + 1) for j in range(19)] + [(0, 19)]  # a ring: not decomposable, cliques small enough
    done = tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=margins, mode="simulation", seed=2),
                              tmp_path / "r")
    release = done.release
    assert all(m.dtype.kind == "i" and m.min() >= 0 for m in release.released_margins)
    assert release.consistent and mutually_consistent(release.released_margins, release.margins)
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert public["consistency"] == release.consistency
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert audit["table"]["cells"] == 10**20 and audit["table"]["n"] == 20000
    # The ring's refit comes from its margins on a junction tree of small cliques; the MLE distance would need
    # every one of the 10^20 cells, and the audit says so.
    evaluation = audit["evaluation"]
    assert evaluation["g2_original"] is not None and evaluation["g2_original"] >= 0
    assert evaluation["mle_l1"] is None and "needs every cell" in evaluation["refit_note"]


@pytest.mark.e2e
def test_a_refit_whose_junction_tree_is_too_large_is_reported_not_attempted(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(5)
    codes = rng.integers(0, 10, size=(5000, 12))
    frame = pd.DataFrame({f"V{j}": codes[:, j].astype(str) for j in range(12)})
    table = tr.table_from_microdata(frame, levels={f"V{j}": [str(i) for i in range(10)] for j in range(12)})
    done = tr.publish_release(table,
                              tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=list(itertools.combinations(range(12), 2)),
                                             mode="simulation", seed=2), tmp_path / "r")
    assert done.evaluation.g2_original is None
    assert "the model's junction tree has a clique of 1e+12 cells" in done.evaluation.refit_note


@pytest.mark.parametrize("seed", range(8))
def test_the_junction_tree_fit_is_the_fit_over_cells(seed):
    """Non-negative clique margins that agree on their separators are exactly the clique margins of non-negative
    tables, so least squares over the triangulation's cliques solves the cell problem: same real-valued margins
    from the same measurements (to solver tolerance), on non-decomposable models."""
    from tabrelease.estimate import LocalLeastSquares
    from tabrelease.junction import junction_tree

    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(4, 6))
    shape = tuple(int(v) for v in rng.integers(2, 4, size=k))
    margins = [(0, 1), (1, 2), (2, 3), (0, 3)] + ([(3, 4)] if k == 5 else [])  # a 4-cycle
    counts = rng.poisson(rng.uniform(0.5, 4), size=shape)
    tree = junction_tree(margins, shape)
    assert not tree.decomposable
    plan = with_post_processing(plan_at(shape, margins, 0.5), rounding="none")
    measurements = tr.run_plan(plan, counts, SimulationNoise(seed)).measurements
    cells = tr.release_from_measurements(with_post_processing(plan, "least-squares"), measurements)
    cliques = tr.release_from_measurements(plan, measurements, estimator=LocalLeastSquares(cliques=tree.cliques))
    scale = max(1.0, counts.sum())
    for g, m in zip(cliques.margins, cliques.released_margins):
        np.testing.assert_allclose(m, margin_counts(cells.table, g), atol=1e-5 * scale)


@pytest.mark.e2e
def test_a_margin_too_large_for_the_fit_is_refused_before_the_charge(tmp_path, capsys, monkeypatch):
    """A margin under the 2^26-cell memory guard can still be far past what the least-squares fit on margins
    handles (an 18-million-cell margin grew the solver to 24 GB): refused in one line, before any charge."""
    import pandas as pd

    from tabrelease.cli import main
    from tabrelease.ledger import init_ledger

    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    rng = np.random.default_rng(0)
    sizes = (20, 15, 9, 7, 4)
    frame = pd.DataFrame({f"v{j}": rng.integers(0, k, 1000).astype(str) for j, k in enumerate(sizes)})
    frame.to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "levels.json").write_text(json.dumps({f"v{j}": [str(i) for i in range(k)] for j, k in enumerate(sizes)}))
    ledger = init_ledger(tmp_path / "ledger.json")
    code = main(["release", str(tmp_path / "p.csv"), "--microdata", "--levels", str(tmp_path / "levels.json"),
                 "--margins", "[ABCD][E]", "--epsilon", "1", "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert ("more than the 1,048,576 it handles (the largest, v0 (20) x v1 (15) x v2 (9) x v3 (7), has 18,900 cells)"
            in err and "nothing was charged" in err)
    records = json.loads(Path(ledger).read_text())["records"]
    assert not [r for r in records if r.get("kind") in ("release", "failure")] and not (tmp_path / "r").exists()


@pytest.mark.parametrize("seed", range(3))
def test_all_two_way_margins_of_sparse_data_at_small_epsilon_release(seed):
    """200 people over 4,320 cells at epsilon 0.1 used to end, after the charge, in Clarabel's NumericalError on
    every draw (a junction-tree fit with many unmeasured residuals)."""
    import pandas as pd

    shape = (3, 4, 5, 2, 3, 6, 2)
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"v{j}": rng.integers(0, k, 200).astype(str) for j, k in enumerate(shape)})
    table = tr.table_from_microdata(frame, levels={f"v{j}": [str(i) for i in range(k)] for j, k in enumerate(shape)})
    release = tr.release_margins(table,
                                 tr.ReleaseSpec(loss=tr.loss_of(0.1),
                                                margins=list(itertools.combinations(range(7), 2)), mode="simulation",
                                                seed=seed))
    assert release.consistent and all(m.dtype.kind == "i" and m.min() >= 0 for m in release.released_margins)


def _pairwise_consistent(released, margins, atol=0.0):
    """The definition, pair by pair (what rounding.mutually_consistent computed before it went near-linear)."""
    from tabrelease.tables import margin_counts

    for i, (a, ma) in enumerate(zip(margins, released)):
        for b, mb in zip(margins[i + 1:], released[i + 1:]):
            shared = tuple(sorted(set(a) & set(b)))
            sa = margin_counts(ma, [a.index(j) for j in shared]) if shared else ma.sum()
            sb = margin_counts(mb, [b.index(j) for j in shared]) if shared else mb.sum()
            if not np.allclose(sa, sb, rtol=0.0, atol=atol):
                return False
    return True


@pytest.mark.unit
@pytest.mark.parametrize("scan_max", [12, 1])
def test_mutual_consistency_is_the_pairwise_definition(scan_max, monkeypatch):
    # 300 random sets of margins of a random 2x3x2x4x3 table, half of them with one cell of one margin moved by one:
    # the near-linear check says what the pair-by-pair definition says; with scan_max 1 the margins past one variable
    # take the other branch (the sets they share with each other margin).
    import itertools

    from tabrelease import models
    from tabrelease.rounding import mutually_consistent
    from tabrelease.tables import margin_counts

    monkeypatch.setattr(models, "SUBSET_SCAN_MAX_SIZE", scan_max)
    rng = np.random.default_rng(17)
    shape = (2, 3, 2, 4, 3)
    every = [c for size in range(1, 5) for c in itertools.combinations(range(5), size)]
    verdicts = []
    for trial in range(300):
        table = rng.integers(0, 9, size=shape)
        chosen = [every[i] for i in rng.choice(len(every), size=rng.integers(2, 7), replace=False)]
        released = [margin_counts(table, list(g)).copy() for g in chosen]
        if trial % 2:
            which = rng.integers(len(released))
            released[which].flat[rng.integers(released[which].size)] += 1
        expected = _pairwise_consistent(released, chosen)
        assert mutually_consistent(released, chosen) == expected, (chosen, trial)
        verdicts.append(expected)
    assert 50 < sum(verdicts) < 250  # both answers were tested many times
    # Real-valued margins of one real table agree within a tolerance; a change of 1e-6 in one cell does not.
    table = rng.random(shape) * 100
    chosen = [(0, 1, 3), (1, 2, 3), (3, 4), (0, 4)]
    released = [margin_counts(table, list(g)) for g in chosen]
    assert mutually_consistent(released, chosen, atol=1e-9)
    released[2] = released[2].copy()
    released[2].flat[0] += 1e-6
    assert not mutually_consistent(released, chosen, atol=1e-9) and not _pairwise_consistent(released, chosen, 1e-9)
