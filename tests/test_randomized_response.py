"""k-ary randomized response: the channel's epsilon by brute force, the samplers' distribution, unbiasedness and the
variance formula by simulation, noise off, rescale, the guarantee's text."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import tabrelease as tr
from tabrelease.errors import TabreleaseError
from tabrelease.mechanisms import with_epsilon
from tabrelease.testing import plan_at
from tabrelease.estimate import cell_variance, unbiased_cells
from tabrelease.noise import NoNoise, SecureNoise, SimulationNoise
from tabrelease.spec import ReleaseSpec, loss_of
from tabrelease.workflow import release_margins
from tabrelease.pipeline import run_plan
from tabrelease.tables import builtin_table

from .helpers import true_margin

SHAPE = (2, 3, 2)
MARGINS = [(0, 1), (1, 2)]


def _plan(epsilon, shape=SHAPE, margins=MARGINS, neighbours="add-remove"):
    return plan_at(shape, margins, epsilon, mechanism="randomized-response", neighbours=neighbours)


def _channel(plan):
    """P(y | x) from the plan's keep probability alone: keep, else each of the other k - 1 cells alike."""
    k = int(np.prod(plan.shape))
    keep = plan.calibration.scale
    return np.where(np.eye(k, dtype=bool), keep, (1 - keep) / (k - 1))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 2.5])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 2), (2, 2)])
def test_channel_epsilon_is_exact_by_brute_force(epsilon, shape):
    channel = _channel(_plan(epsilon, shape, [tuple(range(len(shape)))]))
    np.testing.assert_allclose(channel.sum(axis=1), 1.0)
    worst = max(channel[x, y] / channel[x2, y] for y, x, x2 in itertools.product(range(channel.shape[0]), repeat=3))
    assert worst == pytest.approx(math.exp(epsilon), rel=1e-12)


def test_opendp_measurement_certifies_the_plans_epsilon():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    plan = _plan(1.3)
    measurement = dp.m.make_randomized_response(list(range(12)), plan.calibration.scale, T="i64")
    assert measurement.map(1) == pytest.approx(1.3, rel=1e-9)


@pytest.mark.parametrize("noise", [SimulationNoise(5), SecureNoise()], ids=["simulation", "release"])
def test_one_record_reports_follow_the_channel(noise):
    # Simulation: 20,000 records in cell 4 of 6; release mode (OpenDP, record by record): 3,000.
    n = 20_000 if noise.mode == "simulation" else 3_000
    k, keep = 6, 0.5
    counts = np.zeros(k, np.int64)
    counts[4] = n
    reports = noise.randomize_cells(counts, keep)
    assert reports.sum() == n and reports.dtype.kind == "i"
    expected = np.full(k, n * (1 - keep) / (k - 1))
    expected[4] = n * keep
    sd = np.sqrt(expected * (1 - expected / n))
    assert np.all(np.abs(reports - expected) < 5 * sd)


def test_unbiased_and_variance_formula_by_simulation():
    plan = _plan(1.0)
    p = plan.calibration.scale
    k = 12
    q = (1 - p) / (k - 1)
    counts = np.array([0, 5, 40, 7, 100, 3, 0, 60, 20, 1, 9, 55])
    noise = SimulationNoise(11)
    draws = 4000
    estimates = np.array([unbiased_cells(noise.randomize_cells(counts, p), p, q) for _ in range(draws)])
    # The variance by hand: each record is an independent Bernoulli report (p in its own cell, q in another).
    by_hand = (counts * p * (1 - p) + (counts.sum() - counts) * q * (1 - q)) / (p - q) ** 2
    np.testing.assert_allclose(cell_variance(counts, p, q), by_hand)
    np.testing.assert_allclose(estimates.var(axis=0), by_hand, rtol=0.12)
    assert np.all(np.abs(estimates.mean(axis=0) - counts) < 4 * np.sqrt(by_hand / draws))
    np.testing.assert_allclose(estimates.sum(axis=1), counts.sum())  # the unbiased cells sum to n exactly


