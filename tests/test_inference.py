"""`tabrelease test`: a log-linear model tested on a release's public margins alone, with a noise-aware p-value."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

import tabrelease as tr
from tabrelease.errors import TabreleaseError
from tabrelease.inference import published_plan, read_public_release, model_test


def _release(tmp_path, counts, margins, epsilon=1.0, seed=1, name="t"):
    k = counts.ndim
    variables = tuple(f"v{j}" for j in range(k))
    table = tr.ContingencyTable(variables, tuple(tuple(f"l{i}" for i in range(s)) for s in counts.shape), counts,
                                name)
    spec = tr.ReleaseSpec(loss=tr.loss_of(epsilon), margins=margins, mode="simulation", seed=seed)
    out = tmp_path / f"r{seed}"
    tr.publish_release(table, spec, out)
    return out


def _independent_table(rng, shape, n):
    """A table drawn from complete independence (every variable its own margin)."""
    p = np.ones(1)
    for s in shape:
        p = np.multiply.outer(p, rng.dirichlet(np.full(s, 5.0))).squeeze()
    return rng.multinomial(n, p.ravel()).reshape(shape)


def test_g2_and_df_are_the_closed_forms_of_decomposable_models(tmp_path):
    # Released [v0 v1][v1 v2]: its MLE is n_01 n_12 / n_1. Model [v0 v1][v2]: n_01 n_2 / n. G² between them and
    # the df (the released model's free parameters less the model's), by hand.
    rng = np.random.default_rng(0)
    out = _release(tmp_path, _independent_table(rng, (2, 3, 4), 3000), [(0, 1), (1, 2)])
    release = read_public_release(out)
    m01, m12 = release.released
    n = m01.sum()
    n1 = m01.sum(axis=0)
    n2 = m12.sum(axis=0)
    full = m01[:, :, None] * m12[None, :, :] / n1[None, :, None]
    model = m01[:, :, None] * n2[None, None, :] / n
    g2 = 2 * np.sum(np.where(full > 0, full * np.log(full / model), 0.0))
    result = model_test(out, "[v0,v1][v2]", bootstrap=19)
    assert result.g2 == pytest.approx(g2, rel=1e-6, abs=1e-6)
    assert result.df == (3 - 1) * (4 - 1)  # what [v1 v2] adds to [v0 v1][v2]: the v1-v2 interaction's parameters
    assert result.p_value_naive == pytest.approx(stats.chi2.sf(g2, result.df))


def test_the_p_value_is_reproducible_and_separates_a_true_model_from_a_false_one(tmp_path):
    rng = np.random.default_rng(5)
    # v0 and v1 strongly associated, v2 independent of both.
    p01 = np.array([[0.35, 0.05], [0.05, 0.55]])
    p = p01[:, :, None] * np.array([0.3, 0.7])[None, None, :]
    counts = rng.multinomial(2000, p.ravel()).reshape(p.shape)
    # A table the true model fits on its own counts (G² against [v0 v1][v2] by the closed form, 3 df). On one that
    # the sampling alone nearly rejects (default_rng(4)'s table: 0.058) the noise-aware p-value falls either side
    # of 0.05 with the bootstrap's seed, and the assertion below would test luck.
    expected = counts.sum(axis=2, keepdims=True) * counts.sum(axis=(0, 1), keepdims=True) / counts.sum()
    assert stats.chi2.sf(2 * np.sum(counts * np.log(counts / expected)), 3) > 0.5
    out = _release(tmp_path, counts, [(0, 1), (0, 2), (1, 2)], epsilon=1.0)
    true = model_test(out, "[v0,v1][v2]", bootstrap=99, seed=3)
    assert true == model_test(out, "[v0,v1][v2]", bootstrap=99, seed=3)
    assert true.p_value > 0.05
    false = model_test(out, "[v0][v1][v2]", bootstrap=99, seed=3)
    assert false.p_value == pytest.approx(1 / 100) and false.p_value_naive < 1e-10
    assert false.p_value_error == pytest.approx(0.01)  # sqrt(0.01 x 0.99 / 99), by hand
    assert 1 / 100 <= true.p_value <= 1 and true.bootstrap == 99


def test_worker_processes_give_the_very_same_test(tmp_path):
    # The replicates' tables and seeds are drawn in one order, whoever releases them: two workers (chunks of
    # ceil(41 / (4 x 2)) = 6, so six of six and a last of five, at most four waiting) give the p-value and every
    # interval bound of one process.
    rng = np.random.default_rng(5)
    out = _release(tmp_path, _independent_table(rng, (2, 2, 3), 800), [(0, 1), (0, 2), (1, 2)])
    import tabrelease.sweeps.driver as driver

    pools, sent = [], []

    def counted(jobs):
        pools.append(jobs)
        pool = real(jobs)
        submit = pool.submit

        def counting(function, plan, tables, seeds):  # what each worker is sent: its chunk of tables
            sent.append(len(tables))
            return submit(function, plan, tables, seeds)

        pool.submit = counting
        return pool

    real = driver.local_executor
    alone = model_test(out, "[v0,v1][v2]", bootstrap=41, seed=2, intervals=True)
    driver.local_executor = counted
    try:
        assert model_test(out, "[v0,v1][v2]", bootstrap=41, seed=2, intervals=True, jobs=2) == alone
    finally:
        driver.local_executor = real
    assert pools == [2] and sent == [6] * 6 + [5]  # the workers did release them, every replicate
    assert len(alone.intervals) == 2 * 2 + 3
    with pytest.raises(TabreleaseError, match="jobs is a whole number of at least 1, not 0"):
        model_test(out, "[v0,v1][v2]", bootstrap=41, jobs=0)


def test_the_progress_bar_counts_every_replicate_on_standard_error(tmp_path, capsys):
    rng = np.random.default_rng(6)
    out = _release(tmp_path, _independent_table(rng, (2, 2, 2), 500), [(0, 1), (1, 2)])
    capsys.readouterr()
    model_test(out, "[v0][v1][v2]", bootstrap=23, progress=True)
    shown = capsys.readouterr()
    assert "bootstrap" in shown.err and "23/23" in shown.err and shown.out == ""
    model_test(out, "[v0][v1][v2]", bootstrap=23)  # not a terminal here: no bar
    assert capsys.readouterr().err == ""


def test_at_small_epsilon_the_nominal_test_rejects_a_true_model_and_the_noise_aware_one_does_not():
    # The paper's message (its Figure 3): noise inflates G². Six tables from [v0 v1][v2], released at epsilon 0.05:
    # the nominal test rejects the true model in most of them; the bootstrap through the plan knows the noise.
    from tabrelease.inference import margins_model_test
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan
    from tabrelease.testing import plan_at

    rng = np.random.default_rng(4)
    p01 = np.array([[0.35, 0.05], [0.05, 0.55]])
    p = p01[:, :, None] * np.array([0.3, 0.7])[None, None, :]
    plan = plan_at((2, 2, 2), [(0, 1), (0, 2), (1, 2)], 0.05)
    nominal, aware = [], []
    for t in range(6):
        counts = rng.multinomial(2000, p.ravel()).reshape(p.shape)
        released = run_plan(plan, counts, SimulationNoise(seed=t)).released_margins
        _, p_aware, p_nominal, _ = margins_model_test(plan, released, [(0, 1), (2,)], bootstrap=99, seed=t)
        nominal.append(p_nominal <= 0.05)
        aware.append(p_aware <= 0.05)
    assert sum(nominal) >= 4 and sum(aware) == 0


def test_the_intervals_hold_the_estimate_and_mostly_the_truth(tmp_path):
    # 25 tables from a known model, each released at epsilon 1 and given 95% intervals for the model's margin
    # probabilities: each interval holds its estimate, and most hold the truth (the coverage study measures how
    # many; this guards against intervals reflected the wrong way or centred elsewhere).
    from tabrelease.inference import margins_model_test
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan
    from tabrelease.testing import plan_at

    rng = np.random.default_rng(8)
    p01 = np.array([[0.35, 0.05], [0.05, 0.55]])
    p = p01[:, :, None] * np.array([0.3, 0.7])[None, None, :]
    plan = plan_at((2, 2, 2), [(0, 1), (0, 2), (1, 2)], 1.0)
    covered = []
    for t in range(25):
        counts = rng.multinomial(1000, p.ravel()).reshape(p.shape)
        released = run_plan(plan, counts, SimulationNoise(seed=t)).released_margins
        *_, intervals = margins_model_test(plan, released, [(0, 1), (2,)], bootstrap=49, seed=t)
        for truth, (estimate, low, high) in zip((p01, p.sum(axis=(0, 1))), intervals):
            assert np.all(low <= estimate) and np.all(estimate <= high)
            covered.extend(((low <= truth) & (truth <= high)).ravel())
    assert np.mean(covered) >= 0.8


def test_the_interval_bounds_are_the_order_statistics_at_b_plus_one_tail():
    # 39 replicates at 95%: (39 + 1) * 0.025 = 1, so the bounds reflect the smallest and the largest replicate
    # about the estimate (worked by hand: 2 * 0.3 - 0.38 and 2 * 0.3 - 0.00).
    from tabrelease.inference import _intervals

    replicates = np.random.default_rng(0).permutation(np.arange(39) / 100.0)[:, None]
    estimate, low, high = _intervals(np.array([0.3]), replicates, 0.95)
    assert low[0] == pytest.approx(0.22) and high[0] == pytest.approx(0.6)
    # 99 replicates 0.00, 0.01, ..., 0.98: the bounds sit at positions 2.5 and 97.5, halfway between order
    # statistics (0.015 and 0.965), so [1.0 - 0.965, 1.0 - 0.015] about 0.5.
    replicates = np.random.default_rng(1).permutation(np.arange(99) / 100.0)[:, None]
    _, low, high = _intervals(np.array([0.5]), replicates, 0.95)
    assert low[0] == pytest.approx(0.035) and high[0] == pytest.approx(0.985)
    # A cell released as 0: reflection would give [0, 0]; the upper bound is the replicates' upper quantile.
    _, low, high = _intervals(np.array([0.0]), np.arange(39)[:, None] / 100.0, 0.95)
    assert low[0] == 0.0 and high[0] == pytest.approx(0.38)


def test_basic_intervals_cover_at_their_level_where_the_pivot_is_exact():
    # Replicates whose spread about the estimate is the estimate's own about the truth (a normal mean): the basic
    # interval is then exact, and covers 95% (4,000 trials: one standard error is 0.34%). Bounds placed by numpy's
    # default quantile rule cover about 90% with 39 replicates.
    from tabrelease.inference import _intervals

    rng = np.random.default_rng(3)
    truth, trials, b = 0.4, 4000, 39
    estimate = truth + rng.normal(0.0, 0.05, trials)
    replicates = estimate[None, :] + rng.normal(0.0, 0.05, (b, trials))
    _, low, high = _intervals(estimate, replicates, 0.95)
    assert abs(np.mean((low <= truth) & (truth <= high)) - 0.95) < 0.012


def test_intervals_near_zero_still_cover():
    # A count near 0 released with Laplace noise and clipped at 0 (as the non-negative fit does), the replicates
    # released again from the estimate: the truth at 0.5, 2 and 10 noise scales. Reflected alone, the upper bound
    # collapses to the estimate near 0 and covers 59-79% here; with the replicates' upper quantile as a floor it
    # covers at least the level (4,000 trials: one standard error is 0.34%).
    from tabrelease.inference import _intervals

    rng = np.random.default_rng(1)
    trials, b = 4000, 99
    for truth in (0.5, 2.0, 10.0):
        estimate = np.maximum(0.0, truth + rng.laplace(0.0, 1.0, trials))
        replicates = np.maximum(0.0, estimate[None, :] + rng.laplace(0.0, 1.0, (b, trials)))
        _, low, high = _intervals(estimate / 100, replicates / 100, 0.95)
        covered = np.mean((low <= truth / 100) & (truth / 100 <= high))
        assert 0.94 <= covered <= 0.99, (truth, covered)


def test_what_the_margins_cannot_test_is_one_line(tmp_path):
    rng = np.random.default_rng(1)
    out = _release(tmp_path, _independent_table(rng, (2, 2, 2), 500), [(0, 1), (1, 2)])
    with pytest.raises(TabreleaseError, match="is the released margins' own model: they fit it exactly"):
        model_test(out, "[v0,v1][v1,v2]", bootstrap=19)
    with pytest.raises(TabreleaseError, match="the model's margin \\[v0, v2\\] is inside no released margin"):
        model_test(out, "[v0,v2][v1]", bootstrap=19)
    with pytest.raises(TabreleaseError, match="at least 19 replicates"):
        model_test(out, "[v0][v1][v2]", bootstrap=5)
    with pytest.raises(TabreleaseError, match="intervals at level 0.95 need at least 39 bootstrap replicates, not 38"):
        model_test(out, "[v0][v1][v2]", bootstrap=38, intervals=True)
    with pytest.raises(TabreleaseError, match="intervals at level 0.98 need at least 99 bootstrap replicates, not 98"):
        model_test(out, "[v0][v1][v2]", bootstrap=98, level=0.98, intervals=True)
    # 19 replicates are just enough at 90%: (19 + 1) * 0.05 is 1 (0.9999999999999998 in floating point).
    assert len(model_test(out, "[v0][v1][v2]", bootstrap=19, level=0.9, intervals=True).intervals) == 6
    with pytest.raises(TabreleaseError, match="jobs is a whole number of at least 1, not True"):
        model_test(out, "[v0][v1][v2]", bootstrap=19, jobs=True)
    with pytest.raises(TabreleaseError, match="holds no release.json"):
        model_test(tmp_path / "nowhere", "[v0][v1][v2]")


def test_a_plan_that_cannot_be_rebuilt_with_the_published_scales_is_refused(tmp_path):
    rng = np.random.default_rng(2)
    out = _release(tmp_path, _independent_table(rng, (2, 2, 3), 500), [(0, 1), (1, 2)])
    release = read_public_release(out)
    # Rebuilt, the plan has the published blocks and scales.
    plan = published_plan(release)
    published = json.loads((out / "public" / "release.json").read_text())["plan"]["blocks"]
    rebuilt = [plan.calibration.scale * b.relative_scale for b in plan.design.blocks]
    assert rebuilt == pytest.approx([b["scale"] for b in published], rel=1e-9)
    path = out / "public" / "release.json"
    document = json.loads(path.read_text())
    original = path.read_text()
    document["plan"]["blocks"][0]["scale"] *= 1.01  # another plan than the one rebuilt
    path.write_text(json.dumps(document))
    with pytest.raises(TabreleaseError, match="could not be rebuilt with its published noise scales"):
        model_test(out, "[v0][v1][v2]", bootstrap=19)
    # The noise's own scale too, with the blocks as published (an auditor's trial: 2 edited to 50 went unnoticed).
    document = json.loads(original)
    document["noise"]["scale"] *= 25
    path.write_text(json.dumps(document))
    with pytest.raises(TabreleaseError, match="could not be rebuilt with its published noise scales"):
        model_test(out, "[v0][v1][v2]", bootstrap=19)


def test_a_sensitive_attribute_release_is_tested_with_the_attributes_its_guarantee_names(tmp_path):
    """An auditor's trial: a sensitive-attribute bundle was refused as needing the attributes the release was made
    for, which its release.json records (guarantee.unit.attributes). Its plan is rebuilt with them and tested: over
    ten tables drawn from a true independence model the test rejects at 5% about as often as it should (at most 2 of
    10; 0 of 20 in a scratch run, its p-values spread over (0.06, 0.99)), and a table with a strong interaction is
    rejected."""

    def p_value(counts, seed):
        table = tr.ContingencyTable(("v0", "v1", "v2"), (("a", "b"), ("c", "d", "e"), ("f", "g")), counts, "s")
        spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1), (1, 2)], mechanism="sensitive-attributes",
                              unit=tr.unit_of("replace", sensitive=("v2",)), mode="simulation", seed=seed)
        out = tmp_path / f"sa{seed}"
        tr.publish_release(table, spec, out)
        assert published_plan(read_public_release(out)).mechanism == "sensitive-attributes"
        return model_test(out, "[v0][v1][v2]", bootstrap=49, seed=1, intervals=False).p_value

    true_model = []
    for r in range(10):
        rng = np.random.default_rng(100 + r)
        probs = np.einsum("i,j,k->ijk", *[rng.dirichlet(np.ones(k)) for k in (2, 3, 2)])
        true_model.append(p_value(rng.multinomial(3000, probs.ravel()).reshape(probs.shape), r))
    assert sum(p <= 0.05 for p in true_model) <= 2
    dependent = np.array([[[400, 100], [100, 400], [250, 250]], [[400, 100], [100, 400], [250, 250]]])  # v1 ~ v2
    assert p_value(dependent, 99) <= 0.05


@pytest.mark.parametrize("options", [{"plan_objective": "max-cell-variance"}, {"plan_candidates": "closure"},
                                     {"plan_objective": "max-cell-variance", "plan_candidates": "closure"}])
def test_a_release_planned_with_other_settings_is_rebuilt_and_tested(tmp_path, options):
    """--plan-objective and --plan-candidates change the plan (Czech's model, here checked against the default's
    blocks): release.json records them, and the plan rebuilt from it has the published blocks and scales, so `test`
    runs (a new user's trial found such releases refused as made by another version)."""
    table = tr.builtin_table("czech")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1, options=options)
    done = tr.publish_release(table, spec, tmp_path / "r")
    default = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1))
    blocks = [(b.query, b.variables, b.relative_scale) for b in done.release.plan.design.blocks]
    assert blocks != [(b.query, b.variables, b.relative_scale) for b in default.plan.design.blocks]
    plan = published_plan(read_public_release(tmp_path / "r"))
    assert [(b.query, b.variables) for b in plan.design.blocks] == [(q, v) for q, v, _ in blocks]
    assert plan.calibration.scale * np.array([b.relative_scale for b in plan.design.blocks]) == pytest.approx(
        done.release.plan.calibration.scale * np.array([r for _, _, r in blocks]), rel=1e-9)
    assert 0 < model_test(tmp_path / "r", "[A][B][C][D][E][F]", bootstrap=19).p_value <= 1


