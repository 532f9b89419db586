"""Releases past the cell-based engine (issue 12, first part): least squares on the margins themselves, controlled
rounding of margins without cells, and an audit that leaves out (and says so) what it cannot do at a size."""

import itertools
import json

import numpy as np
import pytest

import tabrelease as tr
from tabrelease.mechanisms import plan_release, with_post_processing
from tabrelease.loglinear.design import is_decomposable
from tabrelease.noise import NoNoise
from tabrelease.rounding import mutually_consistent
from tabrelease.tables import margin_counts

TABLES = ["edwards", "czech", "rochdale", "journey_to_work"]


@pytest.mark.parametrize("name", TABLES)
def test_local_fit_without_noise_returns_every_margin_exactly(name):
    table = tr.builtin_table(name)
    plan = with_post_processing(plan_release(table.shape, tr.default_model(table).generators, 1.0),
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
    plan = with_post_processing(plan_release(shape, margins, 0.5), "local-least-squares")
    release = tr.run_plan(plan, counts, tr.SimulationNoise(seed))
    released = release.released_margins
    assert all(m.dtype.kind == "i" and m.min() >= 0 for m in released)
    assert release.consistent and mutually_consistent(released, release.margins)
    assert len({int(m.sum()) for m in released}) == 1


@pytest.mark.parametrize("seed", range(16))
def test_on_a_decomposable_model_the_local_fit_is_the_fit_over_cells(seed):
    """Locally consistent non-negative margins of a decomposable model are the margins of a non-negative table:
    the two fits solve the same problem and give the same real-valued margins (to solver tolerance)."""
    shape, margins, counts = _random_case(seed)
    if not is_decomposable(plan_release(shape, margins, 1.0).margins):
        k = len(shape)  # a chain instead: [0..k-2][k-2, k-1] is decomposable
        margins = [tuple(range(k - 1)), (k - 2, k - 1)]
    assert is_decomposable(plan_release(shape, margins, 1.0).margins)
    plan = with_post_processing(plan_release(shape, margins, 0.5), rounding="none")
    measurements = tr.run_plan(plan, counts, tr.SimulationNoise(seed)).measurements
    cells = tr.release_from_measurements(with_post_processing(plan, "least-squares"), measurements)
    local = tr.release_from_measurements(with_post_processing(plan, "local-least-squares"), measurements)
    scale = max(1.0, counts.sum())
    for g, m in zip(local.margins, local.released_margins):
        np.testing.assert_allclose(m, margin_counts(cells.table, g), atol=1e-5 * scale)


def test_the_planned_release_goes_local_past_its_cell_limit_and_says_so(tmp_path):
    k = 13  # 8192 cells
    rng = np.random.default_rng(1)
    counts = rng.poisson(4, size=(2,) * k)
    table = tr.ContingencyTable(tuple(f"V{i}" for i in range(k)), tuple(("0", "1") for _ in range(k)), counts, "wide")
    margins = list(itertools.combinations(range(k), 2))
    done = tr.publish_release(table, tmp_path / "r", 1.0, margins, mode="simulation", seed=2)
    release = done.release
    assert release.estimator == "local-least-squares" and release.table is None and release.consistent
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert public["consistency"] == "local"
    assert any("locally consistent" in w for w in public["warnings"])
    assert audit["evaluation"]["g2_original"] is None and "not computed" in audit["evaluation"]["refit_note"]
    assert audit["evaluation"]["max_l1_error"] > 0  # the margin errors are there


def test_an_audit_refit_that_fails_does_not_fail_the_release(tmp_path, monkeypatch):
    import tabrelease.evaluation as evaluation

    def broken(*args, **kwargs):
        raise tr.TabreleaseError("the facial-set LP did not solve: HiGHS says Unknown")

    monkeypatch.setattr(evaluation, "fit_loglinear", broken)
    done = tr.publish_release(tr.builtin_table("czech"), tmp_path / "r", 1.0, mode="simulation", seed=1)
    assert "refit failed (TabreleaseError)" in done.evaluation.refit_note
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert audit["evaluation"]["g2_original"] is None and (tmp_path / "r" / "public" / "release.json").exists()


def test_a_table_too_large_to_hold_as_cells_is_refused_in_one_line_before_any_work(tmp_path, capsys):
    import pandas as pd

    from tabrelease.cli import main

    people = pd.DataFrame({f"V{j}": ["0", "1"] * 5 for j in range(30)})
    with pytest.raises(tr.TabreleaseError, match=r"has 1.07e\+09 cells; tables are held as cells up to"):
        tr.table_from_microdata(people)
    frame = people.assign(count=1).drop_duplicates(subset=[f"V{j}" for j in range(30)])
    frame.to_csv(tmp_path / "wide.csv", index=False)
    code = main(["release", str(tmp_path / "wide.csv"), "--epsilon", "1", "--sparse", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cells; tables are held as cells" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.csv"]
