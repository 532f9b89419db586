"""The DP Gaussian copula (Asghar et al. 2019) and its cop-ID baseline: exact sensitivity of every noised block by
brute force over every record, the budget split, the copula's numerics against scipy and Higham's example, and what
the model reproduces with the noise off (and what it cannot)."""

import itertools
import json
from math import comb

import numpy as np
import pytest
from scipy import stats

from tabrelease import builtin_table
from tabrelease.copula import (bivariate_normal_cdf, both_one_probability, fit_copula, gaussian_correlations,
                               nearest_correlation, sample_records, synthesise, synthetic_counts)
from tabrelease.errors import TabreleaseError
from tabrelease.measurements import Measurements
from tabrelease.mechanisms import get_mechanism, with_epsilon
from tabrelease.testing import plan_at
from tabrelease.noise import NoNoise
from tabrelease.pipeline import measure, release_from_measurements, run_plan
from tabrelease.spec import ReleaseSpec, loss_of
from tabrelease.workflow import release_margins
from tabrelease.tables import margin_counts

from .helpers import RecordingNoise

COPULAS = ("gaussian-copula", "copula-id")
SHAPES = [(2, 2), (2, 3, 2), (3, 3), (4, 2, 3)]


# -- by hand: explicit dummy coding of a list of records ------------------------------------------------------------

def dummy_matrix(shape, records):
    """n x d: one column per level of every variable, 1 where the record has that level."""
    columns = [np.asarray(records)[:, i][:, None] == np.arange(k)[None, :] for i, k in enumerate(shape)]
    return np.concatenate(columns, axis=1).astype(int).reshape(len(records), sum(shape))


def block_by_hand(shape, records, variables):
    """Algorithm 1's (n0, n1) per dummy, or Algorithm 2's four counts per pair of dummies, counted row by row."""
    D = dummy_matrix(shape, records) if len(records) else np.zeros((0, sum(shape)), int)
    start = np.concatenate([[0], np.cumsum(shape)])
    if len(variables) == 1:
        (i,) = variables
        return np.array([[np.sum(D[:, start[i] + l] == a) for a in (0, 1)] for l in range(shape[i])]).ravel()
    i, j = variables
    return np.array([[[[np.sum((D[:, start[i] + l] == a) & (D[:, start[j] + m] == b)) for b in (0, 1)]
                       for a in (0, 1)] for m in range(shape[j])] for l in range(shape[i])]).ravel()


def counts_of(shape, records):
    counts = np.zeros(shape, np.int64)
    for r in records:
        counts[tuple(r)] += 1
    return counts


def neighbour_pairs(shape, neighbours, base):
    """(D, D') for every record: D + x (add-remove; removal is the same pair reversed), or D with x replaced by y."""
    domain = list(itertools.product(*(range(k) for k in shape)))
    if neighbours == "add-remove":
        for x in domain:
            yield base, base + [x]
    else:
        for x, y in itertools.product(domain, domain):
            yield base + [x], base + [y]


class ScaleRecordingNoise(RecordingNoise):
    """Also keeps the distribution and scale each draw was made with (what the sampler really used)."""

    def __init__(self, seed):
        super().__init__(seed)
        self.drawn_with = []

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        self.drawn_with.append((calibration.distribution, calibration.scale))
        return super().perturb(values, calibration, integer_scale, integers)


def every_block(shape):
    return [(i,) for i in range(len(shape))] + list(itertools.combinations(range(len(shape)), 2))