def test_margins_asked_inside_a_released_one_are_weighed_again_when_the_plan_is_rebuilt(tmp_path):
    """[AB][CD][C] on Titanic releases AB and CD, and the plan weighs C too (with closure candidates, its scales
    differ from [AB][CD]'s): release.json's plan records C as weighed inside, and the rebuilt plan has the published
    scales, so `test` runs (a review found it refused)."""
    table = tr.builtin_table("titanic")
    options = {"plan_candidates": "closure"}
    done = tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins="[AB][CD][C]", mode="simulation",
                                                    seed=1, options=options), tmp_path / "r")
    outer = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins="[AB][CD]", mode="simulation",
                                                     seed=1, options=options))
    scales = [done.release.plan.block_scale(b.query, b.variables) for b in done.release.plan.design.blocks]
    assert scales != pytest.approx([outer.plan.block_scale(b.query, b.variables) for b in outer.plan.design.blocks])
    document = json.loads((tmp_path / "r/public/release.json").read_text())
    assert document["plan"]["weighed_inside"] == [[table.variables[2]]]
    plan = published_plan(read_public_release(tmp_path / "r"))
    assert [plan.block_scale(b.query, b.variables) for b in plan.design.blocks] == pytest.approx(scales, rel=1e-9)
    assert 0 < model_test(tmp_path / "r", "[A][B][C][D]", bootstrap=19).p_value <= 1


