"""The release path, forward: plan -> measure (the privacy step) -> estimate -> round, and the whole workflow
that an agency runs (destination checked, budget charged before any noise, evaluation, bundle written).

`run_plan` is the only place the steps meet, and it never asks which mechanism ran: the mechanism is
reached through the registry for its privacy step alone, and everything after reads the plan and the
`Measurements`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ._signals import deferred_signals
from .errors import ChargedReleaseFailed, TabreleaseError
from .measurements import EXACT, Measurements
from .mechanisms import DEFAULT, MechanismPlan, get_mechanism, plan_release
from .models import Margin, default_model
from .noise import RELEASE, NoiseCalibration, NoiseSource, noise_source
from .rounding import round_estimate
from .tables import ContingencyTable


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
        from .notebook import release_html

        return release_html(self)

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
    records is given to mechanisms that read margins only; the others get its cells)."""
    mechanism = get_mechanism(plan.mechanism)
    if not isinstance(data, np.ndarray) and hasattr(data, "margin_counts"):
        data = data if mechanism.reads_margins else data.counts
    else:
        data = np.asarray(data)
    if tuple(data.shape) != plan.shape:
        raise TabreleaseError(f"the plan is for a table of shape {plan.shape}, not {tuple(data.shape)}")
    return mechanism.measure(plan, data, noise)


def release_from_measurements(plan: MechanismPlan, measurements: Measurements, *, estimator=None,
                              noise_seconds: float = float("nan")) -> Release:
    """Post-processing only: estimate (the plan's estimator, or another, by name or object), round, take the margins."""
    if isinstance(estimator, str):
        from .estimate import get_estimator

        estimator = get_estimator(estimator)
    estimator = plan.estimator if estimator is None else estimator.for_plan(plan)
    # The plan states the privacy of what is released: it must be the plan the noise was drawn for.
    get_mechanism(plan.mechanism).check_measurements(plan, measurements)
    estimate = estimator.estimate(plan, measurements)
    rounded = round_estimate(estimate, plan.margins, plan.rounding, plan.calibration.scale)
    notes = list(plan.notes) + list(estimate.notes)
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
        rounding=plan.rounding,
        rounding_gap=rounded.gap,
        measurements=measurements,
        estimator=estimator.name,
        plan=plan,
        guarantee=rounded.consistency,
        privacy=get_mechanism(plan.mechanism).privacy_statement(plan),
    )


# A margin whose expected L1 error is above this share of the released total is flagged as unfit to publish.
UNFIT_ERROR_SHARE = 0.25


def fitness_notes(plan: MechanismPlan, released_margins) -> list[str]:
    """Whether the release is fit to publish, judged from the plan's expected errors and the released (DP) total
    only, so the notes may be public: a margin whose expected L1 error is a large share of n', or whose expected
    noise per cell exceeds its typical released cell; and what would help."""
    planned = get_mechanism(plan.mechanism).expected_errors(plan) if plan.design is not None else None
    if not planned or not released_margins:
        return []
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
    from .tables import LETTERS

    letters = [LETTERS[j] if j < len(LETTERS) else f"V{j + 1}" for j in range(len(plan.shape))]

    return [f"unfit to publish as it stands: {len(unfit)} of {len(plan.margins)} margins are expected to be "
            f"too noisy to use (worst {margin_label(worst[0], letters)}: expected L1 error {worst[1]:.0%} of the released "
            f"total, noise sd {worst[2]:.3g} per cell against a typical released cell of {worst[3]:.3g}); more "
            "epsilon, fewer or coarser margins (merged levels), or --plan-objective max-cell-variance would help"]


def run_plan(plan: MechanismPlan, data, noise: NoiseSource) -> Release:
    """Draw the noise and produce the release for one table (a count array, or a table)."""
    start = time.perf_counter()
    measurements = measure(plan, data, noise)
    return release_from_measurements(plan, measurements, noise_seconds=time.perf_counter() - start)


