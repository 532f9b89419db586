"""Privacy accounting: exact conversions between the guarantees a release can state.

Pure functions, no I/O. Three kinds of guarantee appear in tabrelease:

* pure epsilon-DP (Laplace noise, randomized response);
* (epsilon, delta)-DP;
* rho-zCDP (Bun & Steinke 2016), which composes by addition.

A single Gaussian measurement (one Gaussian mechanism; a vector with per-coordinate scales is one Gaussian
mechanism after whitening, with L2 sensitivity Delta / sigma) is accounted with its exact privacy profile, the
analytic Gaussian mechanism of Balle & Wang (ICML 2018, Theorem 8):

    delta(epsilon) = Phi(Delta / (2 sigma) - epsilon sigma / Delta) - e^epsilon Phi(-Delta / (2 sigma) - epsilon sigma / Delta).

No accountant can certify less noise for a Gaussian mechanism. Several measurements composed under zCDP (RAP) are
converted to (epsilon, delta) with the tightest known conversion of a zCDP guarantee, Canonne, Kamath & Steinke
(2020, "The Discrete Gaussian for Differential Privacy", Corollary 13):

    delta = inf over alpha > 1 of exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha.

Every function that returns a parameter of a guarantee errs on the side that keeps it true: a noise scale and an
epsilon are rounded up, a rho down. The profile itself is accurate to about 1e-12 relative; the calibration keeps a
1e-9 relative margin below delta for that.
"""

from __future__ import annotations

import math

import numpy as np

# Relative safety margin on delta when a noise scale is calibrated: the scale returned gives at most
# delta * (1 - DELTA_MARGIN), so evaluation error in the profile (far below 1e-12 relative) cannot carry the true
# delta above the one asked for. It costs about 1e-10 of the scale.
DELTA_MARGIN = 1e-9
_SQRT2 = math.sqrt(2.0)
_LOG_HALF = math.log(0.5)


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, not {value!r}")
    return value


def _check_nonnegative(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative finite number, not {value!r}")
    return value


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1, not {delta!r}")
    return delta


def _check_k(k: int) -> int:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"a group size is a positive integer, not {k!r}")
    return int(k)


# --- the analytic Gaussian mechanism (Balle & Wang 2018) --------------------------------------------------------
def _log_profile(epsilon: float, mu: float) -> float:
    """log delta(epsilon) of the Gaussian mechanism whose sensitivity-to-scale ratio is mu = Delta / sigma.

    With a = mu/2 - epsilon/mu and b = -mu/2 - epsilon/mu, delta = Phi(a) - e^epsilon Phi(b). Since
    b^2 / 2 = a^2 / 2 + epsilon, e^epsilon Phi(b) = exp(-a^2/2) erfcx(-b/sqrt 2) / 2 exactly (b < 0 always), and
    for a <= 0 also Phi(a) = exp(-a^2/2) erfcx(-a/sqrt 2) / 2: the difference is taken between two scaled
    complementary error functions of moderate size, with no exponential of epsilon and no underflow, so delta keeps
    its relative precision down to 1e-300 and for epsilon far beyond 50.
    """
    from scipy import special

    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    tail_b = special.erfcx(-b / _SQRT2)  # e^epsilon Phi(b) = exp(-a^2/2) * tail_b / 2
    if a <= 0:
        gap = special.erfcx(-a / _SQRT2) - tail_b
        if gap <= 0:
            return -math.inf
        return _LOG_HALF - a * a / 2.0 + math.log(gap)
    value = special.ndtr(a) - 0.5 * math.exp(-a * a / 2.0) * tail_b
    return math.log(value) if value > 0 else -math.inf


