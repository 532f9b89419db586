"""Fitting hierarchical log-linear models: IPF, the extended MLE, G², X² and degrees of freedom.

Three of the four reference tables have zero margins under their models, where the ordinary
MLE does not exist. Following Fienberg & Rinaldo (2012), we find the facial set F (the cells
that some non-negative table with the observed margins puts mass on) by one linear program,
fit by IPF on F (cells off F are fitted as exactly 0), finished by Newton's method on F where
IPF is slow (it converges linearly, at rates near 1 on some released tables), and count degrees of freedom as
|F| - rank of the design restricted to F. Where F is every cell this is the ordinary MLE and
its nominal degrees of freedom.

Modules: `fit` (the fit and its summaries), `ipf` (IPF on a stack of tables), `newton` (the Newton finish of
the extended MLE), `facial` (the facial set), `design` (the margin design, ranks, decomposability), `distances`, and `margins_fit` (the same
fit from generator margins alone, held on a junction tree, for tables too large to hold).
"""

from .design import design_rank, is_decomposable, margin_design
from .distances import g_squared, l1_distance, pearson_x2, total_variation
from .facial import facial_set
from .fit import LogLinearFit, fit_loglinear, fit_summary, uniform_probabilities
from .margins_fit import (
    MarginsFit,
    fit_loglinear_from_margins,
    margins_fit_kl_divergence,
    margins_fit_l1_distance,
    margins_of_microdata,
    margins_of_table,
    sum_n_log_n_of_microdata,
)
from .ipf import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE, ipf, ipf_to_margins, one_blas_thread
from .newton import IPF_CYCLES_BEFORE_NEWTON, NEWTON_MAX_ITERATIONS, fit_extended_mle

__all__ = [
    "DEFAULT_MAX_ITERATIONS", "DEFAULT_TOLERANCE", "IPF_CYCLES_BEFORE_NEWTON", "LogLinearFit", "MarginsFit",
    "NEWTON_MAX_ITERATIONS", "fit_loglinear_from_margins", "margins_fit_kl_divergence", "margins_fit_l1_distance",
    "margins_of_microdata", "margins_of_table", "sum_n_log_n_of_microdata",
    "design_rank", "facial_set", "fit_extended_mle", "fit_loglinear", "fit_summary", "g_squared", "ipf",
    "ipf_to_margins", "is_decomposable", "l1_distance", "margin_design", "one_blas_thread", "pearson_x2",
    "total_variation", "uniform_probabilities",
]
