"""A mechanism is one small object in a registry: a toy one, registered in a few lines, runs through
release, estimation from its measurements, the written bundle and a sweep with no change anywhere else."""

import json

import numpy as np
import pytest

import tabrelease as tr
from tabrelease.testing import plan_at
from tabrelease.mechanisms import get_mechanism, with_epsilon
from tabrelease.estimate import AsMeasured
from tabrelease.measurements import Measurements, margin_blocks
from tabrelease.mechanisms import Mechanism, MechanismPlan, register, unregister
from tabrelease.noise import laplace_calibration
from tabrelease.tables import margin_counts


class ToyMargins(Mechanism):
    """Toy: Laplace noise on the cells of each margin, estimated as measured. Only to show the protocol."""

    name = "toy-margins"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        # Each released margin is a histogram of its own: sensitivity = the number of margins.
        cal = laplace_calibration(float(len(margins)), epsilon, neighbours)
        return MechanismPlan(self.name, shape, margins, cal, AsMeasured())

    def measure(self, plan, counts, noise):
        exact = [margin_counts(counts, g) for g in plan.margins]
        noisy = noise.perturb(np.concatenate([m.ravel() for m in exact]), plan.calibration, 1.0)
        pieces = np.split(noisy, np.cumsum([m.size for m in exact])[:-1])
        blocks = margin_blocks(plan.margins, pieces, "laplace", plan.calibration.scale, plan.shape)
        return Measurements(blocks, noise.mode, getattr(noise, "seed", None))


@pytest.fixture
def toy():
    register(ToyMargins())
    yield "toy-margins"
    unregister("toy-margins")


