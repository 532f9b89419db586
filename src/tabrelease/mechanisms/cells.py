"""Dwork, McSherry & Talwar section 3: Laplace noise on every cell of the full table (a histogram: one record
moves one cell by 1, two when replaced), clip at 0 and round; margins from the rounded table."""

from __future__ import annotations

import numpy as np

from ..measurements import margin_blocks, measured
from ..noise import laplace_calibration
from ..postprocessing import AS_MEASURED
from ._base import Mechanism, MechanismPlan, no_paper_calibration, replace_factor


class Cells(Mechanism):
    name = "cells"
    summary = "every cell of the full table (sensitivity 1), clip at 0, round"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        cal = laplace_calibration(1.0 * replace_factor(neighbours), epsilon, neighbours)
        return MechanismPlan(self.name, shape, margins, cal, AS_MEASURED)

    def measure(self, plan, counts, noise):
        integers = np.asarray(counts, np.int64).ravel()
        noisy = noise.perturb(integers.astype(float), plan.calibration, 1.0, integers=integers)
        full = tuple(range(len(plan.shape)))
        blocks = margin_blocks([full], [noisy], plan.calibration.distribution, plan.calibration.scale, plan.shape)
        return measured(blocks, noise)