def test_the_replicates_are_released_with_the_recorded_estimator_and_rounding(tmp_path):
    rng = np.random.default_rng(3)
    counts = _independent_table(rng, (2, 2, 3), 600)
    table = tr.ContingencyTable(("v0", "v1", "v2"), (("a", "b"), ("c", "d"), ("e", "f", "g")), counts, "t")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1), (1, 2)], mode="simulation", seed=1,
                          rounding="nearest")
    tr.publish_release(table, spec, tmp_path / "r")
    plan = published_plan(read_public_release(tmp_path / "r"))
    assert plan.rounding == "nearest" == json.loads((tmp_path / "r/public/release.json").read_text())["rounding"]
    # Margins that are not of one table cannot be fitted: one line.
    path = tmp_path / "r" / "public" / "release.json"
    document = json.loads(path.read_text())
    document["consistent"] = False
    path.write_text(json.dumps(document))
    with pytest.raises(TabreleaseError, match="not consistent"):
        model_test(tmp_path / "r", "[v0][v1][v2]", bootstrap=19)
    del document["epsilon"]
    document["consistent"] = True
    path.write_text(json.dumps(document))
    with pytest.raises(TabreleaseError, match="lacks or garbles what the plan needs"):
        model_test(tmp_path / "r", "[v0][v1][v2]", bootstrap=19)


