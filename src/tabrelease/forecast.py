"""What a plan forecasts before any count is read: expected errors per margin and epsilon, and the epsilon a target
error needs (the planned mechanism's, beside the paper's), from the shape and margins alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .errors import TabreleaseError
from .planner import plan_release
from .models import Margin
from .spec import EPSILON_RANGE, ReleaseSpec

def _plan(shape, margins, spec: ReleaseSpec, epsilon: float, mechanism: str | None = None):
    """The spec's plan at epsilon (or another mechanism's, without the spec's options)."""
    if mechanism is not None:  # the paper's mechanism beside it: its own, without the spec's options
        spec = replace(spec, mechanism=mechanism, options=())
    return plan_release(shape, margins, spec.with_epsilon(epsilon))


def expected_errors_table(shape: Sequence[int], margins: Sequence[Margin], epsilons: Sequence[float],
                          spec: ReleaseSpec) -> list[dict]:
    """Per margin and epsilon: the spec's mechanism's expected error, noise on every cell's (Laplace only) and the
    paper mechanism's (the unbiased linear reconstruction of each one's measurements), from the shape and margins
    alone (no counts).

    Parameters
    ----------
    shape : sequence of int
    margins : sequence of tuple of int
    epsilons : sequence of float
    spec : ReleaseSpec
        The release planned (its mechanism, unit, delta and options; its epsilon is not used).

    Returns
    -------
    list of dict
        One row per margin and epsilon; ``cells_expected_l1`` is None under (epsilon, delta) (noise on every cell
        is a Laplace mechanism here).
    """
    from .mechanisms import AUTO, with_epsilon

    planned = _plan(shape, margins, spec, epsilons[0])
    paper_name = AUTO if spec.delta is None else "gaussian"
    try:
        paper, paper_note = _plan(shape, margins, spec, epsilons[0], mechanism=paper_name), None
    except TabreleaseError as refused:
        # The comparison is skipped, not the plan: the paper's mechanism is refused at this size (its LP is over
        # every cell), and the row says why.
        paper, paper_note = None, f"the paper's mechanism is not compared: {str(refused).split('; nothing was')[0]}"
    cells = None if spec.delta is not None else _plan(shape, margins, spec, epsilons[0], mechanism="cells")
    rows = []
    for epsilon in epsilons:
        ours = planned.implementation.expected_errors(with_epsilon(planned, epsilon))
        theirs = None if paper is None else paper.implementation.expected_errors(with_epsilon(paper, epsilon))
        every_cell = None if cells is None else _cells_errors(with_epsilon(cells, epsilon))
        for g in planned.margins:
            rows.append({"axes": g, "cells": ours[g].cells, "epsilon": float(epsilon),
                         "expected_l1": ours[g].expected_l1, "cell_sd": ours[g].cell_sd,
                         "expected_squared_error": ours[g].total_variance,
                         "cells_expected_l1": None if every_cell is None else every_cell[g].expected_l1,
                         "paper_mechanism": paper_name if paper is None else paper.mechanism,
                         "paper_expected_l1": None if theirs is None else theirs[g].expected_l1,
                         "paper_note": paper_note})
    return rows


def total_noise_sds(shape: Sequence[int], margins: Sequence[Margin], epsilons: Sequence[float],
                    spec: ReleaseSpec) -> list[dict]:
    """Per epsilon, the standard deviation of the noise in the total n the spec's plan releases (the unbiased
    reconstruction's total: the best linear unbiased estimate of n from the blocks that carry it, to which the fit
    pins the released total), from the shape and margins alone.

    Why: on a sparse table the fit's non-negativity corrects much of the noise in the cells' interactions, but not
    the noise in the total, and where that is as large as n the release is mostly noise whatever the margins'
    planned errors say (ICU's 3,072 cells at epsilon 0.05: sd 1,568 against 200 patients;
    `benchmarks/bench_total_share.py`). A user who knows roughly how many records the table holds can read it.

    Parameters
    ----------
    shape, margins, epsilons, spec
        As for `expected_errors_table`: the table's levels, the released margins, the epsilons to say it at, and
        the release planned (its epsilon is not used).

    Returns
    -------
    list of dict
        ``epsilon`` and ``total_noise_sd`` (0 where the total is public; None where the plan's blocks have no scales
        of their own to read it from).
    """
    from .mechanisms import with_epsilon

    planned = _plan(shape, margins, spec, epsilons[0])
    # The total is the empty margin: the mechanism's own expected error of it (`Mechanism.expected_errors`, the
    # design's scales), for a plan whose blocks have scales of their own.
    total_only = replace(planned, margins=((),))
    rows = []
    for epsilon in epsilons:
        sd = None
        if planned.design is not None:
            plan = with_epsilon(total_only, epsilon)
            sd = float(np.sqrt(plan.implementation.expected_errors(plan)[()].total_variance))
        rows.append({"epsilon": float(epsilon), "total_noise_sd": sd})
    return rows


