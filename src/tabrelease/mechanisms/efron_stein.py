"""Yang, Fienberg & Rinaldo (the paper's Table 2): Laplace noise on the Efron-Stein components f^S(x_S) of
every S in the downward closure of the released margins; any table."""

from __future__ import annotations

from ..bases import EFRON_STEIN
from ._coefficients import PaperCoefficientMechanism


class EfronStein(PaperCoefficientMechanism):
    name = EFRON_STEIN
    summary = "Efron-Stein components of the closure (any table), consistency LP, round"
    basis_kind = EFRON_STEIN
