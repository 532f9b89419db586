"""The values post-processing passes along: the names of the estimators and roundings a plan carries, and the
`Estimate` an estimator hands to rounding.

A mechanism names its default estimator and rounding (these strings) without importing the estimation layer; the
planner (`tabrelease.planner`) resolves the estimator's name into an `Estimator` (`estimate.get_estimator`), and
`rounding.py` implements the roundings. Kept at the bottom of the layers so that both sides can name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .consistency import LPSolution
    from .models import Margin

# Estimators (estimate.py implements them; see its table).
LINF_LP = "linf-lp"
LEAST_SQUARES = "least-squares"
LOCAL_LEAST_SQUARES = "local-least-squares"
AS_MEASURED = "as-measured"
SHIFTED_SYNTHESIS = "shifted-synthesis"
COPULA_SYNTHESIS = "copula-synthesis"
RELAXED_PROJECTION = "relaxed-projection"
RANDOMIZED_RESPONSE_LEAST_SQUARES = "randomized-response-least-squares"

# Roundings (rounding.py implements them).
NEAREST = "nearest"
CONTROLLED = "controlled"
NO_ROUNDING = "none"
ROUNDINGS = (NEAREST, CONTROLLED, NO_ROUNDING)


@dataclass(frozen=True, eq=False)
class Estimate:
    """A real-valued estimate: a non-negative table on the table's own shape, or margins alone."""

    table: np.ndarray | None
    margins: tuple[np.ndarray, ...] | None
    seconds: float
    lp: LPSolution | None = None
    notes: tuple[str, ...] = ()
    # When set, `margins` are the clique margins of a junction tree (not the released margins themselves).
    cliques: tuple[Margin, ...] | None = None
    # The estimate exactly, where a float cannot hold it (counts above 2^52): an integer table `base` plus `change`
    # (both flat, over the table's cells); `table` is then their sum as a float.
    base: np.ndarray | None = None
    change: np.ndarray | None = None
    # The integer total rounding must keep (an exactly measured n, or the fit's total rounded exactly), and the
    # margins that were measured exactly ((axes, integer cells) on the table's own shape): rounding holds both.
    total: int | None = None
    pinned: tuple[tuple[Margin, np.ndarray], ...] = ()
    # Whether `total` was measured exactly (public, or n under replace neighbours): "nearest" rounding keeps it then.
    total_exact: bool = False
