"""Noise: calibration to an exact sensitivity, and the two ways of drawing it.

* Release mode draws from OpenDP's vetted samplers (discrete Laplace on integer-scaled
  coefficients, where the coefficients of an integer table are integers after scaling;
  OpenDP's Gaussian otherwise) and accepts no seed.
* Simulation mode draws from a seeded numpy Generator: fast and reproducible, for sweeps and
  tests. It is not a secure sampler and every output made with it says so.

A calibration records the sensitivity it was computed from and the epsilon the drawn noise
actually gives, so that a release made with the paper's formulas can say whether the epsilon
it claims holds. A Gaussian calibration is the analytic Gaussian mechanism (Balle & Wang 2018,
`accounting`): the smallest scale whose exact privacy profile gives delta at epsilon; it also
records the scale's zCDP, rho.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .accounting import analytic_gaussian_epsilon, analytic_gaussian_sigma, gaussian_rho
from ._numbers import number
from .errors import TabreleaseError

from .spec import RELEASE, SIMULATION  # noqa: E402  (the modes are spec values)


@dataclass(frozen=True)
class NoiseCalibration:
    """How much noise, why, and what privacy it gives."""

    distribution: str  # "laplace" or "gaussian"
    scale: float  # Laplace b, or Gaussian standard deviation, on the released coefficients
    sensitivity: float  # exact L1 (Laplace) or L2 (Gaussian) sensitivity of what is released
    epsilon: float  # the epsilon the caller asked for
    delta: float | None
    neighbours: str
    calibration: str  # "exact" or "paper"
    epsilon_actual: float  # the epsilon the scale gives for the exact sensitivity (at delta, for Gaussian noise)
    rho: float | None = None  # Gaussian noise: its zCDP, sensitivity^2 / (2 scale^2) (a composition: the total rho)

    @property
    def epsilon_holds(self) -> bool:
        return self.epsilon_actual <= self.epsilon * (1 + 1e-9)

    def as_dict(self) -> dict:
        """The calibration as a JSON-ready mapping (written to release.json and the audit).

        Returns
        -------
        dict
            Every field, plus ``sensitivity_norm`` ("L1" for Laplace, "L2" for Gaussian noise) and
            ``epsilon_holds``.
        """
        return {
            "distribution": self.distribution,
            "scale": self.scale,
            "sensitivity": self.sensitivity,
            "sensitivity_norm": "L1" if self.distribution == "laplace" else "L2",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbours": self.neighbours,
            "calibration": self.calibration,
            "epsilon_actual": self.epsilon_actual,
            "epsilon_holds": self.epsilon_holds,
            "rho": self.rho,
        }


def check_epsilon(epsilon: float) -> float:
    """Check that epsilon is a positive finite number.

    Parameters
    ----------
    epsilon : float
        The privacy parameter asked for (anything `float` accepts).

    Returns
    -------
    float
        Epsilon as a float.

    Raises
    ------
    TabreleaseError
        If epsilon is not a number, not finite, or not positive.
    """
    try:
        value = number(epsilon)
    except (TypeError, ValueError):
        raise TabreleaseError(f"epsilon {epsilon!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise TabreleaseError(f"epsilon must be a positive finite number, not {epsilon!r}")
    return value


def check_delta(delta: float) -> float:
    """Check that delta lies strictly between 0 and 1.

    Parameters
    ----------
    delta : float
        The approximate-DP parameter asked for (anything `float` accepts).

    Returns
    -------
    float
        Delta as a float.

    Raises
    ------
    TabreleaseError
        If delta is not a number or not in the open interval (0, 1).
    """
    try:
        value = number(delta)
    except (TypeError, ValueError):
        raise TabreleaseError(f"delta {delta!r} is not a number") from None
    if not 0 < value < 1:
        raise TabreleaseError(f"delta must lie strictly between 0 and 1, not {delta!r}")
    return value


def laplace_calibration(
    sensitivity: float,
    epsilon: float,
    neighbours: str,
    *,
    paper_scale: float | None = None,
) -> NoiseCalibration:
    """Laplace scale sensitivity/epsilon, or the paper's scale (reproduction only) with its true epsilon.

    Parameters
    ----------
    sensitivity : float
        Exact L1 sensitivity of the released values.
    epsilon : float
        The epsilon asked for (checked by `check_epsilon`).
    neighbours : str
        The neighbour relation the sensitivity was computed for ("add-remove" or "replace").
    paper_scale : float, optional
        The paper's Laplace scale (reproduction only); its actual epsilon, sensitivity / paper_scale, is recorded
        and may exceed the asked one. Default: the exact scale sensitivity / epsilon.

    Returns
    -------
    NoiseCalibration
        A Laplace calibration (delta None, calibration "exact" or "paper").

    Raises
    ------
    TabreleaseError
        If epsilon is not a positive finite number.
    """
    epsilon = check_epsilon(epsilon)
    scale = sensitivity / epsilon if paper_scale is None else paper_scale
    return NoiseCalibration(
        distribution="laplace",
        scale=float(scale),
        sensitivity=float(sensitivity),
        epsilon=epsilon,
        delta=None,
        neighbours=neighbours,
        calibration="exact" if paper_scale is None else "paper",
        epsilon_actual=float(sensitivity / scale),
    )


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def gaussian_calibration(l2_sensitivity: float, epsilon: float, delta: float, neighbours: str) -> NoiseCalibration:
    """The smallest Gaussian scale that is (epsilon, delta)-DP at this L2 sensitivity: the analytic Gaussian mechanism.

    The scale is the least sigma whose exact privacy profile (Balle & Wang 2018, Theorem 8) is at most delta at
    epsilon, rounded up (`accounting.analytic_gaussian_sigma`); `epsilon_actual` is the profile's tightest epsilon
    at delta for that scale (epsilon up to rounding) and `rho` its zCDP. A vector with per-block scales is one
    Gaussian mechanism after whitening: the caller passes the whitened sensitivity and gets the multiplier.
    The same calibration serves both modes, so a simulated release has the noise a real one would.

    Parameters
    ----------
    l2_sensitivity : float
        Exact L2 sensitivity of the released vector (whitened, where blocks have scales of their own).
    epsilon : float
        The epsilon asked for.
    delta : float
        The delta asked for, strictly between 0 and 1.
    neighbours : str
        The neighbour relation the sensitivity was computed for.

    Returns
    -------
    NoiseCalibration
        A Gaussian calibration whose scale is the standard deviation sigma, with `epsilon_actual` and `rho` set.

    Raises
    ------
    TabreleaseError
        If epsilon or delta is out of range, or the sensitivity is not positive and finite.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    l2 = float(l2_sensitivity)
    if not math.isfinite(l2) or l2 <= 0:
        raise TabreleaseError(f"a Gaussian scale needs a positive L2 sensitivity, not {l2_sensitivity!r}")
    scale = analytic_gaussian_sigma(l2, epsilon, delta)
    try:
        achieved = analytic_gaussian_epsilon(l2, scale, delta)
    except ArithmeticError:  # e.g. epsilon 1e-6 with delta 0.5: the profile is flat to the solver (before any charge)
        raise TabreleaseError(f"the Gaussian's epsilon at delta {delta:g} could not be solved for at epsilon "
                              f"{epsilon:g}: ask for a larger epsilon or a smaller delta") from None
    return NoiseCalibration("gaussian", scale, l2, epsilon, delta, neighbours, "exact", achieved,
                            rho=gaussian_rho(l2, scale))


