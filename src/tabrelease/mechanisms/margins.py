"""Dwork, McSherry & Talwar section 3: Laplace noise on every cell of each released margin independently
(sensitivity: the number of margins), clip at 0 and round each; the margins need not agree."""

from __future__ import annotations

import numpy as np

from ..measurements import margin_blocks, measured
from ..noise import laplace_calibration
from ..postprocessing import AS_MEASURED
from ..tables import margin_counts
from ._base import Mechanism, MechanismPlan, no_paper_calibration, replace_factor


class Margins(Mechanism):
    name = "margins"
    summary = "every cell of each released margin independently (sensitivity |A|), clip at 0, round"

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        cal = laplace_calibration(float(len(margins) * replace_factor(neighbours)), epsilon, neighbours)
        return MechanismPlan(self.name, shape, margins, cal, AS_MEASURED)

    def measure(self, plan, counts, noise):
        exact = [margin_counts(np.asarray(counts, np.int64), g) for g in plan.margins]
        integers = np.concatenate([m.ravel() for m in exact])
        noisy = noise.perturb(integers.astype(float), plan.calibration, 1.0, integers=integers)
        pieces = np.split(np.asarray(noisy, float), np.cumsum([m.size for m in exact])[:-1])
        blocks = margin_blocks(plan.margins, pieces, plan.calibration.distribution, plan.calibration.scale, plan.shape)
        return measured(blocks, noise)
