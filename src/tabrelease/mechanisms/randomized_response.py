"""k-ary randomized response (local differential privacy; Warner 1965, the lecture notes' randomized-response section).

Every record's cell (its full combination of levels; k = number of cells) is reported truthfully with probability
p = e^eps / (e^eps + k - 1) and otherwise as one of the other k - 1 cells uniformly (q = 1 / (e^eps + k - 1) each).
For any report y and records x, x': P(y|x) / P(y|x') <= p / q = e^eps, so each report is eps-locally DP whatever
the other records are; the count n of reports is public.

Estimation (post-processing, `estimate.RandomizedResponseLeastSquares`, which also holds the unbiasing below):
with y the report counts and x the true counts,
E[y_c] = p x_c + q (n - x_c), so x_hat = (y - n q) / (p - q) is unbiased, and it sums to n exactly. Its variance is

    Var(x_hat_c) = (x_c p (1 - p) + (n - x_c) q (1 - q)) / (p - q)^2,

whose mean over the k cells, n (p (1 - p) + (k - 1) q (1 - q)) / (k (p - q)^2), is the weight given to the least
squares (one block, equal weights: the weight changes no estimate, only what is reported). Then the same
least-squares fit as the planned release (non-negative table, total pinned to the public n) and controlled
rounding. The error grows with k (q ~ 1/k: for e^eps << k, p - q ~ e^eps / k and the sd of a cell ~ sqrt(n k)/e^eps):
this mechanism is for small tables.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import TabreleaseError
from ..measurements import RANDOMIZED_REPORTS, Measurement, measured
from ..noise import NoiseCalibration, check_epsilon, rr_probabilities
from ..privacy import ADD_REMOVE, LOCAL, PURE, PrivacyGuarantee, PrivacyLoss, PrivacyUnit
from ..postprocessing import CONTROLLED, RANDOMIZED_RESPONSE_LEAST_SQUARES
from ._base import calibration_loss, Mechanism, MechanismPlan, no_paper_calibration

RANDOMIZED_RESPONSE = "randomized-response"
MAX_CELLS = 2**12  # the least-squares fit is over the cells (as the planned release's, up to the same size)


def channel_matrix(k: int, epsilon: float) -> np.ndarray:
    """P(report y | cell x), rows x, columns y (small k only: for tests and documentation).

    Parameters
    ----------
    k : int
        The number of cells.
    epsilon : float
        The local-DP epsilon.

    Returns
    -------
    numpy.ndarray
        A (k, k) float matrix: p on the diagonal, q elsewhere (`noise.rr_probabilities`).
    """
    p, q = rr_probabilities(k, epsilon)
    return np.where(np.eye(k, dtype=bool), p, q)


def _calibration(k: int, epsilon: float, neighbours: str) -> NoiseCalibration:
    epsilon = check_epsilon(epsilon)
    p, q = rr_probabilities(k, epsilon)
    # scale: the keep probability p (there is no additive noise); sensitivity: one record's report. Local DP holds
    # for any change of one record, so for either central relation asked for (the statement says what it means).
    return NoiseCalibration("randomized-response", p, 1.0, epsilon, None, neighbours, "exact",
                            float(math.log(p / q)))


class RandomizedResponse(Mechanism):
    name = RANDOMIZED_RESPONSE
    summary = "k-ary randomized response on every record's cell (local DP), unbiased, least squares, controlled"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        k = int(np.prod(shape))
        if k > MAX_CELLS:
            raise TabreleaseError(f"randomized response over every cell is for small tables (its error grows with the "
                                  f"number of cells): this one has {k} cells, more than {MAX_CELLS}")
        note = (f"local DP: each record's cell is randomised (k={k}); the error of every cell grows with k "
                "(about sqrt(n k) / e^epsilon for k >> e^epsilon): for small tables")
        notes = (note,)
        if neighbours == ADD_REMOVE:
            # The count of reports is n, published exactly: what was asked for does not hold, and the release must
            # say so where a reader looks first, not only in its privacy sentence (a new user's trial).
            notes += (f"no add-remove guarantee holds: the number of reports, n, is published exactly; the guarantee "
                      f"is epsilon={epsilon:g}-local DP (each record randomised), which implies epsilon-DP for "
                      "replace neighbours; a ledger budget for add-remove refuses this release",)
        return MechanismPlan(self.name, tuple(shape), tuple(margins), _calibration(k, epsilon, neighbours),
                             RANDOMIZED_RESPONSE_LEAST_SQUARES, parameters={"cells": k}, notes=notes,
                             rounding=CONTROLLED)

    def rescale(self, plan, epsilon):
        return replace(plan, calibration=_calibration(plan.parameters["cells"], epsilon, plan.calibration.neighbours))

    def measure(self, plan, counts, noise):
        counts = np.asarray(counts)
        if counts.size != plan.parameters["cells"]:
            raise TabreleaseError("the table does not have the plan's shape")
        reports = noise.randomize_cells(counts, plan.calibration.scale)
        block = Measurement(RANDOMIZED_REPORTS, tuple(range(len(plan.shape))), np.ravel(reports),
                            plan.calibration.distribution, plan.calibration.scale, plan.shape)
        return measured([block], noise)

    def check_measurements(self, plan, measurements):
        ok = (len(measurements.blocks) == 1 and measurements.blocks[0].query == RANDOMIZED_REPORTS
              and measurements.blocks[0].distribution == plan.calibration.distribution
              and measurements.blocks[0].scale == plan.calibration.scale
              and measurements.blocks[0].size == plan.parameters["cells"])
        if not ok:
            raise TabreleaseError("these measurements were not drawn with this plan's randomized response")

    def guarantee(self, plan, variables=None):
        # Local: each report is epsilon-LDP whatever the other records; n (the number of reports) is public.
        return PrivacyGuarantee(unit=PrivacyUnit(kind=LOCAL),
                                loss=calibration_loss(plan.calibration),
                                how=f"k-ary randomized response on every record (k={plan.parameters['cells']})")

    def privacy_statement(self, plan):
        return (f"epsilon={plan.calibration.epsilon:g}-local differential privacy: each record's cell is randomised "
                f"by k-ary randomized response (k={plan.parameters['cells']}); the count n of reports is public "
                "(local neighbours: any change of one person's record; this implies central epsilon-DP for replace "
                "neighbours, while under add-remove n is revealed)")
