"""The paper's formulas: its noise scales (Table 1, Theorem 2) and its error bounds (Theorems 1 and 3).

A reproduction preset only: for multi-category interactions the Theorem 2 scale is below the true
sensitivity, and Theorem 1's constant is 8 where Dwork-McSherry-Talwar's Theorem 5 has 2.

They live with the mechanisms, not in `paper/`, because the Fourier and Efron-Stein mechanisms' paper calibration
and bound read them: `paper/` (the reproduction, an experiment above the release path) imports them from here
(`paper.theorems` re-exports them), and no mechanism imports `paper/`.
"""

from __future__ import annotations

from math import log, prod

from ..bases import FOURIER, CoefficientBasis
from ..models import Margin


def paper_noise_scale(basis: CoefficientBasis, epsilon: float) -> float:
    """The Laplace scale the paper's formulas give (Table 1 step 3, Table 2 step 3 / Theorem 2).

    Reproduction only: for multi-category interactions it is below the true sensitivity / epsilon.

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis.
    epsilon : float

    Returns
    -------
    float
        Fourier: 2 |B| / (epsilon 2^{k/2}); Efron-Stein: sum over S in B of 2 / (epsilon prod_{j not in S} k_j).
    """
    if basis.kind == FOURIER:
        return 2.0 * len(basis.closure) / (epsilon * 2.0 ** (basis.k / 2))
    return sum(2.0 / (epsilon * prod(basis.shape[j] for j in range(basis.k) if j not in s)) for s in basis.closure)


def paper_theorem_constant(basis: CoefficientBasis, margin: Margin, epsilon: float, constant: float = 8.0) -> tuple[float, float]:
    """(multiplier of log(X/delta), additive term) of the paper's Theorem 1 (binary) or Theorem 3.

    Theorem 1 of Yang-Fienberg-Rinaldo: 2^{|alpha|} 8 |B| / eps log(|B|/delta) + |B|; Theorem 5 of
    Dwork-McSherry-Talwar has 2 in place of 8 (`constant=2`). Theorem 3:
    (2/eps) prod_{i in alpha} k_i sum_{S in B} 1/prod_{j not in S} k_j log(N/delta) + N.

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis (B its closure).
    margin : Margin
        The margin alpha.
    epsilon : float
    constant : float, default 8.0
        Theorem 1's constant (binary tables only; 2 gives Dwork-McSherry-Talwar's Theorem 5).

    Returns
    -------
    tuple of float
        (multiplier, additive term): the bound is multiplier * log(X / delta) + additive term, X = |B| (Fourier)
        or N = `basis.size` (Efron-Stein).
    """
    if basis.kind == FOURIER:
        b = len(basis.closure)
        return 2.0 ** len(margin) * constant * b / epsilon, float(b)
    shape, k = basis.shape, basis.k
    total = sum(1.0 / prod(shape[j] for j in range(k) if j not in s) for s in basis.closure)
    return 2.0 / epsilon * prod(shape[i] for i in margin) * total, float(basis.size)


def paper_theorem_bound(basis: CoefficientBasis, margin: Margin, epsilon: float, delta: float) -> float:
    """The paper's Theorem 1 (binary) or Theorem 3 (multi-category) bound for margin alpha at delta.

    Stated for the paper's own noise scale (Table 1 / Theorem 2), whatever scale a release used.

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis.
    margin : Margin
        The margin alpha.
    epsilon : float
    delta : float
        The failure probability, in (0, 1).

    Returns
    -------
    float
        The L1 error bound, in counts.
    """
    mult, add = paper_theorem_constant(basis, margin, epsilon)
    count = len(basis.closure) if basis.kind == FOURIER else basis.size
    return mult * log(count / delta) + add


