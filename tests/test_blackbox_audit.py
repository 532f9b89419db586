"""A black-box audit of three mechanisms' noise: a lower bound on epsilon from repeated releases, which must not
exceed the epsilon claimed, and which does exceed it when the noise is deliberately cut (so the audit has power).

For two neighbouring tables x and x' the mechanism's own `measure` is run M times each with seeded simulation noise.
A distinguishing event E is fixed first, on a separate calibration run (other seeds): for the Laplace mechanisms the
log-likelihood ratio of the claimed noise, log p_x(y) / p_x'(y) = sum over noised values of (|y - mu'| - |y - mu|) /
scale, above a threshold (or, the other way, below one); for randomized response the report count of the record's
old cell minus that of its new cell, above (below) a threshold. Then, on fresh runs, with k of M releases of x and
k' of M releases of x' in E, Clopper-Pearson bounds give

    epsilon_lower = log(P_x(E)_lower / P_x'(E)_upper)   (and the same with x and x' exchanged for the other event),

each of the four one-sided bounds at level 1 - 1e-3 / 4, so that the larger of the two is below the true epsilon of
the pair with probability at least 1 - 1e-3. Pure epsilon-DP requires P_x(E) <= e^epsilon P_x'(E) for every E.

Power: the same audit of the same plan with its Laplace scale halved (randomized response: the keep probability of
2 epsilon) must give epsilon_lower above the claimed epsilon. The thresholds are chosen on the calibration run of
the mechanism being audited, never on the samples the bound is computed from. Seeds are fixed: the test is
deterministic.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import beta

from tabrelease.mechanisms import get_mechanism
from tabrelease.testing import plan_at
from tabrelease.noise import NoNoise, SimulationNoise

ALPHA = 1e-3
EACH = ALPHA / 4  # four one-sided Clopper-Pearson bounds, jointly at 1 - ALPHA (union bound)
CALIBRATION_RUNS = 1500
AUDIT_RUNS = 4000


def cp_lower(k, n: int, a: float = EACH):
    """Clopper-Pearson lower bound on a probability from k of n (arrays of k allowed)."""
    k = np.asarray(k)
    return np.where(k == 0, 0.0, beta.ppf(a, np.maximum(k, 1), n - k + 1))


def cp_upper(k, n: int, a: float = EACH):
    """Clopper-Pearson upper bound on a probability from k of n (arrays of k allowed)."""
    k = np.asarray(k)
    return np.where(k == n, 1.0, beta.ppf(1 - a, k + 1, np.maximum(n - k, 1)))


def log_ratio_lower(k_num, k_den, n: int):
    """Lower confidence bound on log(P_num(E) / P_den(E)) from k_num and k_den of n runs each in E."""
    low = cp_lower(k_num, n)
    with np.errstate(divide="ignore"):
        return np.where(low == 0, -np.inf, np.log(np.maximum(low, 1e-300) / cp_upper(k_den, n)))


def draws(plan, table, statistic, runs: int, seed: int) -> np.ndarray:
    """The statistic of `runs` releases of `table`, each one run of the mechanism's measure."""
    mechanism, noise = get_mechanism(plan.mechanism), SimulationNoise(seed=seed)
    return np.array([statistic(mechanism.measure(plan, table, noise)) for _ in range(runs)])


def best_threshold(s_num: np.ndarray, s_den: np.ndarray) -> float:
    """The t whose event {S >= t} has the largest lower bound on log(P_num / P_den) on these (calibration) draws."""
    candidates = np.unique(np.concatenate([s_num, s_den]))
    n = len(s_num)
    k_num = n - np.searchsorted(np.sort(s_num), candidates, side="left")  # how many draws are >= each candidate
    k_den = n - np.searchsorted(np.sort(s_den), candidates, side="left")
    return float(candidates[int(np.argmax(log_ratio_lower(k_num, k_den, n)))])


def audit(plan, x, x_prime, statistic, seed: int, runs: int = AUDIT_RUNS) -> float:
    """epsilon_lower for the pair (x, x'): thresholds from one run of each table, the bound from another."""
    cal, cal_prime = (draws(plan, t, statistic, CALIBRATION_RUNS, seed + i) for i, t in enumerate((x, x_prime)))
    high = best_threshold(cal, cal_prime)  # {S >= high}: likelier under x
    low = -best_threshold(-cal_prime, -cal)  # {S <= low}: likelier under x'
    s, s_prime = (draws(plan, t, statistic, runs, seed + 10 + i) for i, t in enumerate((x, x_prime)))
    n = runs
    return float(max(log_ratio_lower((s >= high).sum(), (s_prime >= high).sum(), n),
                     log_ratio_lower((s_prime <= low).sum(), (s <= low).sum(), n)))


