"""Post-processing of the DP Gaussian copula (Asghar et al. 2019, arXiv:1902.01499, section 3.3): from the noisy
dummy-coded counts to n synthetic records, and the released margins of those records.

Steps, as the paper does them (each only reads the measurements):

1. one-way margins: p_l = n1 / (n0 + n1) of every dummy (Algorithm 1 step 3), negative noisy counts set to 0;
2. target positive conjunctions E{X_i X_j} = n11 / (n00 + n01 + n10 + n11) of every pair of dummies of two
   different variables (Algorithm 2 step 3); two dummies of one variable are never both 1 (a structural zero,
   public), so their target is 0 and needs no measurement;
3. the Gaussian correlation rho_ij for which P(Y_i > Phi^-1(1 - p_i), Y_j > Phi^-1(1 - p_j)) equals the target
   (equating Eq. 7 and Eq. 8), by bisection (the paper's method). The bivariate normal probability is computed by
   Gauss-Legendre quadrature of Plackett's identity d Phi2/d rho = phi2 after the substitution rho = sin(theta)
   (smooth up to |rho| = 1), not on the paper's 0.01 grid over [-10, 10]^2: the same quantity, more accurately;
4. the nearest correlation matrix by Higham's alternating projections with Dykstra's correction (the paper's
   Algorithm 3, unit weights), then the zero eigenvalues raised to a small positive value and the diagonal rescaled
   to 1 (the paper's step for a Cholesky factor). Higham rather than one eigenvalue clip: it is the paper's
   choice, and it is the nearest correlation matrix in the Frobenius norm, which a single clip-and-rescale is not;
5. n synthetic records Y = Z L (Algorithm 4) mapped to dummies X_l = 1 iff Phi(Y_l) > 1 - p_l (Eq. 6).

Decoding to categories is not in the paper (it evaluates queries on the binary columns and notes, footnote 3, that
a synthetic binary record may set two levels of one variable). Here a record whose dummies of a variable set
exactly one level keeps that level; otherwise (none or several set) the variable takes the level l minimising
(1 - U_l) / p_l, U_l = Phi(Y_l): the level deepest inside its own '1' region, which is also the rule that picks the
set level of a valid record. n is not taken as public: it is the inverse-variance weighted mean of the noisy totals
every block carries (n0 + n1 of each dummy, the four cells of each pair of dummies), rounded; post-processing.

Model error: the copula is fitted to one-way margins and positive two-way conjunctions only, so higher-order
margins (three-way interactions) are not reproduced, and for a variable with three or more levels the exclusivity
of its dummies cannot be represented exactly (the decoded one-way margin is then approximate, see the tests).
For binary variables (two dummies, rho = -1) every record is a valid dummy coding and, noise off, the one-way
margins and the 2x2 tables of pairs are reproduced up to the sampling error of n draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.special import ndtr, ndtri

from ._limits import MAX_SYNTHETIC_RECORDS
from .errors import TabreleaseError
from .measurements import DUMMY_TABLES, Measurements
from .postprocessing import Estimate

GAUSS_LEGENDRE_NODES = 48
BISECTION_STEPS = 50  # the bracket [-1, 1] halves each step: 2^-49 at the end
HIGHAM_TOLERANCE = 1e-10
HIGHAM_MAX_ITERATIONS = 2000
EIGENVALUE_FLOOR = 1e-10  # the paper's "small positive value" for the zero eigenvalues
# Above this many cells the synthetic records' margins are released without the full table (same margins).
MAX_TABLE_CELLS = 2**22

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(GAUSS_LEGENDRE_NODES)


def bivariate_normal_cdf(h, k, rho) -> np.ndarray:
    """P(Y1 <= h, Y2 <= k) for standard normals of correlation rho (arrays broadcast), |rho| <= 1.

    Phi2 = Phi(h) Phi(k) + (1 / 2 pi) int_0^asin(rho) exp(-(h^2 + k^2 - 2 h k sin t) / (2 cos^2 t)) dt.

    Parameters
    ----------
    h, k : array_like
        The upper limits (infinite values allowed).
    rho : array_like
        The correlations, in [-1, 1] (clipped).

    Returns
    -------
    numpy.ndarray
        The probabilities, of the broadcast shape.
    """
    h, k, rho = np.broadcast_arrays(np.asarray(h, float), np.asarray(k, float), np.asarray(rho, float))
    top = np.arcsin(np.clip(rho, -1.0, 1.0))
    theta = 0.5 * top[..., None] * (_NODES + 1.0)  # interior nodes: cos(theta) > 0 even at |rho| = 1
    s, c2 = np.sin(theta), np.cos(theta) ** 2
    hh, kk = h[..., None], k[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        integrand = np.exp(-(hh * hh + kk * kk - 2.0 * hh * kk * s) / (2.0 * c2))
    integrand = np.where(np.isfinite(hh) & np.isfinite(kk), integrand, 0.0)
    integral = 0.5 * top * (integrand @ _WEIGHTS) / (2.0 * np.pi)
    return ndtr(h) * ndtr(k) + integral


def both_one_probability(p_i, p_j, rho) -> np.ndarray:
    """P(X_i = 1, X_j = 1) when X = 1 iff Phi(Y) > 1 - p (Eq. 6): Phi2(Phi^-1(p_i), Phi^-1(p_j); rho).

    Parameters
    ----------
    p_i, p_j : array_like
        The probabilities that each dummy is 1 (broadcast together with the rest).
    rho : array_like
        The Gaussian correlations, in [-1, 1].

    Returns
    -------
    numpy.ndarray
        The probabilities that both dummies are 1, of the broadcast shape.
    """
    return bivariate_normal_cdf(ndtri(np.asarray(p_i, float)), ndtri(np.asarray(p_j, float)), rho)


def gaussian_correlations(p_i, p_j, target) -> np.ndarray:
    """Per pair, rho in [-1, 1] with P(X_i = 1, X_j = 1) = target (bisection; the probability increases with rho).

    The target is first clipped to the Frechet bounds [max(0, p_i + p_j - 1), min(p_i, p_j)] that rho = -1 and
    rho = 1 reach; a pair with p in {0, 1} does not depend on rho and gets 0.

    Parameters
    ----------
    p_i, p_j : array_like
        The probabilities that each dummy is 1 (broadcast together with the rest).
    target : array_like
        The target probabilities that both are 1.

    Returns
    -------
    numpy.ndarray
        The correlations, of the broadcast shape (to 2^-49).
    """
    p_i, p_j, target = np.broadcast_arrays(*(np.asarray(a, float) for a in (p_i, p_j, target)))
    target = np.clip(target, np.maximum(0.0, p_i + p_j - 1.0), np.minimum(p_i, p_j))
    low, high = -np.ones(p_i.shape), np.ones(p_i.shape)
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        below = both_one_probability(p_i, p_j, middle) < target
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    rho = 0.5 * (low + high)
    degenerate = (p_i <= 0) | (p_i >= 1) | (p_j <= 0) | (p_j >= 1)
    return np.where(degenerate, 0.0, rho)


def nearest_correlation(matrix: np.ndarray, tolerance: float = HIGHAM_TOLERANCE,
                        max_iterations: int = HIGHAM_MAX_ITERATIONS) -> np.ndarray:
    """Higham (2002) section 3.2 with unit weights: alternating projections onto the positive semi-definite
    matrices and the unit-diagonal ones, with Dykstra's correction (the paper's Algorithm 3).

    Parameters
    ----------
    matrix : numpy.ndarray
        A symmetric d x d matrix with unit diagonal (symmetrised here).
    tolerance : float, default HIGHAM_TOLERANCE
        Stop when an iteration moves the matrix by at most this, relative to its Frobenius norm.
    max_iterations : int, default HIGHAM_MAX_ITERATIONS
        The most iterations.

    Returns
    -------
    numpy.ndarray
        The nearest correlation matrix (d x d, unit diagonal; positive semi-definite up to the tolerance).
    """
    y = 0.5 * (np.asarray(matrix, float) + np.asarray(matrix, float).T)
    correction = np.zeros_like(y)
    for _ in range(max_iterations):
        r = y - correction
        values, vectors = np.linalg.eigh(r)
        x = (vectors * np.maximum(values, 0.0)) @ vectors.T
        correction = x - r
        previous, y = y, x.copy()
        np.fill_diagonal(y, 1.0)
        if np.linalg.norm(y - previous) <= tolerance * max(1.0, np.linalg.norm(y)):
            break
    return y


def cholesky_factor(correlation: np.ndarray, floor: float = EIGENVALUE_FLOOR) -> np.ndarray:
    """Lower-triangular L with L L^T = the correlation matrix after its eigenvalues are raised to `floor` and its
    diagonal rescaled to 1 (the paper forces the zero eigenvalues of NCM(P) to small positive values).

    Parameters
    ----------
    correlation : numpy.ndarray
        A d x d correlation matrix (symmetrised here).
    floor : float, default EIGENVALUE_FLOOR
        The least eigenvalue kept.

    Returns
    -------
    numpy.ndarray
        The lower-triangular factor L (d x d).

    Raises
    ------
    TabreleaseError
        If no Cholesky factor is found even with a growing ridge (an internal error).
    """
    values, vectors = np.linalg.eigh(0.5 * (correlation + correlation.T))
    lifted = (vectors * np.maximum(values, floor)) @ vectors.T
    d = np.sqrt(np.diag(lifted))
    lifted = lifted / np.outer(d, d)
    for attempt in range(8):
        try:
            return np.linalg.cholesky(lifted + (0.0 if attempt == 0 else floor * 10**attempt) * np.eye(len(d)))
        except np.linalg.LinAlgError:
            continue
    raise TabreleaseError("internal error: the repaired correlation matrix has no Cholesky factor")


@dataclass(frozen=True)
class CopulaModel:
    """The fitted copula: dummy probabilities, the Gaussian correlation before and after repair, and n."""

    shape: tuple[int, ...]
    probabilities: np.ndarray  # one per dummy, variable after variable
    correlation: np.ndarray  # the solved rho (d x d), before repair
    repaired: np.ndarray  # the nearest correlation matrix, then floored and rescaled
    n: int

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.shape)])


def block_values(measurements: Measurements) -> tuple[dict, dict]:
    """The measured one-way blocks {i: (k_i, 2) array} and pair blocks {(i, j): (k_i, k_j, 2, 2) array}.

    Parameters
    ----------
    measurements : Measurements
        Dummy-coded blocks (one-way and pairwise).

    Returns
    -------
    one_way : dict
        Variable index -> noisy counts of shape (k_i, 2): per level, the counts of dummy 0 and dummy 1.
    pairs : dict
        Pair of variable indices -> noisy counts of shape (k_i, k_j, 2, 2).

    Raises
    ------
    TabreleaseError
        If a block is not a one-way or pairwise dummy table.
    """
    one_way, pairs = {}, {}
    for b in measurements.blocks:
        if b.query != DUMMY_TABLES:
            raise TabreleaseError("the copula-synthesis estimator reads dummy-coded tables only")
        k = [b.domain[j] for j in b.variables]
        if len(b.variables) == 1:
            one_way[b.variables[0]] = b.values.reshape(k[0], 2)
        elif len(b.variables) == 2:
            pairs[tuple(b.variables)] = b.values.reshape(k[0], k[1], 2, 2)
        else:
            raise TabreleaseError("the copula-synthesis estimator reads one-way and pairwise dummy tables only")
    return one_way, pairs


def estimated_total(measurements: Measurements) -> float:
    """n from the noisy totals every block carries: each dummy's n0 + n1 and each pair of dummies' four cells,
    weighted by 1 / variance (a sum of c Laplace(b) has variance 2 c b^2).

    Parameters
    ----------
    measurements : Measurements
        Dummy-coded blocks (one-way and pairwise).

    Returns
    -------
    float
        The estimate of n (not rounded; may be negative at very small n and epsilon).
    """
    estimates, weights = [], []
    for b in measurements.blocks:
        per = 2 if len(b.variables) == 1 else 4
        sums = b.values.reshape(-1, per).sum(axis=1)
        estimates.append(sums)
        weights.append(np.full(sums.size, 1.0 / max(per * 2.0 * b.scale**2, 1e-300)))
    estimates, weights = np.concatenate(estimates), np.concatenate(weights)
    return float(weights @ estimates / weights.sum())


def fit_copula(shape, measurements: Measurements) -> CopulaModel:
    """Post-processing of the measurements into the copula (steps 1-4 of the module docstring).

    Parameters
    ----------
    shape : sequence of int
        The number of levels of each variable.
    measurements : Measurements
        Dummy-coded blocks: the one-way table of every variable, and pairwise tables.

    Returns
    -------
    CopulaModel
        The dummies' probabilities, the solved and repaired correlations, and n (the estimated total, rounded and at
        least 0).

    Raises
    ------
    TabreleaseError
        If a variable's one-way table is missing, or a block is not a one-way or pairwise dummy table.
    """
    shape = tuple(int(k) for k in shape)
    one_way, pairs = block_values(measurements)
    if sorted(one_way) != list(range(len(shape))):
        raise TabreleaseError("the copula needs the one-way dummy table of every variable")
    offsets = np.concatenate([[0], np.cumsum(shape)])
    d = int(offsets[-1])
    probabilities = np.zeros(d)
    for i, values in one_way.items():
        counts = np.maximum(values, 0.0)  # Algorithm 1: a negative noisy count is fixed to 0
        totals = counts.sum(axis=1)
        probabilities[offsets[i]:offsets[i + 1]] = np.divide(counts[:, 1], totals, out=np.zeros(len(totals)),
                                                             where=totals > 0)
    rows, cols, targets = [], [], []
    for i, k in enumerate(shape):  # two dummies of one variable: a structural zero, no measurement
        a, b = np.triu_indices(k, 1)
        rows.append(offsets[i] + a), cols.append(offsets[i] + b), targets.append(np.zeros(a.size))
    for (i, j), values in pairs.items():
        counts = np.maximum(values, 0.0)
        totals = counts.sum(axis=(2, 3))
        pi, pj = probabilities[offsets[i]:offsets[i + 1]], probabilities[offsets[j]:offsets[j + 1]]
        # Eq. 4; where every noisy cell is clipped to 0, no information: the independence value
        both = np.divide(counts[:, :, 1, 1], totals, out=np.outer(pi, pj), where=totals > 0)
        a, b = np.indices(totals.shape)
        rows.append(offsets[i] + a.ravel()), cols.append(offsets[j] + b.ravel()), targets.append(both.ravel())
    rows, cols, targets = np.concatenate(rows), np.concatenate(cols), np.concatenate(targets)
    rho = gaussian_correlations(probabilities[rows], probabilities[cols], targets)
    correlation = np.eye(d)
    correlation[rows, cols] = correlation[cols, rows] = rho
    repaired = nearest_correlation(correlation)
    # The records drawn are the noisy total, which at a very small epsilon may be far above n (2 x 10^8 take minutes
    # to draw): capped at the limit the mechanism puts on n (post-processing; `synthesise`'s note says so).
    n = int(np.floor(min(max(estimated_total(measurements), 0.0), MAX_SYNTHETIC_RECORDS) + 0.5))
    return CopulaModel(shape, probabilities, correlation, repaired, n)


# Records are drawn in chunks of at most this many normal deviates (128 MiB of float64), so that memory does not
# grow with n; the draws are those of one call (numpy fills its arrays from one stream in order).
CHUNK_VALUES = 2**24


def record_chunks(model: CopulaModel, rng: np.random.Generator):
    """The n synthetic records (chunks of rows of level codes): Algorithm 4, Eq. 6, then the decoding of the module
    docstring.

    Parameters
    ----------
    model : CopulaModel
        The fitted copula.
    rng : numpy.random.Generator
        The post-processing randomness.

    Yields
    ------
    numpy.ndarray
        A chunk of records (rows x variables, int64 level codes), at most `CHUNK_VALUES` deviates' worth each;
        n records in all.
    """
    factor = cholesky_factor(model.repaired)
    d = len(model.probabilities)
    size = max(1, CHUNK_VALUES // max(d, 1))
    offsets = model.offsets
    for start in range(0, model.n, size):
        rows = min(size, model.n - start)
        uniforms = ndtr(rng.standard_normal((rows, d)) @ factor.T)
        records = np.empty((rows, len(model.shape)), np.int64)
        for i in range(len(model.shape)):
            u = uniforms[:, offsets[i]:offsets[i + 1]]
            p = model.probabilities[offsets[i]:offsets[i + 1]]
            with np.errstate(divide="ignore"):
                # X_l = 1 iff (1 - U_l) / p_l < 1: a single level set is the minimum; a level of p = 0 never wins
                depth = np.where(p > 0, (1.0 - u) / np.where(p > 0, p, 1.0), np.inf)
            records[:, i] = np.argmin(depth, axis=1)
        yield records


def sample_records(model: CopulaModel, rng: np.random.Generator) -> np.ndarray:
    """n synthetic records (n x k level codes), all at once (small n: tests and notebooks).

    Parameters
    ----------
    model : CopulaModel
        The fitted copula.
    rng : numpy.random.Generator
        The post-processing randomness.

    Returns
    -------
    numpy.ndarray
        n x k int64 level codes.
    """
    chunks = list(record_chunks(model, rng))
    return np.concatenate(chunks) if chunks else np.empty((0, len(model.shape)), np.int64)


def synthetic_counts(shape, records: np.ndarray) -> np.ndarray:
    """The contingency table of the records.

    Parameters
    ----------
    shape : sequence of int
        The number of levels of each variable.
    records : numpy.ndarray
        Records x variables, level codes.

    Returns
    -------
    numpy.ndarray
        The counts (int64), of `shape`.
    """
    if records.shape[0] == 0:
        return np.zeros(shape, np.int64)
    flat = np.ravel_multi_index(tuple(records.T), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)


def synthetic_margin(shape, records: np.ndarray, margin) -> np.ndarray:
    """The margin over `margin` of the records' table, counted from the records.

    Parameters
    ----------
    shape : sequence of int
        The number of levels of each variable.
    records : numpy.ndarray
        Records x variables, level codes.
    margin : tuple of int
        The margin's axes (empty: the number of records).

    Returns
    -------
    numpy.ndarray
        The margin's counts (int64), one axis per entry of `margin`.
    """
    sub = tuple(shape[j] for j in margin)
    if not margin:
        return np.array(records.shape[0], np.int64)
    flat = np.ravel_multi_index(tuple(records[:, list(margin)].T), sub)
    return np.bincount(flat, minlength=int(np.prod(sub))).reshape(sub).astype(np.int64)


def synthesise(plan, measurements: Measurements, rng: np.random.Generator) -> Estimate:
    """The synthetic records' table (or, for tables of more than MAX_TABLE_CELLS cells, their released margins as
    the margins of one table): integer and mutually consistent by construction.

    Parameters
    ----------
    plan : MechanismPlan
        The plan (its shape, and the margins released when the table is too large to hold).
    measurements : Measurements
        Dummy-coded blocks of one run.
    rng : numpy.random.Generator
        The post-processing randomness that draws the records.

    Returns
    -------
    Estimate
        The records' table (int64), or the plan's margins with ``cliques`` set to them; a note says the release is
        synthetic.

    Raises
    ------
    TabreleaseError
        If the measurements are not the dummy-coded tables the copula needs.
    """
    from .loglinear.ipf import one_blas_thread

    start = time.perf_counter()
    whole = np.prod(plan.shape, dtype=object) <= MAX_TABLE_CELLS
    with one_blas_thread():  # d x d eigen-decompositions, d = sum k_i: BLAS threads only contend at this size
        model = fit_copula(plan.shape, measurements)
        # Counted chunk by chunk: the records themselves are never all held.
        if whole:
            table = np.zeros(plan.shape, np.int64)
            for records in record_chunks(model, rng):
                table += synthetic_counts(plan.shape, records)
        else:
            margins = [np.zeros(tuple(plan.shape[j] for j in g), np.int64) for g in plan.margins]
            for records in record_chunks(model, rng):
                for total, g in zip(margins, plan.margins):
                    total += synthetic_margin(plan.shape, records, g)
    notes = (f"synthetic data: {model.n} records sampled from a Gaussian copula fitted to the noisy dummy-coded "
             "counts; the released margins are those records' margins",)
    if model.n >= MAX_SYNTHETIC_RECORDS:
        notes += (f"the noisy total reached {MAX_SYNTHETIC_RECORDS:.0e}, the most records this tool draws: "
                  f"{MAX_SYNTHETIC_RECORDS:.0e} were drawn",)
    if whole:
        return Estimate(table=table, margins=None, seconds=time.perf_counter() - start, notes=notes)
    # Each released margin is its own "clique": they are all margins of the one table of the records.
    return Estimate(table=None, margins=tuple(margins), seconds=time.perf_counter() - start, notes=notes,
                    cliques=tuple(plan.margins))


def measurements_rng(measurements: Measurements) -> np.random.Generator:
    """noise.post_processing_rng for the source these measurements were drawn from (seeded in simulation).

    Parameters
    ----------
    measurements : Measurements
        The measurements (their noise mode and seed).

    Returns
    -------
    numpy.random.Generator
        Derived from the seed for seeded simulation, seeded from the operating system otherwise.
    """
    from .noise import RELEASE, SIMULATION, post_processing_rng

    seeded = measurements.noise_mode == SIMULATION and measurements.seed is not None
    return post_processing_rng(SimpleNamespace(mode=SIMULATION if seeded else RELEASE, seed=measurements.seed))