@pytest.mark.e2e
def test_a_registered_toy_mechanism_runs_through_release_bundle_and_sweep(toy, tmp_path, capsys):
    table = tr.builtin_table("czech")
    assert toy in tr.mechanism_names()
    release = tr.release_margins(table,
                                 tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1)], mechanism=toy,
                                                mode="simulation", seed=3))
    assert release.mechanism == toy and release.estimator == "as-measured"
    # The measurements are kept: the released margin is their rounding, recomputed here by hand.
    values = release.measurements.blocks[0].values.reshape(2, 2)
    np.testing.assert_array_equal(release.released_margins[0], np.maximum(np.floor(values + 0.5), 0))
    # The command line knows it through the registry.
    out = tmp_path / "bundle"
    from tabrelease.cli import main

    code = main(["release", "czech", "--epsilon", "1", "--margins", "[AB]", "--mechanism", toy,
                 "--simulate", "--seed", "3", "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    public = json.loads((out / "public" / "release.json").read_text())
    assert public["mechanism"] == toy and public["noise"]["scale"] == pytest.approx(1.0)
    # A sweep over it, beside a built-in mechanism.
    grid = tr.make_grid([table], [0.5, 1.0], 2, margins=[[(0, 1)]], mechanisms=(toy, "efron-stein"), master_seed=1)
    result = tr.run_sweep(grid, progress=False)
    assert set(result.runs.mechanism) == {toy, "efron-stein"} and len(result.runs) == 8
    assert result.runs.run_id.str.contains(toy).sum() == 4


def test_an_estimator_runs_again_on_the_same_measurements():
    table = tr.builtin_table("rochdale")
    release = tr.release_margins(table,
                                 tr.ReleaseSpec(loss=tr.loss_of(0.5), mode="simulation", seed=11, mechanism="auto"))
    again = tr.release_from_measurements(release.plan, release.measurements)
    for a, b in zip(release.released_margins, again.released_margins):
        np.testing.assert_array_equal(a, b)
    assert release.measurements.size == release.coefficients_released == 30  # |B| of the Rochdale model


def test_estimators_are_chosen_by_name_and_refuse_what_they_cannot_read():
    table = tr.builtin_table("czech")
    release = tr.release_margins(table,
                                 tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=4, mechanism="auto"))
    by_name = tr.release_from_measurements(release.plan, release.measurements, estimator="linf-lp")
    for a, b in zip(release.released_margins, by_name.released_margins):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(tr.TabreleaseError, match="reads margin_cells measurements only"):
        tr.release_from_measurements(release.plan, release.measurements, estimator="as-measured")
    with pytest.raises(tr.TabreleaseError, match="needs a plan with a lift"):
        tr.release_from_measurements(release.plan, release.measurements, estimator="shifted-synthesis")
    with pytest.raises(tr.TabreleaseError, match="unknown estimator"):
        tr.release_from_measurements(release.plan, release.measurements, estimator="magic")


def test_unknown_and_malformed_mechanisms_are_refused():
    with pytest.raises(tr.TabreleaseError, match="unknown mechanism 'magic'"):
        get_mechanism("magic")
    with pytest.raises(tr.TabreleaseError, match="Mechanism instance"):
        register(object())


@pytest.mark.e2e
def test_a_release_needs_no_matplotlib(monkeypatch, tmp_path, capsys):
    # Every figure is SVG drawn by tabrelease.charts: a release works where matplotlib is not installed.
    import sys

    from tabrelease.cli import main

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "r"
    assert main(["release", "czech", "--epsilon", "1", "--simulate", "--seed", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    assert (out / "internal" / "audit.html").read_text().count("<svg") == 2


@pytest.mark.parametrize("module, argv, extra", [
    ("distributed", ["sweep", "czech", "--epsilons", "1", "--repetitions", "1", "--out", "s", "--scheduler",
                     "tcp://127.0.0.1:9"], "tabrelease[dask]"),
])
@pytest.mark.e2e
def test_a_missing_extra_is_named_in_one_line(module, argv, extra, monkeypatch, tmp_path, capsys):
    import sys

    from tabrelease.cli import main

    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert extra in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_a_bad_nonneg_t_is_refused_before_the_ledger_is_charged(tmp_path):
    ledger = tmp_path / "ledger.json"
    for t in (float("nan"), float("inf"), -1.0):
        with pytest.raises(tr.TabreleaseError, match="nonneg-t"):
            tr.publish_release(tr.builtin_table("edwards"),
                               tr.ReleaseSpec(loss=tr.loss_of(1.0), mechanism="nonneg", mode="simulation",
                                              options={"nonneg_t": t}), tmp_path / "out",
                               account=tr.LedgerAccount(ledger=ledger))
    assert not ledger.exists() and not (tmp_path / "out").exists()
    # t = 0 is a lift of 0, not the default of 5.
    plan = plan_at((2, 2), [(0, 1)], 1.0, mechanism="nonneg", nonneg_t=0.0)
    assert plan.parameters["t"] == 0.0 and plan.parameters["shift_total"] == 0.0


def test_two_names_for_one_mechanism_are_refused_in_a_grid():
    with pytest.raises(tr.TabreleaseError, match="auto and fourier are the same mechanism"):
        tr.make_grid([tr.builtin_table("edwards")], [1.0], 2, mechanisms=("auto", "fourier"))
    with pytest.raises(tr.TabreleaseError, match="auto and efron-stein"):
        tr.make_grid([tr.builtin_table("journey_to_work")], [1.0], 2, mechanisms=("auto", "efron-stein"))


def test_the_registry_keeps_its_built_in_mechanisms(toy):
    from tabrelease.mechanisms.fourier import Fourier

    with pytest.raises(tr.TabreleaseError, match="registered already"):
        register(Fourier())
    with pytest.raises(tr.TabreleaseError, match="built-in"):
        unregister("fourier")
    with pytest.raises(tr.TabreleaseError, match="registered already"):
        register(ToyMargins())


def test_measurements_are_not_re_estimated_under_another_plans_privacy():
    table = tr.builtin_table("czech")
    release = tr.release_margins(table,
                                 tr.ReleaseSpec(loss=tr.loss_of(5.0), mode="simulation", seed=4, mechanism="auto"))
    weaker_looking = with_epsilon(release.plan, 0.5)
    with pytest.raises(tr.TabreleaseError, match="not drawn with this plan's noise"):
        tr.release_from_measurements(weaker_looking, release.measurements)