def analytic_gaussian_delta(epsilon: float, sensitivity: float, sigma: float) -> float:
    """The exact privacy profile delta(epsilon) of the Gaussian mechanism.

    Balle & Wang (2018), Theorem 8: adding N(0, sigma^2) noise to a query of L2 sensitivity Delta is
    (epsilon, delta)-DP exactly when
    delta >= Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta).

    Parameters
    ----------
    epsilon : float
        The epsilon at which the profile is evaluated (>= 0).
    sensitivity : float
        The L2 sensitivity Delta of the query (> 0).
    sigma : float
        The standard deviation of the Gaussian noise (> 0).

    Returns
    -------
    float
        The smallest delta for which the mechanism is (epsilon, delta)-DP, computed stably (see `_log_profile`).
    """
    epsilon = _check_nonnegative("epsilon", epsilon)
    mu = _check_positive("sensitivity", sensitivity) / _check_positive("sigma", sigma)
    return float(min(1.0, math.exp(_log_profile(epsilon, mu))))


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest Gaussian noise scale that is (epsilon, delta)-DP for this L2 sensitivity.

    The profile depends on sigma only through mu = Delta / sigma and decreases as sigma grows, so the root of
    log delta(epsilon; mu) = log delta is found by Brent's method in log mu. The scale is then raised, ulp by ulp,
    until the profile evaluated at the floating-point scale itself is at most delta * (1 - DELTA_MARGIN).

    Parameters
    ----------
    sensitivity : float
        The L2 sensitivity Delta (> 0).
    epsilon : float
        The target epsilon (> 0).
    delta : float
        The target delta, in (0, 1).

    Returns
    -------
    float
        sigma with analytic_gaussian_delta(epsilon, sensitivity, sigma) <= delta, at most a relative 1e-9 or so
        above the exact smallest one.
    """
    sensitivity = _check_positive("sensitivity", sensitivity)
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    target = math.log(delta) + math.log1p(-DELTA_MARGIN)

    def excess(log_mu: float) -> float:
        return _log_profile(epsilon, math.exp(log_mu)) - target

    # Bracket around the classical scale's mu = epsilon / sqrt(2 log(1.25 / delta)); excess increases with mu.
    guess = math.log(epsilon / math.sqrt(2.0 * (math.log(1.25) - math.log(delta))))  # 1.25 / delta may overflow
    low, high = guess - 0.5, guess + 0.5
    while excess(low) > 0:
        low -= 1.0
    while excess(high) < 0:
        high += 1.0
    from scipy import optimize  # on use: its import is a large share of a command-line release's time

    log_mu = optimize.brentq(excess, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = sensitivity / math.exp(log_mu)
    limit = delta * (1.0 - DELTA_MARGIN)
    for _ in range(10_000):
        if analytic_gaussian_delta(epsilon, sensitivity, sigma) <= limit:
            return float(sigma)
        sigma = float(np.nextafter(sigma, math.inf)) * (1.0 + 1e-15)
    raise ArithmeticError("the analytic Gaussian calibration did not converge")  # pragma: no cover


def analytic_gaussian_epsilon(sensitivity: float, sigma: float, delta: float) -> float:
    """The tightest epsilon of a Gaussian mechanism at a given delta: the inverse of the privacy profile.

    Parameters
    ----------
    sensitivity : float
        The L2 sensitivity Delta (> 0).
    sigma : float
        The noise standard deviation (> 0).
    delta : float
        The delta, in (0, 1).

    Returns
    -------
    float
        The smallest epsilon >= 0 with analytic_gaussian_delta(epsilon, sensitivity, sigma) <= delta (found by
        Brent's method in epsilon, then raised until the profile at the returned value is at most delta).
    """
    mu = _check_positive("sensitivity", sensitivity) / _check_positive("sigma", sigma)
    delta = _check_delta(delta)
    log_delta = math.log(delta)

    def excess(epsilon: float) -> float:
        return _log_profile(epsilon, mu) - log_delta

    if math.exp(_log_profile(0.0, mu)) <= delta:
        return 0.0
    # Bun & Steinke's conversion of the mechanism's rho-zCDP is a valid, looser epsilon: an upper end.
    rho = mu * mu / 2.0
    high = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1e-12
    while excess(high) > 0:  # pragma: no cover - the bound above always holds
        high *= 2.0
    from scipy import optimize

    epsilon = optimize.brentq(excess, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    for _ in range(10_000):  # checked as analytic_gaussian_delta computes it (exp of the log), not in logs
        if min(1.0, math.exp(_log_profile(epsilon, mu))) <= delta:
            return float(epsilon)
        epsilon = float(np.nextafter(epsilon, math.inf)) * (1.0 + 1e-15)
    raise ArithmeticError("the analytic Gaussian epsilon did not converge")  # pragma: no cover


# --- zero-concentrated DP ----------------------------------------------------------------------------------------
def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """The zCDP of the Gaussian mechanism: rho = Delta^2 / (2 sigma^2) (Bun & Steinke 2016, Proposition 1.6).

    Parameters
    ----------
    sensitivity : float
        The L2 sensitivity Delta (>= 0).
    sigma : float
        The noise standard deviation (> 0).

    Returns
    -------
    float
        rho.
    """
    sensitivity = _check_nonnegative("sensitivity", sensitivity)
    sigma = _check_positive("sigma", sigma)
    return float((sensitivity / sigma) ** 2 / 2.0)


def _cks_epsilon(log_alpha_minus_1: float, rho: float, log_inv_delta: float) -> float:
    """Canonne, Kamath & Steinke's Corollary 13 solved for epsilon at one alpha = 1 + e^u:
    epsilon = alpha rho + (log(1/delta) + (alpha - 1) log(alpha - 1) - alpha log alpha) / (alpha - 1)."""
    am1 = math.exp(log_alpha_minus_1)
    alpha = 1.0 + am1
    return alpha * rho + (log_inv_delta + am1 * log_alpha_minus_1 - alpha * math.log1p(am1)) / am1


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """The epsilon at which rho-zCDP implies (epsilon, delta)-DP, by the tightest known conversion.

    Canonne, Kamath & Steinke (2020), Corollary 13: rho-zCDP implies (epsilon, delta)-DP with
    delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha. For each
    alpha this is solved for epsilon in closed form, and epsilon is minimised over alpha (every alpha gives a valid
    epsilon, so the minimiser's accuracy only affects tightness): a grid in log(alpha - 1), then Brent's method
    around the best grid point. The result is rounded up by a relative 1e-12.

    Parameters
    ----------
    rho : float
        The zCDP parameter (>= 0).
    delta : float
        The delta, in (0, 1).

    Returns
    -------
    float
        epsilon >= 0.
    """
    rho = _check_nonnegative("rho", rho)
    delta = _check_delta(delta)
    if rho == 0:
        return 0.0
    log_inv_delta = -math.log(delta)

    def objective(u: float) -> float:
        return _cks_epsilon(u, rho, log_inv_delta)

    grid = np.linspace(-25.0, 40.0, 131)
    values = [objective(u) for u in grid]
    best = int(np.argmin(values))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    from scipy import optimize

    result = optimize.minimize_scalar(objective, bounds=(low, high), method="bounded",
                                      options={"xatol": 1e-12, "maxiter": 500})
    epsilon = min(float(result.fun), values[best])
    return max(0.0, epsilon * (1.0 + 1e-12))


def approx_dp_to_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose conversion (`zcdp_to_approx_dp`) gives at most epsilon at delta.

    For declaring a zCDP budget from an (epsilon, delta) target: bisection in log rho, returning the lower end, so
    that zcdp_to_approx_dp(approx_dp_to_rho(epsilon, delta), delta) <= epsilon always.

    Parameters
    ----------
    epsilon : float
        The target epsilon (> 0).
    delta : float
        The target delta, in (0, 1).

    Returns
    -------
    float
        rho > 0.
    """
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    # Bun & Steinke's Proposition 1.3 (epsilon = rho + 2 sqrt(rho log 1/delta)) is looser than the conversion used:
    # its rho is a lower end of the bracket.
    log_term = math.log(1.0 / delta)
    # (sqrt(L + e) - sqrt(L))^2 written as e^2 / (sqrt(L + e) + sqrt(L))^2: the difference of square roots cancels to 0
    # at a tiny epsilon (1e-17 with delta 1e-6), and the doubling below then never ended (a reviewer's budget hung).
    low = (epsilon / (math.sqrt(log_term + epsilon) + math.sqrt(log_term))) ** 2
    if not (math.isfinite(low) and low > 0):
        raise ValueError(f"no rho converts to epsilon {epsilon!r} at delta {delta!r} in floating point")
    while zcdp_to_approx_dp(low, delta) > epsilon:  # pragma: no cover - the bound above always holds
        low /= 2.0
    high = 2.0 * low
    while zcdp_to_approx_dp(high, delta) <= epsilon:
        low, high = high, 2.0 * high
        if not math.isfinite(high):
            raise ValueError(f"no finite rho bounds the conversion of epsilon {epsilon!r} at delta {delta!r}")
    for _ in range(200):
        middle = math.sqrt(low * high)
        if middle <= low or middle >= high:
            break
        low, high = (middle, high) if zcdp_to_approx_dp(middle, delta) <= epsilon else (low, middle)
    return float(low)


def pure_to_rho(epsilon: float) -> float:
    """epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Proposition 1.4).

    Parameters
    ----------
    epsilon : float
        The pure-DP epsilon (>= 0).

    Returns
    -------
    float
        rho = epsilon^2 / 2.
    """
    epsilon = _check_nonnegative("epsilon", epsilon)
    return float(epsilon * epsilon / 2.0)


# --- group privacy -------------------------------------------------------------------------------------------------
def group_pure(epsilon: float, k: int = 2) -> float:
    """epsilon-DP for one record is k epsilon-DP for a group of k records (Dwork & Roth 2014, Theorem 2.2).

    Parameters
    ----------
    epsilon : float
        The per-record epsilon (>= 0).
    k : int
        The group size (>= 1).

    Returns
    -------
    float
        k epsilon.
    """
    return float(_check_k(k) * _check_nonnegative("epsilon", epsilon))


def group_approx(epsilon: float, delta: float, k: int = 2) -> tuple[float, float]:
    """(epsilon, delta)-DP for one record, for a group of k records.

    Chaining the definition along k neighbouring steps gives (k epsilon, delta (1 + e^epsilon + ... +
    e^((k-1) epsilon))); for k = 2 that is (2 epsilon, (1 + e^epsilon) delta), and for every k the delta is at most
    the textbook k e^((k-1) epsilon) delta.

    Parameters
    ----------
    epsilon : float
        The per-record epsilon (>= 0).
    delta : float
        The per-record delta (>= 0).
    k : int
        The group size (>= 1).

    Returns
    -------
    tuple of float
        (k epsilon, delta sum_{i<k} e^(i epsilon)), the delta capped at 1.
    """
    k = _check_k(k)
    epsilon = _check_nonnegative("epsilon", epsilon)
    delta = _check_nonnegative("delta", delta)
    if delta == 0:
        return float(k * epsilon), 0.0
    if k * epsilon > 700:  # e^epsilon overflows a float past 709.78: the factor's log instead, for a delta of 1
        # log(sum_{i<k} e^(i epsilon)) = (k - 1) epsilon + log((1 - e^(-k epsilon)) / (1 - e^(-epsilon)))
        log_factor = (k - 1) * epsilon + math.log(-math.expm1(-k * epsilon)) - math.log(-math.expm1(-epsilon))
        return float(k * epsilon), float(math.exp(min(0.0, log_factor + math.log(delta))))
    if k == 2:
        factor = 1.0 + math.exp(epsilon)
    elif epsilon == 0:
        factor = float(k)
    else:
        factor = math.expm1(k * epsilon) / math.expm1(epsilon)
    return float(k * epsilon), float(min(1.0, factor * delta))


def group_rho(rho: float, k: int = 2) -> float:
    """rho-zCDP for one record is k^2 rho-zCDP for a group of k records (Bun & Steinke 2016, Proposition 1.9).

    Parameters
    ----------
    rho : float
        The per-record rho (>= 0).
    k : int
        The group size (>= 1).

    Returns
    -------
    float
        k^2 rho.
    """
    k = _check_k(k)
    return float(k * k * _check_nonnegative("rho", rho))


__all__ = [
    "analytic_gaussian_delta", "analytic_gaussian_epsilon", "analytic_gaussian_sigma", "approx_dp_to_rho",
    "gaussian_rho", "group_approx", "group_pure", "group_rho", "pure_to_rho", "zcdp_to_approx_dp",
]