@pytest.mark.e2e
def test_the_command_line_test_reads_only_public_and_prints_one_json_document(tmp_path):
    rng = np.random.default_rng(5)
    out = _release(tmp_path, _independent_table(rng, (2, 3, 2), 800), [(0, 1), (1, 2)])
    (out / "internal").rename(tmp_path / "elsewhere")  # an outside researcher has public/ alone
    done = subprocess.run([sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model", "[v0][v1][v2]",
                           "--bootstrap", "39", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) >= {"p_value", "p_value_error", "p_value_naive", "g2", "df", "bootstrap", "n"}
    assert document["bootstrap"] == 39
    assert "intervals" not in document
    # The bundle was simulated: said in the JSON and the text, as `release` says it (a reviewer's trial: it was not).
    assert document["bundle_mode"] == "simulation"
    with_intervals = subprocess.run([sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model",
                                     "[v0][v1][v2]", "--bootstrap", "39", "--intervals"], capture_output=True, text=True)
    assert with_intervals.returncode == 0 and "v1=l2" in with_intervals.stdout  # the cells of each margin, by label
    assert with_intervals.stdout.startswith("WARNING: the bundle was made in simulation mode: not produced by a "
                                            "secure sampler")
    release_json = out / "public" / "release.json"
    made = json.loads(release_json.read_text())
    made["noise"]["mode"] = "release"  # as a secure release's says
    release_json.write_text(json.dumps(made))
    secure = subprocess.run([sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model",
                             "[v0][v1][v2]", "--bootstrap", "19"], capture_output=True, text=True)
    assert secure.returncode == 0 and "WARNING" not in secure.stdout, secure.stderr
    refused = subprocess.run([sys.executable, "-m", "tabrelease", "test", str(out), "--model", "[v0,v1][v1,v2]"],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_a_model_may_name_variables_as_the_published_files_do(tmp_path):
    """Rochdale's public files name its variables wife_active, wife_over_38, ...; `test` refused them ("unknown
    variable 'wife_active'") though `release` and `plan` take them (a new user's trial). The same test by names
    and by letters."""
    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("rochdale"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1),
                       out)
    by_name = model_test(out, "[wife_active][wife_over_38]", bootstrap=19, seed=1, intervals=False)
    by_letter = model_test(out, "[A][B]", bootstrap=19, seed=1, intervals=False)
    assert by_name.as_dict() == by_letter.as_dict()
    assert by_letter.model == "[wife_active][wife_over_38]"  # the model as the public files name it, not "[A][B]"


def test_a_margin_file_with_its_columns_reordered_is_refused(tmp_path):
    """Two variables of the same levels (yes/no): a file whose columns were swapped after the release would be read
    transposed, its test run on the wrong margin (a new user's trial: exit 0, smoker's estimate swapped with
    drinker's). The header names the columns, so it is refused; the file as released is read again."""
    import pandas as pd

    counts = np.array([[[30, 12], [9, 25]], [[14, 8], [11, 40]]])
    table = tr.ContingencyTable(("smoker", "drinker", "region"), (("no", "yes"), ("no", "yes"), ("n", "s")),
                                counts, "yn")
    out = tmp_path / "r"
    tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1), (2,)], mode="simulation",
                                             seed=1), out)
    path = out / "public" / "smoker__drinker.simulation.csv"
    frame = pd.read_csv(path, dtype=str)
    assert list(frame.columns) == ["smoker", "drinker", "count"]
    before = model_test(out, "[smoker][drinker][region]", bootstrap=19, seed=1, intervals=False)
    frame[["drinker", "smoker", "count"]].to_csv(path, index=False)
    with pytest.raises(TabreleaseError, match=r"smoker__drinker.simulation.csv's columns are headed drinker, smoker, not "
                                              r"smoker, drinker as release.json gives them"):
        model_test(out, "[smoker][drinker][region]", bootstrap=19, seed=1, intervals=False)
    frame.set_axis(["smoker", "drinker", "count"], axis=1).to_csv(path, index=False)  # as released again
    assert model_test(out, "[smoker][drinker][region]", bootstrap=19, seed=1, intervals=False) == before
    # Two variables labelled by each other's names: the swapped file is refused too (a review found it read).
    crossed = tr.ContingencyTable(("v1", "v2", "region"), (("no", "yes"), ("no", "yes"), ("n", "s")), counts, "x",
                                  metadata={"variables": [{"name": "v1", "label": "v2"}, {"name": "v2", "label": "v1"},
                                                          {"name": "region"}]})
    tr.publish_release(crossed, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1), (2,)], mode="simulation",
                                               seed=1), tmp_path / "x")
    swapped = tmp_path / "x" / "public" / json.loads((tmp_path / "x/public/release.json").read_text())["margins"][0][
        "file"]
    frame = pd.read_csv(swapped, dtype=str)
    assert list(frame.columns) == ["v2", "v1", "count"]  # the labels, as released
    model_test(tmp_path / "x", "[v1][v2][region]", bootstrap=19, seed=1, intervals=False)  # read as released
    frame[["v1", "v2", "count"]].to_csv(swapped, index=False)
    with pytest.raises(TabreleaseError, match="columns are headed v1, v2, not v2, v1"):
        model_test(tmp_path / "x", "[v1][v2][region]", bootstrap=19, seed=1, intervals=False)
    # The bundle's release.json named in place of its folder is read as the folder (it said "holds no release.json").
    assert model_test(out / "public" / "release.json", "[smoker][drinker][region]", bootstrap=19, seed=1,
                      intervals=False) == before


