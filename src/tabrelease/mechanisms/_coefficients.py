"""What the coefficient mechanisms share: measure the coefficients of the released margins' downward
closure, with noise calibrated to their exact sensitivity, and estimate with the consistency LP."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..bases import FOURIER, coefficient_basis, coefficients, sensitivity
from ..bounds import derived_l1_bound
from ..paper.theorems import paper_noise_scale, paper_theorem_bound
from ..estimate import LInfinityLP
from ..measurements import Measurements, coefficient_blocks
from ..noise import laplace_calibration
from ._base import Mechanism, MechanismPlan, no_paper_calibration


class CoefficientMechanism(Mechanism):
    """Laplace noise on the coefficients of a basis (`basis_kind`), then the consistency LP."""

    basis_kind: str = FOURIER
    estimator = LInfinityLP()
    bound_source = "derived here: triangle inequality over the closure with the scale actually used (see README)"

    def basis_for(self, shape, margins):
        return coefficient_basis(self.basis_kind, shape, margins)

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        if not self.paper_calibration:
            no_paper_calibration(self.name, calibration)
        basis = self.basis_for(shape, margins)
        exact = sensitivity(basis, neighbours, 1)
        paper = paper_noise_scale(basis, epsilon) if calibration == "paper" else None
        cal = laplace_calibration(exact, epsilon, neighbours, paper_scale=paper)
        plan = MechanismPlan(self.name, shape, margins, cal, self.estimator, basis)
        plan = replace(plan, estimator=self.estimator.for_plan(plan))
        return self._with_notes(plan)

    def _with_notes(self, plan: MechanismPlan) -> MechanismPlan:
        notes = tuple(n for n in plan.notes if not n.startswith("paper calibration"))
        if plan.calibration.calibration == "paper":
            notes += (paper_note(plan.calibration),)
        return replace(plan, notes=notes)

    def rescale(self, plan, epsilon):
        cal = plan.calibration
        paper = paper_noise_scale(plan.basis, epsilon) if cal.calibration == "paper" else None
        new = laplace_calibration(cal.sensitivity, epsilon, cal.neighbours, paper_scale=paper)
        return self._with_notes(replace(plan, calibration=new))

    def measure(self, plan, counts, noise):
        source = counts if plan.encoding is None else plan.encoding.encode(counts)
        exact = coefficients(plan.basis, source)
        noisy = noise.perturb(exact, plan.calibration, plan.basis.integer_scale)
        return Measurements(coefficient_blocks(plan.basis, np.asarray(noisy, float), plan.calibration.distribution,
                                               plan.calibration.scale),
                            noise.mode, getattr(noise, "seed", None) if noise.mode == "simulation" else None)

    def bound_axes(self, plan, margin):
        """The margin's axes in the measured domain (bits, for a binary encoding)."""
        return margin if plan.encoding is None else plan.encoding.axes_of(margin)

    def l1_bounds(self, plan, delta):
        # The derivation is for the L-infinity LP followed by plain rounding; other post-processing has none here.
        if plan.calibration.distribution != "laplace" or plan.estimator.name != "linf-lp" or plan.rounding != "nearest":
            return None
        return {g: derived_l1_bound(plan.basis, self.bound_axes(plan, g), plan.calibration.scale, delta)
                for g in plan.margins}


class PaperCoefficientMechanism(CoefficientMechanism):
    """The paper's mechanisms: they also carry the paper's calibration preset and its theorem's bound."""

    paper_calibration = True

    def paper_bounds(self, plan, delta):
        return {g: paper_theorem_bound(plan.basis, g, plan.calibration.epsilon, delta) for g in plan.margins}


def paper_note(cal) -> str:
    verdict = "holds" if cal.epsilon_holds else "does NOT hold"
    return (
        f"paper calibration (reproduction only): scale {cal.scale:.6g} against exact sensitivity "
        f"{cal.sensitivity:.6g}; the stated epsilon {cal.epsilon:g} {verdict} (actual epsilon {cal.epsilon_actual:.6g})"
    )