def release_margins(
    table: ContingencyTable,
    epsilon: float,
    margins: Sequence[Margin] | None = None,
    *,
    mechanism: str = DEFAULT,
    neighbours: str = "add-remove",
    delta: float | None = None,
    calibration: str = "exact",
    mode: str = RELEASE,
    seed: int | None = None,
    nonneg_t: float | None = None,
    estimator: str | None = None,
    rounding: str | None = None,
    public_total: bool = False,
    plan_objective: str | None = None,
    sensitive: Sequence[str | int] | str | None = None,
) -> Release:
    """Release margins of `table` under differential privacy (in memory: no ledger, no files).

    `margins` are axis tuples (default: the table's paper model). `mode="release"` draws from
    OpenDP and refuses a seed; `mode="simulation"` is seeded numpy noise for experiments.
    Use `publish_release` for the workflow with a privacy ledger and a written bundle.
    """
    plan, noise = _plan_and_noise(table, epsilon, margins, mode, seed, mechanism=mechanism, neighbours=neighbours,
                                  delta=delta, calibration=calibration, nonneg_t=nonneg_t, estimator=estimator,
                                  rounding=rounding, public_total=public_total,
                                  plan_objective=plan_objective, sensitive=sensitive)
    return run_plan(plan, table, noise)


def _plan_and_noise(table, epsilon, margins, mode, seed, public_total=False, plan_objective=None, sensitive=None,
                    **plan_options):
    """The noise source (a seed is refused in release mode) and the plan; margins default to the paper model."""
    from .tables import LEVELS_FROM_DATA

    margins = resolve_margins(table, margins)
    from .mechanisms import _checked_margins

    # Before any plan: a plan over every cell, or over a margin too large, would exhaust memory first.
    check_release_size(table, _checked_margins(margins), plan_options.get("mechanism", DEFAULT))
    if mode == RELEASE and table.metadata.get(LEVELS_FROM_DATA):
        missing = table.metadata.get("undeclared_levels")
        which = f" (undeclared: {', '.join(missing)})" if missing else ""
        raise TabreleaseError("the table's levels were read from data that need not show every level (microdata, or "
                              "a --sparse table): the published schema would reveal which values occur; declare "
                              f"every variable's levels (--levels FILE, or levels= in the API){which}")
    noise = noise_source(mode, seed)
    options = _planned_options(public_total, plan_objective)
    if sensitive is not None:  # the sensitive-attributes mechanism's: names, letters or axes, as axes
        from .mechanisms.sensitive_attributes import sensitive_axes

        options["sensitive"] = sensitive_axes(sensitive, table.k, table.variables)
    if options:
        plan_options["options"] = options
    plan = plan_release(table.shape, margins, epsilon, **plan_options)
    from .models import margin_label, maximal_margins

    if table.metadata.get(LEVELS_FROM_DATA):  # simulation only (release mode refused it above); in release.json too
        plan = replace(plan, notes=plan.notes + ("the levels were read from the data: the published schema reveals "
                                                 "which values occur (declare them with --levels FILE before a "
                                                 "release for publication)",))

    _, dropped = maximal_margins(_checked_margins(margins))
    if dropped:
        # A margin inside another asked-for margin is determined by it: not released separately, and said so.
        labels = ", ".join(margin_label(g, table.letters) for g in dropped)
        plan = replace(plan, notes=plan.notes + (f"not released separately, being inside another released margin "
                                                 f"(sum that one to get it): {labels}",))
    return plan, noise