def test_a_margin_file_must_list_each_cell_once(tmp_path):
    """A row repeated (even identically) or left out after the release: the reader took the last row of a repeated
    cell, and a missing cell as 0 (a new user's trial found a repeated row accepted). Refused in one line."""
    rng = np.random.default_rng(6)
    out = _release(tmp_path, _independent_table(rng, (2, 2, 3), 500), [(0, 1), (1, 2)])
    path = out / "public" / json.loads((out / "public/release.json").read_text())["margins"][1]["file"]
    rows = path.read_text().splitlines(keepends=True)
    assert len(rows) == 1 + 6  # the header and the margin's 2 x 3 cells
    for edited in (rows + rows[-1:], rows[:-1]):
        path.write_text("".join(edited))
        with pytest.raises(TabreleaseError, match=f"{path.name} does not list each of its 6 cells once"):
            read_public_release(out)
    path.write_text("".join(rows))
    read_public_release(out)


def test_margins_edited_after_the_release_are_refused(tmp_path):
    """A count edited in public/ (the margins no longer agree) was tested as if it were the release (a new user's
    trial); now refused, as a negative count is."""
    import shutil

    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("rochdale"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1),
                       out)
    for change, message in ((5, "disagree where they share variables"), (None, "holds a negative count")):
        edited = tmp_path / f"edited-{change}"
        shutil.copytree(out, edited)
        document = json.loads((edited / "public" / "release.json").read_text())
        path = edited / "public" / document["margins"][0]["file"]
        lines = path.read_text().splitlines()
        cells = lines[1].split(",")
        count = int(float(cells[-1]))
        cells[-1] = str(count + change if change is not None else -1)
        lines[1] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(TabreleaseError, match=message):
            model_test(edited, "[A][B]", bootstrap=19, seed=1, intervals=False)
    assert model_test(out, "[A][B]", bootstrap=19, seed=1, intervals=False).p_value is not None