def _cells_errors(plan) -> dict:
    """The unbiased expected error of each margin from Laplace noise on every cell (the cells mechanism's plan)."""
    from .measurements import MARGIN_CELLS
    from .planning import expected_margin_errors

    full = tuple(range(len(plan.shape)))
    variance = 2.0 * plan.calibration.scale**2
    return expected_margin_errors(plan.shape, plan.margins, [(MARGIN_CELLS, full, "efron-stein", variance)])


# With a reference, the simulated mean error is wanted to this relative standard error at the epsilon found (runs
# from a first batch's spread, at least TARGET_FIRST_RUNS, at most TARGET_MOST_RUNS): 40 fixed runs had left the
# answer 10-25% off on a small sparse table at small epsilon (a new user's trial: 299 against 252 from 400 runs).
TARGET_RELATIVE_SE = 0.02
TARGET_FIRST_RUNS = 40
TARGET_MOST_RUNS = 400


def target_runs(shape: Sequence[int], margins: Sequence[Margin], target_l1: float, spec: ReleaseSpec,
                reference) -> tuple[int, float]:
    """How many simulated releases `epsilon_for_target` takes per epsilon tried with a reference: a first batch at
    each margin's unbiased epsilon for the target gives the spread of its mean error, and the runs are as many as make
    the largest relative standard error `TARGET_RELATIVE_SE` (within the bounds above).

    Parameters
    ----------
    shape, margins, target_l1, spec, reference
        As `epsilon_for_target` (`reference` required).

    Returns
    -------
    runs : int
        The simulated releases per epsilon.
    relative_se : float
        The largest relative standard error of a margin's mean error that many runs give, by the first batch's
        spread (a margin whose target is beyond reach is left out).
    """
    from math import ceil

    from .error_model import AUDIT_SEED, _simulated_runs, _table_of_plan
    from .mechanisms import with_epsilon

    unbiased = epsilon_for_target(shape, margins, target_l1, spec)
    plan = _plan(shape, margins, spec, 1.0)
    counts = np.rint(_table_of_plan(plan, reference, "the reference")).astype(np.int64)
    worst = 0.0
    for j, g in enumerate(plan.margins):
        if unbiased[g] is None:
            continue
        errors, _ = _simulated_runs(with_epsilon(plan, unbiased[g]), [counts] * TARGET_FIRST_RUNS, seed=AUDIT_SEED,
                                    rounded=True)
        mean = float(errors[:, j].mean())
        if mean > 0:
            worst = max(worst, float(errors[:, j].std(ddof=1)) / mean / np.sqrt(TARGET_FIRST_RUNS))
    runs = int(min(TARGET_MOST_RUNS, max(TARGET_FIRST_RUNS,
                                         ceil(TARGET_FIRST_RUNS * (worst / TARGET_RELATIVE_SE) ** 2))))
    return runs, worst * np.sqrt(TARGET_FIRST_RUNS / runs)