def resolve_margins(table, margins) -> list:
    """Margins as axis tuples, from what a person writes: None (the table's paper model), bracket notation
    ("[sex,age][age,region]" or "[AB][BC]"), or a list whose margins are axis numbers, variable names or letters
    (("sex", "age"), or "sex" for a one-way margin)."""
    from .models import parse_model

    if margins is None:
        return list(default_model(table).generators)
    if isinstance(margins, str):
        model = parse_model(margins, table)
        return list(model.generators) + list(model.dropped)
    if not isinstance(margins, Sequence):
        raise TabreleaseError(f"give the margins as a list, e.g. [('sex', 'age'), (1, 2)], or in bracket notation, "
                              f"not {margins!r}")
    resolved = []
    for g in margins:
        items = [g] if isinstance(g, str) else g
        if not isinstance(items, Sequence) or isinstance(items, bytes):
            raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        axes = []
        for item in items:
            if isinstance(item, str):
                axes.append(table.axis(item))
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                axes.append(int(item))
            else:
                raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        resolved.append(tuple(axes))
    return resolved


def released_frames(release: Release, table) -> dict:
    """The released margins as labelled pandas DataFrames, keyed by the variables' names joined by " x ": one
    column per variable (its level labels) and a count column, one row per cell."""
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


def _planned_options(public_total: bool, plan_objective: str | None) -> dict:
    """The planned mechanism's options, as plan_release takes them (only those given)."""
    options = {"public_total": True} if public_total else {}
    if plan_objective is not None:
        options["plan_objective"] = plan_objective
    return options


def check_release_size(table, margins: Sequence[Margin], mechanism: str) -> None:
    """Refuse, in one line and before any plan or charge, what cannot be done at this size: a released margin with
    more cells than a margin may have, or a mechanism that needs every cell of a table held as records."""
    from .tables import MAX_MARGIN_CELLS

    for g in margins:
        if any(not 0 <= a < table.k for a in g):
            return  # the plan names the bad axis
        cells = int(np.prod([table.shape[a] for a in g], dtype=object))
        if cells > MAX_MARGIN_CELLS:
            names = " x ".join(f"{table.variables[a]} ({table.shape[a]})" for a in g)
            raise TabreleaseError(f"the margin {names} has {cells:.3g} cells, more than the {MAX_MARGIN_CELLS:,} "
                                  "(2^26) a released margin may have; release smaller margins; nothing was charged")
    from .mechanisms import resolve_mechanism
    from .mechanisms.planned import GLOBAL_MAX_CELLS, LOCAL_MAX_NONZEROS, fit_nonzeros

    if mechanism == "planned" and margins and table.cells > GLOBAL_MAX_CELLS:
        needed = fit_nonzeros(table.shape, margins)
        if needed > LOCAL_MAX_NONZEROS:
            largest = max(margins, key=lambda g: fit_nonzeros(table.shape, [g]))
            names = " x ".join(f"{table.variables[a]} ({table.shape[a]})" for a in largest)
            cells = int(np.prod([table.shape[a] for a in largest], dtype=object))
            raise TabreleaseError(f"the fit of these margins on themselves needs {needed:,} operator non-zeros, more "
                                  f"than the {LOCAL_MAX_NONZEROS:,} it handles (the largest, {names}, has {cells:,} "
                                  "cells): release smaller or coarser margins; nothing was charged")
    try:
        reads_margins = get_mechanism(resolve_mechanism(mechanism, table.shape)).reads_margins
    except TabreleaseError:
        return  # an unknown mechanism: the plan says so
    if not getattr(table, "held_as_cells", True) and not reads_margins:
        raise TabreleaseError(f"the {mechanism} mechanism needs every cell of the table, and it has "
                              f"{table.cells:.3g} cells (held as records): use the planned mechanism, which works "
                              "from margins; nothing was charged")


def check_before_charge(plan: MechanismPlan, table: ContingencyTable, mode: str) -> None:
    """Every check of a planned release against its table that must refuse before any charge: the secure sampler's
    domain, the range in which estimates are exact (floats hold every count), and the mechanism's own size limit."""
    from .estimate import check_exact_range

    check_sampler_domain(plan, table, mode)
    check_exact_range(table)
    get_mechanism(plan.mechanism).check_table_size(plan, int(table.n))