class NoiseSource(Protocol):
    mode: str

    def perturb(self, values: np.ndarray, calibration: NoiseCalibration, integer_scale: float | None = None,
                integers: np.ndarray | None = None) -> np.ndarray:
        """Return values plus noise of the calibrated distribution and scale. `integers`, where given, are
        values * integer_scale computed exactly in integer arithmetic (what a discrete sampler perturbs): an
        array, or a function returning one, so that only a sampler that needs them pays for them.

        Parameters
        ----------
        values : numpy.ndarray
            The exact values to perturb (any shape).
        calibration : NoiseCalibration
            The distribution ("laplace" or "gaussian") and scale of the noise.
        integer_scale : float, optional
            A factor that makes every value an integer: release mode then draws discrete Laplace noise on
            values * integer_scale (scale times integer_scale) and divides back.
        integers : numpy.ndarray or callable, optional
            values * integer_scale computed exactly as int64, or a function returning them.

        Returns
        -------
        numpy.ndarray
            Float array of the noisy values (the secure sampler returns them flattened; callers pass 1-d values).
        """

    def randomize_cells(self, counts: np.ndarray, keep: float) -> np.ndarray:
        """k-ary randomized response on every record of a table of cell counts (k = counts.size): each record
        keeps its cell with probability `keep`, else moves to one of the other k - 1 cells uniformly. Returns
        the cell counts of the randomised records (integers; NoNoise: their expectation).

        Parameters
        ----------
        counts : numpy.ndarray
            Non-negative integer cell counts (any shape; k = counts.size cells).
        keep : float
            Probability that a record reports its own cell.

        Returns
        -------
        numpy.ndarray
            The randomised cell counts, of the shape of `counts`.
        """

    def noisy_max(self, scores: np.ndarray, scale: float) -> int:
        """Report noisy max: the index of the largest of scores + independent Gumbel(scale) noise (the exponential
        mechanism; with score L-infinity sensitivity D and no monotonicity it is epsilon_0 = 2 D / scale -DP and
        epsilon_0^2 / 8 -zCDP, OpenDP's make_noisy_max accounting). NoNoise: the first largest score.

        Parameters
        ----------
        scores : numpy.ndarray
            One score per candidate (1-d).
        scale : float
            The Gumbel noise scale.

        Returns
        -------
        int
            The index of the selected candidate.
        """


