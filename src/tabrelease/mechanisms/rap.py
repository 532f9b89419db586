"""RAP, relaxed adaptive projection (Aydore et al. 2021; the lecture notes' Algorithm 2): Gaussian measurements of
marginal queries under rho-zCDP, report-noisy-max selection in the adaptive variant, and a relaxed synthetic dataset
fitted to the noisy answers (relaxed.py), whose margins are released.

Queries. The workload is the m released margins; one query is a whole margin (the vector of its cells).

* rounds T = 1 (the default): every released margin is measured at once with Gaussian noise, no selection (the
  notes' first branch: m measurements of rho/m each, which is one Gaussian measurement of all m margins at rho).
* rounds T > 1, queries per round K (default floor(m / T); T K <= m as the notes require): round t scores every
  margin not yet measured by the L1 distance, in counts, between its true cells and the current relaxed data's
  answers times the current estimate of n, selects K of them one after another by report noisy max (Gumbel noise),
  measures each with Gaussian noise, and fits the relaxed data again (warm start) to every answer so far. In round 1
  nothing is measured yet, the estimate of n is 0 and every score is n: the first selection is uniform. Margins
  never selected (T K < m) are read off the relaxed data without a measurement of their own.

Exact sensitivities (the tests check them by brute force over every record on small tables):

| quantity                                   | add-remove | replace    |
|--------------------------------------------|------------|------------|
| one margin's cells, L2                     | 1          | sqrt(2)    |
| m margins together, L2                     | sqrt(m)    | sqrt(2m)   |
| a selection score (L-infinity over margins) | 1          | 2          |

(the score's relaxed answers and estimate of n are fixed by earlier DP outputs, so only the true cells move).

Budget (the notes' split). The release composes several measurements (and, for T > 1, selections) under zCDP, so
it is accounted in rho, not by the analytic Gaussian (which is exact for one Gaussian measurement only). rho is the
largest zCDP parameter whose conversion to (epsilon, delta)-DP gives epsilon (accounting.approx_dp_to_rho: the
exact conversion of Canonne, Kamath & Steinke 2020, Corollary 13, which is also OpenDP's make_zCDP_to_approxDP; the
notes' conversion epsilon = rho + 2 sqrt(rho log(1/delta)) is looser: it gives a smaller rho for the same
guarantee). T = 1: the m
margins get rho together. T > 1: each of the T K selections and each of the T K measurements gets rho / (2 T K); a
selection of zCDP rho_0 is report noisy max with Gumbel scale D / sqrt(2 rho_0) (D the score sensitivity): the
exponential mechanism at epsilon_0 = sqrt(8 rho_0), which is epsilon_0^2 / 8 -zCDP (bounded range; OpenDP's
make_noisy_max accounting); a measurement of zCDP rho_0 has Gaussian sigma = D_2 / sqrt(2 rho_0). Every scale is
checked with OpenDP's own privacy maps, the spent rho summed (zCDP composes adaptively by addition), recorded as
the calibration's rho, and converted back (accounting.zcdp_to_approx_dp) to the epsilon recorded as epsilon_actual.

n is not taken as public (the notes' statistical queries are proportions with n known): n is the best linear
unbiased estimate from the measured margins' sums (post-processing, no budget of its own). The released margins are
those of the relaxed dataset times that n: the margins of one non-negative table (a mixture of n' products),
rounded by controlled rounding of that table (integer margins of one integer table) when it has at most
relaxed.MAX_TABLE_CELLS cells, else by controlled rounding of the margins themselves.

Noise off, the released margins reproduce the true ones up to the fit's optimisation error (the tests: proportions
within 1e-4 before rounding on small tables, and rounding adds at most what controlled rounding of a near-integer
table adds).
"""

from __future__ import annotations

from dataclasses import replace
from math import sqrt

import numpy as np

from ..privacy import ZCDP, PrivacyGuarantee, PrivacyLoss, PrivacyUnit
from ..errors import TabreleaseError
from ..measurements import MARGIN_CELLS, Measurement, measured
from ..accounting import approx_dp_to_rho, zcdp_to_approx_dp
from ..noise import NoiseCalibration, post_processing_rng
from ..postprocessing import CONTROLLED, RELAXED_PROJECTION
from ..tables import margin_of
from ._base import Mechanism, MechanismPlan, no_paper_calibration

ROUNDS, QUERIES_PER_ROUND, SYNTHETIC_ROWS = "rounds", "queries_per_round", "synthetic_rows"


