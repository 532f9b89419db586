"""The audit's derived L1 error bound (`evaluation.derived_l1_bound`), step by step, against values computed here.

The bound's derivation: (1) with probability >= 1 - delta every one of the d coefficients' noise is
below t; (2) the true table is feasible, so b* <= t and every coefficient of w is within 2t of the
truth; (3) a margin alpha moves by at most W(alpha) per unit of L-infinity coefficient error;
(4) rounding moves the margin by at most cells / 2. So a bound that is honest about its own steps
is at least 2 * t_delta * W(alpha) + cells / 2, where

* t_delta is the exact (1 - delta) quantile of max_i |noise_i| (not the union bound's t, which is
  larger), checked against the noise the tool draws by simulation below;
* W(alpha) is the exact worst case of the margin's L1 error per unit coefficient error, by brute
  force over the vertices of the box (the L1 norm of a linear map is convex, so its maximum over
  the box is at a vertex), through `bases.margin_from_coefficients`;
* cells / 2 is attained when every cell of w is a half.

Step (2) is checked in `tests/test_properties.py` (b* <= max |noise|, w within b* of the noisy
coefficients). The Efron-Stein cases leave the bound no slack in step (3) (W equals its factor), so
dropping any factor of the bound (2^|alpha|, the 2 of 2t, the reach, the log) makes them fail.
"""

import itertools
from math import exp, floor, log, prod

import numpy as np
import pytest

from tabrelease import builtin_table, default_model
from tabrelease.bases import EFRON_STEIN, FOURIER, coefficient_basis, margin_from_coefficients
from tabrelease.evaluation import evaluate_release
from tabrelease.testing import plan_at
from tabrelease.spec import ReleaseSpec, loss_of
from tabrelease.workflow import release_margins
from tabrelease.pipeline import run_plan
from tabrelease.noise import SecureNoise, SimulationNoise
from tabrelease.tables import ContingencyTable


def worst_margin_error_per_unit(basis, alpha):
    """max ||margin_alpha(e)||_1 over coefficient errors e with ||e||_inf <= 1 (only blocks S of alpha matter)."""
    free = [i for s, lo, hi in zip(basis.closure, basis.offsets[:-1], basis.offsets[1:]) if set(s) <= set(alpha)
            for i in range(lo, hi)]
    vertices = np.array(list(itertools.product((-1.0, 1.0), repeat=len(free))))
    errors = np.zeros((len(vertices), basis.size))
    errors[:, free] = vertices
    margins = margin_from_coefficients(basis, errors, alpha).reshape(len(vertices), -1)
    return float(np.abs(margins).sum(axis=1).max())


def max_laplace_quantile(d, scale, delta):
    """Exact (1 - delta) quantile of max of d independent |Laplace(scale)| (each Exponential(scale))."""
    return -scale * np.log1p(-((1 - delta) ** (1 / d)))


def max_discrete_laplace_quantile(d, scale, integer_scale, delta):
    """The same for release-mode noise: discrete Laplace on the lattice 1/I, P(Y = y) proportional to q^|y|."""
    q = exp(-1 / (scale * integer_scale))
    m = 0
    while (1 - 2 * q ** (m + 1) / (1 + q)) ** d < 1 - delta:  # P(|Y| <= m) = 1 - 2 q^(m+1) / (1 + q)
        m += 1
    return m / integer_scale


def _table(shape, seed=0):
    counts = np.random.default_rng(seed).poisson(4, size=shape)
    return ContingencyTable(tuple("ABCD"[: len(shape)]), tuple(tuple(f"l{i}" for i in range(k)) for k in shape), counts)