def test_noise_off_reproduces_the_true_margins():
    table = builtin_table("czech")
    plan = plan_at(table.shape, [(0, 1), (2, 3), (1, 4, 5)], 1.0, mechanism="randomized-response")
    release = run_plan(plan, table, NoNoise())  # the expected reports: their unbiasing is the true table
    for g, m in zip(plan.margins, release.released_margins):
        np.testing.assert_array_equal(m, true_margin(table.counts, g))


def test_rescale_is_a_fresh_plan_and_measurements_are_checked():
    moved, fresh = with_epsilon(_plan(0.5), 2.0), _plan(2.0)
    assert moved.calibration == fresh.calibration and moved.parameters == fresh.parameters
    counts = np.arange(12).reshape(SHAPE)
    other = tr.mechanisms.get_mechanism("randomized-response").measure(_plan(0.5), counts, SimulationNoise(1))
    with pytest.raises(TabreleaseError, match="randomized response"):
        tr.mechanisms.get_mechanism("randomized-response").check_measurements(fresh, other)


def test_end_to_end_statement_and_refusals():
    table = builtin_table("czech")
    release = release_margins(table,
                              ReleaseSpec(loss=loss_of(1.0), margins=[(0, 1), (2, 3)], mechanism="randomized-response",
                                          mode="simulation", seed=1))
    assert release.released_margins[0].sum() == table.counts.sum()  # n is public and pinned
    statement = tr.mechanisms.get_mechanism("randomized-response").privacy_statement(release.plan)
    assert statement.startswith("epsilon=1-local differential privacy: each record's cell is randomised by k-ary "
                                "randomized response (k=64); the count n of reports is public")
    with pytest.raises(TabreleaseError, match="small tables"):
        plan_at((2,) * 13, [(0, 1)], 1.0, mechanism="randomized-response")


def test_release_mode_hands_opendp_the_keep_probability_for_epsilon(monkeypatch):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    seen = []
    original = dp.m.make_randomized_response

    def recording(categories, prob, T=None):
        seen.append((list(categories), prob))
        return original(categories, prob, T=T)

    monkeypatch.setattr(dp.m, "make_randomized_response", recording)
    counts = np.array([3, 0, 2, 1, 0, 4, 0, 0, 1, 0, 2, 5]).reshape(SHAPE)
    plan = _plan(0.8)
    m = tr.mechanisms.get_mechanism("randomized-response").measure(plan, counts, SecureNoise())
    (categories, prob), = seen
    assert categories == list(range(12))
    assert prob == pytest.approx(math.exp(0.8) / (math.exp(0.8) + 11), rel=1e-12)  # by hand: e^eps / (e^eps + k - 1)
    assert m.noise_mode == "release" and m.seed is None and m.blocks[0].values.sum() == counts.sum()


@pytest.mark.e2e
def test_asked_for_add_remove_it_warns_that_no_add_remove_guarantee_holds(tmp_path, capsys):
    """A new user's trial: randomized response under the default add-remove neighbours ran with no warning line,
    and release.json's `neighbours` read add-remove, while the count of reports is n, published exactly (its
    guarantee is local, which a ledger's add-remove budget refuses). A WARNING line and release.json's warnings now
    say so; asked for replace neighbours, which the local guarantee implies, there is no such warning."""
    import json

    from tabrelease.cli import main

    said = {}
    for neighbours in ("add-remove", "replace"):
        out = tmp_path / neighbours
        assert main(["release", "czech", "--margins", "[AB][BC]", "--epsilon", "1", "--mechanism",
                     "randomized-response", "--neighbours", neighbours, "--simulate", "--seed", "1", "--out",
                     str(out)]) == 0
        printed = capsys.readouterr().out
        public = json.loads((out / "public" / "release.json").read_text())
        assert public["guarantee"]["unit"]["kind"] == "local" and public["guarantee"]["unit"]["n_public"]
        said[neighbours] = ([line for line in printed.splitlines() if "no add-remove guarantee holds" in line],
                            [w for w in public["warnings"] if "no add-remove guarantee holds" in w])
    assert all(len(found) == 1 and found[0] for found in said["add-remove"])
    assert said["add-remove"][0][0].startswith("WARNING: ")
    assert said["replace"] == ([], [])
