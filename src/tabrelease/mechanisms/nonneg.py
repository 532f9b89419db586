"""Dwork, McSherry & Talwar section 4.5.3, Corollary 1: the coefficients with Laplace noise, the constant term
lifted by t * d * scale so that the margins are non-negative with probability >= 1 - exp(-t), and the margins
synthesised straight from the coefficients (no LP, no rounding: the released margins are not counts)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..bases import margin_from_coefficients
from ..errors import TabreleaseError
from ..postprocessing import NO_ROUNDING, SHIFTED_SYNTHESIS
from ._base import MechanismPlan
from ._coefficients import CoefficientMechanism

DEFAULT_NONNEG_T = 5.0


class NonNeg(CoefficientMechanism):
    name = "nonneg"
    options = ("nonneg_t",)
    summary = "coefficients, then t·d·scale added to the constant term; margins from the coefficients (no LP)"
    basis_kind = None  # Fourier for all-binary tables, Efron-Stein otherwise
    estimator = SHIFTED_SYNTHESIS
    rounding = NO_ROUNDING

    def expected_errors(self, plan):
        return None  # the lifted constant term biases every cell: not the unbiased reconstruction's error

    def parameters(self, options):
        t = DEFAULT_NONNEG_T if options.get("nonneg_t") is None else float(options["nonneg_t"])
        if not math.isfinite(t) or t < 0:
            raise TabreleaseError(f"--nonneg-t must be a finite number of at least 0, not {options['nonneg_t']!r}")
        return {"t": t}

    def finish(self, plan):
        return with_shift(plan)  # the lift moves with the scale

    def l1_bounds(self, plan, delta):
        return None  # the lift is a bias of its own: the LP bound does not apply


def nonneg_shift(plan: MechanismPlan) -> dict[str, float]:
    """What the nonneg mechanism adds to every release: t * d * scale on the constant coefficient.

    It depends on t, the number of coefficients and the noise scale only (never on the counts),
    so it may be published. Per cell of the full table the lift is the shift times the constant
    basis function (2^{-k/2} for Fourier, 1 for Efron-Stein), found here by synthesising the total.

    Parameters
    ----------
    plan : MechanismPlan
        A nonneg plan (its basis, calibration scale and parameter "t").

    Returns
    -------
    dict
        ``constant_term_shift`` (t * d * scale), ``shift_total`` (added to n) and ``shift_per_cell``.
    """
    basis = plan.basis
    shift = float(plan.parameters["t"]) * basis.size * plan.calibration.scale
    unit = np.zeros(basis.size)
    unit[basis.empty_set_index] = shift
    total = float(margin_from_coefficients(basis, unit, ()))
    cells = float(np.prod(plan.shape))
    return {"constant_term_shift": shift, "shift_total": total, "shift_per_cell": total / cells}


def with_shift(plan: MechanismPlan) -> MechanismPlan:
    """Record the shift (it moves with the scale) in the plan's parameters and notes.

    Parameters
    ----------
    plan : MechanismPlan
        A nonneg plan with its calibration.

    Returns
    -------
    MechanismPlan
        A copy whose parameters hold t and the `nonneg_shift` values, with the note on the lift.

    Raises
    ------
    TabreleaseError
        If the lift is not finite or exceeds 1e15.
    """
    shift = nonneg_shift(plan)
    if not all(math.isfinite(v) and abs(v) < 1e15 for v in shift.values()):
        raise TabreleaseError(f"--nonneg-t {plan.parameters['t']:g} lifts the counts by more than 1e15: choose a "
                              "smaller t (the default is 5)")
    note = (
        f"nonneg: every released count is lifted on purpose, by {shift['shift_per_cell']:.6g} per cell of the full "
        f"table ({shift['shift_total']:.6g} in all; t * d * scale = {shift['constant_term_shift']:.6g} on the constant "
        "coefficient), so that the margins are non-negative without an LP; the released margins are not counts"
    )
    notes = tuple(n for n in plan.notes if not n.startswith("nonneg:")) + (note,)
    return replace(plan, parameters={"t": plan.parameters["t"], **shift}, notes=notes)