# (shape, margins, mechanism, calibration, epsilon, encoded shape, margins on the encoding's axes)
CASES = {
    "fourier 2x2x2 [AB][BC]": ((2, 2, 2), [(0, 1), (1, 2)], "fourier", "exact", 1.0, None, None),
    "fourier 2x2x2x2 [ABC][CD]": ((2, 2, 2, 2), [(0, 1, 2), (2, 3)], "fourier", "exact", 0.5, None, None),
    "efron-stein 3x2 [AB]": ((3, 2), [(0, 1)], "efron-stein", "exact", 1.0, None, None),
    "efron-stein 3x2 [A][B] eps 8": ((3, 2), [(0,), (1,)], "efron-stein", "exact", 8.0, None, None),
    "efron-stein 2x3x2 [AB][BC] paper scale": ((2, 3, 2), [(0, 1), (1, 2)], "efron-stein", "paper", 1.0, None, None),
    # 5 levels -> 3 bits (axes 0, 1, 2), 2 levels -> 1 bit (axis 3); 6 of the 16 encoded cells are structural zeros
    "binary-encoding 5x2 [A][B]": ((5, 2), [(0,), (1,)], "binary-encoding", "exact", 1.0, (2, 2, 2, 2), [(0, 1, 2), (3,)]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_audit_bound_is_no_smaller_than_its_steps_computed_exactly(case):
    shape, margins, mechanism, calibration, epsilon, encoded_shape, encoded_margins = CASES[case]
    table = _table(shape)
    plan = plan_at(shape, margins, epsilon, mechanism=mechanism, calibration=calibration)
    release = run_plan(plan, table.counts, SimulationNoise(3))
    kind = EFRON_STEIN if mechanism == "efron-stein" else FOURIER
    basis = coefficient_basis(kind, encoded_shape or shape, encoded_margins or margins)
    assert release.coefficients_released == basis.size
    cells = prod(shape)  # structural zeros of an encoding are never moved by rounding
    for delta in (0.2, 0.05, 1e-3):
        evaluation = evaluate_release(table, release, bound_delta=delta)
        t = max_laplace_quantile(basis.size, release.noise.scale, delta)
        for g, alpha in zip(margins, encoded_margins or margins):
            label = "[" + "".join("ABCD"[j] for j in g) + "]"
            honest = 2 * t * worst_margin_error_per_unit(basis, alpha) + cells / 2
            assert evaluation.l1_bound_by_margin[label] >= honest * (1 - 1e-12), (label, delta)


def test_worst_case_margin_error_per_unit_by_hand():
    # The brute force against the derivation's algebra. Efron-Stein: m_alpha(x) = prod_{j not in alpha} k_j *
    # sum_{S in alpha} f^S(x_S), every term +1 at the all-ones vertex: 2^|alpha| * prod k_j, the bound's factor.
    es = coefficient_basis(EFRON_STEIN, (3, 2), [(0, 1)])
    assert worst_margin_error_per_unit(es, (0, 1)) == pytest.approx(4 * 6)
    assert worst_margin_error_per_unit(es, (0,)) == pytest.approx(2 * 6)
    # Fourier: m_alpha = 2^{k/2 - |alpha|} H e with H the 2^|alpha| Hadamard matrix; max ||H e||_1 over the
    # cube is 2 (|alpha| = 1), 8 (|alpha| = 2), 20 (|alpha| = 3): half the bound's 2^|alpha| * 2^|alpha| and less.
    fourier = coefficient_basis(FOURIER, (2, 2, 2, 2), [(0, 1, 2), (2, 3)])
    assert worst_margin_error_per_unit(fourier, (2,)) == pytest.approx(2 ** (2 - 1) * 2)
    assert worst_margin_error_per_unit(fourier, (2, 3)) == pytest.approx(2 ** (2 - 2) * 8)
    assert worst_margin_error_per_unit(fourier, (0, 1, 2)) == pytest.approx(2 ** (2 - 3) * 20)


def test_simulated_noise_exceeds_the_union_bound_t_at_the_rate_the_derivation_states():
    # Step (1) at delta = 0.2, where violations are frequent enough to count: P(max_i |X_i| > t) for
    # t = scale log(d / delta) is 1 - (1 - delta/d)^d (= 0.183 for d = 12: the union bound is nearly tight), and
    # the exact quantile is exceeded at rate delta. 20,000 draws: standard error 0.003; 4 standard errors allowed.
    edwards = builtin_table("edwards")
    plan = plan_at(edwards.shape, default_model(edwards).generators, 1.0, mechanism="auto")  # Fourier, 12 coefficients
    d, scale, delta = plan.basis.size, plan.calibration.scale, 0.2
    assert d == 12
    draws = SimulationNoise(seed=20260906).perturb(np.zeros((20_000, d)), plan.calibration)
    largest = np.abs(draws).max(axis=1)
    union_rate = 1 - (1 - delta / d) ** d
    assert union_rate == pytest.approx(0.1826, abs=1e-4)
    se = np.sqrt(delta * (1 - delta) / len(largest))
    assert np.mean(largest > scale * log(d / delta)) == pytest.approx(union_rate, abs=4 * se)
    assert np.mean(largest > max_laplace_quantile(d, scale, delta)) == pytest.approx(delta, abs=4 * se)
    # Without the log(d) of the union the rate would be 1 - (1 - delta)^d = 0.93.
    assert np.mean(largest > scale * log(1 / delta)) > 0.9


# Release mode draws discrete Laplace on the lattice 1/I (I = prod k_j = 4 here) with scale s: at s I = 0.65,
# P(|noise| > t) = 2 q^(floor(t I) + 1) / (1 + q), q = exp(-1 / (s I)), is 1.58 times delta / d at t = s log(d / delta).
DISCRETE = dict(shape=(2, 2), margins=[(0,), (1,)], epsilon=7.75, delta=0.05)


def test_release_mode_noise_has_the_discrete_laplace_tail_which_exceeds_the_union_bounds_premise():
    plan = plan_at(DISCRETE["shape"], DISCRETE["margins"], DISCRETE["epsilon"], mechanism="efron-stein")
    d, scale, integer_scale, delta = plan.basis.size, plan.calibration.scale, plan.basis.integer_scale, DISCRETE["delta"]
    assert (d, integer_scale) == (5, 4.0)
    draws = SecureNoise().perturb(np.zeros(30_000), plan.calibration, integer_scale)
    np.testing.assert_array_equal(draws * integer_scale, np.round(draws * integer_scale))
    t = scale * log(d / delta)
    q = exp(-1 / (scale * integer_scale))
    tail = 2 * q ** (floor(t * integer_scale) + 1) / (1 + q)
    assert tail == pytest.approx(0.01577, abs=1e-5) and delta / d == pytest.approx(0.01)
    se = np.sqrt(tail * (1 - tail) / draws.size)  # 0.0007
    observed = np.mean(np.abs(draws) > t)
    assert observed == pytest.approx(tail, abs=5 * se)
    assert observed > delta / d + 5 * se  # the union bound's P(|X_i| > t) <= delta / d fails in release mode


def test_the_audit_bound_is_no_smaller_than_its_steps_for_release_mode_noise():
    shape, margins, epsilon, delta = DISCRETE["shape"], DISCRETE["margins"], DISCRETE["epsilon"], DISCRETE["delta"]
    table = _table(shape)
    # release mode: OpenDP's sampler
    release = release_margins(table, ReleaseSpec(loss=loss_of(epsilon), margins=margins, mechanism="efron-stein"))
    assert release.noise_mode == "release"
    evaluation = evaluate_release(table, release, bound_delta=delta)
    basis = coefficient_basis(EFRON_STEIN, shape, margins)
    t = max_discrete_laplace_quantile(basis.size, release.noise.scale, basis.integer_scale, delta)
    d, scale, integer_scale = basis.size, release.noise.scale, basis.integer_scale
    q = exp(-1 / (scale * integer_scale))
    union_t_exceeded = 1 - (1 - 2 * q ** (floor(scale * log(d / delta) * integer_scale) + 1) / (1 + q)) ** d
    assert union_t_exceeded == pytest.approx(0.0764, abs=1e-4)  # > delta
    for g in margins:
        label = "[" + "".join("ABCD"[j] for j in g) + "]"
        honest = 2 * t * worst_margin_error_per_unit(basis, g) + prod(shape) / 2
        assert evaluation.l1_bound_by_margin[label] >= honest * (1 - 1e-12), label