# Release mode draws integers on 64-bit domains: anything larger is refused before any budget is charged.
MAX_SAMPLER_INTEGER = 2**62
# Release mode's randomized response draws each record through OpenDP in turn (`SecureNoise.randomize_cells`): about
# 13,000 a second here (400,000 records in 30.5 s, a scratch timing of 2026-11-27), so a table of more records is
# refused before the charge: at that rate 10^8 would take about two hours after it.
MAX_SECURE_RESPONSES = 10**6


@dataclass
class SimulationNoise:
    """Seeded numpy noise for simulation: reproducible, not for publication.

    Without a seed one is drawn (63 bits from the operating system) and kept in `seed`, so every
    simulated release records the seed that replays it.
    """

    seed: int | None = None
    mode: str = SIMULATION

    def __post_init__(self) -> None:
        if self.seed is None:
            self.seed = secrets.randbits(63)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise TabreleaseError(f"a seed is a non-negative whole number, not {self.seed!r}")
        self._rng = np.random.default_rng(self.seed)

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        """Values plus seeded numpy Laplace or Gaussian noise (continuous; `integer_scale` and `integers` unused).

        Parameters
        ----------
        values : numpy.ndarray
            The exact values to perturb.
        calibration : NoiseCalibration
            The distribution and scale of the noise.
        integer_scale : float, optional
            Ignored (the simulated noise is continuous).
        integers : numpy.ndarray or callable, optional
            Ignored.

        Returns
        -------
        numpy.ndarray
            Float array of the shape of `values`.
        """
        values = np.asarray(values, float)
        if calibration.distribution == "laplace":
            return values + self._rng.laplace(0.0, calibration.scale, size=values.shape)
        return values + self._rng.normal(0.0, calibration.scale, size=values.shape)

    def randomize_cells(self, counts, keep):
        """k-ary randomized response on every record, drawn from the seeded generator.

        Parameters
        ----------
        counts : numpy.ndarray
            Non-negative integer cell counts (k = counts.size cells).
        keep : float
            Probability that a record reports its own cell.

        Returns
        -------
        numpy.ndarray
            Integer report counts, of the shape of `counts`.
        """
        # Per cell: how many of its records keep their cell (binomial); each other record moves by a uniform
        # non-zero offset mod k, i.e. to one of the other k - 1 cells uniformly: the same distribution of report
        # counts as randomising record by record, in O(n) memory.
        x = np.asarray(counts, np.int64).ravel()
        k = x.size
        kept = self._rng.binomial(x, keep)
        sources = np.repeat(np.arange(k), x - kept)
        targets = (sources + self._rng.integers(1, k, size=sources.size)) % k
        reports = kept + np.bincount(targets, minlength=k)
        return reports.reshape(np.shape(counts))

    def noisy_max(self, scores, scale):
        """Report noisy max with seeded Gumbel noise.

        Parameters
        ----------
        scores : numpy.ndarray
            One score per candidate.
        scale : float
            The Gumbel noise scale.

        Returns
        -------
        int
            The index of the largest noisy score.
        """
        scores = np.asarray(scores, float)
        return int(np.argmax(scores + self._rng.gumbel(0.0, float(scale), size=scores.shape)))


