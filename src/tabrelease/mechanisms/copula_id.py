"""The paper's cop-ID baseline (Asghar et al. 2019, section 4.3.1), made differentially private: the Gaussian copula
with no correlation between variables, i.e. independent variables drawn from the DP one-way margins.

Only the one-way dummy-coded blocks are measured, each at epsilon / m (m variables). The dummies of one variable
keep their within-variable correlations (computed from the one-way margins alone: two levels are never both set),
so a decoded record takes one level per variable; the paper's literal identity matrix would also drop those and
let a binary variable's two dummies be 1 together. Higher-order and pairwise margins are those of independence.
"""

from __future__ import annotations

from .gaussian_copula import GaussianCopula


class CopulaID(GaussianCopula):
    name = "copula-id"
    summary = "the copula's cop-ID baseline: independent variables from DP dummy-coded one-way margins"
    pairs = False