# -- privacy: exact sensitivity and the budget split ----------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("neighbours", ["add-remove", "replace"])
def test_each_block_is_noised_at_its_brute_force_sensitivity_and_the_shares_sum_to_epsilon(shape, neighbours):
    rng = np.random.default_rng(sum(shape))
    base = [tuple(int(rng.integers(k)) for k in shape) for _ in range(5)]
    blocks = every_block(shape)
    changes = {b: [] for b in blocks}
    for d, d2 in neighbour_pairs(shape, neighbours, base):
        for b in blocks:
            changes[b].append(np.abs(block_by_hand(shape, d2, b) - block_by_hand(shape, d, b)).sum())
    brute = {b: max(changes[b]) for b in blocks}
    epsilon = 0.7
    for name in COPULAS:
        plan = plan_at(shape, [tuple(range(len(shape)))], epsilon, mechanism=name, neighbours=neighbours)
        noise = ScaleRecordingNoise(1)
        measured = measure(plan, counts_of(shape, base), noise)
        scales = {tuple(b.variables): b.scale for b in measured.blocks}
        # The scale recorded with each block is the one its noise was drawn with.
        assert noise.drawn_with == [("laplace", b.scale) for b in measured.blocks]
        # Every variable, and (copula only) every pair of variables, measured once: m + C(m, 2) blocks.
        wanted = blocks if name == "gaussian-copula" else [(i,) for i in range(len(shape))]
        assert sorted(scales) == sorted(wanted) and len(measured.blocks) == len(wanted)
        assert plan.parameters["block_sensitivity"] == [brute[b] for b in wanted]  # what release.json says
        # What was perturbed is the by-hand dummy coding of the table.
        for (values, _), b in zip(noise.calls, measured.blocks):
            np.testing.assert_array_equal(values, block_by_hand(shape, base, b.variables))
        # Each block's share is its brute-force sensitivity over its scale; the shares are equal and sum to epsilon.
        shares = [brute[b] / scales[b] for b in wanted]
        np.testing.assert_allclose(shares, epsilon / len(wanted), rtol=1e-12)
        assert sum(shares) == pytest.approx(epsilon, rel=1e-12)
        # Joint: over every neighbouring pair, sum_B |change_B|_1 / b_B (the privacy loss of the whole vector) is at
        # most epsilon, and reaches it (no share is wasted).
        loss = np.sum([np.asarray(changes[b]) / scales[b] for b in wanted], axis=0)
        assert loss.max() == pytest.approx(epsilon, rel=1e-12)


def test_block_sensitivities_against_the_papers_lemmas():
    """By hand: the paper's Lap(2 / eps') claims sensitivity 2 for a variable's block (Lemma 1) and for a pair's
    (Lemma 2). Brute force on one binary pair and one 3 x 4 pair says otherwise."""
    from tabrelease.mechanisms.gaussian_copula import block_sensitivity

    def brute(shape, b, neighbours):
        return max(np.abs(block_by_hand(shape, d2, b) - block_by_hand(shape, d, b)).sum()
                   for d, d2 in neighbour_pairs(shape, neighbours, [(0,) * len(shape)]))

    assert brute((2, 2), (0, 1), "replace") == 8 == block_sensitivity((2, 2), (0, 1), "replace")
    assert brute((2, 2), (0,), "replace") == 4 == block_sensitivity((2, 2), (0,), "replace")
    assert brute((3, 4), (0, 1), "add-remove") == 12 == block_sensitivity((3, 4), (0, 1), "add-remove")
    assert brute((3, 4), (0, 1), "replace") == 20 == block_sensitivity((3, 4), (0, 1), "replace")
    assert brute((3, 4), (1,), "add-remove") == 4 == block_sensitivity((3, 4), (1,), "add-remove")


def test_rescale_gives_the_plan_at_another_epsilon():
    shape = (2, 3, 2)
    for name in COPULAS:
        plan = plan_at(shape, [(0, 1), (1, 2)], 1.0, mechanism=name)
        moved, direct = with_epsilon(plan, 4.0), plan_at(shape, [(0, 1), (1, 2)], 4.0, mechanism=name)
        mechanism = get_mechanism(name)
        assert mechanism.block_scales(moved) == mechanism.block_scales(direct)
        for b, scale in mechanism.block_scales(plan).items():
            assert mechanism.block_scales(moved)[b] == pytest.approx(scale / 4.0, rel=1e-12)


def test_measurements_of_another_plan_are_refused():
    shape, counts = (2, 3, 2), np.arange(12).reshape(2, 3, 2)
    plan = plan_at(shape, [(0, 1)], 1.0, mechanism="gaussian-copula")
    taken = measure(plan, counts, NoNoise())
    with pytest.raises(TabreleaseError, match="not drawn with this plan"):
        release_from_measurements(with_epsilon(plan, 2.0), taken)
    dropped = Measurements(taken.blocks[:-1], taken.noise_mode, taken.seed)
    with pytest.raises(TabreleaseError, match="not drawn with this plan"):
        release_from_measurements(plan, dropped)
    other = plan_at(shape, [(0, 1)], 1.0, mechanism="gaussian-copula", neighbours="replace")
    with pytest.raises(TabreleaseError, match="not drawn with this plan"):
        release_from_measurements(other, taken)
    with pytest.raises(TabreleaseError, match="reads"):
        plan_at(shape, [(0, 1)], 1.0, mechanism="gaussian-copula", estimator="least-squares")