def epsilon_for_target(shape: Sequence[int], margins: Sequence[Margin], target_l1: float,
                       spec: ReleaseSpec, reference=None, runs: int | None = None) -> dict:
    """Per margin, the smallest epsilon at which the planned mechanism's expected L1 error of that margin is at most
    `target_l1` (bisection on log epsilon; the expected error falls as epsilon grows). None where even
    epsilon = 10^4 does not reach it.

    Without a reference, the error is the plan's (the unbiased linear reconstruction's, from the shape and margins
    alone): an upper figure, as non-negative fitting only lowers it. With a reference table (public, e.g. a table
    released before, or one of a published total), it is the fitted release's mean error simulated on that table
    (`error_model.simulate_errors`, rounded as released, the same seed at every epsilon, so the search follows one
    smooth curve): non-negativity in view, for a table like the reference.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : sequence of tuple of int
        The margins released, as axis tuples.
    target_l1 : float
        The expected L1 error wanted per margin, in counts (positive).
    spec : ReleaseSpec
        The release planned (its mechanism, unit, delta and options; its epsilon is not used).
    reference : numpy.ndarray, optional
        Counts of the table's shape the error is simulated on (never the confidential table in a release).
    runs : int, optional
        Simulated releases per epsilon tried (with a reference); default `target_runs`'s, as many as make each
        margin's simulated mean known to about 2%.

    Returns
    -------
    dict
        Each planned margin (tuple of axes) mapped to the epsilon (float), or None.

    Raises
    ------
    TabreleaseError
        If the target is not a positive finite number, or the release cannot be planned.
    """
    from .mechanisms import with_epsilon

    if not (isinstance(target_l1, (int, float)) and np.isfinite(target_l1) and target_l1 > 0):
        raise TabreleaseError(f"the target error must be a positive number, not {target_l1!r}")
    plan = _plan(shape, margins, spec, 1.0)
    mechanism = plan.implementation

    def unbiased(epsilon, g):
        return mechanism.expected_errors(with_epsilon(plan, epsilon))[g].expected_l1

    out = {}
    for g in plan.margins:
        # A release asks for epsilon within EPSILON_RANGE: a target met only above its top is not met.
        low, high = np.log(EPSILON_RANGE[0]), np.log(EPSILON_RANGE[1])
        if unbiased(np.exp(high), g) > target_l1:
            out[g] = None
            continue
        for _ in range(60):  # to a relative precision of about 1e-7 in epsilon
            middle = (low + high) / 2
            low, high = (middle, high) if unbiased(np.exp(middle), g) > target_l1 else (low, middle)
        out[g] = float(np.exp(high))
    if reference is None:
        return out
    from functools import lru_cache

    from .error_model import simulate_errors

    if runs is None:
        runs, _ = target_runs(shape, margins, target_l1, spec, reference)

    @lru_cache(maxsize=None)
    def simulated(log_epsilon):
        return simulate_errors(with_epsilon(plan, float(np.exp(log_epsilon))), reference, runs=runs,
                               described="the reference", rounded=True).mean_l1

    def gap(log_epsilon, g):  # log(simulated error / target): falls as epsilon grows
        return float(np.log(max(simulated(log_epsilon)[g], 1e-12) / target_l1))

    for g, found in out.items():
        if found is None:
            continue
        # The fitted error is near the unbiased one or below it: bracket the root from the unbiased epsilon down
        # (and up, for safety), then the Illinois variant of regula falsi on log error against log epsilon (the
        # curve is smooth: the same seed at every epsilon), to 0.1% in epsilon.
        high = np.log(found)
        while gap(high, g) > 0 and high < np.log(EPSILON_RANGE[1]):
            high += np.log(2.0)
        low = high - np.log(2.0)
        while gap(low, g) <= 0 and low > np.log(EPSILON_RANGE[0]):
            low -= np.log(2.0)
        f_low, f_high, side = gap(low, g), gap(high, g), 0
        if f_high > 0 or f_low <= 0:
            out[g] = None if f_high > 0 else float(np.exp(low))
            continue
        for _ in range(40):
            if high - low < 1e-3 or -f_high < 2e-3:  # epsilon within 0.1%, or its error within 0.2% of the target
                break
            middle = high - f_high * (high - low) / (f_high - f_low)
            f_middle = gap(middle, g)
            if f_middle > 0:
                low, f_low = middle, f_middle
                f_high = f_high / 2 if side == -1 else f_high
                side = -1
            else:
                high, f_high = middle, f_middle
                f_low = f_low / 2 if side == 1 else f_low
                side = 1
        out[g] = float(np.exp(high))
    return out