def laplace_log_likelihood_ratio(plan, x, x_prime):
    """y -> log p_x(y) / p_x'(y) under the plan's claimed Laplace noise (blocks released exactly are equal)."""
    mechanism = get_mechanism(plan.mechanism)
    mu, mu_prime = (mechanism.measure(plan, t, NoNoise()).blocks for t in (x, x_prime))
    noised = [i for i, b in enumerate(mu) if b.distribution == "laplace"]
    assert noised and all(b.distribution in ("laplace", "exact") for b in mu)
    centres = [(mu[i].values, mu_prime[i].values, mu[i].scale) for i in noised]

    def statistic(measurements):
        blocks = measurements.blocks
        ratio = sum(float((np.abs(blocks[i].values - c1) - np.abs(blocks[i].values - c0)).sum()) / s
                    for i, (c0, c1, s) in zip(noised, centres))
        # Rounded: the statistic of exact arithmetic. Its last bits would otherwise tell x from x' through the
        # rounding of mu + noise in floating point (Mironov's attack, CCS 2012): a property of the simulation's
        # continuous numpy sampler, which releases never use (they draw from OpenDP's discrete sampler).
        return round(ratio, 9)

    return statistic


def halved_laplace(plan):
    """The same plan with every Laplace scale halved (the multiplier of its blocks' scales): 2 epsilon of noise."""
    return replace(plan, calibration=replace(plan.calibration, scale=plan.calibration.scale / 2))


def neighbours_added(shape, seed):
    x = np.random.default_rng(seed).integers(0, 4, size=shape)
    x_prime = x.copy()
    x_prime[(0,) * len(shape)] += 1  # one record added
    return x, x_prime


# --- the audits ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism, shape, margins, epsilon, seed", [
    ("planned", (2, 3, 2), [(0, 1), (1, 2)], 1.0, 100),
    ("copula-id", (2, 2), [(0, 1)], 1.0, 200),
])
def test_laplace_release_audit_stays_below_epsilon_and_catches_halved_noise(mechanism, shape, margins, epsilon, seed):
    plan = plan_at(shape, margins, epsilon, mechanism=mechanism)
    guarantee = get_mechanism(mechanism).guarantee(plan)
    assert guarantee.unit.kind == "add-remove" and guarantee.loss.kind == "pure"
    assert guarantee.loss.epsilon == pytest.approx(epsilon)
    x, x_prime = neighbours_added(shape, seed)
    statistic = laplace_log_likelihood_ratio(plan, x, x_prime)

    claimed = audit(plan, x, x_prime, statistic, seed)
    assert claimed <= epsilon, f"{mechanism}: the audit finds epsilon >= {claimed:.3f} > {epsilon}"
    under_noised = audit(halved_laplace(plan), x, x_prime, statistic, seed + 50)
    assert under_noised > epsilon, f"{mechanism}: no power: halved noise gives only epsilon >= {under_noised:.3f}"


@pytest.mark.slow
def test_gaussian_copula_audit_stays_below_epsilon_and_catches_halved_noise():
    # Eight dummy-coded counts move per added record (two per one-way block, four in the pair block), so the
    # likelihood ratio concentrates far from its bound: epsilon 2 and twice the runs give the audit the room to show
    # power.
    epsilon, shape, seed, runs = 2.0, (2, 2), 300, 2 * AUDIT_RUNS
    plan = plan_at(shape, [(0, 1)], epsilon, mechanism="gaussian-copula")
    assert get_mechanism("gaussian-copula").guarantee(plan).loss.epsilon == pytest.approx(epsilon)
    x, x_prime = neighbours_added(shape, seed)
    statistic = laplace_log_likelihood_ratio(plan, x, x_prime)
    claimed = audit(plan, x, x_prime, statistic, seed, runs)
    assert claimed <= epsilon, f"gaussian-copula: the audit finds epsilon >= {claimed:.3f} > {epsilon}"
    under_noised = audit(halved_laplace(plan), x, x_prime, statistic, seed + 50, runs)
    assert under_noised > epsilon, f"gaussian-copula: no power: halved noise gives only epsilon >= {under_noised:.3f}"


def test_randomized_response_audit_stays_below_epsilon_and_catches_a_raised_keep_probability():
    epsilon, shape = 1.0, (2, 3)
    plan = plan_at(shape, [(0, 1)], epsilon, mechanism="randomized-response", neighbours="replace")
    guarantee = get_mechanism("randomized-response").guarantee(plan)
    assert guarantee.unit.kind == "local" and guarantee.loss.epsilon == pytest.approx(epsilon)
    # Local DP: any one record's change; here one record moves from cell (0, 0) to cell (0, 1), n = 3 in both.
    x = np.array([[1, 0, 0], [0, 2, 0]])
    x_prime = np.array([[0, 1, 0], [0, 2, 0]])
    old, new = 0, 1  # flat indices of the record's cells

    def statistic(measurements):
        reports = measurements.blocks[0].values
        return float(reports[old] - reports[new])

    claimed = audit(plan, x, x_prime, statistic, 400)
    assert claimed <= epsilon, f"randomized response: the audit finds epsilon >= {claimed:.3f} > {epsilon}"
    k = x.size
    keep_2eps = math.exp(2 * epsilon) / (math.exp(2 * epsilon) + k - 1)  # k-ary RR at 2 epsilon, by hand
    assert keep_2eps > plan.calibration.scale
    raised = replace(plan, calibration=replace(plan.calibration, scale=keep_2eps))
    under_noised = audit(raised, x, x_prime, statistic, 450)
    assert under_noised > epsilon, f"randomized response: no power: 2 epsilon gives only {under_noised:.3f}"
