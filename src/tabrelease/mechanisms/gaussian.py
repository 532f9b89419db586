"""Dwork, McSherry & Talwar section 5: the same coefficients with Gaussian noise, (epsilon, delta)-DP, at the
smallest scale OpenDP's accountant certifies for the exact L2 sensitivity."""

from __future__ import annotations

from dataclasses import replace

from ..bases import EFRON_STEIN, FOURIER, coefficient_basis, sensitivity
from ..noise import gaussian_calibration
from ._base import MechanismPlan, no_paper_calibration
from ._coefficients import CoefficientMechanism


class Gaussian(CoefficientMechanism):
    name = "gaussian"
    summary = "Fourier (binary) or Efron-Stein coefficients with Gaussian noise, (epsilon, delta)-DP; LP, round"
    needs_delta = True

    def basis_for(self, shape, margins):
        return coefficient_basis(FOURIER if all(k == 2 for k in shape) else EFRON_STEIN, shape, margins)

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        basis = self.basis_for(shape, margins)
        cal = gaussian_calibration(sensitivity(basis, neighbours, 2), epsilon, delta, neighbours)
        plan = MechanismPlan(self.name, shape, margins, cal, self.estimator, basis)
        return replace(plan, estimator=self.estimator.for_plan(plan))

    def rescale(self, plan, epsilon):
        cal = plan.calibration
        return replace(plan, calibration=gaussian_calibration(cal.sensitivity, epsilon, cal.delta, cal.neighbours))
