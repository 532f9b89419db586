"""Asghar, Ding, Rakotoarivelo, Mrabet & Kaafar (2019), DP synthetic data through the Gaussian copula.

Dummy coding as the paper's section 2.2: one binary attribute per level of every variable (d = sum k_i). Measured,
as the paper's Algorithms 1 and 2 (Laplace noise on counts, never on correlation coefficients):

* per variable i, the counts (n0, n1) of each of its k_i dummies (Algorithm 1);
* per pair of variables i < j, the 2x2 table (n00, n01, n10, n11) of each of the k_i k_j pairs of their dummies
  (Algorithm 2; pairs of dummies of one variable are structural zeros, not measured, as the paper's m' counts).

Exact L1 sensitivity of each block (the tests check it by brute force over every record):

| block          | add-remove | replace            | the paper's (Lemmas 1, 2)  |
|----------------|------------|--------------------|----------------------------|
| one-way, i     | k_i        | 4                  | 2                          |
| pair, (i, j)   | k_i k_j    | 4 (k_i + k_j - 2)  | 2                          |

Budget: the paper's split, equal shares epsilon_0 over its m' = m + C(m, 2) blocks, block B with Laplace scale
Delta_B / epsilon_0. Without delta the blocks compose sequentially (pure epsilon): epsilon_0 = epsilon / m'; the
calibration records this as one multiplier m' / epsilon (sensitivity m', the whitened L1 sensitivity of everything
measured: every added or changed record reaches every block's maximum at once) times each block's Delta_B. With
delta, as the paper (section 3.4, Theorem 3: advanced composition of k = m' epsilon_0-DP blocks), epsilon_0 solves
sqrt(2 k ln(1/delta)) epsilon_0 + k epsilon_0 (e^epsilon_0 - 1) = epsilon, when that is larger than epsilon / m'
(it is not for few variables: 6 variables at delta = 2^-30 give 0.033 against 1/21 = 0.048); otherwise the pure
split is kept and the release is pure epsilon-DP.

n is not taken as public (the paper assumes it is): the copula's n is estimated from the noisy counts.
Post-processing (copula.py): the copula, n synthetic records, their margins. With noise off the one-way margins
and the positive two-way conjunctions are reproduced up to sampling error (and, for variables of three or more
levels, the decoding's approximation); higher-order margins are not reproduced (the model has pairwise dependence
only).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from math import comb

import numpy as np

from .._limits import MAX_SYNTHETIC_RECORDS  # the copula draws one record per person, at most this many
from ..errors import TabreleaseError
from ..measurements import DUMMY_TABLES, Measurement, measured
from ..noise import NoiseCalibration, laplace_calibration
from ..postprocessing import COPULA_SYNTHESIS
from ..tables import margin_of, total_of
from ._base import Mechanism, MechanismPlan, no_paper_calibration


def block_variables(k: int, pairs: bool = True) -> tuple[tuple[int, ...], ...]:
    """The measured blocks: every variable, then (with pairs) every pair of variables.

    Parameters
    ----------
    k : int
        The number of variables.
    pairs : bool, default True
        Whether the pairs are measured (copula-id: not).

    Returns
    -------
    tuple of tuple of int
        (0,), ..., (k-1,), then (i, j) for i < j in lexicographic order.
    """
    singles = tuple((i,) for i in range(k))
    return singles + (tuple(combinations(range(k), 2)) if pairs else ())


def block_sensitivity(shape, variables, neighbours: str) -> int:
    """Exact L1 sensitivity of one dummy-coded block (see the module docstring's table).

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    variables : tuple of int
        The block: one variable, or a pair.
    neighbours : {"add-remove", "replace"}
        The neighbour relation.

    Returns
    -------
    int
        One-way: k_i (add-remove) or 4 (replace); pair: k_i k_j or 4 (k_i + k_j - 2).
    """
    k = [int(shape[j]) for j in variables]
    if len(k) == 1:
        # Add-remove: n1 of the record's level and n0 of each other level move by 1. Replace: n0 and n1 of the
        # old and of the new level.
        return k[0] if neighbours == "add-remove" else 4
    # Add-remove: one of the four cells of every pair of dummies. Replace (both levels changed, the maximum): the
    # pairs of dummies that involve an old or new level, k_i k_j - (k_i - 2)(k_j - 2) of them, two cells each.
    return k[0] * k[1] if neighbours == "add-remove" else 4 * (k[0] + k[1] - 2)


def dummy_tables(shape, data, variables) -> np.ndarray:
    """The exact dummy-coded table of a block, flattened as measurements.DUMMY_TABLES says (from margins only).

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable (unused: the margins give the levels).
    data : numpy.ndarray or table
        The cell counts, or a table that gives margins (one held as records).
    variables : tuple of int
        The block: one variable (i,), or a pair (i, j).

    Returns
    -------
    numpy.ndarray
        Integer counts: 2 k_i values over (level, bit) for one variable; 4 k_i k_j values over
        (l_i, l_j, bit_i, bit_j) for a pair.
    """
    n = total_of(data)
    if len(variables) == 1:
        ones = np.asarray(margin_of(data, variables), np.int64)
        return np.stack([n - ones, ones], axis=1).ravel()
    i, j = variables
    both = np.asarray(margin_of(data, (i, j)), np.int64)
    row, col = both.sum(axis=1)[:, None], both.sum(axis=0)[None, :]
    cells = np.stack([np.stack([n - row - col + both, col - both], -1), np.stack([row - both, both], -1)], -2)
    return cells.ravel()


class GaussianCopula(Mechanism):
    name = "gaussian-copula"
    summary = ("DP Gaussian copula (Asghar et al.): Laplace on dummy-coded one-way and pairwise counts, copula, "
               "n synthetic records, their margins")
    pairs = True  # measure the pairwise blocks (copula-id does not)
    accepts_delta = True  # with delta: the paper's advanced composition of the blocks
    reads_margins = True  # one- and two-way margins are all it reads

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        blocks = block_variables(len(shape), self.pairs)
        cal = _calibration(len(blocks), epsilon, delta, neighbours)
        # Independent of epsilon (rescale keeps them): what is measured and each block's exact sensitivity.
        parameters = {"dummies": int(sum(shape)), "blocks": len(blocks),
                      **({} if delta is None else {"delta_asked": float(delta)}),
                      "block_sensitivity": [block_sensitivity(shape, v, neighbours) for v in blocks]}
        note = ("the noise scale shown is a multiplier, 1/epsilon_0 (epsilon_0: each block's share, in the privacy "
                "statement): each dummy-coded block has Laplace scale = its exact sensitivity "
                "(parameters.block_sensitivity: each variable, then each pair of variables in order) x the multiplier")
        return MechanismPlan(self.name, tuple(shape), tuple(margins), cal, COPULA_SYNTHESIS, parameters=parameters,
                             notes=(note,))

    def rescale(self, plan, epsilon):
        cal = plan.calibration
        delta = cal.delta if cal.delta is not None else plan.parameters.get("delta_asked")
        return replace(plan, calibration=_calibration(int(plan.parameters["blocks"]), epsilon, delta, cal.neighbours))

    def block_scales(self, plan: MechanismPlan) -> dict:
        """{variables: Laplace scale} for every block the plan measures.

        Parameters
        ----------
        plan : MechanismPlan
            A plan this mechanism made.

        Returns
        -------
        dict
            Maps each block's variables to its exact sensitivity times the calibration's multiplier.
        """
        neighbours = plan.calibration.neighbours
        return {v: block_sensitivity(plan.shape, v, neighbours) * plan.calibration.scale
                for v in block_variables(len(plan.shape), self.pairs)}

    def margins_read(self, plan):
        return list(block_variables(len(plan.shape), self.pairs))

    def measure(self, plan, counts, noise):
        blocks = []
        for variables, scale in self.block_scales(plan).items():
            exact = dummy_tables(plan.shape, counts, variables)
            noisy = noise.perturb(exact.astype(float), _scaled(plan.calibration, scale), 1.0, integers=exact)
            blocks.append(Measurement(DUMMY_TABLES, variables, np.asarray(noisy, float), "laplace", scale, plan.shape))
        return measured(blocks, noise)

    def check_measurements(self, plan, measurements):
        expected = self.block_scales(plan)
        got = {tuple(b.variables): b for b in measurements.blocks}
        if (len(got) != len(measurements.blocks) or set(got) != set(expected)
                or any(b.query != DUMMY_TABLES or b.distribution != "laplace" or b.scale != expected[v]
                       or tuple(b.domain) != tuple(plan.shape) for v, b in got.items())):
            raise TabreleaseError("these measurements were not drawn with this plan's noise (blocks, scale or "
                                  "distribution differ)")

    def check_table_size(self, plan, n):
        if int(n) > MAX_SYNTHETIC_RECORDS:
            raise TabreleaseError(f"the {self.name} mechanism synthesises one record per person, and this table has "
                                  f"more than {MAX_SYNTHETIC_RECORDS:.0e} (this tool's limit for it); use the planned "
                                  "mechanism; nothing was charged")

    def privacy_statement(self, plan):
        cal, m = plan.calibration, len(plan.shape)
        blocks = len(block_variables(m, self.pairs))
        what = (f"the dummy-coded counts of the {m} variables and of the {comb(m, 2)} pairs of variables"
                if self.pairs else f"the dummy-coded counts of the {m} variables")
        tail = ("n is not treated as public (estimated from the noisy counts); the synthetic records are "
                "post-processing")
        if cal.delta is not None:
            return (f"(epsilon={cal.epsilon:g}, delta={cal.delta:g})-differential privacy for {cal.neighbours} "
                    f"neighbours: Laplace noise on {what}, {blocks} blocks of epsilon_0={1 / cal.scale:.6g} each at "
                    f"their exact sensitivity, composed by advanced composition (Dwork-Rothblum-Vadhan, the paper's "
                    f"Theorem 3); {tail}")
        asked = plan.parameters.get("delta_asked")
        why = ("" if asked is None else f" (advanced composition at delta={asked:g} would give each block less, so "
                                        "no delta is spent)")
        return (f"epsilon={cal.epsilon:g} differential privacy (pure) for {cal.neighbours} neighbours: Laplace noise "
                f"on {what}, {blocks} blocks of epsilon/{blocks} each at their exact sensitivity (sequential "
                f"composition{why}); {tail}")


def _scaled(calibration, scale):
    return replace(calibration, scale=scale)


def advanced_composition_epsilon(epsilon_0: float, k: int, delta: float) -> float:
    """The paper's Theorem 3 (Dwork, Rothblum & Vadhan 2010): k adaptively composed epsilon_0-DP mechanisms are
    (epsilon, delta)-DP for epsilon = sqrt(2 k ln(1/delta)) epsilon_0 + k epsilon_0 (e^epsilon_0 - 1).

    Parameters
    ----------
    epsilon_0 : float
        Each mechanism's epsilon.
    k : int
        The number of mechanisms composed.
    delta : float
        The delta of the composition, in (0, 1).

    Returns
    -------
    float
        The composed epsilon.
    """
    return float(np.sqrt(2.0 * k * np.log(1.0 / delta)) * epsilon_0 + k * epsilon_0 * np.expm1(epsilon_0))


def per_block_epsilon(epsilon: float, k: int, delta: float) -> float:
    """The largest epsilon_0 whose advanced composition over k blocks is at most epsilon (bisection, then never
    above: the composed epsilon is checked).

    Parameters
    ----------
    epsilon : float
        The total epsilon.
    k : int
        The number of blocks.
    delta : float
        The delta of the composition, in (0, 1).

    Returns
    -------
    float
        epsilon_0, from 200 bisection steps on [0, epsilon], keeping the side whose composition is at most epsilon.
    """
    low, high = 0.0, float(epsilon)
    for _ in range(200):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if advanced_composition_epsilon(middle, k, delta) <= epsilon else (low, middle)
    return low


def _calibration(blocks: int, epsilon: float, delta, neighbours: str) -> NoiseCalibration:
    """The multiplier 1 / epsilon_0 of the blocks' sensitivities: pure sequential composition (epsilon_0 =
    epsilon / blocks), or the paper's advanced composition under delta where that gives a larger epsilon_0."""
    pure = laplace_calibration(float(blocks), epsilon, neighbours)
    if delta is None:
        return pure
    epsilon_0 = per_block_epsilon(pure.epsilon, blocks, delta)
    if epsilon_0 <= pure.epsilon / blocks:
        return pure
    return replace(pure, scale=1.0 / epsilon_0, delta=float(delta),
                   epsilon_actual=advanced_composition_epsilon(epsilon_0, blocks, delta))
