"""The workflow an agency runs around the pipeline: every check before the charge, the ledger's charge before any
noise is drawn, then measure, estimate, evaluate and write the bundle (public/ and internal/), or nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ._signals import deferred_signals
from .errors import ChargedReleaseFailed, TabreleaseError
from .mechanisms import DEFAULT, MechanismPlan, get_mechanism
from .planner import plan_release
from .models import Margin, default_model
from .noise import RELEASE, noise_source
from .forecast import _planned_options
from .pipeline import Release, fitness_notes, run_plan
from .tables import ContingencyTable


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
    from .planner import _checked_margins

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
        from ._display import html_for

        return html_for(self)


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
    from .bundle import (check_release_destination, check_report_support, check_writable, remove_stale_staging,
                         write_release_bundle)
    from .evaluation import evaluate_release, evaluation_warnings, release_warnings
    from .models import HierarchicalModel

    if not 0 < bound_delta < 1:
        raise TabreleaseError(f"--bound-delta must lie strictly between 0 and 1, not {bound_delta:g}")
    check_release_destination(out, force)
    check_writable(out)
    _check_figures_available()
    if workbook:
        check_report_support(workbook)
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

