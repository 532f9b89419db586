"""The release pipeline, forward: measure (the privacy step) -> estimate -> round, and the `Release` record.

`run_plan` is the only place the steps meet, and it never asks which mechanism ran: the mechanism is reached
through the registry for its privacy step alone, and everything after reads the plan and the `Measurements`.
Nothing here knows of ledgers, files or specs: that is the workflow's (`workflow.py`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import TabreleaseError
from .measurements import EXACT, Measurements
from .mechanisms import MechanismPlan
from .models import Margin
from .noise import NoiseCalibration, NoiseSource
from .planner import resolve_estimator
from .postprocessing import AS_MEASURED, CONTROLLED, NEAREST
from .rounding import round_estimate


@dataclass(frozen=True, eq=False)
class Release:
    """What one run of a mechanism produced, in one shape for every mechanism.

    `released_margins` is what would be published. `table` is the rounded non-negative table w'
    whose margins they are (None when only margins were estimated), `lp` the consistency LP's
    solution where the estimator has one, `measurements` the noisy answers themselves (an
    estimator can be run again on them).
    """

    mechanism: str
    margins: tuple[Margin, ...]
    released_margins: tuple[np.ndarray, ...]
    table: np.ndarray | None
    lp: Any
    noise: NoiseCalibration
    noise_mode: str
    consistent: bool
    basis: str | None
    coefficients_released: int
    timings: Mapping[str, float]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    noise_seed: int | None = None
    rounding: str | None = None
    rounding_gap: float | None = None  # controlled rounding's MILP gap (0: proved closest)
    measurements: Measurements | None = field(default=None, repr=False)
    estimator: str | None = None
    plan: MechanismPlan | None = field(default=None, repr=False)
    # What the rounding established: "global" (the margins of one non-negative table), "local" or "none".
    guarantee: str | None = None
    # The privacy guarantee, in one sentence (the mechanism's `privacy_statement`).
    privacy: str | None = None

    def _repr_html_(self) -> str:
        from ._display import html_for

        return html_for(self)  # the renderer is registered by the presentation layer (tabrelease.notebook)

    @property
    def n_released(self) -> float:
        """n' = sum of w' (or of the first released margin when there is no table)."""
        source = self.table if self.table is not None else self.released_margins[0]
        return float(np.sum(source))

    @property
    def consistency(self) -> str:
        """"global": the margins of one non-negative table (a released table, a junction tree's clique margins, or
        decomposable margins that agree); "local": they agree on every shared sub-margin; "none": they disagree."""
        if not self.consistent:
            return "none"
        if self.guarantee is not None:
            return self.guarantee
        return "global" if self.table is not None else "local"

    @property
    def lp_b(self) -> float | None:
        return None if self.lp is None else self.lp.b

    @property
    def basis_operator(self):
        return None if self.plan is None else self.plan.basis


def measure(plan: MechanismPlan, data, noise: NoiseSource) -> Measurements:
    """The privacy step: the plan's mechanism draws its noise once. `data` is a count array, or a table (one held as
    records is given to mechanisms that read margins only; the others get its cells).

    Parameters
    ----------
    plan : MechanismPlan
        The plan (its mechanism measures).
    data : numpy.ndarray or ContingencyTable or MicrodataTable
        The confidential counts, of the plan's shape.
    noise : NoiseSource
        Where the noise comes from (simulation, seeded or not, or secure release noise).

    Returns
    -------
    Measurements
        The noisy blocks, with the noise mode and (simulation only) the seed.

    Raises
    ------
    TabreleaseError
        If the data's shape is not the plan's (or a table held as records has too many cells for a mechanism that
        reads cells).
    """
    mechanism = plan.implementation
    if mechanism is None:
        raise TabreleaseError(f"the plan carries no mechanism ({plan.mechanism!r} is not registered): make plans with "
                              "plan_release, or register the mechanism")
    if not isinstance(data, np.ndarray) and hasattr(data, "margin_counts"):
        data = data if mechanism.reads_margins else data.counts
    else:
        data = np.asarray(data)
        # Counts are whole and non-negative: a negative or fractional cell had been released from (a new user's
        # trial). The message names no value: the counts are confidential.
        whole = np.issubdtype(data.dtype, np.integer)  # an integer array needs only its sign checked (no copy)
        if data.dtype == object or not np.issubdtype(data.dtype, np.number) or data.size and not (
                data.min() >= 0 if whole else
                np.all(np.isfinite(data)) and data.min() >= 0 and np.array_equal(data, np.round(data))):
            raise TabreleaseError("the counts must be whole non-negative numbers (a cell is negative, fractional, "
                                  "not finite or not a number)")
    if tuple(data.shape) != plan.shape:
        raise TabreleaseError(f"the plan is for a table of shape {plan.shape}, not {tuple(data.shape)}")
    if not callable(getattr(noise, "perturb", None)):
        raise TabreleaseError(f"the noise comes from a noise source (SimulationNoise(seed=...), or the secure "
                              f"sampler's), not {type(noise).__name__}")
    return mechanism.measure(plan, data, noise)


def release_from_measurements(plan: MechanismPlan, measurements: Measurements, *, estimator=None,
                              noise_seconds: float = float("nan")) -> Release:
    """Post-processing only: estimate (the plan's estimator, or another, by name or object), round, take the margins.

    Parameters
    ----------
    plan : MechanismPlan
        The plan the measurements were drawn under.
    measurements : Measurements
        The noisy blocks.
    estimator : str or Estimator, optional
        Another estimator (prepared for the plan here); the plan's own by default.
    noise_seconds : float, default nan
        How long the privacy step took, for the timings.

    Returns
    -------
    Release
        The released margins (and table, when there is one), the noise calibration, consistency, timings and notes.

    Raises
    ------
    TabreleaseError
        If the measurements are not the plan's, the estimator is unknown or cannot read them, or estimation or
        rounding fails.
    """
    if isinstance(estimator, str):
        from .estimate import get_estimator

        estimator = get_estimator(estimator)
    plan = resolve_estimator(plan)  # a plan straight from a mechanism names its estimator: built here
    estimator = plan.estimator if estimator is None else estimator.for_plan(plan)
    # The plan states the privacy of what is released: it must be the plan the noise was drawn for.
    plan.implementation.check_measurements(plan, measurements)
    estimate = estimator.estimate(plan, measurements)
    rounding, fell_back = plan.rounding, []
    try:
        rounded = round_estimate(estimate, plan.margins, rounding, plan.calibration.scale)
    except TabreleaseError:
        if rounding != CONTROLLED or estimator.name != AS_MEASURED:
            raise
        # The measured cells keep the noise's sign, and measured margins may disagree: whether a controlled rounding
        # exists depends on the noise (cells on Edwards at epsilon 0.05: none, seed after seed), and a release that
        # found none failed after its charge. Rounding is post-processing: the nearest integers cost no privacy.
        rounding = NEAREST
        rounded = round_estimate(estimate, plan.margins, rounding, plan.calibration.scale)
        fell_back.append("controlled rounding found no integer table or margins next to the cells as measured; "
                         "they were rounded to the nearest integers instead")
    notes = list(plan.notes) + list(estimate.notes) + fell_back + ([rounded.note] if rounded.note else [])
    if not rounded.consistent:
        notes.append("the released margins are mutually inconsistent: they disagree on shared sub-margins, and no "
                     "table has them all")
    timings = {"noise": noise_seconds, "round": rounded.seconds}
    timings["lp" if estimate.lp is not None else "estimate"] = estimate.seconds
    return Release(
        mechanism=plan.mechanism,
        margins=plan.margins,
        released_margins=rounded.margins,
        table=rounded.table,
        lp=estimate.lp,
        noise=plan.calibration,
        noise_mode=measurements.noise_mode,
        consistent=rounded.consistent,
        basis=None if plan.basis is None else plan.basis.kind,
        coefficients_released=sum(b.size for b in measurements.blocks if b.distribution != EXACT),
        timings=timings,
        parameters=dict(plan.parameters),
        notes=tuple(notes),
        noise_seed=measurements.seed,
        rounding=rounding,
        rounding_gap=rounded.gap,
        measurements=measurements,
        estimator=estimator.name,
        plan=plan,
        guarantee=rounded.consistency,
        privacy=plan.implementation.privacy_statement(plan),
    )


# A margin whose expected L1 error is above this share of the released total is flagged as unfit to publish.
UNFIT_ERROR_SHARE = 0.25
# How a fitness note starts (`fitness_notes`): the audit's reader is told what it means for the simulated figures.
UNFIT = "unfit to publish as it stands:"


def fitness_notes(plan: MechanismPlan, released_margins, names=None) -> list[str]:
    """Whether the release is fit to publish, judged from the plan's expected errors and the released (DP) total
    only, so the notes may be public: a margin whose expected L1 error is a large share of n', or whose expected
    noise per cell exceeds its typical released cell; and what would help.

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan (notes only where its mechanism gives expected errors: a measurement design's, or for
        the paper's coefficient mechanisms those of the unbiased reconstruction of their measurements, which the
        note then names as such: their own fit's error is not derived).
    released_margins : sequence of numpy.ndarray
        The released margins (only the first margin's total is read).
    names : sequence of str, optional
        The variables' names for people, as the public files name them (`tables.people_names`); by default the
        margins are named by letters.

    Returns
    -------
    list of str
        One note when some margins are unfit to publish; empty otherwise.
    """
    planned = plan.implementation.expected_errors(plan)
    if not planned or not released_margins:
        return []
    # Without a design the figures are the unbiased reconstruction's, not the mechanism's own fit's (the LP's).
    whose = "" if plan.design is not None else " (of the unbiased reconstruction of its measurements)"
    n_released = float(np.sum(released_margins[0]))
    unfit = []
    for g in plan.margins:
        error = planned[g]
        typical = n_released / max(error.cells, 1)
        if n_released <= 0 or error.expected_l1 > UNFIT_ERROR_SHARE * n_released or error.cell_sd > typical:
            unfit.append((g, error.expected_l1 / max(n_released, 1.0), error.cell_sd, typical))
    if not unfit:
        return []
    worst = max(unfit, key=lambda u: u[1])
    from .models import margin_label
    from .tables import LETTERS, margin_title

    letters = [LETTERS[j] if j < len(LETTERS) else f"V{j + 1}" for j in range(len(plan.shape))]
    worst_margin = margin_label(worst[0], letters) if names is None else margin_title(names, worst[0])

    helps = ("more epsilon, fewer or coarser margins (merged levels), or "
             + ("--plan-objective max-cell-variance" if plan.design is not None else "the planned mechanism")
             + " would help")
    if n_released <= 0:  # no share of an empty total means anything: say what the noise is
        return [f"{UNFIT} the released total is 0 (every margin empty), and the noise is "
                f"expected{whose} to err by up to {max(planned[g].expected_l1 for g in plan.margins):.3g} in L1 on "
                f"a margin (noise sd up to {max(planned[g].cell_sd for g in plan.margins):.3g} per cell); {helps}"]
    return [f"{UNFIT} {len(unfit)} of {len(plan.margins)} margins are expected to be "
            f"too noisy to use (worst {worst_margin}: expected L1 error{whose} {worst[1]:.0%} of "
            f"the released total, noise sd {worst[2]:.3g} per cell against a typical released cell of "
            f"{worst[3]:.3g}); {helps}"]


def run_plan(plan: MechanismPlan, data, noise: NoiseSource) -> Release:
    """Draw the noise and produce the release for one table (a count array, or a table).

    Parameters
    ----------
    plan : MechanismPlan
        The plan.
    data : numpy.ndarray or ContingencyTable or MicrodataTable
        The confidential counts, of the plan's shape.
    noise : NoiseSource
        Where the noise comes from (simulation, seeded or not, or secure release noise).

    Returns
    -------
    Release
        The release (see `release_from_measurements`).

    Raises
    ------
    TabreleaseError
        If the data do not fit the plan, or estimation or rounding fails.
    """
    start = time.perf_counter()
    measurements = measure(plan, data, noise)
    return release_from_measurements(plan, measurements, noise_seconds=time.perf_counter() - start)


def released_frames(release: Release, table) -> dict:
    """The released margins as labelled pandas DataFrames, keyed by the variables' names joined by " x ": one
    column per variable (its level labels) and a count column, one row per cell.

    Parameters
    ----------
    release : Release
        The release.
    table : ContingencyTable or MicrodataTable
        The released table (its variables' names and level labels).

    Returns
    -------
    dict of str to pandas.DataFrame
        One frame per released margin, in the release's order.
    """
    import pandas as pd

    frames = {}
    for g, values in zip(release.margins, release.released_margins):
        values = np.asarray(values)
        grids = np.meshgrid(*[np.arange(table.shape[a]) for a in g], indexing="ij")
        data = {table.variables[a]: np.asarray(table.levels[a], dtype=object)[grid.ravel()]
                for a, grid in zip(g, grids)}
        data["count"] = values.ravel()
        frames[" x ".join(table.variables[a] for a in g)] = pd.DataFrame(data)
    return frames


