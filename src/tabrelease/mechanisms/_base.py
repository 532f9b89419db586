"""The protocol every release mechanism follows, and the plan it makes.

A mechanism is a small object with three jobs (emcee's moves are the model):

* `plan`: everything that does not depend on the counts: which queries are measured, their exact
  sensitivity, the noise calibration, and the default estimator and rounding, by name (a mechanism imports no
  estimator: `tabrelease.planner` resolves the name into an `Estimator` built for the plan);
* `measure`: draw the noise through a noise source, once, and return `Measurements`;
* `rescale`: the same plan at another epsilon (a sweep builds the estimator's LP once).

Optionally `l1_bounds` and `paper_bounds` give per-margin error bounds for the audit. Nothing
after `measure` knows which mechanism ran: it reads the plan and the measurements.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TabreleaseError
from ..measurements import Measurements
from ..models import Margin
from ..noise import NoiseCalibration, gaussian_calibration, laplace_calibration
from ..privacy import (ADD_REMOVE, APPROXIMATE, PURE, REPLACE, ZCDP, PrivacyGuarantee, PrivacyLoss, PrivacyUnit,
                       group_loss)
from ..postprocessing import NEAREST

if TYPE_CHECKING:  # pragma: no cover
    from ..bases import CoefficientBasis
    from ..noise import NoiseSource


@dataclass(frozen=True, eq=False)
class MechanismPlan:
    """Everything about a release that does not depend on the counts."""

    mechanism: str
    shape: tuple[int, ...]
    margins: tuple[Margin, ...]
    calibration: NoiseCalibration
    # The estimator: its name (postprocessing.LINF_LP, ...) as a mechanism plans it; an `estimate.Estimator` built
    # for this plan once the planner has resolved it (plan_release always does; rescaling keeps it, LP and all).
    estimator: Any
    basis: CoefficientBasis | None = None
    encoding: Any = None  # a BinaryEncoding when the queries live on a bit encoding of the table
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    rounding: str = NEAREST
    design: Any = None  # a planning.MeasurementDesign when blocks have scales of their own
    # The mechanism object itself (picklable), set when the plan is made: whatever reads the plan (a sweep's worker
    # process, the audit) reaches the mechanism through it, not through this process's registry.
    implementation: Any = field(default=None, repr=False, compare=False)
    # Keyword arguments the planned default estimator is built with (the planned release's junction-tree cliques).
    estimator_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def estimator_name(self) -> str:
        """The estimator's name, before or after the planner resolved it."""
        return self.estimator if isinstance(self.estimator, str) else self.estimator.name

    def block_scale(self, query: str, variables) -> float:
        """The noise scale of one measured block: the calibration's, times the block's relative scale if planned."""
        if self.design is None:
            return self.calibration.scale
        return self.design.scales(self.calibration.scale).get((query, tuple(variables)))

    def _repr_html_(self) -> str:
        from .._display import html_for

        return html_for(self)  # the renderer is registered by the presentation layer (tabrelease.notebook)

    @property
    def problem(self):
        """The estimator's consistency LP, where it has one."""
        return getattr(self.estimator, "problem", None)