def test_privacy_statement():
    plan = plan_at((2, 3, 2, 2), [(0, 1)], 0.5, mechanism="gaussian-copula", neighbours="replace")
    text = get_mechanism("gaussian-copula").privacy_statement(plan)
    assert text.startswith("epsilon=0.5 differential privacy (pure) for replace neighbours")
    assert "4 variables and of the 6 pairs" in text and "10 blocks of epsilon/10" in text
    assert "n is not treated as public" in text
    plan = plan_at((2, 3, 2, 2), [(0, 1)], 0.5, mechanism="copula-id")
    text = get_mechanism("copula-id").privacy_statement(plan)
    assert "add-remove" in text and "4 blocks of epsilon/4" in text and "pairs" not in text


@pytest.mark.parametrize("m, published", [(14, 0.014782), (27, 0.007791), (9, 0.022579)])
def test_with_delta_the_papers_advanced_composition_gives_its_published_per_block_epsilon(m, published):
    """Section 4.2: k = m + C(m, 2) blocks, delta = 2^-30, overall epsilon just under 1: epsilon_0 = 0.014782 (Adult,
    m = 14), 0.007791 (DSS, m = 27), 0.022579 (Hospital, m = 9), given to 6 decimals."""
    delta, k = 2.0**-30, m + comb(m, 2)
    plan = plan_at((2,) * m, [(0, 1)], 1.0, mechanism="gaussian-copula", delta=delta)
    epsilon_0 = 1.0 / plan.calibration.scale
    assert np.floor(epsilon_0 * 1e6) / 1e6 == pytest.approx(published, abs=1e-12)
    # Theorem 3 written out again: the composed epsilon is at most 1, and no share is left over.
    composed = np.sqrt(2 * k * np.log(1 / delta)) * epsilon_0 + k * epsilon_0 * (np.exp(epsilon_0) - 1)
    assert composed <= 1.0 and composed == pytest.approx(1.0, abs=1e-9)
    assert plan.calibration.delta == delta
    scales = get_mechanism("gaussian-copula").block_scales(plan)
    # Delta (add-remove, binary): 2 for a variable's block, 4 for a pair's; scale Delta / epsilon_0.
    assert len(scales) == k and all(scale == pytest.approx((2 if len(v) == 1 else 4) / epsilon_0, rel=1e-12)
                                    for v, scale in scales.items())
    text = get_mechanism("gaussian-copula").privacy_statement(plan)
    assert text.startswith("(epsilon=1, delta=9.31323e-10)-differential privacy") and "advanced composition" in text
    half = with_epsilon(plan, 0.5)
    assert 1.0 / half.calibration.scale < epsilon_0 / 2 + 1e-3 and half.calibration.delta == delta


def test_with_delta_few_variables_keep_the_pure_split():
    """6 variables (21 blocks): advanced composition at delta = 2^-30 gives 0.033 per block, less than 1/21."""
    plan = plan_at((2,) * 6, [(0, 1)], 1.0, mechanism="gaussian-copula", delta=2.0**-30)
    assert plan.calibration.delta is None and plan.calibration.scale == pytest.approx(21.0)
    assert "pure" in get_mechanism("gaussian-copula").privacy_statement(plan)
    assert "no delta is spent" in get_mechanism("gaussian-copula").privacy_statement(plan)


# -- the copula's numerics -----------------------------------------------------------------------------------------

def test_bivariate_normal_cdf_against_scipy_and_the_limits():
    for h, k, rho in itertools.product([-1.7, -0.2, 0.0, 0.9, 2.3], [-1.1, 0.4, 1.6], [-0.99, -0.6, 0.0, 0.3, 0.97]):
        expected = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([h, k])
        assert bivariate_normal_cdf(h, k, rho) == pytest.approx(expected, abs=2e-6)
    h, k = np.array([-1.0, 0.3, 1.2]), np.array([0.5, 0.3, -0.4])
    np.testing.assert_allclose(bivariate_normal_cdf(h, k, 1.0), stats.norm.cdf(np.minimum(h, k)), atol=1e-9)
    np.testing.assert_allclose(bivariate_normal_cdf(h, k, -1.0),
                               np.maximum(0, stats.norm.cdf(h) + stats.norm.cdf(k) - 1), atol=1e-9)


