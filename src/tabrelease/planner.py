"""Planning a release: the mechanism's plan, with its estimator resolved and built for it.

A mechanism (layer 3) names its default estimator and rounding; the estimators (layer 4) read measurements and a
plan's fields, and neither imports the other. This module, above both, joins them: `plan_release` asks the chosen
mechanism for its plan and resolves the estimator's name into an `Estimator` built for that plan
(`get_estimator(name).for_plan(plan)`: the consistency LP is built once here, and `mechanisms.with_epsilon` keeps it
for a sweep's other epsilons); `with_post_processing` swaps in another estimator or rounding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .errors import TabreleaseError
from .estimate import Estimator, get_estimator
from .mechanisms import MechanismPlan, check_margins_fit, delta_takers, get_mechanism, resolve_mechanism
from .models import Margin, maximal_margins
from .postprocessing import ROUNDINGS
from .spec import ReleaseSpec


def plan_release(shape: Sequence[int], margins: Sequence[Margin], spec: ReleaseSpec,
                 variables: Sequence[str] | None = None) -> MechanismPlan:
    """Everything that does not depend on the counts: queries, exact sensitivity, calibration, estimator.

    The mechanism plans (queries, sensitivity, calibration, the names of its default estimator and rounding); the
    estimator named, or the one asked for, is then built for the plan here (its LP once, shared by rescaling).

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of tuple of int
        The margins released, as axis tuples (a margin inside another is released through it).
    spec : ReleaseSpec
        The release asked for: its loss and unit, mechanism and options, calibration, estimator and rounding (its
        margins, noise mode and outputs are not read here).
    variables : sequence of str or None
        The variables' names, for a sensitive-attribute unit that names them (letters work without), and to name a
        margin left inside another in the plan's note (by letters without).

    Returns
    -------
    MechanismPlan
        Carrying the mechanism object that made it (`implementation`).
    """
    if not isinstance(spec, ReleaseSpec):
        raise TabreleaseError(f"a plan is made from a ReleaseSpec, not {type(spec).__name__}")
    shape, margins = _checked_shape(shape), _checked_margins(margins)
    chosen = get_mechanism(resolve_mechanism(spec.mechanism, shape))  # a name, or a Mechanism object as it is
    name, delta = chosen.name, spec.delta
    if spec.calibration == "paper" and not chosen.paper_calibration:
        raise TabreleaseError("--calibration paper reproduces the Fourier and Efron-Stein mechanisms only")
    if chosen.needs_delta and delta is None:
        raise TabreleaseError(f"the {name} mechanism gives (epsilon, delta)-DP; give --delta")
    if delta is not None and not (chosen.needs_delta or chosen.accepts_delta):
        takers = delta_takers()
        listed = ", ".join(takers[:-1]) + " and " + takers[-1] if len(takers) > 1 else takers[0]
        raise TabreleaseError(f"--delta applies to the {listed} mechanisms only, not to {name}")
    generators, dropped = maximal_margins(margins)
    check_margins_fit(shape, generators)
    # Before the mechanism plans: a plan over a margin too large would exhaust memory first.
    check_plan_size(shape, generators, chosen.name, variables)
    options = dict(spec.options)
    if spec.sensitive is not None:  # the sensitive-attribute unit: its attributes, as axes, for the mechanism
        if "sensitive" not in chosen.options:
            raise TabreleaseError(f"--sensitive (the sensitive-attribute unit) does not apply to the {name} "
                                  "mechanism; use sensitive-attributes")
        from .mechanisms.sensitive_attributes import sensitive_axes

        options["sensitive"] = sensitive_axes(list(spec.sensitive), len(shape), variables)
    if "workload" in chosen.options:  # every margin asked for, nested ones too, for a mechanism that weighs them
        options["workload"] = tuple(dict.fromkeys(tuple(g) for g in margins))
    for option in options:
        if option not in chosen.options:
            flag = "--" + option.replace("_", "-")
            raise TabreleaseError(f"{flag} does not apply to the {name} mechanism")
    plan = chosen.plan(shape, tuple(generators), spec.epsilon, neighbours=spec.neighbours, delta=delta,
                       calibration=spec.calibration, options=options)
    plan = replace(plan, implementation=chosen)
    if dropped and "workload" in options:
        plan = replace(plan, weighed_inside=tuple(tuple(g) for g in dropped))
    if dropped:
        # A margin inside another asked-for margin is determined by it: not released separately, and said so.
        # Named by the variables where the caller gave them (letters depend on which variables were read).
        from .models import margin_label
        from .tables import margin_title

        letters = _letters(len(shape))
        labels = ", ".join(margin_title(variables, g) if variables is not None else margin_label(g, letters)
                           for g in dropped)
        plan = replace(plan, notes=plan.notes + (f"not released separately, being inside another released margin "
                                                 f"(sum that one to get it): {labels}",))
    return with_post_processing(plan, spec.estimator, spec.rounding)


def check_plan_size(shape: Sequence[int], margins: Sequence[Margin], mechanism: str,
                    variables: Sequence[str] | None = None) -> None:
    """Refuse, in one line and before any plan or charge, what cannot be planned at this size.

    Parameters
    ----------
    shape : sequence of int
    margins : sequence of tuple of int
        The margins to release, as axis tuples within the shape.
    mechanism : str
        The mechanism's name (the planned fit has a size limit of its own).
    variables : sequence of str or None
        The variables' names, for the message (letters without).

    Raises
    ------
    TabreleaseError
        A margin above `MAX_MARGIN_CELLS` cells, or a planned fit of the margins on themselves too large to handle;
        nothing is charged.
    """
    from .mechanisms.planned import GLOBAL_MAX_CELLS, LOCAL_MAX_NONZEROS, fit_nonzeros
    from .tables import MAX_MARGIN_CELLS

    names = list(variables) if variables is not None else _letters(len(shape))

    def described(g):
        return " x ".join(f"{names[a]} ({shape[a]})" for a in g)

    for g in margins:
        cells = int(np.prod([shape[a] for a in g], dtype=object))
        if cells > MAX_MARGIN_CELLS:
            raise TabreleaseError(f"the margin {described(g)} has {cells:.3g} cells, more than the "
                                  f"{MAX_MARGIN_CELLS:,} (2^26) a released margin may have; release smaller margins; "
                                  "nothing was charged")
    if mechanism == "planned" and margins and int(np.prod(shape, dtype=object)) > GLOBAL_MAX_CELLS:
        needed = fit_nonzeros(shape, margins)
        if needed > LOCAL_MAX_NONZEROS:
            largest = max(margins, key=lambda g: fit_nonzeros(shape, [g]))
            cells = int(np.prod([shape[a] for a in largest], dtype=object))
            raise TabreleaseError(f"the fit of these margins on themselves needs {needed:,} operator non-zeros, more "
                                  f"than the {LOCAL_MAX_NONZEROS:,} it handles (the largest, {described(largest)}, "
                                  f"has {cells:,} cells): release smaller or coarser margins; nothing was charged")


def _letters(k: int) -> list[str]:
    # The papers' letters, as a table names its variables (tables.ContingencyTable.letters).
    from .tables import LETTERS

    return [LETTERS[j] if j < len(LETTERS) else f"V{j + 1}" for j in range(k)]


def _checked_shape(shape) -> tuple[int, ...]:
    try:
        shape = tuple(int(k) for k in shape)
    except (TypeError, ValueError):
        raise TabreleaseError(f"a table's shape is a sequence of level counts, not {shape!r}") from None
    if not shape or any(k < 2 for k in shape):
        raise TabreleaseError(f"every variable needs at least 2 levels; the shape {list(shape)} has fewer")
    return shape


def _checked_margins(margins) -> list[tuple[int, ...]]:
    """Margins as sequences of axis numbers (a margin given as text, or axes that are not numbers, are refused)."""
    if isinstance(margins, (str, bytes)) or not isinstance(margins, Sequence):
        raise TabreleaseError(f"give the margins as a list of axis tuples, e.g. [(0, 1), (1, 2)], not {margins!r}; "
                              "parse_model reads the bracket notation")
    out = []
    for g in margins:
        if isinstance(g, (str, bytes)) or not isinstance(g, Sequence) or not all(
                isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in g):
            raise TabreleaseError(f"a margin is a tuple of axis numbers, not {g!r}")
        axes = tuple(int(a) for a in g)
        if len(set(axes)) < len(axes):
            raise TabreleaseError(f"the margin {g!r} names an axis twice")
        # In the table's order, as the bracket notation gives them: (1, 0) and (0, 1) are one margin, planned and
        # released alike (a new user's trial: the order a program gave had changed the plan's scales).
        out.append(tuple(sorted(axes)))
    return out


def with_post_processing(plan: MechanismPlan, estimator: str | None = None, rounding: str | None = None) -> MechanismPlan:
    """The plan with another estimator and/or rounding (post-processing: the privacy is the plan's).

    The plan's own estimator is resolved first where the mechanism left it as a name.

    Parameters
    ----------
    plan : MechanismPlan
        The plan.
    estimator : str, optional
        The estimator's name (the plan's own by default); it must read every kind of measurement the plan's
        estimator reads.
    rounding : str, optional
        ``"nearest"``, ``"controlled"`` or ``"none"`` (the plan's own by default).

    Returns
    -------
    MechanismPlan
        A new plan, its estimator built for it.

    Raises
    ------
    TabreleaseError
        If the estimator or rounding is unknown, or the estimator cannot read the mechanism's measurements.
    """
    plan = resolve_estimator(plan)
    if estimator is not None:
        chosen = get_estimator(estimator)
        if not set(plan.estimator.reads) <= set(chosen.reads):
            raise TabreleaseError(f"the {estimator} estimator reads {' and '.join(chosen.reads)} measurements; the "
                                  f"{plan.mechanism} mechanism measures {' and '.join(plan.estimator.reads)}")
        plan = replace(plan, estimator=chosen.for_plan(plan))
    if rounding is not None:
        if rounding not in ROUNDINGS:
            raise TabreleaseError(f"unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}")
        plan = replace(plan, rounding=rounding)
    return plan


def resolve_estimator(plan: MechanismPlan) -> MechanismPlan:
    """The plan with its estimator built for it, where the mechanism named it (with the options it gave); a plan
    whose estimator is built already is returned as it is.

    Parameters
    ----------
    plan : MechanismPlan
        The plan.

    Returns
    -------
    MechanismPlan
        The plan with an `Estimator` (prepared by `Estimator.for_plan`) in place of the name.

    Raises
    ------
    TabreleaseError
        If the name is unknown, or the estimator cannot work with the plan.
    """
    if not isinstance(plan.estimator, str):
        return plan
    return replace(plan, estimator=build_estimator(plan.estimator, plan.estimator_options).for_plan(plan))


def build_estimator(name: str, options: Mapping[str, Any] | None = None) -> Estimator:
    """The registered estimator of that name, or (with options) a new one built with those keyword arguments.

    Parameters
    ----------
    name : str
        The estimator's name.
    options : mapping of str to object, optional
        Keyword arguments of its constructor (a junction tree's ``cliques``, say).

    Returns
    -------
    Estimator
        The estimator, not yet prepared for a plan.

    Raises
    ------
    TabreleaseError
        If no estimator has this name.
    """
    chosen = get_estimator(name)
    return type(chosen)(**options) if options else chosen


__all__ = ["build_estimator", "plan_release", "resolve_estimator", "with_post_processing"]