@dataclass
class SecureNoise:
    """OpenDP's samplers, for releases that will be published. Takes no seed."""

    mode: str = RELEASE

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        """Values plus noise from OpenDP: discrete Laplace on 64-bit integers where `integer_scale` is given with
        Laplace noise, else OpenDP's continuous Laplace or Gaussian.

        Parameters
        ----------
        values : numpy.ndarray
            The exact values to perturb.
        calibration : NoiseCalibration
            The distribution and scale of the noise.
        integer_scale : float, optional
            A factor that makes every value an integer (Laplace noise only).
        integers : numpy.ndarray or callable, optional
            values * integer_scale as exact integers, or a function returning them; computed by rounding (and
            checked) when not given.

        Returns
        -------
        numpy.ndarray
            1-d float array: the noisy values, flattened in C order.

        Raises
        ------
        TabreleaseError
            If a scaled integer exceeds 2**62 (the sampler's 64-bit domain), or the scaled values are not integers.
        """
        dp = _opendp()
        values = np.asarray(values, float)
        if calibration.distribution == "laplace" and integer_scale is not None:
            if callable(integers):
                integers = integers()
            if integers is None:
                scaled = np.rint(values * integer_scale)
                if not np.allclose(scaled, values * integer_scale, atol=1e-6):
                    raise TabreleaseError("internal error: scaled coefficients are not integers")
                integers = scaled.astype(np.int64)
            exact = [int(v) for v in np.ravel(integers)]
            if any(abs(v) > MAX_SAMPLER_INTEGER for v in exact):
                raise TabreleaseError("the counts are too large for the secure sampler's 64-bit integers")
            # 64-bit integer domains: OpenDP's default `int` is 32-bit.
            measurement = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=calibration.scale * integer_scale
            )
            noisy = np.asarray(measurement(exact), float)
            return noisy / integer_scale
        if calibration.distribution == "laplace":
            measurement = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=calibration.scale
            )
        else:
            measurement = dp.m.make_gaussian(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=calibration.scale
            )
        return np.asarray(measurement([float(v) for v in values]), float)

    def randomize_cells(self, counts, keep):
        """k-ary randomized response through OpenDP's measurement, record by record.

        Parameters
        ----------
        counts : numpy.ndarray
            Non-negative integer cell counts (k = counts.size cells).
        keep : float
            Probability that a record reports its own cell.

        Returns
        -------
        numpy.ndarray
            Integer report counts, of the shape of `counts`.
        """
        # OpenDP's randomized-response measurement, applied to each record (a table is expanded to its records).
        dp = _opendp()
        x = np.asarray(counts, np.int64).ravel()
        measurement = dp.m.make_randomized_response(list(range(x.size)), float(keep), T="i64")
        reports = np.zeros(x.size, np.int64)
        for cell in np.repeat(np.arange(x.size), x).tolist():
            reports[measurement(cell)] += 1
        return reports.reshape(np.shape(counts))

    def noisy_max(self, scores, scale):
        """Report noisy max through OpenDP's Gumbel `make_noisy_max`.

        Parameters
        ----------
        scores : numpy.ndarray
            One score per candidate.
        scale : float
            The Gumbel noise scale.

        Returns
        -------
        int
            The index of the selected candidate.
        """
        # OpenDP's report noisy max with Gumbel noise (its zCDP output measure is the Gumbel variant).
        dp = _opendp()
        measurement = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                          dp.linf_distance(T=float), dp.zero_concentrated_divergence(),
                                          scale=float(scale))
        return int(measurement([float(v) for v in np.ravel(scores)]))


