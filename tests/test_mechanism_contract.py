"""One contract suite over every registered mechanism (built-in, installed through the entry-point group, or
registered in this process), and the ways a mechanism travels: pickled with its plan to a sweep's worker processes,
found by installed packages' metadata, listed by `--help`.

The checks themselves live in `tabrelease.testing` so that a third-party package can run them on its own
mechanism; what they compute is independent of the mechanism's code (the privacy check measures every neighbouring
pair of the small table with no noise and sums the moves over the scales the blocks were drawn with).
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import tabrelease as tr
import tabrelease.mechanisms as mechanisms
from tabrelease.measurements import Measurements, margin_blocks
from tabrelease.mechanisms import BUILT_IN, Mechanism, MechanismPlan, get_mechanism, register, unregister
from tabrelease.testing import parametrize_with_checks
from tabrelease.noise import laplace_calibration
from tabrelease.spec import BUILT_IN_MECHANISMS


class ToyMargins(Mechanism):
    """A third party's mechanism: Laplace noise on every cell of each margin, the sensitivity the number of margins
    (one record is in one cell of each). Defined at module level so worker processes can unpickle it."""

    name = "toy-contract-margins"
    summary = "every margin cell, Laplace, sensitivity = number of margins"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        from tabrelease.estimate import get_estimator

        factor = 2 if neighbours == "replace" else 1
        cal = laplace_calibration(float(factor * len(margins)), epsilon, neighbours)
        plan = MechanismPlan(self.name, tuple(shape), tuple(margins), cal, get_estimator("as-measured"))
        return plan

    def measure(self, plan, counts, noise):
        from tabrelease.tables import margin_counts

        exact = [margin_counts(np.asarray(counts, float), g) for g in plan.margins]
        noisy = noise.perturb(np.concatenate([m.ravel() for m in exact]), plan.calibration)
        pieces = np.split(noisy, np.cumsum([m.size for m in exact])[:-1])
        blocks = margin_blocks(plan.margins, pieces, "laplace", plan.calibration.scale, plan.shape)
        return Measurements(blocks, noise.mode, getattr(noise, "seed", None))

    def rescale(self, plan, epsilon):
        return self.plan(plan.shape, plan.margins, epsilon, neighbours=plan.calibration.neighbours, delta=None,
                         calibration="exact", options={})


class UnderNoised(ToyMargins):
    """The same, with the sensitivity of one margin only: under-noised whenever two margins are released."""

    name = "toy-under-noised"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        from tabrelease.estimate import get_estimator

        cal = laplace_calibration(1.0, epsilon, neighbours)
        return MechanismPlan(self.name, tuple(shape), tuple(margins), cal, get_estimator("as-measured"))


def _every_registered():
    return [get_mechanism(n) for n in tr.mechanism_names() if n != "auto"] + [ToyMargins()]


@parametrize_with_checks(_every_registered())
def test_every_mechanism_keeps_the_contract(mechanism, check):
    check(mechanism)


def test_the_contract_catches_an_under_noised_mechanism():
    from tabrelease.testing import check_guarantee_holds_on_every_neighbouring_pair

    with pytest.raises(AssertionError, match="moves the Laplace blocks"):
        check_guarantee_holds_on_every_neighbouring_pair(UnderNoised())


def test_the_names_help_shows_without_importing_are_the_registrys():
    assert BUILT_IN_MECHANISMS == BUILT_IN


@pytest.fixture
def toy():
    mechanism = register(ToyMargins())
    yield mechanism
    unregister(mechanism.name)


@pytest.mark.e2e
def test_a_mechanism_registered_in_this_process_only_runs_in_a_two_process_sweep(toy, tmp_path):
    table = tr.builtin_table("edwards")
    grid = tr.make_grid([table], [0.5, 1.0], 2, margins=[[(0, 1), (1, 2)]], mechanisms=(toy.name, "efron-stein"),
                        master_seed=4)
    two = tr.run_sweep(grid, tmp_path / "two", jobs=2, progress=False).runs
    one = tr.run_sweep(grid, tmp_path / "one", jobs=1, progress=False).runs
    assert set(two.mechanism) == {toy.name, "efron-stein"} and len(two) == 8
    # The same seeds give the same rows, whichever process ran them.
    columns = ["run_id", "seed", "max_l1_error", "n_released"]
    key = "run_id"
    np.testing.assert_array_equal(two.sort_values(key)[columns].to_numpy(), one.sort_values(key)[columns].to_numpy())


@pytest.mark.e2e
def test_help_and_errors_list_every_registered_mechanism(toy, capsys):
    from tabrelease.cli import main

    assert main(["release", "--help"]) == 0
    shown = "".join(capsys.readouterr().out.split())  # argparse wraps lines, even inside a hyphenated name
    for name in tr.mechanism_names():
        assert name in shown, f"--help does not list {name}"
    with pytest.raises(tr.TabreleaseError) as refused:
        get_mechanism("no-such-mechanism")
    for name in tr.mechanism_names():
        assert name in str(refused.value)
    from tabrelease.estimate import ESTIMATORS

    for name in ESTIMATORS:  # and every estimator --estimator takes
        assert name in shown, f"--help does not list the estimator {name}"


def test_an_installed_mechanism_is_found_through_its_entry_point(tmp_path, monkeypatch, capsys):
    """A package declaring [project.entry-points."tabrelease.mechanisms"] is found without being imported by hand."""
    (tmp_path / "toy_installed.py").write_text(textwrap.dedent("""
        from tabrelease.mechanisms.margins import Margins

        class Installed(Margins):
            name = "toy-installed"
    """))
    info = tmp_path / "toy_installed-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-installed\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tabrelease.mechanisms]\ntoy-installed = toy_installed:Installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(mechanisms, "_entry_points_loaded", False)
    try:
        assert "toy-installed" in tr.mechanism_names()
        assert get_mechanism("toy-installed").name == "toy-installed"
        release = tr.release_margins(tr.builtin_table("czech"), tr.ReleaseSpec(
            loss=tr.loss_of(1.0), margins=[(0, 1)], mechanism="toy-installed", mode="simulation", seed=2))
        assert release.mechanism == "toy-installed"
        # --help reads installed packages' metadata without importing them.
        from tabrelease.cli._common import registered_mechanisms

        monkeypatch.delitem(sys.modules, "tabrelease.mechanisms")
        assert "toy-installed" in registered_mechanisms()
    finally:
        sys.modules["tabrelease.mechanisms"] = mechanisms
        unregister("toy-installed")