class Mechanism(ABC):
    """Base class of the release mechanisms. Subclasses set `name` and implement `plan` and `measure`."""

    name: str = ""
    summary: str = ""
    needs_delta: bool = False  # (epsilon, delta)-DP: the plan requires delta
    accepts_delta: bool = False  # with delta, the plan gives (epsilon, delta)-DP (Gaussian); without, pure epsilon
    paper_calibration: bool = False  # has a --calibration paper preset (reproduction only)
    options: tuple[str, ...] = ()  # the mechanism-specific options its plan accepts
    # measure() reads only margins of the table (it may be given a table held as records); else every cell.
    reads_margins: bool = False

    @abstractmethod
    def plan(self, shape: tuple[int, ...], margins: tuple[Margin, ...], epsilon: float, *, neighbours: str,
             delta: float | None, calibration: str, options: Mapping[str, Any]) -> MechanismPlan:
        """Everything that does not depend on the counts."""

    @abstractmethod
    def measure(self, plan: MechanismPlan, counts: np.ndarray, noise: NoiseSource) -> Measurements:
        """The privacy step: draw the noise once, through `noise`."""

    def rescale(self, plan: MechanismPlan, epsilon: float) -> MechanismPlan:
        """The same plan at another epsilon: only the calibration changes (same sensitivity and queries)."""
        return replace(plan, calibration=recalibrate(plan.calibration, epsilon))

    def l1_bounds(self, plan: MechanismPlan, delta: float) -> dict[Margin, float] | None:
        """Per released margin, an L1 error bound that holds with probability >= 1 - delta, if known."""
        return None

    def check_table_size(self, plan: MechanismPlan, n: int) -> None:
        """Refuse, before the charge, a table this mechanism cannot release at its size `n` (number of records).
        The message may state the limit, never n. The default accepts every n."""

    def sampler_bound(self, plan: MechanismPlan) -> float:
        """W such that every integer the secure sampler perturbs is at most W * n in absolute value."""
        return 1.0

    def expected_errors(self, plan: MechanismPlan) -> dict | None:
        """Per released margin, the planned expected error (a planning.MarginError), where the plan has one."""
        return None

    def paper_bounds(self, plan: MechanismPlan, delta: float) -> dict[Margin, float] | None:
        """The paper's own bound per margin, where the mechanism is the paper's."""
        return None

    def privacy_statement(self, plan: MechanismPlan) -> str:
        """One sentence: the guarantee the release has (kind of DP, parameters, neighbour relation, how accounted).

        Written to release.json, the audit and the terminal. Mechanisms whose guarantee is not the calibration's
        plain Laplace or Gaussian one (local DP, zCDP composition, public attributes) override it."""
        cal = plan.calibration
        who = f"{cal.neighbours} neighbours"
        if cal.distribution == "gaussian":
            return (f"(epsilon={cal.epsilon:g}, delta={cal.delta:g})-differential privacy for {who}: Gaussian noise "
                    f"(sigma={cal.scale:.6g} at L2 sensitivity {cal.sensitivity:.6g}), accounted exactly by the analytic "
                    f"Gaussian mechanism (Balle & Wang 2018: its privacy profile at epsilon is delta); also "
                    f"rho-zCDP with rho={cal.rho:.6g}")
        held = "" if cal.epsilon_holds else f" (the noise gives only epsilon={cal.epsilon_actual:.6g})"
        return f"epsilon={cal.epsilon:g} differential privacy (pure) for {who}: Laplace noise{held}"

    def guarantee(self, plan: MechanismPlan, variables: Sequence[str] | None = None) -> PrivacyGuarantee:
        """The release's privacy guarantee as a value: the unit it protects and its loss.

        Parameters
        ----------
        plan : MechanismPlan
        variables : sequence of str, optional
            The table's variable names (a unit that names attributes uses them; default: letters).

        Returns
        -------
        PrivacyGuarantee
            The default reads the calibration: Laplace noise gives pure epsilon (the epsilon the noise really gives,
            where a reproduction preset's scale gives more than it claims), Gaussian noise rho-zCDP with its tightest
            (epsilon, delta), Laplace noise composed under delta approximate (epsilon, delta); the unit is the
            calibration's neighbour relation. A plan that publishes n exactly under add-remove noise has no
            add-remove guarantee: between tables of equal n it is, by group privacy, the loss of two steps.
        """
        cal = plan.calibration
        loss = calibration_loss(cal)
        how = f"{cal.distribution} noise at its exact sensitivity"
        if cal.neighbours == ADD_REMOVE and plan.parameters.get("total_is_public"):
            return PrivacyGuarantee(unit=PrivacyUnit(kind=REPLACE), loss=group_loss(loss, 2),
                                    how=how + "; n published exactly, so group privacy over two add-remove steps")
        return PrivacyGuarantee(unit=PrivacyUnit(kind=cal.neighbours), loss=loss, how=how)

    def check_measurements(self, plan: MechanismPlan, measurements: Measurements) -> None:
        """Refuse measurements that were not drawn with this plan's noise (the plan states what they guarantee).

        The default checks every noised block's distribution and scale against the plan; a mechanism whose
        blocks are not plain Laplace or Gaussian answers overrides it with its own exact check."""
        from ..measurements import EXACT

        if any(b.distribution != EXACT and (b.scale != plan.block_scale(b.query, b.variables)
                                            or b.distribution != plan.calibration.distribution)
               for b in measurements.blocks):
            raise TabreleaseError("these measurements were not drawn with this plan's noise (scale or distribution "
                                  "differ)")

    bound_source: str = ""


def calibration_loss(cal: NoiseCalibration) -> PrivacyLoss:
    """The loss a calibration gives: pure epsilon for Laplace noise (the actual one where it exceeds the asked, so a
    paper preset's shortfall is charged), rho-zCDP for Gaussian noise, approximate where Laplace blocks were
    composed under delta."""
    # The asked epsilon, unless the noise gives more (beyond rounding: `epsilon_holds`), as a paper preset's may.
    epsilon = cal.epsilon if cal.epsilon_holds else cal.epsilon_actual
    if cal.distribution == "gaussian":
        if cal.rho is None:  # every Gaussian calibration records its rho (noise.gaussian_calibration)
            raise TabreleaseError("internal error: a Gaussian calibration without its rho")
        return PrivacyLoss(kind=ZCDP, epsilon=epsilon, delta=float(cal.delta), rho=float(cal.rho))
    if cal.delta:
        return PrivacyLoss(kind=APPROXIMATE, epsilon=epsilon, delta=float(cal.delta))
    return PrivacyLoss(kind=PURE, epsilon=epsilon)


def recalibrate(calibration: NoiseCalibration, epsilon: float) -> NoiseCalibration:
    """An exact calibration at another epsilon, for the same sensitivity, distribution and delta."""
    if calibration.distribution == "gaussian":
        return gaussian_calibration(calibration.sensitivity, epsilon, calibration.delta, calibration.neighbours)
    return laplace_calibration(calibration.sensitivity, epsilon, calibration.neighbours)


def no_paper_calibration(name: str, calibration: str) -> None:
    if calibration != "exact":
        raise TabreleaseError(f"the paper calibration reproduces the Fourier and Efron-Stein mechanisms only, not {name}")


def replace_factor(neighbours: str) -> int:
    """A changed record moves two cells of a histogram; an added or removed one moves one."""
    return 2 if neighbours == "replace" else 1


def check_margins_fit(shape: Sequence[int], margins: Sequence[Margin]) -> None:
    if not margins or any(len(g) == 0 for g in margins):
        raise TabreleaseError("give at least one non-empty margin to release")
    if any(a < 0 or a >= len(shape) for g in margins for a in g):
        raise TabreleaseError("a margin names a variable the table does not have")
