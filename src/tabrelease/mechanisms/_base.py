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


# The registered mechanisms by name (`mechanisms.register` fills it; here, beside the plan, so that a plan finds its
# mechanism without importing the registry's module).
REGISTRY: dict[str, "Mechanism"] = {}


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
    # The variables' names for people, in axis order, where the plan was made for a table (`prepare_release`): what
    # names the margins wherever a plan or its release is shown (a notebook's box). None: shown by letters.
    variable_names: tuple[str, ...] | None = field(default=None, compare=False)
    # Margins asked for inside a released one, which a mechanism that weighs its workload planned for (`[A][AB]`
    # releases AB, A weighed): recorded in release.json's plan so that the plan can be rebuilt from it.
    weighed_inside: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        # A plan made by a registered mechanism carries it from the start (`plan_release` sets it for any other), so
        # whatever reads the plan reaches the mechanism as an attribute, in any process.
        if self.implementation is None:
            object.__setattr__(self, "implementation", REGISTRY.get(self.mechanism))

    @property
    def estimator_name(self) -> str:
        """The estimator's name, before or after the planner resolved it."""
        return self.estimator if isinstance(self.estimator, str) else self.estimator.name

    def block_scale(self, query: str, variables) -> float:
        """The noise scale of one measured block: the calibration's, times the block's relative scale if planned.

        Parameters
        ----------
        query : str
            The block's query ("coefficients", "margin_cells", ...).
        variables : iterable of int
            The block's variables.

        Returns
        -------
        float
            The Laplace scale or Gaussian standard deviation of the block (None where a planned design has no
            such block).
        """
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
        """Everything that does not depend on the counts.

        Parameters
        ----------
        shape : tuple of int
            The table's levels per variable.
        margins : tuple of Margin
            The margins to release, each a tuple of axes.
        epsilon : float
            The privacy parameter asked for.
        neighbours : {"add-remove", "replace"}
            The neighbour relation the sensitivity is computed for.
        delta : float or None
            Delta of (epsilon, delta)-DP, for a mechanism that needs or accepts one; None otherwise.
        calibration : {"exact", "paper"}
            "paper" is the reproduction preset of the paper's mechanisms only.
        options : mapping
            Mechanism-specific options (the names in the mechanism's `options`; absent ones take defaults).

        Returns
        -------
        MechanismPlan
            The queries, their sensitivity and calibration, and the default estimator and rounding by name.

        Raises
        ------
        TabreleaseError
            If the mechanism cannot make this plan (a paper calibration it does not have, an invalid option,
            a delta it needs and lacks, a table or margins it cannot release).
        """

    @abstractmethod
    def measure(self, plan: MechanismPlan, counts: np.ndarray, noise: NoiseSource) -> Measurements:
        """The privacy step: draw the noise once, through `noise`.

        Parameters
        ----------
        plan : MechanismPlan
            A plan this mechanism made.
        counts : numpy.ndarray
            The confidential cell counts, of shape `plan.shape` (a mechanism with `reads_margins` may also be given
            a table that gives its margins, e.g. one held as records).
        noise : NoiseSource
            Where the noise is drawn (secure, simulated or none).

        Returns
        -------
        Measurements
            The noisy blocks, with how their noise was drawn.
        """

    def rescale(self, plan: MechanismPlan, epsilon: float) -> MechanismPlan:
        """The same plan at another epsilon: only the calibration changes (same sensitivity and queries).

        Parameters
        ----------
        plan : MechanismPlan
            A plan this mechanism made.
        epsilon : float
            The new epsilon.

        Returns
        -------
        MechanismPlan
            A copy of the plan with the new calibration (the estimator, and its LP, are kept).

        Raises
        ------
        TabreleaseError
            If epsilon is not a positive finite number.
        """
        return replace(plan, calibration=recalibrate(plan.calibration, epsilon))

    def l1_bounds(self, plan: MechanismPlan, delta: float) -> dict[Margin, float] | None:
        """Per released margin, an L1 error bound that holds with probability >= 1 - delta, if known.

        Parameters
        ----------
        plan : MechanismPlan
        delta : float
            The failure probability, in (0, 1).

        Returns
        -------
        dict or None
            Maps each released margin to its bound (in counts); None where the mechanism has none (the default).
        """
        return None

    def margins_read(self, plan: MechanismPlan) -> list[tuple[int, ...]]:
        """The margins `measure` reads from a table held as margins (one counted from its file counts them all in one
        pass before the release): the released margins and the sets of the plan's measured blocks.

        Parameters
        ----------
        plan : MechanismPlan

        Returns
        -------
        list of tuple of int
        """
        sets = [tuple(g) for g in plan.margins]
        if plan.design is not None:
            sets += [tuple(b.variables) for b in plan.design.blocks]
        return list(dict.fromkeys(sets))

    def check_table_size(self, plan: MechanismPlan, n: int) -> None:
        """Refuse, before the charge, a table this mechanism cannot release at its size `n` (number of records).
        The message may state the limit, never n. The default accepts every n.

        Parameters
        ----------
        plan : MechanismPlan
        n : int
            The table's number of records.

        Returns
        -------
        None

        Raises
        ------
        TabreleaseError
            If the mechanism cannot release a table of `n` records.
        """

    def sampler_bound(self, plan: MechanismPlan) -> float:
        """W such that every integer the secure sampler perturbs is at most W * n in absolute value.

        Parameters
        ----------
        plan : MechanismPlan

        Returns
        -------
        float
            W (the default, 1.0, suits values that are counts).
        """
        return 1.0

    def expected_errors(self, plan: MechanismPlan) -> dict | None:
        """Per released margin, the planned expected error (a planning.MarginError), where the plan has one.

        Parameters
        ----------
        plan : MechanismPlan

        Returns
        -------
        dict or None
            Maps each released margin to its `planning.MarginError`; None where there is none (the default).
        """
        return None

    def paper_bounds(self, plan: MechanismPlan, delta: float) -> dict[Margin, float] | None:
        """The paper's own bound per margin, where the mechanism is the paper's.

        Parameters
        ----------
        plan : MechanismPlan
        delta : float
            The failure probability, in (0, 1).

        Returns
        -------
        dict or None
            Maps each released margin to the paper's L1 bound (in counts); None for other mechanisms (the default).
        """
        return None

    def privacy_statement(self, plan: MechanismPlan) -> str:
        """One sentence: the guarantee the release has (kind of DP, parameters, neighbour relation, how accounted).

        Written to release.json, the audit and the terminal. Mechanisms whose guarantee is not the calibration's
        plain Laplace or Gaussian one (local DP, zCDP composition, public attributes) override it.

        Parameters
        ----------
        plan : MechanismPlan

        Returns
        -------
        str
            The sentence.
        """
        cal = plan.calibration
        who = f"{cal.neighbours} neighbours"
        if cal.neighbours == ADD_REMOVE and plan.parameters.get("total_is_public"):
            # n published exactly: no add-remove guarantee holds, and the statement is the guarantee's (`guarantee`),
            # not the calibration's (a new user's trial found "for add-remove neighbours" on such a release).
            loss = self.guarantee(plan).loss
            return (f"{loss.describe()} differential privacy for replace neighbours only: n is published exactly, "
                    f"so no add-remove guarantee holds; the {cal.distribution} noise is calibrated to epsilon="
                    f"{cal.epsilon:g} per add-remove step, and a replacement is two such steps (group privacy)")
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
        blocks are not plain Laplace or Gaussian answers overrides it with its own exact check.

        Parameters
        ----------
        plan : MechanismPlan
        measurements : Measurements
            The measurements to check.

        Returns
        -------
        None

        Raises
        ------
        TabreleaseError
            If a block's distribution or scale differs from the plan's.
        """
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
    composed under delta.

    Parameters
    ----------
    cal : NoiseCalibration

    Returns
    -------
    PrivacyLoss
        Pure, approximate (Laplace with a delta) or zCDP (Gaussian, with its tightest epsilon at delta).

    Raises
    ------
    TabreleaseError
        If a Gaussian calibration has no rho (an internal error).
    """
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
    """An exact calibration at another epsilon, for the same sensitivity, distribution and delta.

    Parameters
    ----------
    calibration : NoiseCalibration
        The calibration to redo (a paper one is recalibrated exactly).
    epsilon : float
        The new epsilon.

    Returns
    -------
    NoiseCalibration

    Raises
    ------
    TabreleaseError
        If epsilon is not a positive finite number.
    """
    if calibration.distribution == "gaussian":
        return gaussian_calibration(calibration.sensitivity, epsilon, calibration.delta, calibration.neighbours)
    return laplace_calibration(calibration.sensitivity, epsilon, calibration.neighbours)