def _opendp():
    from ..noise import _opendp as load

    return load()


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose zCDP converts to (epsilon, delta)-DP (Canonne, Kamath & Steinke's conversion, as
    OpenDP's make_zCDP_to_approxDP).

    Parameters
    ----------
    epsilon : float
    delta : float
        In (0, 1).

    Returns
    -------
    float
        rho (`accounting.approx_dp_to_rho`).
    """
    return approx_dp_to_rho(epsilon, delta)


def gaussian_zcdp(scale: float, l2_sensitivity: float) -> float:
    """OpenDP's zCDP of its Gaussian mechanism of this scale at this L2 sensitivity.

    Parameters
    ----------
    scale : float
        The Gaussian standard deviation.
    l2_sensitivity : float

    Returns
    -------
    float
        rho, as OpenDP's privacy map gives it (rounded up).
    """
    dp = _opendp()
    measurement = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float),
                                     scale=float(scale))
    return float(measurement.map(float(l2_sensitivity)))


def noisy_max_zcdp(scale: float, score_sensitivity: float) -> float:
    """OpenDP's zCDP of report noisy max (Gumbel noise of this scale) at this L-infinity score sensitivity.

    Parameters
    ----------
    scale : float
        The Gumbel scale.
    score_sensitivity : float
        The L-infinity sensitivity of the scores.

    Returns
    -------
    float
        rho, as OpenDP's privacy map gives it.
    """
    dp = _opendp()
    measurement = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float),
                                      dp.zero_concentrated_divergence(), scale=float(scale))
    return float(measurement.map(float(score_sensitivity)))


def epsilon_of_rho(rho: float, delta: float) -> float:
    """The conversion of rho-zCDP to epsilon at delta (Canonne, Kamath & Steinke 2020, Corollary 13).

    Parameters
    ----------
    rho : float
    delta : float
        In (0, 1).

    Returns
    -------
    float
        epsilon (`accounting.zcdp_to_approx_dp`).
    """
    return zcdp_to_approx_dp(rho, delta)


def notes_epsilon(rho: float, delta: float) -> float:
    """The notes' conversion (Bun & Steinke's Proposition 1.3): epsilon = rho + 2 sqrt(rho log(1/delta)).

    Parameters
    ----------
    rho : float
    delta : float
        In (0, 1).

    Returns
    -------
    float
        epsilon (looser than `epsilon_of_rho`).
    """
    return float(rho + 2.0 * np.sqrt(rho * np.log(1.0 / delta)))


def scale_for(zcdp, sensitivity: float, rho: float) -> float:
    """The smallest scale (from the closed form sensitivity / sqrt(2 rho), raised past any rounding) whose zCDP,
    by OpenDP's map `zcdp(scale, sensitivity)`, is at most rho. Both Gaussian and Gumbel noisy max use this form.

    Parameters
    ----------
    zcdp : callable
        ``zcdp(scale, sensitivity) -> rho``: `gaussian_zcdp` or `noisy_max_zcdp`.
    sensitivity : float
        The sensitivity the map is evaluated at.
    rho : float
        The zCDP the noise may spend.

    Returns
    -------
    float
        The scale.

    Raises
    ------
    TabreleaseError
        If 64 steps past the closed form are not certified (an internal error).
    """
    scale = float(sensitivity) / sqrt(2.0 * rho)
    for _ in range(64):  # OpenDP rounds its maps up: a few ulps at most
        if zcdp(scale, sensitivity) <= rho:
            return scale
        scale = float(np.nextafter(scale, np.inf)) * (1.0 + 1e-15)
    raise TabreleaseError("internal error: OpenDP does not certify the closed-form noise scale")


def margin_l2_sensitivity(neighbours: str) -> float:
    """One margin's cell vector: an added or removed record moves one cell by 1; a changed one two cells.

    Parameters
    ----------
    neighbours : {"add-remove", "replace"}

    Returns
    -------
    float
        The L2 sensitivity: sqrt(2) for replace, else 1.
    """
    return sqrt(2.0) if neighbours == "replace" else 1.0


def score_sensitivity(neighbours: str) -> float:
    """|delta| of ||m(D) - c||_1 for a fixed c: at most the L1 change of the margin's cells (1, or 2 for replace).

    Parameters
    ----------
    neighbours : {"add-remove", "replace"}

    Returns
    -------
    float
        2.0 for replace, else 1.0.
    """
    return 2.0 if neighbours == "replace" else 1.0


def selection_score(exact: np.ndarray, relaxed: np.ndarray, total: float) -> float:
    """How badly the relaxed data answers a margin: the L1 distance in counts to its true cells.

    Parameters
    ----------
    exact : numpy.ndarray
        The margin's true cell counts.
    relaxed : numpy.ndarray
        The relaxed data's answers (proportions), of the same size.
    total : float
        The current estimate of n (0 before anything is measured).

    Returns
    -------
    float
        sum |exact - total * relaxed|.
    """
    return float(np.abs(np.ravel(exact) - total * np.ravel(relaxed)).sum())


def _int_option(options, name, default, low):
    value = options.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise TabreleaseError(f"--{name.replace('_', '-')} must be an integer of at least {low}, not {value!r}")
    return int(value)


def design(m: int, options) -> tuple[int, int]:
    """(T, K) from the options: T = 1 measures all m margins (K = m); T > 1 selects K per round, T K <= m.

    Parameters
    ----------
    m : int
        The number of released margins.
    options : mapping
        The mechanism's options: "rounds" (default 1) and "queries_per_round" (default floor(m / T), at least 1).

    Returns
    -------
    tuple of int
        (rounds T, queries per round K).

    Raises
    ------
    TabreleaseError
        If an option is not an integer of at least 1, queries per round is given with one round (other than m),
        or T K exceeds m.
    """
    rounds = _int_option(options, ROUNDS, 1, 1)
    per_round = _int_option(options, QUERIES_PER_ROUND, None, 1)
    if rounds == 1:
        if per_round not in (None, m):
            raise TabreleaseError("--queries-per-round applies to the adaptive variant (rounds > 1); with one round "
                                  "every released margin is measured")
        return 1, m
    per_round = max(1, m // rounds) if per_round is None else per_round
    if rounds * per_round > m:
        raise TabreleaseError(f"rounds x queries per round ({rounds} x {per_round}) must be at most the number of "
                              f"released margins ({m})")
    return rounds, per_round


class RAP(Mechanism):
    name = "rap"
    summary = ("relaxed adaptive projection: Gaussian margins under rho-zCDP (noisy-max selection when T > 1), a "
               "relaxed synthetic dataset fitted by gradient descent, its margins")
    needs_delta = True
    options = (ROUNDS, QUERIES_PER_ROUND, SYNTHETIC_ROWS)
    reads_margins = True

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        m = len(margins)
        rounds, per_round = design(m, options)
        rows = _int_option(options, SYNTHETIC_ROWS, None, 1)
        from ..relaxed import DEFAULT_ROWS

        rows = DEFAULT_ROWS if rows is None else rows
        cal, parameters = _accounting(m, rounds, per_round, epsilon, delta, neighbours)
        parameters.update({SYNTHETIC_ROWS: rows})
        notes = ()
        if rounds > 1 and rounds * per_round < m:
            notes = (f"the adaptive variant measures {rounds * per_round} of the {m} released margins; the others are "
                     "read off the relaxed synthetic data (no measurement of their own)",)
        return MechanismPlan(self.name, tuple(shape), tuple(margins), cal, RELAXED_PROJECTION, parameters=parameters,
                             notes=notes, rounding=CONTROLLED)

    def rescale(self, plan, epsilon):
        p = plan.parameters
        cal, parameters = _accounting(len(plan.margins), p[ROUNDS], p[QUERIES_PER_ROUND], epsilon,
                                      plan.calibration.delta, plan.calibration.neighbours)
        parameters[SYNTHETIC_ROWS] = p[SYNTHETIC_ROWS]
        return replace(plan, calibration=cal, parameters=parameters)

    def measure(self, plan, counts, noise):
        p, cal = plan.parameters, plan.calibration
        exact = {g: np.asarray(margin_of(counts, g), np.int64) for g in plan.margins}
        if p[ROUNDS] == 1:
            # One Gaussian measurement of all m margins (L2 sensitivity sqrt(m) D_2), sigma from the whole rho.
            values = np.concatenate([exact[g].ravel() for g in plan.margins]).astype(float)
            noisy = np.asarray(noise.perturb(values, cal), float)
            pieces = np.split(noisy, np.cumsum([exact[g].size for g in plan.margins])[:-1])
            blocks = [Measurement(MARGIN_CELLS, g, v, "gaussian", cal.scale, plan.shape)
                      for g, v in zip(plan.margins, pieces)]
            return measured(blocks, noise)
        from ..relaxed import ROUND_ITERATIONS, fit_to_blocks, initial_logits, probabilities, relaxed_answers

        rows = int(p[SYNTHETIC_ROWS])
        theta = initial_logits(plan.shape, rows, post_processing_rng(noise))  # the notes' arbitrary D'_0
        total = 0.0  # nothing measured yet: every first-round score is n
        remaining, blocks = list(plan.margins), []
        for t in range(p[ROUNDS]):
            probs = probabilities(theta, plan.shape, rows)
            answers = {g: relaxed_answers(probs, g) for g in remaining}
            for _ in range(p[QUERIES_PER_ROUND]):
                scores = np.array([selection_score(exact[g], answers[g], total) for g in remaining])
                g = remaining.pop(noise.noisy_max(scores, p["selection_scale"]))
                noisy = noise.perturb(exact[g].ravel().astype(float), cal)
                blocks.append(Measurement(MARGIN_CELLS, g, noisy, "gaussian", cal.scale, plan.shape))
            if t < p[ROUNDS] - 1:  # the last round's fit is the estimator's (post-processing of all the answers)
                theta, total = fit_to_blocks(theta, plan.shape, rows, blocks, ROUND_ITERATIONS)
        return measured(blocks, noise)

    def check_measurements(self, plan, measurements):
        p, cal = plan.parameters, plan.calibration
        variables = [tuple(b.variables) for b in measurements.blocks]
        if (len(variables) != p[ROUNDS] * p[QUERIES_PER_ROUND] or len(set(variables)) != len(variables)
                or not set(variables) <= set(plan.margins)
                or any(b.query != MARGIN_CELLS or b.distribution != "gaussian" or b.scale != cal.scale
                       or tuple(b.domain) != tuple(plan.shape) for b in measurements.blocks)):
            raise TabreleaseError("these measurements were not drawn with this plan's noise (margins, scale or "
                                  "distribution differ)")

    def guarantee(self, plan, variables=None):
        # Several Gaussian measurements and noisy-max selections, composed under zCDP: the rho actually spent.
        cal = plan.calibration
        return PrivacyGuarantee(unit=PrivacyUnit(kind=cal.neighbours),
                                loss=PrivacyLoss(kind=ZCDP, epsilon=cal.epsilon if cal.epsilon_holds else cal.epsilon_actual,
                                                 delta=float(cal.delta), rho=float(plan.parameters["rho_spent"])),
                                how="Gaussian measurements and noisy-max selections composed under zCDP")

    def privacy_statement(self, plan):
        p, cal = plan.parameters, plan.calibration
        how = ("all {m} released margins measured at once with Gaussian noise (sigma={s:.6g}, L2 sensitivity "
               "{d:.6g})" if p[ROUNDS] == 1 else
               "{T} rounds x {K} margins selected by report noisy max (Gumbel scale {g:.6g}, score sensitivity "
               "{u:g}) and measured with Gaussian noise (sigma={s:.6g}, L2 sensitivity {d:.6g}), rho/(2TK) each")
        how = how.format(m=len(plan.margins), s=cal.scale, d=cal.sensitivity, T=p[ROUNDS], K=p[QUERIES_PER_ROUND],
                         g=p.get("selection_scale", 0.0), u=p["score_sensitivity"])
        return (f"(epsilon={cal.epsilon:g}, delta={cal.delta:g})-DP via rho-zCDP (rho={p['rho']:.6g}) converted by "
                f"Canonne, Kamath & Steinke's zCDP-to-approximate-DP conversion (as OpenDP's), for {cal.neighbours} "
                f"neighbours: {how}; n is estimated "
                "from the noisy margins and the relaxed synthetic data is post-processing")


def _accounting(m: int, rounds: int, per_round: int, epsilon: float, delta: float, neighbours: str):
    """The calibration and the budget's parameters (independent of the counts)."""
    rho = rho_for(epsilon, delta)
    d2 = margin_l2_sensitivity(neighbours)
    du = score_sensitivity(neighbours)
    parameters = {"rho": rho, ROUNDS: rounds, QUERIES_PER_ROUND: per_round, "margin_l2_sensitivity": d2,
                  "score_sensitivity": du}
    if rounds == 1:
        sensitivity = sqrt(m) * d2
        sigma = scale_for(gaussian_zcdp, sensitivity, rho)
        spent = gaussian_zcdp(sigma, sensitivity)
        parameters.update({"rho_measurements": spent, "rho_selections": 0.0})
    else:
        share = rho / (2 * rounds * per_round)
        sensitivity = d2
        sigma = scale_for(gaussian_zcdp, d2, share)
        selection = scale_for(noisy_max_zcdp, du, share)
        measuring = rounds * per_round * gaussian_zcdp(sigma, d2)
        selecting = rounds * per_round * noisy_max_zcdp(selection, du)
        spent = measuring + selecting
        parameters.update({"rho_each": share, "selection_scale": selection, "rho_measurements": measuring,
                           "rho_selections": selecting})
    if spent > rho * (1 + 1e-12):
        raise TabreleaseError("internal error: the RAP budget split spends more than its rho")
    parameters["rho_spent"] = spent
    achieved = epsilon_of_rho(spent, delta)
    cal = NoiseCalibration("gaussian", float(sigma), float(sensitivity), float(epsilon), float(delta), neighbours,
                           "exact", achieved, rho=float(spent))
    return cal, parameters
