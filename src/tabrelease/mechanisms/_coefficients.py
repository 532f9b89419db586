"""What the coefficient mechanisms share: measure the coefficients of the released margins' downward
closure, with noise calibrated to their exact sensitivity, and estimate with the consistency LP."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..bases import EFRON_STEIN, FOURIER, coefficient_basis, coefficients, integer_coefficients, sensitivity
from ..bounds import derived_l1_bound
from ..measurements import COEFFICIENTS, coefficient_blocks, measured
from ..planning import expected_margin_errors
from ..noise import laplace_calibration
from ..postprocessing import LINF_LP, NEAREST
from ._base import Mechanism, MechanismPlan, no_paper_calibration, recalibrate
from ._paper_formulas import paper_noise_scale, paper_theorem_bound


class CoefficientMechanism(Mechanism):
    """Noise on the coefficients of a basis, then (by default) the consistency LP.

    One `plan` and one `rescale` serve every coefficient mechanism; a mechanism changes only the hooks:
    `basis_kind` (None: Fourier for all-binary tables, Efron-Stein otherwise), `queries` (the basis, and
    an encoding with its parameters and notes), `calibrate` (Laplace at the L1 sensitivity by default),
    `parameters` and `finish` (what depends on the calibration, redone at every epsilon).
    """

    basis_kind: str | None = FOURIER
    estimator = LINF_LP  # resolved by the planner: the LP is built once per plan
    rounding = NEAREST
    bound_source = "derived here: triangle inequality over the closure with the scale actually used (see docs/method.md)"

    def basis_for(self, shape, margins):
        """The coefficient basis of the margins' closure: `basis_kind`, or (None) Fourier for all-binary tables and
        Efron-Stein otherwise.

        Parameters
        ----------
        shape : tuple of int
            The levels per variable of the table the coefficients are taken on.
        margins : sequence of Margin
            The margins to release.

        Returns
        -------
        CoefficientBasis
            With its analysis matrices.

        Raises
        ------
        TabreleaseError
            If the Fourier basis is asked for a table that is not all binary.
        """
        kind = self.basis_kind or (FOURIER if all(k == 2 for k in shape) else EFRON_STEIN)
        return coefficient_basis(kind, shape, margins)

    def queries(self, shape, margins, neighbours):
        """(basis, encoding, parameters, notes) of what is measured.

        Parameters
        ----------
        shape : tuple of int
            The table's levels per variable.
        margins : sequence of Margin
            The margins to release.
        neighbours : {"add-remove", "replace"}
            The neighbour relation.

        Returns
        -------
        tuple
            (basis, encoding, parameters, notes): the `CoefficientBasis`, the encoding the queries live on (None:
            the table itself), a dict of plan parameters and a tuple of str notes. The default: `basis_for` of the
            table, no encoding, no parameters or notes.
        """
        return self.basis_for(shape, margins), None, {}, ()

    def calibrate(self, basis, epsilon, neighbours, delta, calibration):
        """The noise calibration of the coefficients: by default Laplace at their exact L1 sensitivity, or at the
        paper's scale (reproduction only).

        Parameters
        ----------
        basis : CoefficientBasis
            The measured basis.
        epsilon : float
            The epsilon asked for.
        neighbours : {"add-remove", "replace"}
            The neighbour relation.
        delta : float or None
            Delta, for a mechanism whose noise uses it (the default ignores it).
        calibration : {"exact", "paper"}
            The calibration preset.

        Returns
        -------
        NoiseCalibration

        Raises
        ------
        TabreleaseError
            If epsilon (or delta, where used) is out of range.
        """
        paper = paper_noise_scale(basis, epsilon) if calibration == "paper" else None
        return laplace_calibration(sensitivity(basis, neighbours, 1), epsilon, neighbours, paper_scale=paper)

    def parameters(self, options) -> dict:
        """The plan parameters that come from the mechanism's options (none by default).

        Parameters
        ----------
        options : mapping
            The mechanism-specific options given to `plan`.

        Returns
        -------
        dict
            Merged into the plan's `parameters`.

        Raises
        ------
        TabreleaseError
            If an option is invalid (where a mechanism checks one).
        """
        return {}

    def finish(self, plan: MechanismPlan) -> MechanismPlan:
        """What depends on the calibration, redone at every epsilon: by default the paper calibration's note
        (whether the stated epsilon holds).

        Parameters
        ----------
        plan : MechanismPlan
            The plan with its (new) calibration.

        Returns
        -------
        MechanismPlan
            A copy with its notes (and, where a mechanism has them, parameters) brought up to date.
        """
        notes = tuple(n for n in plan.notes if not n.startswith("paper calibration"))
        if plan.calibration.calibration == "paper":
            notes += (paper_note(plan.calibration),)
        return replace(plan, notes=notes)

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        if not self.paper_calibration:
            no_paper_calibration(self.name, calibration)
        basis, encoding, parameters, notes = self.queries(shape, margins, neighbours)
        cal = self.calibrate(basis, epsilon, neighbours, delta, calibration)
        plan = MechanismPlan(self.name, shape, margins, cal, self.estimator, basis, encoding,
                             {**parameters, **self.parameters(options)}, notes, self.rounding)
        return self.finish(plan)

    def rescale(self, plan, epsilon):
        cal = plan.calibration
        if cal.calibration == "paper":
            new = laplace_calibration(cal.sensitivity, epsilon, cal.neighbours,
                                      paper_scale=paper_noise_scale(plan.basis, epsilon))
        else:
            new = recalibrate(cal, epsilon)
        return self.finish(replace(plan, calibration=new))

    def measure(self, plan, counts, noise):
        source = counts if plan.encoding is None else plan.encoding.encode(counts)
        exact = coefficients(plan.basis, source)
        noisy = noise.perturb(exact, plan.calibration, plan.basis.integer_scale,
                              integers=lambda: integer_coefficients(plan.basis, source))
        blocks = coefficient_blocks(plan.basis, np.asarray(noisy, float), plan.calibration.distribution,
                                    plan.calibration.scale)
        return measured(blocks, noise)

    def sampler_bound(self, plan):
        return integer_row_bound(plan.basis)

    def expected_errors(self, plan):
        """The expected error of the unbiased linear reconstruction of these equal-scale coefficients (for
        comparison with a planned release; the LP's error is not this).

        Parameters
        ----------
        plan : MechanismPlan

        Returns
        -------
        dict or None
            Maps each released margin to its `planning.MarginError`; None for a plan on a binary encoding.
        """
        if plan.encoding is not None:
            return None
        cal = plan.calibration
        variance = 2.0 * cal.scale**2 if cal.distribution == "laplace" else cal.scale**2
        blocks = [(COEFFICIENTS, s, plan.basis.kind, variance) for s in plan.basis.closure]
        return expected_margin_errors(plan.shape, plan.margins, blocks)

    def bound_axes(self, plan, margin):
        """The margin's axes in the measured domain (bits, for a binary encoding).

        Parameters
        ----------
        plan : MechanismPlan
        margin : Margin
            A released margin, in the table's axes.

        Returns
        -------
        tuple of int
            The margin itself, or the axes of its variables' bits.
        """
        return margin if plan.encoding is None else plan.encoding.axes_of(margin)

    def l1_bounds(self, plan, delta):
        # The derivation is for the L-infinity LP followed by plain rounding; other post-processing has none here.
        if plan.calibration.distribution != "laplace" or plan.estimator_name != LINF_LP or plan.rounding != "nearest":
            return None
        return {g: derived_l1_bound(plan.basis, self.bound_axes(plan, g), plan.calibration.scale, delta)
                for g in plan.margins}


class PaperCoefficientMechanism(CoefficientMechanism):
    """The paper's mechanisms: they also carry the paper's calibration preset and its theorem's bound."""

    paper_calibration = True

    def paper_bounds(self, plan, delta):
        return {g: paper_theorem_bound(plan.basis, g, plan.calibration.epsilon, delta) for g in plan.margins}


def integer_row_bound(basis) -> float:
    """The largest L1 norm of a row of the integer-scaled analysis: |coefficient * integer_scale| <= it * n.

    Parameters
    ----------
    basis : CoefficientBasis
        A basis with its analysis matrices.

    Returns
    -------
    float
    """
    return float(max(np.abs(np.rint(a * basis.integer_scale)).sum(axis=1).max() for a in basis.analysis))


def paper_note(cal) -> str:
    """The note a paper-calibrated plan carries: its scale against the exact sensitivity, and whether the stated
    epsilon holds.

    Parameters
    ----------
    cal : NoiseCalibration
        A paper calibration.

    Returns
    -------
    str
    """
    verdict = "holds" if cal.epsilon_holds else "does NOT hold"
    return (
        f"paper calibration (reproduction only): scale {cal.scale:.6g} against exact sensitivity "
        f"{cal.sensitivity:.6g}; the stated epsilon {cal.epsilon:g} {verdict} (actual epsilon {cal.epsilon_actual:.6g})"
    )
