"""Barak et al. (the paper's Table 1): Laplace noise on the Fourier coefficients <f, chi^S> of every S in the
downward closure of the released margins; all-binary tables only."""

from __future__ import annotations

from ..bases import FOURIER
from ..errors import TabreleaseError
from ._coefficients import PaperCoefficientMechanism


class Fourier(PaperCoefficientMechanism):
    name = FOURIER
    summary = "Fourier coefficients of the closure (binary tables), consistency LP, round"
    basis_kind = FOURIER
    contract_shape = (2, 2, 2)  # the contract checks (mechanisms.checks) run it on an all-binary table

    def basis_for(self, shape, margins):
        if any(k != 2 for k in shape):
            raise TabreleaseError(
                f"the Fourier mechanism needs an all-binary table; this one has levels {list(shape)} "
                "(use efron-stein, or binary-encoding)"
            )
        return super().basis_for(shape, margins)
