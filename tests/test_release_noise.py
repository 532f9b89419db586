"""Noise magnitude on every code path that reaches a sampler (issue 9, item 1).

Each test runs the real `run_plan` with a recording noise source that hands run_plan's own
arguments (values, calibration, integer scale) to a real sampler -- OpenDP's `SecureNoise` in
release mode, `SimulationNoise` in simulation mode -- and keeps what went in and what came out.
The spread of (noisy - true) is then compared with the spread of the distribution at the scale
worked out by hand below, never with a number read back from the code under test (the Gaussian
scale, the analytic Gaussian mechanism's, is re-derived here from the exact privacy profile with scipy's
normal cdf and bracketed by an independent sufficient bound).

A scale wrong by 8x (or 2x) anywhere between the calibration and OpenDP -- in the sensitivity, in
the calibration, in `scale * integer_scale`, in the division back by the integer scale -- moves
the statistic far outside the tolerance.

Tolerance: Z = 6 standard errors of the statistic, computed from the exact distribution. Every
statistic is a mean of at least 2,000 independent draws, so it is close to normal and a correct
sampler fails a test with probability of order 1e-8. `assert_spread` checks that the tolerance
is below a quarter of the expected value, so that a scale 2x too small or too large cannot pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest
from scipy import optimize, stats

from tabrelease import builtin_table, default_model
from tabrelease.bases import coefficients, margin_from_coefficients
from tabrelease.rounding import round_table
from tabrelease.testing import plan_at
from tabrelease.pipeline import run_plan
from tabrelease.noise import SecureNoise, SimulationNoise, laplace_calibration

EPSILON = 1.0
DELTA = 1e-6
Z = 6.0  # tolerance, in standard errors of the statistic
LAPLACE_DRAWS = 2_500  # release Laplace: about 7 us a draw in OpenDP
GAUSSIAN_DRAWS = 2_000  # release Gaussian: about 50 us a draw in OpenDP
SIM_SEED = 20260901


# --- the expected noise, worked out by hand ----------------------------------------------------------
@dataclass(frozen=True)
class Hand:
    scale: float  # Laplace b at epsilon = 1: the exact add-remove L1 sensitivity
    integer_scale: float  # what run_plan must pass with it
    d: int  # how many values are perturbed


# Closures B of the paper models, by size of the sets: edwards 1 + 6 + 5 = 12 (five pairs over six
# variables), czech 1 + 6 + 9 + 5 + 1 = 22, rochdale 1 + 8 + 15 + 6 = 30 (six triples, two pairs).
# Fourier: one coefficient per S, each moved by 2^{-k/2} by one record, so b = |B| / 2^{k/2}, and
# the coefficients are integers after multiplying by 2^{k/2}.
# Efron-Stein on a binary table: block S has 2^|S| entries, each moved by 2^{|S|-k} * 1, so
# b = sum_S 2^{|S|} / 2^k and d = sum_S 2^{|S|}; integer scale prod k_j = 2^k.
#   edwards 1 + 6*2 + 5*4 = 33; czech 1 + 6*2 + 9*4 + 5*8 + 16 = 105; rochdale 1 + 8*2 + 15*4 + 6*8 = 125.
# Journey to work, 4 x 4 x 16, [AB][AC][BC]: block S is moved by (prod_{j not in S} k_j)^{-1} times
# the L1 norm 2(k_j - 1)/k_j per axis in S, in units of 1/256:
#   {} 1, A 4 * 3/2 = 6, B 6, C 16 * 30/16 = 30, AB 16 * 9/4 = 36, AC 64 * 3/2 * 30/16 = 180, BC 180
#   -> b = 439/256; d = 1 + 4 + 4 + 16 + 16 + 64 + 64 = 169; integer scale 4 * 4 * 16 = 256.
# Binary encoding of journey to work: 2 + 2 + 4 bits; the closure of the bit margins is
#   2^4 + 2^6 + 2^6 - 2^2 - 2^2 - 2^4 + 1 = 121 sets on 8 bits -> b = 121/16, integer scale 16.
#   (A binary table encodes as itself: the Fourier numbers.)
# Cells: one record moves one cell by 1 -> b = 1 over every cell. Margins: one record moves one
# cell of each generator margin -> b = number of generators (5, 3, 8, 3), d = the margins' cells.
FOURIER_HAND = {"edwards": Hand(12 / 8, 8.0, 12), "czech": Hand(22 / 8, 8.0, 22), "rochdale": Hand(30 / 16, 16.0, 30)}
JOURNEY_ES = Hand(439 / 256, 256.0, 169)
HAND = {
    **{(name, "fourier"): hand for name, hand in FOURIER_HAND.items()},
    ("edwards", "efron-stein"): Hand(33 / 64, 64.0, 33),
    ("czech", "efron-stein"): Hand(105 / 64, 64.0, 105),
    ("rochdale", "efron-stein"): Hand(125 / 256, 256.0, 125),
    ("journey_to_work", "efron-stein"): JOURNEY_ES,
    **{(name, "binary-encoding"): hand for name, hand in FOURIER_HAND.items()},
    ("journey_to_work", "binary-encoding"): Hand(121 / 16, 16.0, 121),
    ("edwards", "cells"): Hand(1.0, 1.0, 64),
    ("czech", "cells"): Hand(1.0, 1.0, 64),
    ("rochdale", "cells"): Hand(1.0, 1.0, 256),
    ("journey_to_work", "cells"): Hand(1.0, 1.0, 256),
    ("edwards", "margins"): Hand(5.0, 1.0, 5 * 4),
    ("czech", "margins"): Hand(3.0, 1.0, 4 + 8 + 16),
    ("rochdale", "margins"): Hand(8.0, 1.0, 6 * 8 + 2 * 4),
    ("journey_to_work", "margins"): Hand(3.0, 1.0, 16 + 64 + 64),
    # nonneg perturbs the coefficients of the default basis as they are, then shifts one of them.
    **{(name, "nonneg"): hand for name, hand in FOURIER_HAND.items()},
    ("journey_to_work", "nonneg"): JOURNEY_ES,
}

# Gaussian: exact add-remove L2 sensitivity and the basis run_plan uses (Fourier for binary tables).
# Fourier sqrt(|B|) / 2^{k/2}. Journey to work, in units of 1/256^2: {} 1, A 16 * 3/4 = 12, B 12,
# C 256 * 15/16 = 240, AB 256 * 9/16 = 144, AC 4096 * 3/4 * 15/16 = 2880, BC 2880 -> sqrt(6169)/256.
# One binary table (Fourier) and the multi-category one (Efron-Stein); the Gaussian sampler ignores the
# integer scale.
GAUSSIAN_HAND = {
    "edwards": (math.sqrt(12) / 8, 8.0, 12),
    "journey_to_work": (math.sqrt(6169) / 256, 256.0, 169),
}

LAPLACE_CASES = list(HAND)  # the default mechanism of every built-in table, then every other Laplace path


def case_id(case) -> str:
    return f"{case[0]}-{case[1]}"


# --- a noise source that records -------------------------------------------------------------------
@dataclass
class Call:
    values: np.ndarray  # what run_plan asked to perturb
    calibration: object
    integer_scale: float | None
    returned: np.ndarray  # a copy of what run_plan got back (it may change its array in place)
    inputs: np.ndarray  # true values of every draw (the call itself, then the replays)
    outputs: np.ndarray  # their noisy values


class RecordingNoise:
    """Pass run_plan's call to a real sampler unchanged, then draw more with the same arguments.

    The extra draws perturb the same values, tiled, with the same calibration and integer scale,
    so that one release gives enough draws to measure the spread.
    """

    def __init__(self, inner, draws: int):
        self.inner, self.draws, self.mode = inner, draws, inner.mode
        self.calls: list[Call] = []

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        integers = integers() if callable(integers) else integers
        first = np.array(self.inner.perturb(values, calibration, integer_scale, integers), float)
        true = np.array(values, float)
        reps = max(0, math.ceil(self.draws / true.size) - 1)
        more_in = np.tile(np.asarray(values), reps)
        more_integers = None if integers is None else np.tile(np.asarray(integers), reps)
        more_out = (np.asarray(self.inner.perturb(more_in, calibration, integer_scale, more_integers), float)
                    if reps else np.empty(0))
        self.calls.append(
            Call(true, calibration, integer_scale, first.copy(), np.concatenate([true, np.asarray(more_in, float)]),
                 np.concatenate([first, more_out]))
        )
        return first


@lru_cache(maxsize=None)
def planned(name: str, mechanism: str):
    table = builtin_table(name)
    kw = {"delta": DELTA} if mechanism == "gaussian" else {}
    return table, plan_at(table.shape, default_model(table).generators, EPSILON, mechanism=mechanism, **kw)


def record(name, mechanism, inner, draws):
    table, plan = planned(name, mechanism)
    noise = RecordingNoise(inner, draws)
    release = run_plan(plan, table.counts, noise)
    assert release.noise_mode == inner.mode
    assert len(noise.calls) == 1, "run_plan should draw once per release"
    call = noise.calls[0]
    assert call.calibration is plan.calibration
    assert call.outputs.size >= draws
    return table, plan, release, call


# --- the distributions ------------------------------------------------------------------------------
def discrete_laplace_moments(b: float, integer_scale: float) -> tuple[float, float]:
    """E|X| and E X^2 for X = K / s, K discrete Laplace with P(K = k) proportional to exp(-|k| / (b s))."""
    q = math.exp(-1.0 / (b * integer_scale))
    return 2 * q / (1 - q**2) / integer_scale, 2 * q / (1 - q) ** 2 / integer_scale**2


def assert_spread(statistic: np.ndarray, expected: float, variance: float, what: str) -> None:
    """Mean of `statistic` (|X| or X^2, one per draw) within Z standard errors of its expectation."""
    tolerance = Z * math.sqrt(variance / statistic.size)
    assert tolerance < 0.25 * expected, f"too few draws to tell a 2x scale error apart ({what})"
    got = float(statistic.mean())
    assert abs(got - expected) <= tolerance, (
        f"{what}: mean {got:.6g}, expected {expected:.6g} +- {tolerance:.3g} "
        f"(ratio {got / expected:.3f}): the noise reaching the sampler has the wrong scale"
    )


def assert_centred(noise: np.ndarray, second_moment: float, what: str) -> None:
    assert abs(noise.mean()) <= Z * math.sqrt(second_moment / noise.size), f"{what}: noise is not centred"


def assert_laplace(noise: np.ndarray, b: float, integer_scale: float | None, what: str) -> None:
    """Discrete Laplace on the integer-scaled values (integer_scale given), continuous otherwise."""
    if integer_scale is None:
        m1, m2 = b, 2 * b**2
    else:
        m1, m2 = discrete_laplace_moments(b, integer_scale)
    assert_spread(np.abs(noise), m1, m2 - m1**2, f"{what} E|noise|")
    assert_centred(noise, m2, what)


def assert_gaussian(noise: np.ndarray, sigma: float, what: str) -> None:
    # E X^2 = sigma^2, Var X^2 = 2 sigma^4.
    assert_spread(noise**2, sigma**2, 2 * sigma**4, f"{what} E noise^2")
    assert_centred(noise, sigma**2, what)


def analytic_gaussian_sigma(l2: float, epsilon: float, delta: float) -> float:
    """The least sigma for which the Gaussian mechanism is (epsilon, delta)-DP at all (Balle & Wang 2018,
    Theorem 8: the exact privacy profile). No correct accountant can certify less noise."""

    def excess(sigma):
        a, c = l2 / (2 * sigma), epsilon * sigma / l2
        return stats.norm.cdf(a - c) - math.exp(epsilon) * stats.norm.cdf(-a - c) - delta

    return optimize.brentq(excess, l2 * 1e-3, l2 * 1e4, xtol=1e-12 * l2)


def zcdp_sufficient_sigma(l2: float, epsilon: float, delta: float) -> float:
    """A sigma that is certainly enough: rho = l2^2 / (2 sigma^2) zCDP gives (rho + 2 sqrt(rho log 1/delta), delta)-DP
    (Bun & Steinke 2016, Proposition 1.3); OpenDP's zCDP -> approx-DP conversion is at least as tight."""
    log_term = math.log(1 / delta)
    rho = (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2
    return l2 / math.sqrt(2 * rho)


# --- what went in -----------------------------------------------------------------------------------
def assert_true_values(call: Call, table, plan, mechanism: str, hand_d: int) -> None:
    assert call.values.size == hand_d
    if mechanism == "cells":
        np.testing.assert_array_equal(call.values, table.counts.ravel())
    elif mechanism == "margins":
        k = table.k
        flat = [table.counts.sum(axis=tuple(j for j in range(k) if j not in g)).ravel() for g in plan.margins]
        np.testing.assert_array_equal(call.values, np.concatenate(flat))
    else:
        source = plan.encoding.encode(table.counts) if plan.encoding is not None else table.counts
        np.testing.assert_allclose(call.values, coefficients(plan.basis, source), rtol=0, atol=1e-9)


def assert_integer_lattice(values: np.ndarray, integer_scale: float, what: str) -> None:
    scaled = values * integer_scale
    np.testing.assert_allclose(scaled, np.rint(scaled), rtol=0, atol=1e-6, err_msg=what)


def assert_release_used_the_draw(release, plan, call: Call, mechanism: str, hand: Hand) -> None:
    """The values run_plan got back are what it released (cells, margins, nonneg: no LP in between)."""
    if mechanism == "cells":
        np.testing.assert_array_equal(release.table, round_table(call.returned.reshape(plan.shape)))
    elif mechanism == "margins":
        released = np.concatenate([m.ravel() for m in release.released_margins])
        np.testing.assert_array_equal(released, round_table(call.returned))
    elif mechanism == "nonneg":
        # After the noise, run_plan lifts the constant term by t * d * b (DMT Corollary 1).
        shifted = call.returned.copy()
        shifted[plan.basis.empty_set_index] += plan.parameters["t"] * hand.d * hand.scale / EPSILON
        for g, m in zip(release.margins, release.released_margins):
            np.testing.assert_allclose(m, margin_from_coefficients(plan.basis, shifted, g), rtol=1e-12, atol=1e-6)


# --- release mode: OpenDP ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, mechanism", LAPLACE_CASES, ids=map(case_id, LAPLACE_CASES))
def test_release_laplace_noise_has_the_hand_computed_scale(name, mechanism):
    hand = HAND[name, mechanism]
    b = hand.scale / EPSILON
    table, plan, release, call = record(name, mechanism, SecureNoise(), LAPLACE_DRAWS)
    cal = call.calibration
    assert cal.distribution == "laplace" and cal.scale == pytest.approx(b, rel=1e-12)
    assert call.integer_scale == hand.integer_scale
    assert_true_values(call, table, plan, mechanism, hand.d)
    # The discrete sampler really was used: the true values and the noisy ones lie on the lattice 1/s.
    assert_integer_lattice(call.inputs, hand.integer_scale, "true values * integer scale")
    assert_integer_lattice(call.outputs, hand.integer_scale, "noisy values * integer scale")
    assert_laplace(call.outputs - call.inputs, b, hand.integer_scale, f"{name} {mechanism} (release)")
    assert_release_used_the_draw(release, plan, call, mechanism, hand)


@pytest.mark.parametrize("name", list(GAUSSIAN_HAND), ids=lambda name: f"{name}-gaussian")
def test_release_gaussian_noise_has_the_certified_scale(name):
    l2, integer_scale, d = GAUSSIAN_HAND[name]
    table, plan, release, call = record(name, "gaussian", SecureNoise(), GAUSSIAN_DRAWS)
    cal = call.calibration
    assert cal.distribution == "gaussian" and cal.delta == DELTA
    assert cal.sensitivity == pytest.approx(l2, rel=1e-12)
    # The scale is the least any correct accountant can certify (the exact profile, about 4.22 times the
    # sensitivity here, re-derived above with scipy), below what zCDP surely gives (5.35) and below the
    # zCDP route through OpenDP's conversion (about 4.53). The textbook sqrt(2 log(1.25/delta)) / epsilon = 5.30
    # is a sufficient scale, not a floor.
    assert cal.scale == pytest.approx(analytic_gaussian_sigma(l2, EPSILON, DELTA), rel=1e-8)
    assert analytic_gaussian_sigma(l2, EPSILON, DELTA) <= cal.scale <= zcdp_sufficient_sigma(l2, EPSILON, DELTA)
    assert call.integer_scale == integer_scale
    assert call.values.size == d
    np.testing.assert_allclose(call.values, coefficients(plan.basis, table.counts), rtol=0, atol=1e-9)
    assert_gaussian(call.outputs - call.inputs, cal.scale, f"{name} gaussian (release)")


def test_release_float_laplace_branch_has_the_stated_scale():
    """SecureNoise without an integer scale (no run_plan path calls it so; the public API allows it)."""
    cal = laplace_calibration(sensitivity=1.5, epsilon=EPSILON, neighbours="add-remove")
    values = np.linspace(-3.3, 7.7, LAPLACE_DRAWS)
    noisy = SecureNoise().perturb(values, cal)
    assert_laplace(noisy - values, 1.5, None, "float Laplace (release)")


# --- simulation mode: numpy -------------------------------------------------------------------------
@pytest.mark.parametrize("name, mechanism", LAPLACE_CASES, ids=map(case_id, LAPLACE_CASES))
def test_simulation_laplace_noise_has_the_hand_computed_scale(name, mechanism):
    hand = HAND[name, mechanism]
    b = hand.scale / EPSILON
    table, plan, release, call = record(name, mechanism, SimulationNoise(SIM_SEED), LAPLACE_DRAWS)
    assert call.calibration.scale == pytest.approx(b, rel=1e-12)
    assert_true_values(call, table, plan, mechanism, hand.d)
    assert_laplace(call.outputs - call.inputs, b, None, f"{name} {mechanism} (simulation)")
    assert_release_used_the_draw(release, plan, call, mechanism, hand)


@pytest.mark.parametrize("name", list(GAUSSIAN_HAND), ids=lambda name: f"{name}-gaussian")
def test_simulation_gaussian_noise_has_the_certified_scale(name):
    l2, _, _ = GAUSSIAN_HAND[name]
    table, plan, release, call = record(name, "gaussian", SimulationNoise(SIM_SEED), GAUSSIAN_DRAWS)
    cal = call.calibration
    assert cal.sensitivity == pytest.approx(l2, rel=1e-12)
    assert analytic_gaussian_sigma(l2, EPSILON, DELTA) <= cal.scale <= zcdp_sufficient_sigma(l2, EPSILON, DELTA)
    assert_gaussian(call.outputs - call.inputs, cal.scale, f"{name} gaussian (simulation)")


@pytest.mark.parametrize("l2", [0.0, -1.0, float("nan"), float("inf")])
def test_a_gaussian_calibration_refuses_a_sensitivity_that_is_not_positive_and_finite(l2):
    """Found by the mutation check: no test gave the Gaussian calibration a zero, negative or non-finite sensitivity,
    which would give no noise (0), or a scale of no meaning; each is refused in one line."""
    from tabrelease.errors import TabreleaseError
    from tabrelease.noise import gaussian_calibration

    with pytest.raises(TabreleaseError, match="a Gaussian scale needs a positive L2 sensitivity"):
        gaussian_calibration(l2, 1.0, 1e-6, "add-remove")


def test_secure_noise_scales_values_to_the_sampler_s_integers_itself_where_none_are_given():
    """Found by the mutation check: the secure sampler's own scaling of values to integers (no integers passed) was
    run only at scale 1, where multiplying and dividing agree. At scale 2, 0.5 and 1.5 are the integers 1 and 3, and
    values that are not integers once scaled are refused."""
    import numpy as np

    from tabrelease.errors import TabreleaseError
    from tabrelease.noise import SecureNoise, laplace_calibration

    calibration = laplace_calibration(1.0, 1e6, "add-remove")  # noise of scale 1e-6: the values come back
    noisy = SecureNoise().perturb(np.array([0.5, 1.5]), calibration, integer_scale=2.0)
    assert np.allclose(noisy, [0.5, 1.5], atol=1e-3)
    with pytest.raises(TabreleaseError, match="not integers"):
        SecureNoise().perturb(np.array([0.25]), calibration, integer_scale=2.0)