def no_paper_calibration(name: str, calibration: str) -> None:
    """Refuse the paper calibration for a mechanism that has none.

    Parameters
    ----------
    name : str
        The mechanism's name (for the message).
    calibration : str
        The calibration asked for; anything but "exact" is refused.

    Raises
    ------
    TabreleaseError
        If `calibration` is not "exact".
    """
    if calibration != "exact":
        raise TabreleaseError(f"the paper calibration reproduces the Fourier and Efron-Stein mechanisms only, not {name}")


def replace_factor(neighbours: str) -> int:
    """A changed record moves two cells of a histogram; an added or removed one moves one.

    Parameters
    ----------
    neighbours : str
        "replace" or "add-remove".

    Returns
    -------
    int
        2 for replace, else 1.
    """
    return 2 if neighbours == "replace" else 1


def check_margins_fit(shape: Sequence[int], margins: Sequence[Margin]) -> None:
    """Refuse an empty list of margins, an empty margin, or a margin naming an axis the table does not have.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of Margin
        The margins to release.

    Raises
    ------
    TabreleaseError
        If there is no margin, a margin is empty, or an axis is out of range.
    """
    if not margins or any(len(g) == 0 for g in margins):
        raise TabreleaseError("give at least one non-empty margin to release")
    if any(a < 0 or a >= len(shape) for g in margins for a in g):
        raise TabreleaseError("a margin names a variable the table does not have")
