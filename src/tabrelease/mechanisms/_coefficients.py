"""What the coefficient mechanisms share: measure the coefficients of the released margins' downward
closure, with noise calibrated to their exact sensitivity, and estimate with the consistency LP."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..bases import EFRON_STEIN, FOURIER, coefficient_basis, coefficients, integer_coefficients, sensitivity
from ..bounds import derived_l1_bound
from ..measurements import COEFFICIENTS, coefficient_blocks, measured
from ..planning import expected_margin_errors
from ..noise import laplace_calibration
from ..postprocessing import LINF_LP, NEAREST
from ._base import Mechanism, MechanismPlan, no_paper_calibration, recalibrate
from ._paper_formulas import paper_noise_scale, paper_theorem_bound


class CoefficientMechanism(Mechanism):
    """Noise on the coefficients of a basis, then (by default) the consistency LP.

    One `plan` and one `rescale` serve every coefficient mechanism; a mechanism changes only the hooks:
    `basis_kind` (None: Fourier for all-binary tables, Efron-Stein otherwise), `queries` (the basis, and
    an encoding with its parameters and notes), `calibrate` (Laplace at the L1 sensitivity by default),
    `parameters` and `finish` (what depends on the calibration, redone at every epsilon).
    """

    basis_kind: str | None = FOURIER
    estimator = LINF_LP  # resolved by the planner: the LP is built once per plan
    rounding = NEAREST
    bound_source = "derived here: triangle inequality over the closure with the scale actually used (see README)"

    def basis_for(self, shape, margins):
        kind = self.basis_kind or (FOURIER if all(k == 2 for k in shape) else EFRON_STEIN)
        return coefficient_basis(kind, shape, margins)

    def queries(self, shape, margins, neighbours):
        """(basis, encoding, parameters, notes) of what is measured."""
        return self.basis_for(shape, margins), None, {}, ()

    def calibrate(self, basis, epsilon, neighbours, delta, calibration):
        paper = paper_noise_scale(basis, epsilon) if calibration == "paper" else None
        return laplace_calibration(sensitivity(basis, neighbours, 1), epsilon, neighbours, paper_scale=paper)

    def parameters(self, options) -> dict:
        return {}

    def finish(self, plan: MechanismPlan) -> MechanismPlan:
        notes = tuple(n for n in plan.notes if not n.startswith("paper calibration"))
        if plan.calibration.calibration == "paper":
            notes += (paper_note(plan.calibration),)
        return replace(plan, notes=notes)

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        if not self.paper_calibration:
            no_paper_calibration(self.name, calibration)
        basis, encoding, parameters, notes = self.queries(shape, margins, neighbours)
        cal = self.calibrate(basis, epsilon, neighbours, delta, calibration)
        plan = MechanismPlan(self.name, shape, margins, cal, self.estimator, basis, encoding,
                             {**parameters, **self.parameters(options)}, notes, self.rounding)
        return self.finish(plan)

    def rescale(self, plan, epsilon):
        cal = plan.calibration
        if cal.calibration == "paper":
            new = laplace_calibration(cal.sensitivity, epsilon, cal.neighbours,
                                      paper_scale=paper_noise_scale(plan.basis, epsilon))
        else:
            new = recalibrate(cal, epsilon)
        return self.finish(replace(plan, calibration=new))

    def measure(self, plan, counts, noise):
        source = counts if plan.encoding is None else plan.encoding.encode(counts)
        exact = coefficients(plan.basis, source)
        noisy = noise.perturb(exact, plan.calibration, plan.basis.integer_scale,
                              integers=lambda: integer_coefficients(plan.basis, source))
        blocks = coefficient_blocks(plan.basis, np.asarray(noisy, float), plan.calibration.distribution,
                                    plan.calibration.scale)
        return measured(blocks, noise)

    def sampler_bound(self, plan):
        return integer_row_bound(plan.basis)

    def expected_errors(self, plan):
        """The expected error of the unbiased linear reconstruction of these equal-scale coefficients (for
        comparison with a planned release; the LP's error is not this)."""
        if plan.encoding is not None:
            return None
        cal = plan.calibration
        variance = 2.0 * cal.scale**2 if cal.distribution == "laplace" else cal.scale**2
        blocks = [(COEFFICIENTS, s, plan.basis.kind, variance) for s in plan.basis.closure]
        return expected_margin_errors(plan.shape, plan.margins, blocks)

    def bound_axes(self, plan, margin):
        """The margin's axes in the measured domain (bits, for a binary encoding)."""
        return margin if plan.encoding is None else plan.encoding.axes_of(margin)

    def l1_bounds(self, plan, delta):
        # The derivation is for the L-infinity LP followed by plain rounding; other post-processing has none here.
        if plan.calibration.distribution != "laplace" or plan.estimator_name != LINF_LP or plan.rounding != "nearest":
            return None
        return {g: derived_l1_bound(plan.basis, self.bound_axes(plan, g), plan.calibration.scale, delta)
                for g in plan.margins}


class PaperCoefficientMechanism(CoefficientMechanism):
    """The paper's mechanisms: they also carry the paper's calibration preset and its theorem's bound."""

    paper_calibration = True

    def paper_bounds(self, plan, delta):
        return {g: paper_theorem_bound(plan.basis, g, plan.calibration.epsilon, delta) for g in plan.margins}


def integer_row_bound(basis) -> float:
    """The largest L1 norm of a row of the integer-scaled analysis: |coefficient * integer_scale| <= it * n."""
    return float(max(np.abs(np.rint(a * basis.integer_scale)).sum(axis=1).max() for a in basis.analysis))


def paper_note(cal) -> str:
    verdict = "holds" if cal.epsilon_holds else "does NOT hold"
    return (
        f"paper calibration (reproduction only): scale {cal.scale:.6g} against exact sensitivity "
        f"{cal.sensitivity:.6g}; the stated epsilon {cal.epsilon:g} {verdict} (actual epsilon {cal.epsilon_actual:.6g})"
    )
