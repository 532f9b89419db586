"""What a release did to the data: errors, refitted models, the LP's b*, and the theory's bounds.

Everything here reads the confidential table; it belongs in the internal audit, never in the
public bundle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from .loglinear import facial_set, fit_extended_mle, fit_loglinear, g_squared, ipf_to_margins, l1_distance
from .errors import TabreleaseError
from .pipeline import UNFIT, Release
from .models import HierarchicalModel, Margin, margin_label  # noqa: F401  (margin_label re-exported)
from .tables import ContingencyTable, margin_counts

DEFAULT_BOUND_DELTA = 0.05
# The audit's refit works on every cell (facial-set LP, IPF); beyond this it is left out and the audit says so.
AUDIT_REFIT_MAX_CELLS = 2**12


@dataclass(frozen=True)
class ReleaseEvaluation:
    n: int
    n_released: float
    lp_b: float | None
    lp_infeasible: bool | None
    max_l1_error: float
    l1_error_by_margin: dict[str, float]
    g2_original: float | None
    g2_released: float | None
    g2_difference: float | None
    df_original: int | None
    df_adjusted_original: int | None
    mle_l1: float | None
    mle_total_variation: float | None
    released_fit_converged: bool | None
    bound_delta: float
    l1_bound_by_margin: dict[str, float] | None
    bound_source: str | None
    paper_bound_by_margin: dict[str, float] | None
    # The plan's expected L1 error per margin, drawn up before the noise (None for mechanisms without one).
    expected_l1_by_margin: dict[str, float] | None = None
    # Its upper (1 - bound_delta) quantile (planning.MarginError.l1_quantile), and each cell's planned sd.
    expected_l1_quantile_by_margin: dict[str, float] | None = None
    expected_cell_sd_by_margin: dict[str, float] | None = None
    # Why the refit is missing, when it is (too many cells to fit here, or a fit that failed).
    refit_note: str | None = None
    # Seconds this run's refit took: its own facial set, plus its share (by iterations) of a stacked fit.
    refit_seconds: float | None = None
    # Whole categories (a level of a variable within a released margin) released as 0 where the truth is not 0.
    zeroed_categories: list[str] | None = None
    # The fitted release's error simulated on the released margins' world (error_model.SimulatedErrors.as_dict): its
    # mean and its empirical (1 - bound_delta) quantile per margin; None with `simulation_note` saying why.
    simulated_errors: dict | None = None
    simulation_note: str | None = None

    def as_dict(self) -> dict:
        """Every field, as the audit's JSON holds it.

        Returns
        -------
        dict
            Field name -> value (`dataclasses.asdict`: nested values copied).
        """
        return asdict(self)


def evaluate_release(
    table: ContingencyTable,
    release: Release,
    model: HierarchicalModel | None = None,
    *,
    bound_delta: float = DEFAULT_BOUND_DELTA,
    original_fit=None,
    simulate: bool = False,
) -> ReleaseEvaluation:
    """Compare a release with the confidential table it came from.

    The model refitted is the released margins' own model unless another is given. G² of the
    released table needs a released table (mechanisms that publish margins only have none);
    the MLE of the release comes from the released margins, which is the same thing when
    there is a table, and is undefined when the margins are mutually inconsistent.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The confidential table the release came from.
    release : Release
        The release.
    model : HierarchicalModel, optional
        The model refitted (the released margins' own by default).
    bound_delta : float, default DEFAULT_BOUND_DELTA
        The failure probability of the error bounds and the expected error's quantile.
    original_fit : LogLinearFit, optional
        The model's fit to the confidential table, when it was made already.
    simulate : bool, default False
        Also simulate the release's error on the released margins' world (`error_model.released_table_errors`):
        public figures, a mean and a true quantile of each margin's L1 error, that take non-negativity into account.

    Returns
    -------
    ReleaseEvaluation
        n and n', each margin's L1 error, G² and the MLE distances of the refit (None where they cannot be computed,
        with `refit_note` saying why; tables of more than `AUDIT_REFIT_MAX_CELLS` cells are refitted from margins),
        the bounds and expected errors the plan gives, and the categories released as zero. A refit that fails is
        recorded, never raised.
    """
    model = model or HierarchicalModel(release.margins, table.k)
    letters = table.letters
    errors = {
        margin_label(g, letters): float(np.abs(table.margin_counts(g) - m).sum())
        for g, m in zip(release.margins, release.released_margins)
    }
    refit_start = time.perf_counter()
    original = None
    g2_released = mle_l1 = converged = None
    refit_note = None
    if original_fit is None and (table.cells > AUDIT_REFIT_MAX_CELLS or not table.held_as_cells):
        original, g2_released, mle_l1, converged, refit_note = _refit_from_margins(table, release, model)
    else:
        try:
            original = original_fit or fit_loglinear(table, model)
            if release.table is not None and release.table.sum() > 0:
                refit = fit_loglinear(release.table, model)
                g2_released = refit.g2
                converged = refit.converged
                released_p = refit.probabilities
            elif release.consistent and release.n_released > 0 and all(np.all(m >= 0) for m in release.released_margins):
                targets = [_margin_for(g, release) for g in model.generators]
                fitted, _, converged = ipf_to_margins(targets, model.generators, table.shape)
                released_p = fitted / fitted.sum()
            else:
                released_p = None
            if released_p is not None:
                mle_l1 = l1_distance(original.probabilities, released_p)
        except (TabreleaseError, MemoryError, ArithmeticError) as exc:
            # The release was drawn already: a refit that fails is recorded in the audit, never fatal.
            original = g2_released = mle_l1 = converged = None
            refit_note = f"the log-linear refit failed ({type(exc).__name__}); the margin errors above stand"
    refit_seconds = time.perf_counter() - refit_start
    bounds = source = paper_bounds = expected = quantile = cell_sd = None
    if release.plan is not None:
        # Bounds depend on the plan alone; the mechanism says which it can give.
        mechanism = release.plan.implementation
        derived = mechanism.l1_bounds(release.plan, bound_delta)
        if derived is not None:
            bounds = {margin_label(g, letters): v for g, v in derived.items()}
            source = mechanism.bound_source
        printed = mechanism.paper_bounds(release.plan, bound_delta)
        if printed is not None:
            paper_bounds = {margin_label(g, letters): v for g, v in printed.items()}
        # The plan's own expectation (that of the unbiased linear reconstruction of what was measured), for every
        # mechanism that has one: the figure an auditor compares the realised error with.
        planned = mechanism.expected_errors(release.plan)
        if planned is not None:
            expected = {margin_label(g, letters): e.expected_l1 for g, e in planned.items()}
            quantile = {margin_label(g, letters): e.l1_quantile(bound_delta) for g, e in planned.items()}
            cell_sd = {margin_label(g, letters): e.cell_sd for g, e in planned.items()}
    simulated = simulation_note = None
    if simulate:
        from .error_model import released_table_errors

        found, simulation_note = released_table_errors(release, level=1.0 - bound_delta)
        simulated = None if found is None else found.as_dict(lambda g: margin_label(g, letters))
    evaluation = _evaluation(table, release, original, errors, g2_released, mle_l1, converged)
    return replace(evaluation, simulated_errors=simulated, simulation_note=simulation_note, bound_delta=bound_delta, l1_bound_by_margin=bounds, bound_source=source,
                   paper_bound_by_margin=paper_bounds, refit_seconds=refit_seconds, expected_l1_by_margin=expected,
                   expected_l1_quantile_by_margin=quantile, expected_cell_sd_by_margin=cell_sd, refit_note=refit_note,
                   zeroed_categories=_zeroed_categories(table, release))


def _zeroed_categories(table, release: Release) -> list[str]:
    """"hs = 3 in [AB]": a level whose released one-way total within a margin is 0 while its true total is not (a
    region zeroed out by noise and rounding)."""
    out = []
    for g, released in zip(release.margins, release.released_margins):
        for position, axis in enumerate(g):
            others = tuple(i for i in range(len(g)) if i != position)
            released_total = np.asarray(released).sum(axis=others) if others else np.asarray(released)
            true_total = table.margin_counts((axis,))
            for level in np.flatnonzero((released_total <= 0) & (true_total > 0)):
                out.append(f"{table.variables[axis]} = {table.levels[axis][level]} in "
                           f"{margin_label(g, table.letters)}")
    return sorted(set(out))


def evaluate_releases(
    table: ContingencyTable,
    releases: Sequence[Release],
    model: HierarchicalModel | None = None,
    *,
    original_fit=None,
) -> list[ReleaseEvaluation]:
    """Evaluate many releases of one table, as a sweep does: the released tables are refitted as
    one stack (batched IPF), which gives the same numbers as `evaluate_release` one by one.

    Error bounds are left out (None): they depend on the plan, not on the run.

    Parameters
    ----------
    table : ContingencyTable
        The confidential table (held as cells).
    releases : sequence of Release
        Releases of that table, all of the same margins as the first when `model` is not given.
    model : HierarchicalModel, optional
        The model refitted (the first release's margins by default).
    original_fit : LogLinearFit, optional
        The model's fit to the confidential table, when it was made already.

    Returns
    -------
    list of ReleaseEvaluation
        One per release, in order; empty for no release.

    Raises
    ------
    TabreleaseError
        If the model cannot be fitted to the confidential table.
    """
    if not releases:
        return []
    model = model or HierarchicalModel(releases[0].margins, table.k)
    original = original_fit or fit_loglinear(table, model)
    generators = model.generators
    letters = table.letters
    true_margins = {g: margin_counts(table.counts, g) for g in {g for r in releases for g in r.margins}}
    stacked = [i for i, r in enumerate(releases) if r.table is not None and r.table.sum() > 0]
    refits = {}
    if stacked:
        stack = np.stack([releases[i].table for i in stacked]).astype(float)
        facial_seconds = []
        facial = []
        for member in stack:
            start = time.perf_counter()
            facial.append(facial_set(member, generators))
            facial_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        fitted, iterations, converged = fit_extended_mle(stack, generators, np.stack(facial), batch_ndim=1)
        fit_seconds = time.perf_counter() - start
        cell_axes = tuple(range(1, stack.ndim))
        g2 = g_squared(stack, fitted, batch_ndim=1)
        probabilities = fitted / fitted.sum(axis=cell_axes, keepdims=True)
        mle_l1 = np.abs(probabilities - original.probabilities).sum(axis=cell_axes)
        # One stacked fit serves every member: each is charged its share by the iterations it took.
        share = np.asarray(iterations, float) / max(float(np.sum(iterations)), 1.0)
        for j, i in enumerate(stacked):
            refits[i] = (float(g2[j]), float(mle_l1[j]), bool(converged[j]),
                         facial_seconds[j] + fit_seconds * float(share[j]))
    evaluations = []
    for i, release in enumerate(releases):
        if i not in refits:
            start = time.perf_counter()
            single = evaluate_release(table, release, model, original_fit=original)
            evaluations.append(replace(single, l1_bound_by_margin=None, bound_source=None, paper_bound_by_margin=None,
                                       refit_seconds=time.perf_counter() - start))
            continue
        g2_released, l1, converged, seconds = refits[i]
        errors = {
            margin_label(g, letters): float(np.abs(true_margins[g] - m).sum())
            for g, m in zip(release.margins, release.released_margins)
        }
        evaluations.append(replace(_evaluation(table, release, original, errors, g2_released, l1, converged),
                                   refit_seconds=seconds))
    return evaluations


def _evaluation(table, release, original, errors, g2_released, mle_l1, converged) -> ReleaseEvaluation:
    # The measures every evaluation has (a sweep's too); a published release's adds its bounds by `replace`.
    return ReleaseEvaluation(
        n=table.n,
        n_released=release.n_released,
        lp_b=release.lp_b,
        lp_infeasible=None if release.lp is None else release.lp.infeasible,
        max_l1_error=max(errors.values()),
        l1_error_by_margin=errors,
        g2_original=None if original is None else original.g2,
        g2_released=g2_released,
        g2_difference=None if g2_released is None or original is None else g2_released - original.g2,
        df_original=None if original is None else original.df,
        df_adjusted_original=None if original is None else original.df_adjusted,
        mle_l1=mle_l1,
        mle_total_variation=None if mle_l1 is None else 0.5 * mle_l1,
        released_fit_converged=converged,
        bound_delta=DEFAULT_BOUND_DELTA,
        l1_bound_by_margin=None,
        bound_source=None,
        paper_bound_by_margin=None,
    )


# The refit from margins holds the model's junction tree: past this many cells in one clique it is left out.
MARGINS_REFIT_MAX_CLIQUE_CELLS = 2**20


def margins_the_audit_reads(margins, shape) -> list[tuple[int, ...]]:
    """The margins the audit's refit from margins reads from a table held as margins (the cliques of its model's
    junction tree, where the refit is computed): a table counted from its file counts them before the release, with
    the ones the mechanism reads, so that nothing is read from the file after the charge.

    Parameters
    ----------
    margins : sequence of tuple of int
        The released margins.
    shape : sequence of int

    Returns
    -------
    list of tuple of int
    """
    from .junction import junction_tree

    tree = junction_tree(HierarchicalModel(tuple(tuple(m) for m in margins), len(shape)).generators, tuple(shape))
    if tree.largest_clique_cells(shape) > MARGINS_REFIT_MAX_CLIQUE_CELLS:
        return []
    return [tuple(c) for c in tree.cliques]


def _refit_from_margins(table, release: Release, model: HierarchicalModel):
    """The refit of a table too large to fit cell by cell: the model's MLE from its generator margins, on its
    junction tree (closed form where decomposable, IPF over the cliques otherwise), for the original table and
    for the released margins. Returns (original fit, G² of a released table, MLE L1 distance, converged, note)."""
    from .junction import junction_tree
    from .loglinear.margins_fit import DENSE_CELL_LIMIT, fit_loglinear_from_margins, margins_fit_l1_distance

    tree = junction_tree(model.generators, table.shape)
    largest = tree.largest_clique_cells(table.shape)
    if largest > MARGINS_REFIT_MAX_CLIQUE_CELLS:
        return None, None, None, None, (
            f"the log-linear refit was not computed: the table has {table.cells:.3g} cells, and the model's junction "
            f"tree has a clique of {largest:.3g} cells (the refit from margins holds cliques up to "
            f"{MARGINS_REFIT_MAX_CLIQUE_CELLS:,})")
    notes = ["the log-linear refit was computed from the generator margins on the model's junction tree, not cell "
             "by cell"]
    try:
        original = fit_loglinear_from_margins(model.generators, table.shape, table.margin_counts,
                                              sum_n_log_n=_sum_n_log_n(table), clique_margins=True)
        if not original.facial_set_exact:
            notes.append("the facial set was too large to decide here: the zero-adjusted df is not given")
        released = converged = mle_l1 = None
        if release.consistent and release.n_released > 0 and all(np.all(m >= 0) for m in release.released_margins):
            released = fit_loglinear_from_margins(model.generators, table.shape,
                                                  lambda axes: _margin_for(tuple(axes), release))
            converged = released.converged
            mle_l1 = margins_fit_l1_distance(original, released)
            if mle_l1 is None:
                notes.append(f"the MLE distance needs every cell and is given up to {DENSE_CELL_LIMIT:,} cells")
        else:
            notes.append("the released margins have no MLE (they are inconsistent or negative)")
    except (TabreleaseError, MemoryError, ArithmeticError) as exc:
        return None, None, None, None, f"the log-linear refit failed ({type(exc).__name__}); the margin errors above stand"
    return original, None, mle_l1, converged, "; ".join(notes)


def _sum_n_log_n(table) -> float | None:
    """sum of n log n over the non-zero cells: over the distinct records of a table held as records; None for a
    table counted from its file as margins (it never lists its records: the refit then has no G²)."""
    if getattr(table, "held_as_file", False):
        return None
    counts = table.counts[table.counts > 0] if table.held_as_cells else table.distinct_records()[1]
    counts = np.asarray(counts, float)
    return float(np.sum(counts * np.log(counts)))


def _margin_for(generator: Margin, release: Release) -> np.ndarray:
    parent = next(i for i, g in enumerate(release.margins) if set(generator) <= set(g))
    g = release.margins[parent]
    return margin_counts(np.asarray(release.released_margins[parent], float), [g.index(j) for j in generator])


# What a release and its audit must say to the publisher (reports.py re-exports these; the workflow reads them).
# Past this epsilon a release is flagged: the guarantee lets one record multiply the probability of an output by up
# to e^epsilon (e^10 is about 22,000), which bounds little that a reader can use. A new user's release at epsilon 300
# was every margin exact, and said "warnings: none".
WEAK_EPSILON = 10.0


def weak_epsilon_warning(epsilon: float) -> str:
    """The warning of a release or plan at an epsilon above `WEAK_EPSILON`.

    Parameters
    ----------
    epsilon : float
        The epsilon asked for.

    Returns
    -------
    str
    """
    factor = f"{math.exp(epsilon):.3g}" if epsilon < 709 else "beyond floating point"
    return (f"epsilon {epsilon:g} is a weak guarantee: one record may change the probability of an output by a "
            f"factor of up to e^{epsilon:g} ({factor}); the released values may be close to exact")


def release_warnings(release: Release) -> list[str]:
    """What a reader of the release must know before using it. Parameters and DP output only: public.

    Parameters
    ----------
    release : Release
        The release.

    Returns
    -------
    list of str
        The warnings: not made with secure noise, paper calibration, an epsilon that does not hold, and the
        release's own notes.
    """
    out = []
    if release.noise_mode != "release":
        # The seed is not published: with the released values it would give the noise back (internal/ has it).
        out.append(f"made in {release.noise_mode} mode: not produced by a secure sampler; do not publish")
    if release.noise.calibration == "paper":
        out.append("paper calibration, for reproducing the paper only")
    if not release.noise.epsilon_holds:
        out.append(
            f"the stated epsilon {release.noise.epsilon:g} does not hold: the noise gives epsilon "
            f"{release.noise.epsilon_actual:.6g} for the exact sensitivity"
        )
    if release.noise.epsilon is not None and release.noise.epsilon > WEAK_EPSILON:
        out.append(weak_epsilon_warning(release.noise.epsilon))
    # Every other note is a function of the plan and the DP output: public. The paper-calibration note
    # repeats what the lines above say.
    out += [n for n in release.notes if not n.startswith("paper calibration")]
    return out


# n' further than this share from n is flagged to the publisher (the audit's warnings and its at-a-glance box).
N_OFF_SHARE = 0.1


def evaluation_warnings(evaluation: ReleaseEvaluation, release: Release | None = None) -> list[str]:
    """What the audit must flag about its own numbers (internal: it reads the confidential table).

    Parameters
    ----------
    evaluation : ReleaseEvaluation
        The audit's evaluation of a release.
    release : Release or None
        The release evaluated: where its notes judge it unfit to publish, the simulated figures are said to be a
        rough guide.

    Returns
    -------
    list of str
        The warnings: a released total more than 10% off n, categories released as zero, a refit that did not
        converge, a simulated error whose world's total the release barely tells (an empty release: its error is n),
        or whose world is built on margins that are mostly noise (a release unfit to publish).
    """
    return confidential_warnings(evaluation) + released_warnings(evaluation, release)


def confidential_warnings(evaluation: ReleaseEvaluation) -> list[str]:
    """The audit's warnings that read the true counts: a released total more than 10% off n, and categories that
    exist in the data released as zero. For the audit alone: the terminal and `--json` say how many there are and
    where, not what they say (a reviewer's trial: a terminal's output ends up in logs).

    Parameters
    ----------
    evaluation : ReleaseEvaluation

    Returns
    -------
    list of str
    """
    out = []
    if evaluation.n > 0 and abs(evaluation.n_released - evaluation.n) > N_OFF_SHARE * evaluation.n:
        out.append(f"the released total n' is more than {N_OFF_SHARE:.0%} away from the true n: the release misstates "
                   "the population's size (see n and n_released in the audit)")
    if evaluation.zeroed_categories:
        out.append(f"{len(evaluation.zeroed_categories)} categories that exist in the data were released as zero "
                   "or less (zeroed_categories in the audit): the release says nobody has them")
    return out


def released_warnings(evaluation: ReleaseEvaluation, release: Release | None = None) -> list[str]:
    """The audit's warnings about its own figures that read only the release and its simulation (no true count):
    a refit that did not converge, a simulated error resting on a total the release barely tells, or on margins
    that are mostly noise.

    Parameters
    ----------
    evaluation : ReleaseEvaluation
    release : Release or None

    Returns
    -------
    list of str
    """
    out = []
    if evaluation.released_fit_converged is False:
        out.append(
            "the refit of the model to the released margins did NOT converge: G2 of the release and the MLE "
            "distances are those of the last iterate, not of an MLE"
        )
    from .error_model import TOTAL_UNCERTAIN

    simulated = evaluation.simulated_errors
    barely = bool(simulated) and TOTAL_UNCERTAIN.partition("{")[0] in simulated["reference"]
    if barely and evaluation.n_released == 0:
        out.append("the release is empty (every released cell 0): each margin's error is exactly the table's total, "
                   "which the release does not tell; the simulated error is that of an empty world's releases")
    elif barely:
        out.append("the simulated error rests on a total the release barely tells (the released total is within the "
                   "noise's interval of 0): it can be far from the error at the true total; a rough "
                   "guide only")
    # A new user's trial: on a small sparse table at epsilon 0.05, judged unfit to publish, the stated 95% quantile of
    # a three-way margin covered 72-74% of 200 releases' errors, its mean 11-12% below theirs.
    if simulated and not barely and release is not None and any(str(n).startswith(UNFIT) for n in release.notes):
        out.append(f"the audit's simulated error and {100 * simulated['level']:g}% quantile are built on this "
                   "release's margins, which are mostly noise here (unfit to publish): they can understate the "
                   "error; a rough guide only")
    return out
