"""Error bounds of a coefficient release: the one derived here, and the paper's Theorems 1 and 3.

Both depend on the plan only (basis, scale, epsilon), never on the counts.
"""

from __future__ import annotations

from math import log, prod

from .bases import FOURIER, CoefficientBasis
from .models import Margin


def derived_l1_bound(basis: CoefficientBasis, margin: Margin, scale: float, delta: float) -> float:
    """With probability >= 1 - delta, the L1 error of margin alpha after the LP and rounding is at most this.

    Union bound: every coefficient's Laplace noise is below t = scale * log(2d / delta). The factor 2
    covers release mode's discrete Laplace on the lattice 1/I (integer scale I), whose tail
    P(|Z| > t) = 2 q^(floor(tI) + 1) / (1 + q), q = exp(-1/(scale I)), is up to 2/(1+q) times the
    continuous exp(-t/scale): with log(d/delta) the bound failed at rate 0.076 for delta = 0.05. The true
    table is feasible with b = max noise, so b* <= t and each coefficient of w is within 2t of
    the truth. Summing the coefficient errors back into the margin: 2^{|alpha|} * 2t * 2^{k/2}
    (Fourier) or 2^{|alpha|} * 2t * prod k_j (Efron-Stein). Rounding adds at most cells / 2.
    """
    t = scale * log(2.0 * basis.size / delta)
    reach = 2.0 ** (basis.k / 2) if basis.kind == FOURIER else float(prod(basis.shape))
    cells = float(prod(basis.shape))
    return 2.0 ** len(margin) * 2.0 * t * reach + cells / 2.0


def paper_theorem_constant(basis: CoefficientBasis, margin: Margin, epsilon: float, constant: float = 8.0) -> tuple[float, float]:
    """(multiplier of log(X/delta), additive term) of the paper's Theorem 1 (binary) or Theorem 3.

    Theorem 1 of Yang-Fienberg-Rinaldo: 2^{|alpha|} 8 |B| / eps log(|B|/delta) + |B|; Theorem 5 of
    Dwork-McSherry-Talwar has 2 in place of 8 (`constant=2`). Theorem 3:
    (2/eps) prod_{i in alpha} k_i sum_{S in B} 1/prod_{j not in S} k_j log(N/delta) + N.
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
    """
    mult, add = paper_theorem_constant(basis, margin, epsilon)
    count = len(basis.closure) if basis.kind == FOURIER else basis.size
    return mult * log(count / delta) + add


