"""Dwork, McSherry & Talwar section 5: the same coefficients with Gaussian noise, (epsilon, delta)-DP, at the
smallest scale that is (epsilon, delta)-DP for the exact L2 sensitivity (the analytic Gaussian mechanism of Balle &
Wang 2018, `accounting.analytic_gaussian_sigma`)."""

from __future__ import annotations

from ..bases import sensitivity
from ..noise import gaussian_calibration
from ._coefficients import CoefficientMechanism


class Gaussian(CoefficientMechanism):
    name = "gaussian"
    summary = "Fourier (binary) or Efron-Stein coefficients with Gaussian noise, (epsilon, delta)-DP; LP, round"
    needs_delta = True
    basis_kind = None  # Fourier for all-binary tables, Efron-Stein otherwise

    def calibrate(self, basis, epsilon, neighbours, delta, calibration):
        return gaussian_calibration(sensitivity(basis, neighbours, 2), epsilon, delta, neighbours)