def test_gaussian_correlation_reaches_the_target_conjunction():
    p_i, p_j = np.array([0.3, 0.5, 0.8, 0.1]), np.array([0.6, 0.5, 0.7, 0.2])
    targets = np.array([0.25, 0.1, 0.6, 0.02])
    rho = gaussian_correlations(p_i, p_j, targets)
    for pi, pj, t, r in zip(p_i, p_j, targets, rho):
        z = stats.norm.ppf([pi, pj])
        assert stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf(z) == pytest.approx(t, abs=1e-5)
    # Independence gives 0; a target beyond the Frechet bounds [max(0, p_i + p_j - 1), min(p_i, p_j)] is clipped to
    # them (reached as rho -> +-1; so flat there that rho itself is found only to about 1e-2).
    assert gaussian_correlations(0.3, 0.6, 0.18) == pytest.approx(0.0, abs=1e-9)
    high, low = gaussian_correlations(0.3, 0.6, 0.5), gaussian_correlations(0.3, 0.6, 0.0)
    assert high > 0.95 and both_one_probability(0.3, 0.6, high) == pytest.approx(0.3, abs=1e-9)
    assert low < -0.95 and both_one_probability(0.3, 0.6, low) == pytest.approx(0.0, abs=1e-9)
    assert both_one_probability(0.3, 0.6, 1.0) == pytest.approx(0.3, abs=1e-9)


