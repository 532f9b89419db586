"""HDMM's marginals strategy (McKenna, Miklau, Hay & Machanavajjhala, VLDB 2018, section 6, OPT_M): Laplace noise
on a weighted stack of marginals, every subset of the variables a candidate (the total and the full table
included), the weights chosen to minimise the released margins' expected total squared error; then least squares
over non-negative tables with the total pinned and controlled rounding, as the planned release is fitted.

A comparison preset: the frontier runs it beside `planned`, whose candidates include this family. The weights are
found by HDMM's own parametrisation (theta_a >= 0 on every marginal, L1 sensitivity sum_a theta_a c_a;
`planning.plan_marginals`), whose design the planner compares with its own wider search, keeping the better; a
test checks both against an OPT_M optimiser over dense matrices.

With strategy A = [theta_a M_a] and Laplace noise of scale 1 / epsilon per row (sensitivity folded into the
weights), the Gram matrix A'A = sum_a theta_a^2 M_a'M_a is diagonal in the residual (Efron-Stein) basis with
eigenvalue sum_(a containing T) theta_a^2 K_out(a) on residual T, so the error of the released margins is

    2 (sum_a theta_a c_a / epsilon)^2  sum_T W_T / sum_(a containing T) theta_a^2 K_out(a)

(W_T as in `tabrelease.planning.residual_weights`; HDMM computes the same inverse in its algebra of Kronecker
products of I and J).
"""

from __future__ import annotations

from math import prod

from ..errors import TabreleaseError
from ..planning import MeasurementDesign, plan_marginals
from ..postprocessing import CONTROLLED, LEAST_SQUARES
from ._base import MechanismPlan, no_paper_calibration
from .planned import Planned, _calibrate

# Every subset is a candidate: 2^d of them. Past this many variables, or this many cells (the fit is over them),
# the strategy is refused before anything is read.
MAX_VARIABLES = 14
MAX_CELLS = 2**16


class HDMMMarginals(Planned):
    name = "hdmm-marginals"
    summary = ("HDMM's marginals strategy (OPT_M): Laplace noise on weighted marginals of every subset, least squares "
               "with the total pinned, controlled rounding (a comparison preset)")
    accepts_delta = False
    options = ()
    reads_margins = False  # may measure the full table

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        shape = tuple(int(k) for k in shape)
        if len(shape) > MAX_VARIABLES or prod(shape) > MAX_CELLS:
            raise TabreleaseError(f"the hdmm-marginals strategy weighs all 2^{len(shape)} marginals and fits the "
                                  f"{prod(shape)} cells: at most {MAX_VARIABLES} variables and {MAX_CELLS} cells")
        design = opt_marginals(shape, tuple(tuple(g) for g in margins), neighbours)
        return MechanismPlan(self.name, shape, tuple(margins), _calibrate(design, epsilon, None, neighbours),
                             LEAST_SQUARES, rounding=CONTROLLED, design=design)


def opt_marginals(shape: tuple[int, ...], margins: tuple, neighbours: str) -> MeasurementDesign:
    """HDMM's OPT_M design for these margins (`planning.plan_marginals`).

    Parameters
    ----------
    shape : tuple of int
    margins : tuple of Margin
    neighbours : {"add-remove", "replace"}

    Returns
    -------
    MeasurementDesign
    """
    return plan_marginals(shape, margins, neighbours)
