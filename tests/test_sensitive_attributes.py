"""Sensitive and insensitive attributes (DMT s.5): the exact sensitivity by brute force over every pair of records
that differ in sensitive attributes only, the scale, what is exact, noise off, the weaker guarantee's text."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tabrelease.errors import TabreleaseError
from tabrelease.mechanisms import get_mechanism, with_epsilon
from tabrelease.testing import plan_at
from tabrelease.measurements import EXACT
from tabrelease.noise import NoNoise, SimulationNoise
from tabrelease.spec import ReleaseSpec, loss_of, unit_of
from tabrelease.workflow import release_margins
from tabrelease.pipeline import run_plan
from tabrelease.reports import release_warnings
from tabrelease.tables import builtin_table

from .helpers import dense_rows, true_margin

NAME = "sensitive-attributes"
CASES = [((2, 3, 2), [(0, 1), (1, 2), (0, 2)], (0,)), ((2, 3, 2), [(0, 1, 2)], (1,)),
         ((2, 3, 2), [(0, 1), (1, 2)], (0, 2)), ((2, 2, 2), [(0, 1), (1, 2), (0, 2)], (1,)),
         ((2, 2, 2), [(0, 1, 2)], (0, 2)), ((3, 2, 2), [(0, 1), (1, 2)], (0, 1, 2))]


def _plan(shape, margins, sensitive, epsilon=1.0):
    return plan_at(shape, margins, epsilon, mechanism=NAME, neighbours="replace",
                        options={"sensitive": sensitive})


@pytest.mark.parametrize("shape, margins, sensitive", CASES)
def test_sensitivity_by_brute_force_over_every_neighbouring_pair(shape, margins, sensitive):
    plan = _plan(shape, margins, sensitive, epsilon=0.7)
    F = dense_rows(plan.basis)
    noised = np.zeros(F.shape[0], bool)
    for s, lo, hi in zip(plan.basis.closure, plan.basis.offsets[:-1], plan.basis.offsets[1:]):
        noised[lo:hi] = bool(set(s) & set(sensitive))
    cells = list(itertools.product(*map(range, shape)))
    worst = 0.0
    for a, b in itertools.product(range(len(cells)), repeat=2):
        if any(cells[a][j] != cells[b][j] for j in range(len(shape)) if j not in sensitive):
            continue  # neighbours change sensitive attributes only
        diff = F[:, a] - F[:, b]
        np.testing.assert_allclose(diff[~noised], 0.0, atol=1e-12)  # the exact coefficients cannot change
        worst = max(worst, np.abs(diff[noised]).sum())
    assert plan.calibration.sensitivity == pytest.approx(worst, rel=1e-12)
    assert plan.calibration.scale == pytest.approx(worst / 0.7, rel=1e-12)


def test_measure_noises_exactly_the_sensitive_sets():
    table = builtin_table("czech")
    plan = plan_at(table.shape, [(0, 1), (2, 3), (1, 4, 5)], 1.0, mechanism=NAME, neighbours="replace",
                        options={"sensitive": (1, 4)})
    m = get_mechanism(NAME).measure(plan, table.counts, SimulationNoise(3))
    F = dense_rows(plan.basis)
    exact = F @ table.counts.ravel()
    for block, lo, hi in zip(m.blocks, plan.basis.offsets[:-1], plan.basis.offsets[1:]):
        if set(block.variables) & {1, 4}:
            assert block.distribution == "laplace" and block.scale == plan.calibration.scale
            assert np.all(block.values != exact[lo:hi])
        else:
            assert block.distribution == EXACT and block.scale == 0.0
            np.testing.assert_allclose(block.values, exact[lo:hi], atol=1e-9)
    get_mechanism(NAME).check_measurements(plan, m)
    other = _plan(table.shape, [(0, 1), (2, 3), (1, 4, 5)], (1,))
    with pytest.raises(TabreleaseError, match="not drawn with this plan"):
        get_mechanism(NAME).check_measurements(other, m)


@pytest.mark.parametrize("name", ["czech", "journey_to_work"])
def test_noise_off_reproduces_the_true_margins(name):
    table = builtin_table(name)
    margins = [(0, 1), (1, 2)]
    plan = _plan(table.shape, margins, (0,))
    release = run_plan(plan, table, NoNoise())
    for g, m in zip(plan.margins, release.released_margins):
        np.testing.assert_array_equal(m, true_margin(table.counts, g))


def test_rescale_names_and_statement():
    plan = _plan((2, 3, 2), [(0, 1), (1, 2)], (2,), epsilon=0.5)
    assert with_epsilon(plan, 2.0).calibration == _plan((2, 3, 2), [(0, 1), (1, 2)], (2,), epsilon=2.0).calibration
    table = builtin_table("czech")
    release = release_margins(table,
                              ReleaseSpec(loss=loss_of(1.0),
                                          unit=unit_of("replace", sensitive=[table.variables[0], "c"]),
                                          margins=[(0, 1), (2, 3)], mechanism=NAME, mode="simulation", seed=1))
    assert release.plan.parameters["sensitive"] == (0, 2)
    statement = get_mechanism(NAME).privacy_statement(release.plan)
    assert statement.startswith("epsilon=1 differential privacy for the sensitive attributes only "
                                "(smoking, physical): "
                                "neighbours differ in the sensitive attributes of one record")
    assert any(w.startswith("weaker guarantee") for w in release_warnings(release))
    with pytest.raises(TabreleaseError, match="--neighbours replace"):
        plan_at((2, 2), [(0, 1)], 1.0, mechanism=NAME, options={"sensitive": (0,)})
    with pytest.raises(TabreleaseError, match="--sensitive"):
        _plan((2, 2), [(0, 1)], None)
    with pytest.raises(TabreleaseError, match="not a variable"):
        _plan((2, 2), [(0, 1)], "Z")


@pytest.mark.e2e
@pytest.mark.figures
def test_the_weaker_guarantee_is_named_in_release_json_audit_and_terminal(tmp_path, capsys):
    import json

    from tabrelease.cli import main

    out = tmp_path / "r"
    assert main(["release", "czech", "--epsilon", "1", "--margins", "[AB][CD]", "--mechanism", NAME, "--sensitive",
                 "A,D", "--neighbours", "replace", "--simulate", "--seed", "1", "--out", str(out)]) == 0
    terminal = capsys.readouterr().out
    public = json.loads((out / "public" / "release.json").read_text())
    assert public["privacy"].startswith("epsilon=1 differential privacy for the sensitive attributes only "
                                        "(smoking, pressure)")
    assert any(w.startswith("weaker guarantee") for w in public["warnings"])
    audit = (out / "internal" / "audit.html").read_text()
    assert "weaker guarantee" in audit and "for the sensitive attributes only" in audit
    assert "WARNING: weaker guarantee" in terminal and "for the sensitive attributes only" in terminal