def check_sampler_domain(plan: MechanismPlan, table: ContingencyTable, mode: str) -> None:
    """Release mode draws on 64-bit integers: refuse, before any charge, a table whose measured integers could
    exceed them (the message names no count)."""
    from .noise import MAX_SAMPLER_INTEGER

    if mode != RELEASE or plan.calibration.distribution != "laplace":
        return
    from fractions import Fraction

    # Exact: in floating point n * W rounds, and counts just above 2^62 passed this check and failed after the charge.
    n = int(table.n)
    if Fraction(n) * Fraction(get_mechanism(plan.mechanism).sampler_bound(plan)) > MAX_SAMPLER_INTEGER:
        raise TabreleaseError("the table's counts are too large for release mode's 64-bit secure sampler "
                              f"(measured integers may reach {MAX_SAMPLER_INTEGER:.3g}); nothing was charged")


def expected_errors_table(shape: Sequence[int], margins: Sequence[Margin], epsilons: Sequence[float], *,
                          neighbours: str = "add-remove", delta: float | None = None,
                          public_total: bool = False, plan_objective: str | None = None) -> list[dict]:
    """Per margin and epsilon: the planned mechanism's expected error and the paper mechanism's (the unbiased
    linear reconstruction of each one's measurements), from the shape and margins alone (no counts)."""
    from .mechanisms import AUTO, with_epsilon

    options = _planned_options(public_total, plan_objective)
    planned = plan_release(shape, margins, epsilons[0], neighbours=neighbours, delta=delta, options=options)
    paper = plan_release(shape, margins, epsilons[0], mechanism=AUTO if delta is None else "gaussian",
                         neighbours=neighbours, delta=delta)
    rows = []
    for epsilon in epsilons:
        ours = get_mechanism(planned.mechanism).expected_errors(with_epsilon(planned, epsilon))
        theirs = get_mechanism(paper.mechanism).expected_errors(with_epsilon(paper, epsilon))
        for g in planned.margins:
            rows.append({"axes": g, "cells": ours[g].cells, "epsilon": float(epsilon),
                         "expected_l1": ours[g].expected_l1, "cell_sd": ours[g].cell_sd,
                         "expected_squared_error": ours[g].total_variance,
                         "paper_mechanism": paper.mechanism, "paper_expected_l1": theirs[g].expected_l1})
    return rows


def epsilon_for_target(shape: Sequence[int], margins: Sequence[Margin], target_l1: float, *,
                       neighbours: str = "add-remove", delta: float | None = None, public_total: bool = False,
                       plan_objective: str | None = None) -> dict:
    """Per margin, the smallest epsilon at which the planned mechanism's expected L1 error of that margin is at most
    `target_l1` (bisection on log epsilon; the expected error falls as epsilon grows), from the shape and margins
    alone. None where even epsilon = 10^4 does not reach it."""
    from .mechanisms import with_epsilon

    if not (isinstance(target_l1, (int, float)) and np.isfinite(target_l1) and target_l1 > 0):
        raise TabreleaseError(f"the target error must be a positive number, not {target_l1!r}")
    options = _planned_options(public_total, plan_objective)
    plan = plan_release(shape, margins, 1.0, neighbours=neighbours, delta=delta, options=options)
    mechanism = get_mechanism(plan.mechanism)

    def error(epsilon, g):
        return mechanism.expected_errors(with_epsilon(plan, epsilon))[g].expected_l1

    out = {}
    for g in plan.margins:
        low, high = np.log(1e-4), np.log(1e4)
        if error(np.exp(high), g) > target_l1:
            out[g] = None
            continue
        for _ in range(60):  # to a relative precision of about 1e-7 in epsilon
            middle = (low + high) / 2
            low, high = (middle, high) if error(np.exp(middle), g) > target_l1 else (low, middle)
        out[g] = float(np.exp(high))
    return out