@dataclass
class NoNoise:
    """Test-only: the exact values, so that the rest of a mechanism can be checked without noise."""

    mode: str = "none (test only)"

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        """The exact values, unperturbed.

        Parameters
        ----------
        values : numpy.ndarray
            The exact values.
        calibration : NoiseCalibration
            Ignored.
        integer_scale : float, optional
            Ignored.
        integers : numpy.ndarray or callable, optional
            Ignored.

        Returns
        -------
        numpy.ndarray
            A float copy of `values`.
        """
        return np.asarray(values, float).copy()

    def randomize_cells(self, counts, keep):
        """The expected report counts of k-ary randomized response.

        Parameters
        ----------
        counts : numpy.ndarray
            Cell counts (k = counts.size cells).
        keep : float
            Probability that a record reports its own cell.

        Returns
        -------
        numpy.ndarray
            Float expected report counts, of the shape of `counts`.
        """
        x = np.asarray(counts, float)
        other = (1.0 - keep) / (x.size - 1)
        return keep * x + other * (x.sum() - x)  # the expected report counts

    def noisy_max(self, scores, scale):
        """The index of the first largest score, without noise.

        Parameters
        ----------
        scores : numpy.ndarray
            One score per candidate.
        scale : float
            Ignored.

        Returns
        -------
        int
            The index of the first largest score.
        """
        return int(np.argmax(np.asarray(scores, float)))


def post_processing_rng(noise: NoiseSource) -> np.random.Generator:
    """Randomness for post-processing (sampling synthetic records, random restarts): it touches no confidential
    value, so it needs no secure sampler. In simulation it is derived from the seed (a run replays exactly); in
    release mode it is seeded from the operating system and never recorded.

    Parameters
    ----------
    noise : NoiseSource
        The release's noise source; its `mode` (and, in simulation, its `seed`) decides the seeding.

    Returns
    -------
    numpy.random.Generator
        A generator for post-processing only.
    """
    if noise.mode == SIMULATION:
        return np.random.default_rng([int(noise.seed), 0x7AB])
    return np.random.default_rng(secrets.randbits(128))


def noise_source(mode: str, seed: int | None) -> NoiseSource:
    """Simulation noise (seed optional) or release noise (seed refused).

    Parameters
    ----------
    mode : str
        "simulation" (`spec.SIMULATION`) or "release" (`spec.RELEASE`).
    seed : int or None
        Simulation only: the seed (None draws one, kept on the source).

    Returns
    -------
    NoiseSource
        A `SimulationNoise` or a `SecureNoise`.

    Raises
    ------
    TabreleaseError
        If a seed is given in release mode, or the mode is unknown.
    """
    if mode == SIMULATION:
        return SimulationNoise(seed)
    if mode == RELEASE:
        if seed is not None:
            raise TabreleaseError(
                "release mode draws from a secure sampler and accepts no seed; use --simulate for seeded, "
                "reproducible (non-secure) noise"
            )
        return SecureNoise()
    raise TabreleaseError(f"unknown noise mode {mode!r}; choose release or simulation")


def rr_probabilities(k: int, epsilon: float) -> tuple[float, float]:
    """(p, q) of k-ary randomized response: keep the true cell with probability p, report each other cell with
    probability q. The mechanism's calibration and the estimator's unbiasing both read it (kept here, below both).

    Parameters
    ----------
    k : int
        The number of cells (categories).
    epsilon : float
        The local-DP epsilon.

    Returns
    -------
    tuple of float
        (p, q) = (e^epsilon / (e^epsilon + k - 1), 1 / (e^epsilon + k - 1)).
    """
    e = math.exp(epsilon)
    return e / (e + k - 1), 1.0 / (e + k - 1)
