"""The L1 error bound of a coefficient release derived here (the paper's Theorems 1 and 3 are in `paper`).

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

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis (its kind, size d, shape and k).
    margin : Margin
        The margin alpha (a tuple of axes).
    scale : float
        The Laplace scale of every coefficient.
    delta : float
        The failure probability, in (0, 1).

    Returns
    -------
    float
        The L1 error bound, in counts.
    """
    t = scale * log(2.0 * basis.size / delta)
    reach = 2.0 ** (basis.k / 2) if basis.kind == FOURIER else float(prod(basis.shape))
    cells = float(prod(basis.shape))
    return 2.0 ** len(margin) * 2.0 * t * reach + cells / 2.0
