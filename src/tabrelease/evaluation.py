"""What a release did to the data: errors, refitted models, the LP's b*, and the theory's bounds.

Everything here reads the confidential table; it belongs in the internal audit, never in the
public bundle.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from math import log, prod

import numpy as np

from .bases import EFRON_STEIN, FOURIER, coefficient_basis, paper_noise_scale, sensitivity
from .bounds import derived_l1_bound, paper_theorem_bound, paper_theorem_constant  # noqa: F401  (re-exported)
from .loglinear import facial_set, fit_extended_mle, fit_loglinear, g_squared, ipf_to_margins, l1_distance
from .mechanisms import get_mechanism
from .release import Release
from .models import HierarchicalModel, Margin, default_model
from .tables import ContingencyTable, margin_counts

DEFAULT_BOUND_DELTA = 0.05


@dataclass(frozen=True)
class ReleaseEvaluation:
    n: int
    n_released: float
    lp_b: float | None
    lp_infeasible: bool | None
    max_l1_error: float
    l1_error_by_margin: dict[str, float]
    g2_original: float
    g2_released: float | None
    g2_difference: float | None
    df_original: int
    df_adjusted_original: int
    mle_l1: float | None
    mle_total_variation: float | None
    released_fit_converged: bool | None
    bound_delta: float
    l1_bound_by_margin: dict[str, float] | None
    bound_source: str | None
    paper_bound_by_margin: dict[str, float] | None
    # Seconds this run's refit took: its own facial set, plus its share (by iterations) of a stacked fit.
    refit_seconds: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def margin_label(margin: Margin, letters) -> str:
    return "[" + "".join(letters[j] for j in margin) + "]"


def evaluate_release(
    table: ContingencyTable,
    release: Release,
    model: HierarchicalModel | None = None,
    *,
    bound_delta: float = DEFAULT_BOUND_DELTA,
    original_fit=None,
) -> ReleaseEvaluation:
    """Compare a release with the confidential table it came from.

    The model refitted is the released margins' own model unless another is given. G² of the
    released table needs a released table (mechanisms that publish margins only have none);
    the MLE of the release comes from the released margins, which is the same thing when
    there is a table, and is undefined when the margins are mutually inconsistent.
    """
    model = model or HierarchicalModel(release.margins, table.k)
    letters = table.letters
    errors = {
        margin_label(g, letters): float(np.abs(margin_counts(table.counts, g) - m).sum())
        for g, m in zip(release.margins, release.released_margins)
    }
    original = original_fit or fit_loglinear(table, model)
    g2_released = mle_l1 = converged = None
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
    bounds = source = paper_bounds = None
    if release.plan is not None:
        # Bounds depend on the plan alone; the mechanism says which it can give.
        mechanism = get_mechanism(release.plan.mechanism)
        derived = mechanism.l1_bounds(release.plan, bound_delta)
        if derived is not None:
            bounds = {margin_label(g, letters): v for g, v in derived.items()}
            source = mechanism.bound_source
        printed = mechanism.paper_bounds(release.plan, bound_delta)
        if printed is not None:
            paper_bounds = {margin_label(g, letters): v for g, v in printed.items()}
    return _evaluation(table, release, original, errors, g2_released, mle_l1, converged, bound_delta,
                       bounds, source, paper_bounds)


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


def _evaluation(table, release, original, errors, g2_released, mle_l1, converged, bound_delta=DEFAULT_BOUND_DELTA,
                bounds=None, source=None, paper_bounds=None) -> ReleaseEvaluation:
    return ReleaseEvaluation(
        n=table.n,
        n_released=release.n_released,
        lp_b=release.lp_b,
        lp_infeasible=None if release.lp is None else release.lp.infeasible,
        max_l1_error=max(errors.values()),
        l1_error_by_margin=errors,
        g2_original=original.g2,
        g2_released=g2_released,
        g2_difference=None if g2_released is None else g2_released - original.g2,
        df_original=original.df,
        df_adjusted_original=original.df_adjusted,
        mle_l1=mle_l1,
        mle_total_variation=None if mle_l1 is None else 0.5 * mle_l1,
        released_fit_converged=converged,
        bound_delta=bound_delta,
        l1_bound_by_margin=bounds,
        bound_source=source,
        paper_bound_by_margin=paper_bounds,
    )


def _margin_for(generator: Margin, release: Release) -> np.ndarray:
    parent = next(i for i, g in enumerate(release.margins) if set(generator) <= set(g))
    g = release.margins[parent]
    return margin_counts(np.asarray(release.released_margins[parent], float), [g.index(j) for j in generator])


# The paper's Table 8 as printed: scale and bound multiplier for eps = 0.01, 1, 2, and the |B| (N) it uses.
PAPER_TABLE8 = {
    "edwards": {"B": 12, 0.01: (300, 38400), 1: (3, 384), 2: (1.5, 192)},
    "czech": {"B": 22, 0.01: (550, 70400), 1: (5.5, 704), 2: (2.75, 352)},
    "rochdale": {"B": 29, 0.01: (362.5, 185600), 1: (3.625, 1856), 2: (1.8125, 928)},
    "journey_to_work": {"B": 169, 0.01: (132, 8450), 1: (1.32, 84.5), 2: (0.66, 42.25)},
}


def reproduce_table8(epsilons=(0.01, 1.0, 2.0), neighbours: str = "add-remove"):
    """The paper's Table 8 beside what its formulas give with the true |B|, and beside exact calibration.

    One row per table and epsilon. The bound multiplier is for the largest released margin
    (the paper's Czech entry uses 2^2 where its largest margin, ABCE, has |alpha| = 4).
    """
    from .tables import builtin_table

    rows = []
    for name, printed in PAPER_TABLE8.items():
        table = builtin_table(name)
        model = default_model(table)
        kind = FOURIER if table.is_binary else EFRON_STEIN
        basis = coefficient_basis(kind, table.shape, model.generators)
        widest = max(model.generators, key=lambda g: (prod(table.shape[j] for j in g), len(g)))
        exact_sensitivity = sensitivity(basis, neighbours, 1)
        for eps in epsilons:
            paper_scale, paper_mult = printed.get(eps, (None, None))
            formula_scale = paper_noise_scale(basis, eps)
            mult, add = paper_theorem_constant(basis, widest, eps)
            dmt_mult, _ = paper_theorem_constant(basis, widest, eps, constant=2.0) if kind == FOURIER else (None, None)
            exact_scale = exact_sensitivity / eps
            rows.append(
                {
                    "table": name,
                    "epsilon": eps,
                    "basis": kind,
                    "printed_B": printed["B"],
                    "true_B": len(basis.closure) if kind == FOURIER else basis.size,
                    "printed_scale": paper_scale,
                    "paper_formula_scale": formula_scale,
                    "printed_bound_multiplier": paper_mult,
                    "paper_formula_bound_multiplier": mult,
                    "paper_formula_bound_additive": add,
                    "dmt_theorem5_bound_multiplier": dmt_mult,
                    "widest_margin": margin_label(widest, table.letters),
                    "exact_sensitivity": exact_sensitivity,
                    "exact_scale": exact_scale,
                    "paper_scale_actual_epsilon": exact_sensitivity / formula_scale,
                    "paper_scale_epsilon_holds": exact_sensitivity / formula_scale <= eps * (1 + 1e-9),
                }
            )
    import pandas as pd

    return pd.DataFrame(rows)


# A fact about the paper's text, not a number this tool computes.
TABLE8_TEXT_NOTE = "The paper's text says Table 8 is for epsilon = 0.1, 1 and 2; its header and its numbers are for 0.01, 1 and 2."


def table8_findings(frame) -> list[str]:
    """Where the printed Table 8 and its own formulas disagree, computed from `reproduce_table8`'s rows."""
    out = []
    for name, rows in frame.groupby("table", sort=False):
        row = rows.sort_values("epsilon").iloc[0]
        eps = row.epsilon
        if row.printed_B != row.true_B:
            out.append(
                f"{name}: the printed Lap({row.printed_scale:g}) at epsilon {eps:g} uses |B| = {row.printed_B}; the "
                f"model's downward closure has {row.true_B} sets (empty set included), which gives "
                f"Lap({row.paper_formula_scale:g})."
            )
        printed, formula = row.printed_bound_multiplier, row.paper_formula_bound_multiplier
        explained = printed * row.true_B / row.printed_B
        if not np.isclose(explained, formula, rtol=1e-3):
            ratio = formula / explained
            power = np.log2(ratio)
            as_power = f" = 2^{power:.0f}" if np.isclose(power, round(power)) else ""
            out.append(
                f"{name}: the printed bound multiplier {printed:g} at epsilon {eps:g} is {ratio:g}{as_power} times "
                f"smaller than the paper's own formula gives for the widest margin {row.widest_margin} "
                f"({formula:g})."
            )
        if row.dmt_theorem5_bound_multiplier is not None and np.isfinite(row.dmt_theorem5_bound_multiplier):
            ratio = formula / row.dmt_theorem5_bound_multiplier
            out.append(
                f"{name}: Theorem 1's bound multiplier is {ratio:g} times that of Dwork-McSherry-Talwar's Theorem 5 "
                f"({formula:g} against {row.dmt_theorem5_bound_multiplier:g} at epsilon {eps:g})."
            )
        if not row.paper_scale_epsilon_holds:
            out.append(
                f"{name}: the paper's scale ({row.paper_formula_scale * eps:.4g}/epsilon) is below the exact L1 "
                f"sensitivity ({row.exact_sensitivity:.4g}/epsilon), so a release at that scale is only "
                f"{row.paper_scale_actual_epsilon / eps:.2f} x epsilon-DP."
            )
    return out + [TABLE8_TEXT_NOTE]