def test_an_unrounded_release_s_margins_agree_within_their_written_decimals(tmp_path):
    """A release with --rounding none writes its margins to 6 decimals: a shared sub-margin summing many cells
    differs by up to their rounding. The agreement check refused such an untouched release (a review); it allows
    the written precision, and still catches an edit of one count."""
    import shutil

    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("rochdale"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1,
                                                                    rounding="none"), out)
    assert model_test(out, "[A][B]", bootstrap=19, seed=1, intervals=False).p_value is not None
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    document = json.loads((edited / "public" / "release.json").read_text())
    path = edited / "public" / document["margins"][0]["file"]
    lines = path.read_text().splitlines()
    cells = lines[1].split(",")
    cells[-1] = str(float(cells[-1]) + 0.5)
    lines[1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TabreleaseError, match="disagree where they share variables"):
        model_test(edited, "[A][B]", bootstrap=19, seed=1, intervals=False)


def test_a_p_value_at_its_floor_is_printed_as_a_bound(tmp_path, capsys):
    """A new user read "p-value 0.0500 ..., Monte Carlo error 0.0500" at 19 replicates as an estimate: where no
    replicate reaches the observed G2, the p-value is the smallest B replicates can give, 1 / (B + 1), and the
    terminal now says "<=" and why; a p-value above it is printed as an estimate with its error."""
    from tabrelease.cli import main

    rng = np.random.default_rng(5)
    p = np.array([[0.35, 0.05], [0.05, 0.55]])[:, :, None] * np.array([0.3, 0.7])[None, None, :]
    counts = rng.multinomial(2000, p.ravel()).reshape(p.shape)
    out = _release(tmp_path, counts, [(0, 1), (0, 2), (1, 2)], epsilon=1.0)
    assert main(["test", str(out), "--model", "[v0][v1][v2]", "--bootstrap", "19", "--seed", "3", "--quiet"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("p-value"))
    assert line.startswith("p-value      <= 0.0500 noise-aware (no replicate reached the observed G2"), line
    assert main(["test", str(out), "--model", "[v0,v1][v2]", "--bootstrap", "19", "--seed", "3", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("p-value"))
    assert "<=" not in lines[at] and "Monte Carlo error" in lines[at], lines[at]
    # The chi-squared p-value below it says it is not valid for a noisy release (a reviewer's trial: a true model
    # rejected in 95% of releases at epsilon 0.1 by it).
    assert lines[at + 1].endswith("nominal (chi-squared, as if the released margins were counts: not valid for a "
                                  "noisy release; for comparison only)"), lines[at + 1]


def test_intervals_a_replicate_released_empty_cannot_give_are_said_missing_without_a_warning(tmp_path):
    """A reviewer's trial: at epsilon 0.01 some bootstrap replicates release an empty table, whose proportions are
    0 / 0; numpy's RuntimeWarning reached stderr and the JSON's bounds were null, unexplained. Now stderr is clean and
    the note says why there are no intervals, in the JSON and the text."""
    rng = np.random.default_rng(5)
    counts = rng.multinomial(300, np.full(12, 1 / 12)).reshape(2, 3, 2)
    out = _release(tmp_path, counts, [(0, 1), (1, 2)], epsilon=0.01)
    argv = [sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model", "[v0][v1][v2]", "--bootstrap",
            "39", "--intervals", "--quiet"]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    document = json.loads(done.stdout)
    assert document["intervals_note"].startswith("no intervals: some replicates released an empty table")
    assert all(c["low"] is None and c["high"] is None for c in document["intervals"])
    text = subprocess.run(argv, capture_output=True, text=True)
    assert text.stderr == "" and "no intervals: some replicates released an empty table" in text.stdout