# --- the workflow ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PublishedRelease:
    """What `publish_release` did: the release, its evaluation, where it was written, the ledger's word."""

    release: Release
    evaluation: Any
    out: Path
    ledger_entry: Mapping[str, Any] | None
    budget: Any  # ledger.BudgetStatus after the charge, or None without a ledger
    warnings: tuple[str, ...]

    def _repr_html_(self) -> str:
        from .notebook import release_html

        return release_html(self.release, self.evaluation)


def charge_release(ledger, table, plan: MechanismPlan, out, mode: str, *, dataset: str | None = None,
                   allow_unbudgeted: bool = False, allow_alias: bool = False) -> dict:
    """Charge the ledger for a release of `plan` before any noise is drawn (or refuse it): what `publish_release`
    does, and what a batch's dry run does on a throw-away copy of the ledger. The charge is the mechanism's
    guarantee as a value (`Mechanism.guarantee`: its unit and loss; a paper preset is charged the epsilon its noise
    really gives), which the ledger reads under the unit of the dataset's budget."""
    from .ledger import charge
    from .models import margin_label

    return charge(
        ledger, table, guarantee=get_mechanism(plan.mechanism).guarantee(plan, table.variables),
        mechanism=plan.mechanism, margins=[margin_label(g, table.letters) for g in plan.margins],
        output=str(Path(out).resolve()), noise_mode=mode, dataset=dataset, allow_unbudgeted=allow_unbudgeted,
        allow_alias=allow_alias,
    )


def charged_failure(ledger, entry: Mapping, exc: BaseException) -> ChargedReleaseFailed:
    """The error for a release that failed after its charge, the failure recorded in the ledger first. The message
    names the charge and the kind of failure only (an exception's text could hold something derived from the
    counts)."""
    from .ledger import record_failure
    from .privacy import PrivacyGuarantee

    kind = type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        kind += f": {exc.strerror}"
    elif isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        kind = f"terminated by signal {exc.code - 128}"
    elif isinstance(exc, KeyboardInterrupt):
        kind = "interrupted"
    recorded = ""
    try:
        with deferred_signals():
            record_failure(ledger, entry, f"the release failed after its charge ({kind})")
    except Exception as record_exc:  # the charge stands all the same; say the failure is not in the ledger
        recorded = f"; the failure could not be recorded in the ledger ({type(record_exc).__name__})"
    loss = PrivacyGuarantee.from_dict(entry["guarantee"]).loss.describe()
    return ChargedReleaseFailed(
        f"charged {loss} to {entry['dataset']} (ledger record {entry.get('sequence')}); the release failed ({kind}) "
        f"and nothing was published{recorded}", entry)


def _bundle_of(out, entry: Mapping) -> bool:
    """Whether `out` holds the bundle of this charge (its internal/charge.json names the charge's MAC)."""
    import hmac
    import json

    from .ledger import CHARGE_FILE

    try:
        recorded = json.loads((Path(out) / "internal" / CHARGE_FILE).read_text()).get("mac")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    return isinstance(recorded, str) and hmac.compare_digest(recorded, str(entry.get("mac")))


def preload_release_modules(workbook: bool = False) -> None:
    """Import, before the charge and with signals held, the compiled modules the release path would otherwise
    import lazily after it (a signal during such an import can abort the interpreter)."""
    import importlib

    for name in ("scipy.sparse", "scipy.sparse.linalg", "scipy.optimize", "scipy.stats", "highspy", "jinja2",
                 "matplotlib.figure", "matplotlib.backends.backend_agg", "pandas", "opendp.prelude", "tabrelease.evaluation",
                 "tabrelease.reports", "tabrelease.estimate", "tabrelease.notebook") + (("openpyxl",) if workbook else ()):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional module: its own check, before the charge, says what is missing
            pass


def _check_figures_available() -> None:
    """The audit draws its figures after the charge: a broken install (no matplotlib) is refused before it."""
    from ._optional import module_available

    if not module_available("matplotlib"):
        raise TabreleaseError("the audit's figures need matplotlib: pip install matplotlib (a dependency of "
                              "tabrelease)")