def test_nearest_correlation_matches_highams_example():
    # Higham (2002), section 4: the nearest correlation matrix to [[1 1 0] [1 1 1] [0 1 1]].
    near = nearest_correlation(np.array([[1.0, 1, 0], [1, 1, 1], [0, 1, 1]]))
    expected = np.array([[1, 0.7607, 0.1573], [0.7607, 1, 0.7607], [0.1573, 0.7607, 1]])
    np.testing.assert_allclose(near, expected, atol=1e-4)
    assert np.linalg.eigvalsh(near).min() > -1e-9
    valid = np.array([[1.0, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(nearest_correlation(valid), valid, atol=1e-12)


def test_nearest_correlation_agrees_with_statsmodels():
    import warnings

    from statsmodels.stats.correlation_tools import corr_nearest

    rng = np.random.default_rng(0)
    for _ in range(4):
        a = rng.uniform(-1, 1, (6, 6))
        a = (a + a.T) / 2
        np.fill_diagonal(a, 1.0)
        with warnings.catch_warnings():  # its iteration limit, reached while already within 1e-10
            warnings.simplefilter("ignore")
            theirs = corr_nearest(a, threshold=1e-15, n_fact=1000)
        np.testing.assert_allclose(nearest_correlation(a), theirs, atol=1e-8)


def test_fit_from_hand_made_noisy_counts_clips_negatives_and_hits_the_clipped_conjunction():
    """Algorithm 1: p = n1 / (n0 + n1) after negative noisy counts are set to 0; Algorithm 2: E{X_i X_j} =
    n11 / (n00 + n01 + n10 + n11) after the same, which the solved rho reproduces (checked with scipy)."""
    from tabrelease.measurements import DUMMY_TABLES, Measurement

    shape = (2, 3)
    one = [Measurement(DUMMY_TABLES, (0,), [62, 38, 38, 62], "laplace", 1.0, shape),
           Measurement(DUMMY_TABLES, (1,), [105, -5, 30, 70, 75, 25], "laplace", 1.0, shape)]
    pair = np.zeros((2, 3, 2, 2))
    pair[1, 1] = [[20, 10], [-4, 34]]  # level 1 of variable 0 with level 1 of variable 1: target 34 / 64
    pair[0, 1] = [[-2, -1], [-3, -4]]  # every cell clipped: no information, the independence value
    blocks = one + [Measurement(DUMMY_TABLES, (0, 1), pair.ravel(), "laplace", 1.0, shape)]
    model = fit_copula(shape, Measurements(tuple(blocks), "simulation", 1))
    np.testing.assert_allclose(model.probabilities, [0.38, 0.62, 0.0, 0.7, 0.25], atol=1e-15)
    assert model.correlation[0, 2] == 0 and model.correlation[1, 2] == 0  # p = 0: rho does not matter
    r = model.correlation[1, 3]
    z = stats.norm.ppf([0.62, 0.7])
    assert stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf(z) == pytest.approx(34 / 64, abs=1e-5)
    assert model.correlation[0, 3] == pytest.approx(0.0, abs=1e-9)  # 0.38 * 0.7: independence
    assert model.correlation[0, 1] == pytest.approx(-1.0, abs=1e-6)  # two levels of one variable: never both


# -- with the noise off: what the model reproduces, and what it cannot ------------------------------------------------

def _binary_table(n, rng):
    """Four binary variables with pairwise dependence (thresholded correlated normals)."""
    cov = np.array([[1, 0.6, 0.2, -0.3], [0.6, 1, 0.4, 0.0], [0.2, 0.4, 1, 0.3], [-0.3, 0.0, 0.3, 1]])
    z = rng.multivariate_normal(np.zeros(4), cov, size=n)
    return counts_of((2,) * 4, (z > np.array([0.0, 0.5, -0.4, 0.8])).astype(int))


def _noise_off_records(shape, counts, name="gaussian-copula", seed=5):
    plan = plan_at(shape, [tuple(range(len(shape)))], 1.0, mechanism=name)
    model = fit_copula(shape, measure(plan, counts, NoNoise()))
    return model, synthetic_counts(shape, sample_records(model, np.random.default_rng(seed)))


def _within_binomial(synthetic, true, n, sds=4.5):
    """Each synthetic count within `sds` binomial standard deviations sqrt(n p (1 - p)) of n p, p the true share."""
    p = np.asarray(true, float) / n
    assert np.all(np.abs(np.asarray(synthetic) - n * p) <= sds * np.sqrt(n * p * (1 - p)) + 1e-9)


def test_noise_off_binary_one_way_margins_and_pairs_are_reproduced_up_to_sampling():
    n, shape = 20000, (2,) * 4
    counts = _binary_table(n, np.random.default_rng(11))
    model, synthetic = _noise_off_records(shape, counts)
    assert model.n == n and synthetic.sum() == n  # n from the (noise-free) counts
    for i in range(4):
        _within_binomial(margin_counts(synthetic, (i,)), margin_counts(counts, (i,)), n)
    for pair in itertools.combinations(range(4), 2):  # every cell of every 2x2 table
        _within_binomial(margin_counts(synthetic, pair), margin_counts(counts, pair), n)


def test_noise_off_the_three_way_interaction_is_not_reproduced():
    """x3 = x1 xor x2, x1 and x2 independent fair coins: every pair is independent, so the copula (pairwise only)
    samples the eight cells about equally, while the true table has four empty cells."""
    n, shape = 8000, (2, 2, 2)
    records = [(a, b, a ^ b) for a, b in np.random.default_rng(3).integers(0, 2, size=(n, 2))]
    counts = counts_of(shape, records)
    _, synthetic = _noise_off_records(shape, counts)
    impossible = np.array([[[synthetic[a, b, c] for c in (0, 1) if c != a ^ b][0] for b in (0, 1)] for a in (0, 1)])
    _within_binomial(impossible.sum(), n / 2, n)  # about half of the records, against none in the table
    assert counts[0, 0, 1] == 0 and counts[1, 1, 1] == 0


def test_noise_off_multi_level_one_way_margins_are_approximate():
    """Three or more levels: the dummies' exclusivity is not a Gaussian copula; the decoded one-way shares are
    within 0.05 of the true ones here (about 0.03 at worst on random 3-level tables)."""
    rng = np.random.default_rng(2)
    for shape in [(3, 2), (3, 3, 2), (5, 3)]:
        counts = rng.multinomial(20000, rng.dirichlet(np.full(int(np.prod(shape)), 0.7))).reshape(shape)
        _, synthetic = _noise_off_records(shape, counts)
        for i in range(len(shape)):
            np.testing.assert_allclose(margin_counts(synthetic, (i,)) / 20000, margin_counts(counts, (i,)) / 20000,
                                       atol=0.05)


def test_noise_off_copula_id_draws_independent_variables_with_the_true_one_way_margins():
    n, shape = 20000, (2,) * 4
    counts = _binary_table(n, np.random.default_rng(11))
    model, synthetic = _noise_off_records(shape, counts, "copula-id")
    for i in range(4):
        _within_binomial(margin_counts(synthetic, (i,)), margin_counts(counts, (i,)), n)
    for pair in itertools.combinations(range(4), 2):
        independent = np.outer(margin_counts(counts, (pair[0],)), margin_counts(counts, (pair[1],))) / n
        _within_binomial(margin_counts(synthetic, pair), independent, n)
    a, b = model.repaired[0, 2], model.repaired[0, 1]  # across variables 0; within variable 0: -1
    assert a == pytest.approx(0.0, abs=1e-12) and b == pytest.approx(-1.0, abs=1e-6)


def test_n_is_estimated_from_the_noisy_totals():
    shape, counts = (2, 3, 2), np.full((2, 3, 2), 50)
    plan = plan_at(shape, [(0, 1, 2)], 1.0, mechanism="gaussian-copula")
    model = fit_copula(shape, measure(plan, counts, NoNoise()))
    assert model.n == 600
    # With noise: every block's totals, weighted by 1 / variance (a pair block's total has 4 cells, a one-way's 2).
    noisy = measure(plan, counts, RecordingNoise(4))
    sums, weights = [], []
    for b in noisy.blocks:
        cells = 2 if len(b.variables) == 1 else 4
        for s in b.values.reshape(-1, cells).sum(axis=1):
            sums.append(s), weights.append(1 / (cells * 2 * b.scale**2))
    expected = np.dot(sums, weights) / np.sum(weights)
    assert fit_copula(shape, noisy).n == int(np.floor(expected + 0.5))


# -- end to end --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", COPULAS)
def test_release_is_the_synthetic_records_margins_integer_and_consistent(name):
    table = builtin_table("journey_to_work")
    margins = [(0, 1), (1, 2), (0, 2)]
    rel = release_margins(table,
                          ReleaseSpec(loss=loss_of(1.0), margins=margins, mechanism=name, mode="simulation", seed=1))
    assert rel.consistency == "global" and rel.table.dtype.kind == "i" and rel.table.min() >= 0
    for g, m in zip(rel.margins, rel.released_margins):
        np.testing.assert_array_equal(m, margin_counts(rel.table, g))
    assert rel.privacy == get_mechanism(name).privacy_statement(rel.plan)
    # The release is the measurements' post-processing, replayed from the seed.
    again = release_from_measurements(rel.plan, rel.measurements)
    np.testing.assert_array_equal(again.table, rel.table)
    from tabrelease.noise import SimulationNoise, post_processing_rng

    replay = synthesise(rel.plan, rel.measurements, post_processing_rng(SimulationNoise(1)))
    np.testing.assert_array_equal(replay.table, rel.table)


def test_release_mode_draws_with_opendp():
    table = builtin_table("czech")
    plan = plan_at(table.shape, [(0, 1), (2, 3)], 1.0, mechanism="gaussian-copula")
    from tabrelease.noise import SecureNoise

    rel = run_plan(plan, table.counts, SecureNoise())
    assert rel.noise_mode == "release" and rel.noise_seed is None and rel.consistency == "global"
    assert abs(rel.n_released - table.n) < 200  # n' from the noisy totals (sd about 5 here)


@pytest.mark.e2e
def test_command_line_release_writes_the_bundle(tmp_path, capsys):
    from tabrelease.cli import main

    out = tmp_path / "bundle"
    code = main(["release", "czech", "--mechanism", "gaussian-copula", "--epsilon", "1", "--simulate", "--seed", "1",
                 "--out", str(out)])
    capsys.readouterr()
    assert code == 0 and (out / "internal" / "audit.html").exists()
    public = json.loads((out / "public" / "release.json").read_text())
    assert public["mechanism"] == "gaussian-copula" and "n is not treated as public" in public["privacy"]
    assert f"{comb(6, 2) + 6} blocks" in public["privacy"]


def test_the_records_drawn_are_capped_at_the_limit_whatever_the_noisy_total(monkeypatch):
    """The copula draws as many records as its noisy total says; at a very small epsilon that total is far above
    n (up to 7.7e7 at epsilon 1e-6 on the built-in tables, a review's scratch runs). It is capped at
    `copula.MAX_SYNTHETIC_RECORDS` (here lowered to 50, below Edwards' 70 records without noise): the release's total
    is the cap, and a note says so. Without noise at the real cap, all 70 are drawn and no such note is made."""
    import tabrelease as tr
    from tabrelease import copula

    table = builtin_table("edwards")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0, 1e-6), mechanism="gaussian-copula", mode="simulation", seed=1)
    monkeypatch.setattr(copula, "MAX_SYNTHETIC_RECORDS", 50)
    capped = tr.release_margins(table, spec)
    assert int(np.asarray(capped.released_margins[0]).sum()) == 50
    assert any("the most records this tool draws" in n for n in capped.notes)
    monkeypatch.undo()
    plan = plan_at(table.shape, tr.default_model(table).generators, 1.0, mechanism="gaussian-copula")
    whole = tr.pipeline.run_plan(plan, table.counts, NoNoise())
    assert int(np.asarray(whole.released_margins[0]).sum()) == 70
    assert not any("the most records this tool draws" in n for n in whole.notes)