def publish_release(
    table: ContingencyTable,
    out: str | os.PathLike,
    epsilon: float,
    margins: Sequence[Margin] | None = None,
    *,
    mechanism: str = DEFAULT,
    neighbours: str = "add-remove",
    delta: float | None = None,
    calibration: str = "exact",
    mode: str = RELEASE,
    seed: int | None = None,
    nonneg_t: float | None = None,
    estimator: str | None = None,
    rounding: str | None = None,
    public_total: bool = False,
    plan_objective: str | None = None,
    sensitive: Sequence[str | int] | str | None = None,
    bound_delta: float = 0.05,
    ledger: str | os.PathLike | None = None,
    dataset: str | None = None,
    allow_unbudgeted: bool = False,
    allow_alias: bool = False,
    force: bool = False,
    version: str | None = None,
    workbook: bool = False,
) -> PublishedRelease:
    """The whole release, with the guarantees of the command line: check the destination, plan, charge the
    ledger before any noise is drawn, measure, estimate, evaluate, and write `out/public` and `out/internal`.

    Every check that can refuse happens before the charge; a refusal charges nothing and writes nothing.
    """
    from . import __version__
    from .evaluation import evaluate_release
    from .models import HierarchicalModel
    from .reports import (check_release_destination, check_writable, evaluation_warnings, release_warnings,
                          remove_stale_staging, write_release_bundle)

    if not 0 < bound_delta < 1:
        raise TabreleaseError(f"--bound-delta must lie strictly between 0 and 1, not {bound_delta:g}")
    check_release_destination(out, force)
    check_writable(out)
    _check_figures_available()
    if workbook:
        from .workbook import check_workbook_support

        check_workbook_support()
    plan, noise = _plan_and_noise(table, epsilon, margins, mode, seed, mechanism=mechanism, neighbours=neighbours,
                                  delta=delta, calibration=calibration, nonneg_t=nonneg_t, estimator=estimator,
                                  rounding=rounding, public_total=public_total,
                                  plan_objective=plan_objective, sensitive=sensitive)
    check_before_charge(plan, table, mode)
    stale = remove_stale_staging(out)  # folders of killed runs (they may hold an audit): gone before anything else
    with deferred_signals():
        preload_release_modules(workbook)
    entry = budget = None
    try:
        with deferred_signals():  # charged and known to be, or not charged: a signal waits for the charge's end
            if ledger is not None:
                entry = charge_release(ledger, table, plan, out, mode, dataset=dataset,
                                       allow_unbudgeted=allow_unbudgeted, allow_alias=allow_alias)
        release = run_plan(plan, table, noise)
        # Judged once per published release (not in run_plan: sweeps draw tens of thousands of releases).
        release = replace(release, notes=release.notes + tuple(fitness_notes(plan, release.released_margins)))
        refit = HierarchicalModel(release.margins, table.k)
        evaluation = evaluate_release(table, release, refit, bound_delta=bound_delta)
        written = write_release_bundle(out, table, release, evaluation, model_label=refit.names(table.variables),
                                       version=version or __version__, force=force, workbook=workbook, charge=entry)
    except BaseException as exc:
        if entry is None or _bundle_of(out, entry):
            # Not charged; or published, and the failure came after (a signal held over the bundle's rename is
            # acted on once the bundle is in place): the release stands, and is not recorded as failed.
            raise
        raise charged_failure(ledger, entry, exc) from exc
    extra = []
    if ledger is not None:
        from .ledger import budget_status

        try:  # the release is made and charged: a failure to read the account now must not say otherwise
            budget = budget_status(ledger, entry["dataset"])
        except TabreleaseError as exc:
            extra.append(f"released and charged, but the ledger's account could not be read back: {exc}")
    warnings = tuple(extra + [f"removed {p.name}, left beside {Path(out).name} by a release that was killed" for p in stale]
                     + release_warnings(release) + evaluation_warnings(evaluation))
    return PublishedRelease(release, evaluation, written, entry, budget, warnings)

