"""The paper's experiment (Yang, Fienberg & Rinaldo, section 6): Figures 1-6, Tables 7-8, and a report.

epsilon from 0.005 to 1.995 in steps of 0.01 (200 values), 50 repetitions, the four tables with
their paper models, Fourier for the binary tables and Efron-Stein for journey to work, each with
exact calibration and with the paper's ("paper" is a reproduction preset: for journey to work it
is not epsilon-DP, and every output says so). Everything is simulation-mode noise.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import TabreleaseError
from ._files import remove_own_outputs, write_atomic, write_frame_atomic, write_text_atomic
from .sweeps import SweepGrid, available_cpus, make_grid, run_sweep

PAPER_TABLES = ("edwards", "czech", "rochdale", "journey_to_work")
PAPER_EPSILONS = tuple(round(0.005 + 0.01 * i, 3) for i in range(200))
PAPER_REPETITIONS = 50
QUICK_EPSILONS = (0.05, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
QUICK_REPETITIONS = 8
DEFAULT_MASTER_SEED = 20101028
CALIBRATIONS = ("exact", "paper")

METRICS = {
    # column in the summary: (source column, transform, label)
    "n_released": ("n_released", None, "sample size n' of the released table"),
    "max_l1_error": ("max_l1_error", None, "max L1 error over the released margins"),
    "g2_abs_difference": ("g2_difference", np.abs, "|G2(released) - G2(original)|"),
    "mle_l1": ("mle_l1", None, "L1 distance between the MLEs"),
    "lp_infeasible": ("lp_infeasible", None, "fraction of runs with b* > 0"),
    "lp_b": ("lp_b", None, "LP optimum b*"),
}
FIGURES = (
    ("figure1_sample_size.png", "n_released", "Figure 1: sample size of the released table"),
    ("figure2_max_l1_margin_error.png", "max_l1_error", "Figure 2: maximal L1 error of the released margins"),
    ("figure3_g2_difference.png", "g2_abs_difference", "Figure 3: |G2 of released - G2 of original|"),
    ("figure4_mle_l1.png", "mle_l1", "Figure 4: L1 distance between the MLEs of original and released tables"),
    ("figure5_lp_infeasible.png", "lp_infeasible", "Figure 5: fraction of runs with b* > 0 (LP infeasible)"),
    ("figure6_lp_b.png", "lp_b", "Figure 6: optimal b of the consistency LP"),
)
REPRODUCTION_OUTPUTS = tuple(f[0] for f in FIGURES) + (
    "summary.csv", "table7.csv", "table8.csv", "findings.csv", "noise_free.csv", "lp_optimal_set.csv",
    "reproduction.json", "report.md", "report.html", "sweep")


@dataclass(frozen=True, eq=False)
class Reproduction:
    out: Path
    summary: pd.DataFrame
    table7: pd.DataFrame
    table8: pd.DataFrame
    findings: tuple  # of Finding
    noise_free: pd.DataFrame
    lp_range: pd.DataFrame
    wall_seconds: float
    computed_runs: int
    total_runs: int


def paper_grid(quick: bool = False, master_seed: int = DEFAULT_MASTER_SEED) -> SweepGrid:
    from .tables import builtin_table

    return make_grid(
        [builtin_table(name) for name in PAPER_TABLES],
        QUICK_EPSILONS if quick else PAPER_EPSILONS,
        QUICK_REPETITIONS if quick else PAPER_REPETITIONS,
        mechanisms=("auto",),
        calibrations=CALIBRATIONS,
        master_seed=master_seed,
    )


def reproduce(
    out: str | os.PathLike,
    *,
    quick: bool = False,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    master_seed: int = DEFAULT_MASTER_SEED,
) -> Reproduction:
    """Run the experiment into OUT/sweep/ and write figures, tables and the report into OUT."""
    out = Path(out)
    _matplotlib()  # before any work: the figures come last
    if out.exists() and any(out.iterdir()) and not (resume or force):
        raise TabreleaseError(f"{out} already exists and is not empty; use --resume to continue it or --force to start over")
    if force and out.exists() and not resume:
        # Only what a reproduction writes; other files in the folder (a .gitignore, notes) stay.
        remove_own_outputs(out, REPRODUCTION_OUTPUTS)
    out.mkdir(parents=True, exist_ok=True)
    grid = paper_grid(quick, master_seed)
    started = time.perf_counter()
    result = run_sweep(grid, out / "sweep", jobs=jobs, scheduler=scheduler, resume=resume and (out / "sweep").exists(),
                       progress=progress)
    summary = summarise(result.runs)
    table7 = reproduce_table7()
    from .evaluation import reproduce_table8

    table8 = reproduce_table8()
    noise_free = noise_free_levels(grid)
    lp_set = lp_optimal_set(grid)
    findings = tuple(compare_with_paper(summary, result.runs, table7, noise_free))
    for name, metric, title in FIGURES:
        plot_metric(summary, metric, title, out / name, noise_free, grid.neighbours)
    write_frame_atomic(summary, out / "summary.csv")
    write_frame_atomic(table7, out / "table7.csv")
    write_frame_atomic(table8, out / "table8.csv")
    write_frame_atomic(findings_frame(findings), out / "findings.csv")
    write_frame_atomic(noise_free, out / "noise_free.csv")
    write_frame_atomic(lp_set, out / "lp_optimal_set.csv")
    wall = time.perf_counter() - started
    meta = {
        "quick": quick,
        "master_seed": master_seed,
        "noise_mode": "simulation",
        "runs": grid.runs,
        "runs_computed_in_this_call": result.computed_runs,
        "wall_seconds": round(wall, 1),
        "jobs": jobs,
        "scheduler": scheduler,
        "machine": machine_description(),
    }
    from . import __version__

    meta["tool_version"] = __version__
    write_text_atomic(out / "reproduction.json", json.dumps(meta, indent=2))
    repro = Reproduction(out, summary, table7, table8, findings, noise_free, lp_range_summary(lp_set), wall,
                         result.computed_runs, grid.runs)
    write_text_atomic(out / "report.md", render_markdown(repro, grid, meta))
    write_text_atomic(out / "report.html", render_html(repro, grid, meta))
    return repro


def machine_description() -> dict:
    cpus = available_cpus()
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": cpus, "cpu": model or platform.processor(), "system": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__}


# --- summaries ------------------------------------------------------------------------------------
def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of each figure's quantity per table, calibration and epsilon."""
    frame = runs.copy()
    for name, (source, transform, _) in METRICS.items():
        values = frame[source].astype(float)
        frame[name] = transform(values) if transform is not None else values
    grouped = frame.groupby(["table", "calibration", "epsilon"], sort=False)
    pieces = {"runs": grouped.size()}
    for name in METRICS:
        pieces[f"{name}_mean"] = grouped[name].mean()
        pieces[f"{name}_sd"] = grouped[name].std(ddof=1)
    pieces["n"] = grouped["n"].first()
    pieces["noise_scale"] = grouped["noise_scale"].first()
    pieces["epsilon_actual"] = grouped["epsilon_actual"].first()
    return pd.DataFrame(pieces).reset_index()


def reproduce_table7() -> pd.DataFrame:
    """Dimension, n, model, G2 and df of each table: the paper's printed values beside the tool's."""
    from .loglinear import fit_summary
    from .tables import builtin_table

    rows = []
    for name in PAPER_TABLES:
        table = builtin_table(name)
        s = fit_summary(table)
        paper = s.get("paper", {})
        rows.append({
            "table": name, "shape": "x".join(map(str, table.shape)), "n": table.n, "model": table.metadata["model"],
            "g2_tool": round(s["g2"], 2), "g2_paper": paper.get("g2"), "df_tool_nominal": s["df"],
            "df_tool_adjusted": s["df_adjusted"], "df_paper": paper.get("df"),
            "l1_to_uniform_tool": round(s["l1_to_uniform"], 3), "l1_to_uniform_paper": paper.get("l1_to_uniform"),
        })
    return pd.DataFrame(rows)


def _at(summary, table, calibration, epsilon, column):
    """The summary's value nearest to epsilon, and the epsilon it is at."""
    row = summary[(summary.table == table) & (summary.calibration == calibration)]
    row = row.iloc[(row.epsilon - epsilon).abs().argsort()[:1]]
    return float(row[column].iloc[0]), float(row.epsilon.iloc[0])


def _series(summary, table, calibration, column) -> pd.DataFrame:
    part = summary[(summary.table == table) & (summary.calibration == calibration)].sort_values("epsilon")
    return part[["epsilon", column]]


# --- what the LP leaves open ------------------------------------------------------------------------
class _RecordingNoise:
    """Delegates to a noise source and keeps the noisy values it returned (to re-solve the LP on them)."""

    def __init__(self, source):
        self.source, self.mode, self.seed, self.noisy = source, source.mode, getattr(source, "seed", None), None

    def perturb(self, values, calibration, integer_scale=None):
        self.noisy = self.source.perturb(values, calibration, integer_scale)
        return self.noisy


def _paper_plan(table, margins, epsilon, calibration="exact"):
    from .mechanisms import plan_release

    return plan_release(table.shape, margins, epsilon, mechanism="auto", calibration=calibration)


def noise_free_levels(grid: SweepGrid) -> pd.DataFrame:
    """Each figure's quantity for a release with no noise at all: what the LP and rounding do alone.

    The LP's optimum is rarely unique (the paper's Remark 3); with exact coefficients b* = 0 and
    the LP returns some non-negative table with the original margins, but not the original table,
    so the released table's G2 and MLE already differ from the original's.
    """
    from .evaluation import evaluate_release
    from .release import run_plan
    from .models import HierarchicalModel
    from .noise import NoNoise

    rows = []
    for table, margins in zip(grid.tables, grid.margins):
        release = run_plan(_paper_plan(table, margins, 1.0), table.counts, NoNoise())
        ev = evaluate_release(table, release, HierarchicalModel(margins, table.k))
        lp_table = release.lp.table
        rows.append({
            "table": table.name, "n": table.n, "n_released": ev.n_released, "max_l1_error": ev.max_l1_error,
            "g2_abs_difference": abs(ev.g2_difference), "mle_l1": ev.mle_l1, "lp_infeasible": float(ev.lp_infeasible),
            "lp_b": ev.lp_b, "lp_fractional_cells": int((np.abs(lp_table - np.round(lp_table)) > 1e-6).sum()),
            # what turns a coefficient into counts (2^{k/2} Fourier, prod k_j Efron-Stein): b* in records
            "coefficient_integer_scale": release.basis_operator.integer_scale,
        })
    return pd.DataFrame(rows)


LP_RANGE_EPSILONS = (0.05, 0.5, 1.0, 2.0)
LP_RANGE_REPETITIONS = 10


def lp_optimal_set(grid: SweepGrid, epsilons=LP_RANGE_EPSILONS, repetitions: int = LP_RANGE_REPETITIONS) -> pd.DataFrame:
    """For a few epsilons, how far n' and the max margin error move across the LP's optimal set.

    The first `repetitions` runs of each grid point are replayed from their sweep seeds; the LP is
    solved as in the release, and again for the optimal tables with the smallest and the largest
    total (b held at b*). All three are rounded as the release rounds.
    """
    from .release import run_plan
    from .consistency import round_table
    from .noise import SimulationNoise
    from .sweeps import run_seed
    from .tables import margin_counts

    chosen = sorted({min(grid.epsilons, key=lambda e: abs(e - target)) for target in epsilons})
    rows = []
    for table, margins in zip(grid.tables, grid.margins):
        true = [margin_counts(table.counts, g) for g in margins]

        def max_error(w):
            return max(float(np.abs(margin_counts(w, g) - t).sum()) for g, t in zip(margins, true))

        for calibration in grid.calibrations:
            for eps in chosen:
                plan = _paper_plan(table, margins, eps, calibration)
                for rep in range(min(repetitions, grid.repetitions)):
                    seed = run_seed(grid.master_seed, table.name, plan.mechanism, calibration, eps, rep)
                    noise = _RecordingNoise(SimulationNoise(seed))
                    release = run_plan(plan, table.counts, noise)
                    low, high = plan.problem.total_range(noise.noisy, release.lp.b)
                    low, high = round_table(low), round_table(high)
                    rows.append({
                        "table": table.name, "calibration": calibration, "epsilon": eps, "repetition": rep,
                        "seed": seed, "n": table.n, "lp_b": release.lp.b,
                        "n_released": float(release.table.sum()), "n_released_min": float(low.sum()),
                        "n_released_max": float(high.sum()), "max_l1_error": max_error(release.table),
                        "max_l1_error_at_min_total": max_error(low), "max_l1_error_at_max_total": max_error(high),
                    })
    return pd.DataFrame(rows)


# --- the comparison with the paper --------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One line of the comparison: what the paper says, what this run computed, and the rule's verdict."""

    subject: str
    table: str
    paper_says: str
    run_paper_calibration: str
    run_exact_calibration: str
    rule: str
    verdict: str


# The paper's words (section 6), quoted where a figure's verdict is judged against them.
PAPER_TEXT = {
    "figure1": "when epsilon is very small the sample size becomes unrealistically large, orders of magnitude "
               "larger than the true sample size; even at epsilon = 2 it is highly variable",
    "figure2": "for a wide spectrum of values of epsilon, which provides good privacy guarantees, these "
               "discrepancies are significantly larger than the sample size",
    "figure3": "we see similar patterns in Figure 3 (the difference of the likelihood ratio statistics)",
    "figure4": "this distance gets larger as epsilon gets smaller, with values that are quite high even when epsilon "
               "is large; when epsilon is small the MLE of the perturbed table is at roughly the same distance from "
               "the true MLE as the uniform distribution",
    "figure5": "(Edwards only) a large proportion of the simulations resulted in an infeasible problem",
    "figure6": "(Edwards only) the optimal values of b can be extremely large",
}


def _spearman(frame: pd.DataFrame, column: str) -> float:
    values = frame[column].astype(float)
    if values.nunique() < 2:
        return 0.0
    return float(frame["epsilon"].rank().corr(values.rank()))


def _pair(summary, name, metric, epsilon, fmt="{:.3g}") -> tuple[str, str]:
    out = []
    for calibration in ("paper", "exact"):
        if calibration not in set(summary.calibration):
            out.append("not run")
            continue
        mean, at = _at(summary, name, calibration, epsilon, f"{metric}_mean")
        sd, _ = _at(summary, name, calibration, epsilon, f"{metric}_sd")
        out.append(f"{fmt.format(mean)} (sd {fmt.format(sd)}) at epsilon {at:g}")
    return out[0], out[1]


def _judged(summary, calibration="paper"):
    """The calibration the verdicts are judged on: the paper's (what it plotted) when it was run."""
    return calibration if calibration in set(summary.calibration) else "exact"


def compare_with_paper(
    summary: pd.DataFrame, runs: pd.DataFrame, table7: pd.DataFrame, noise_free: pd.DataFrame
) -> list[Finding]:
    """Where the run agrees with the paper's section 6 and where not. Every number is this run's; each
    verdict applies the rule stated beside it to the runs made with the paper's calibration."""
    findings: list[Finding] = []
    cal = _judged(summary)
    lo, hi = float(summary.epsilon.min()), float(summary.epsilon.max())
    nf = noise_free.set_index("table")
    t7 = table7.set_index("table")
    tables = list(dict.fromkeys(summary.table))
    for name in tables:
        n = int(t7.loc[name, "n"])
        small, at_lo = _at(summary, name, cal, lo, "n_released_mean")
        spread, at_hi = _at(summary, name, cal, hi, "n_released_sd")
        inflated, variable = small >= 10 * n, spread >= 0.05 * n
        p, e = _pair(summary, name, "n_released", lo, "{:.0f}")
        findings.append(Finding(
            "Figure 1", name, PAPER_TEXT["figure1"], f"{p}; n = {n}; sd {spread:.0f} at epsilon {at_hi:g}", e,
            "agrees if mean n' >= 10 n at the smallest epsilon and sd of n' >= 5% of n at the largest",
            ("agrees" if inflated and variable else "disagrees") + f": mean n' is {small / n:.1f} n at epsilon "
            f"{at_lo:g}; sd of n' is {100 * spread / n:.1f}% of n at epsilon {at_hi:g}",
        ))
    for name in tables:
        n = int(t7.loc[name, "n"])
        series = _series(summary, name, cal, "max_l1_error_mean")
        # The largest epsilon up to which every grid point's mean error exceeds n.
        below = series[series.max_l1_error_mean <= n].epsilon
        above = series[series.max_l1_error_mean > n].epsilon
        above = above[above < below.min()] if len(below) else above
        widest = float(above.max()) if len(above) else None
        p, e = _pair(summary, name, "max_l1_error", hi, "{:.1f}")
        verdict = (f"disagrees: the mean error never exceeds n = {n}" if widest is None else
                   ("agrees" if widest >= 0.1 else "disagrees") + f": the mean error exceeds n = {n} for epsilon up "
                   f"to {widest:g}")
        findings.append(Finding("Figure 2", name, PAPER_TEXT["figure2"], p, e,
                                "agrees if the mean max L1 error exceeds n for every epsilon up to at least 0.1",
                                verdict + f"; no noise: {nf.loc[name, 'max_l1_error']:.0f}"))
    for name in tables:
        series = _series(summary, name, cal, "g2_abs_difference_mean")
        rho = _spearman(series, "g2_abs_difference_mean")
        top, at = _at(summary, name, cal, hi, "g2_abs_difference_mean")
        floor = float(nf.loc[name, "g2_abs_difference"])
        p, e = _pair(summary, name, "g2_abs_difference", hi, "{:.1f}")
        findings.append(Finding(
            "Figure 3", name, PAPER_TEXT["figure3"], p, e,
            "agrees if |G2 difference| falls as epsilon grows (Spearman rho < -0.5), as the max L1 error does",
            ("agrees" if rho < -0.5 else "disagrees") + f": rho = {rho:.2f}; at epsilon {at:g} the mean is "
            f"{top:.1f} against {floor:.1f} with no noise at all ({top / floor:.2f} times)" if floor > 0 else
            ("agrees" if rho < -0.5 else "disagrees") + f": rho = {rho:.2f}; no noise gives 0",
        ))
    for name in tables:
        uniform_tool = float(t7.loc[name, "l1_to_uniform_tool"])
        uniform_paper = t7.loc[name, "l1_to_uniform_paper"]
        small, at_lo = _at(summary, name, cal, lo, "mle_l1_mean")
        series = _series(summary, name, cal, "mle_l1_mean")
        rho = _spearman(series, "mle_l1_mean")
        p, e = _pair(summary, name, "mle_l1", lo, "{:.2f}")
        grows = rho < -0.5
        near_uniform = small >= 0.8 * uniform_tool
        uniform_text = (f"original MLE to uniform {uniform_tool:.2f} here, {float(uniform_paper):.2f} printed"
                        + (" (not reproduced by the verified counts)" if abs(uniform_tool - float(uniform_paper)) > 0.02
                           else " (reproduced)")) if pd.notna(uniform_paper) else f"to uniform {uniform_tool:.2f}"
        findings.append(Finding(
            "Figure 4", name, PAPER_TEXT["figure4"], p, e,
            "agrees if the distance falls as epsilon grows (rho < -0.5) and at the smallest epsilon is at least 0.8 "
            "times the original MLE's distance to uniform",
            ("agrees" if grows and near_uniform else "disagrees") + f": rho = {rho:.2f}; {small:.2f} at epsilon "
            f"{at_lo:g}; {uniform_text}; no noise: {nf.loc[name, 'mle_l1']:.3f}. The paper calls this L1 distance "
            "'total variation'; TV is half of it",
        ))
    for name in tables:
        share = float(summary[(summary.table == name) & (summary.calibration == cal)].lp_infeasible_mean.mean())
        p, e = _pair(summary, name, "lp_infeasible", 1.0, "{:.2f}")
        edwards = name == "edwards"
        findings.append(Finding(
            "Figure 5", name, PAPER_TEXT["figure5"] if edwards else "(not shown for this table)", p, e,
            "agrees if b* > 0 in at least half of all runs, over the whole epsilon grid",
            (("agrees" if share >= 0.5 else "disagrees") if edwards else "no claim to check")
            + f": b* > 0 in {100 * share:.0f}% of the runs",
        ))
    for name in tables:
        n = int(t7.loc[name, "n"])
        top, at = _at(summary, name, cal, lo, "lp_b_mean")
        counts = top * float(nf.loc[name, "coefficient_integer_scale"])
        p, e = _pair(summary, name, "lp_b", lo, "{:.3g}")
        edwards = name == "edwards"
        findings.append(Finding(
            "Figure 6", name, PAPER_TEXT["figure6"] if edwards else "(not shown for this table)", p, e,
            "agrees if the mean b* at the smallest epsilon, in counts (times the coefficients' integer scale), "
            "exceeds n",
            (("agrees" if counts > n else "disagrees") if edwards else "no claim to check")
            + f": mean b* {top:.3g} at epsilon {at:g} is {counts:.0f} in counts (n = {n})",
        ))
    findings += _calibration_findings(runs)
    findings += _table7_findings(table7)
    findings.append(_refit_finding(runs))
    return findings


def _calibration_findings(runs: pd.DataFrame) -> list[Finding]:
    out = []
    if not {"paper", "exact"} <= set(runs.calibration):
        return out
    for name in dict.fromkeys(runs.table):
        part = runs[runs.table == name]
        paper = part[part.calibration == "paper"].iloc[0]
        exact = part[part.calibration == "exact"].iloc[0]
        ratio = paper.noise_scale / exact.noise_scale
        holds = bool(paper.epsilon_holds)
        out.append(Finding(
            "Calibration", name, "Table 1 (binary) / Theorem 2 (multi-category) noise scales",
            f"scale x epsilon = {paper.noise_scale * paper.epsilon:.4g}", f"{exact.noise_scale * exact.epsilon:.4g} "
            f"(the exact sensitivity, {exact.neighbours})", "the paper's scale must be at least the exact one",
            (f"epsilon holds, with {ratio:.2f} times the noise it needs" if holds else
             f"epsilon does NOT hold: the paper's runs are {paper.epsilon_actual / paper.epsilon:.2f} x epsilon-DP"),
        ))
    return out


def _table7_findings(table7: pd.DataFrame) -> list[Finding]:
    out = []
    for row in table7.itertuples(index=False):
        cells = int(np.prod([int(k) for k in row.shape.split("x")]))
        free = cells - int(row.df_tool_nominal)
        df_text = (f"df {row.df_tool_nominal} = {cells} cells - {free} free parameters; printed {row.df_paper}"
                   + ("" if row.df_paper == row.df_tool_nominal else
                      f" ({int(row.df_paper) - int(row.df_tool_nominal):+d}: not cells minus free parameters)")
                   + f"; adjusted for zero margins {row.df_tool_adjusted}")
        same_g2 = abs(float(row.g2_tool) - float(row.g2_paper)) <= 0.01
        out.append(Finding(
            "Table 7", row.table, f"G2 {row.g2_paper}, df {row.df_paper}", "(no noise: the original table)",
            f"G2 {row.g2_tool}", "agrees if G2 matches to 0.01 and df equals cells - free parameters",
            ("agrees" if same_g2 and row.df_paper == row.df_tool_nominal else "disagrees")
            + f": G2 {row.g2_tool} vs {row.g2_paper} printed; {df_text}",
        ))
    return out


def _refit_finding(runs: pd.DataFrame) -> Finding:
    refitted = runs.refit_converged.notna()
    stuck = int((runs.refit_converged[refitted] == False).sum())  # noqa: E712  (a column of objects)
    empty = int((~refitted).sum())
    return Finding(
        "Refits", "all", "(the paper does not say)", "", "",
        "every refit must reach the tolerance (generator margins within 1e-8)",
        f"{int(refitted.sum())} of {len(runs)} released tables refitted; "
        + ("all to tolerance" if stuck == 0 else f"{stuck} did NOT converge (their G2 and MLE distances are approximate)")
        + (f"; {empty} released an empty table (n' = 0), which has no MLE" if empty else ""),
    )


def lp_range_summary(lp_set: pd.DataFrame) -> pd.DataFrame:
    grouped = lp_set.assign(n_width=lp_set.n_released_max - lp_set.n_released_min).groupby(
        ["table", "calibration", "epsilon"], sort=False)
    return grouped.agg(
        runs=("n_released", "size"), n=("n", "first"), n_released=("n_released", "mean"),
        n_released_min=("n_released_min", "mean"), n_released_max=("n_released_max", "mean"),
        widest_n_range=("n_width", "max"), max_l1_error=("max_l1_error", "mean"),
        max_l1_error_at_min_total=("max_l1_error_at_min_total", "mean"),
        max_l1_error_at_max_total=("max_l1_error_at_max_total", "mean"),
    ).reset_index()


# --- figures --------------------------------------------------------------------------------------
# metric: (y-axis label with units, lower and upper end of its range, log axis for epsilon < 1)
AXES = {
    "n_released": ("n' (records)", 0.0, None, True),
    "max_l1_error": ("max L1 error (records)", 0.0, None, True),
    "g2_abs_difference": ("|G2 difference| (deviance)", 0.0, None, True),
    "mle_l1": ("L1 distance (0 to 2)", 0.0, 2.0, False),
    "lp_infeasible": ("fraction of runs", 0.0, 1.0, False),
    "lp_b": ("b* (coefficient units)", 0.0, None, True),
}
CALIBRATION_STYLE = {
    "paper": ("tab:orange", "paper calibration (what the paper plotted; reproduction preset)"),
    "exact": ("tab:blue", "exact calibration"),
}


def _matplotlib():
    """matplotlib, or one line naming the extra that brings it."""
    try:
        import matplotlib
    except ImportError:
        raise TabreleaseError("the reproduction's figures need matplotlib: pip install 'tabrelease[paper]'") from None
    return matplotlib


def plot_metric(summary: pd.DataFrame, metric: str, title: str, path: Path, noise_free: pd.DataFrame | None = None,
                neighbours: str = "add-remove") -> None:
    """Mean and a mean +- 1 sd band (kept inside the quantity's range) against epsilon, one row per
    table, split at epsilon = 1 as in the paper; the no-noise level and, in Figure 1, the true n."""
    matplotlib = _matplotlib()
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ylabel, lower, upper, log_small = AXES[metric]
    tables = list(dict.fromkeys(summary.table))
    fig, axes = plt.subplots(len(tables), 2, figsize=(10, 2.8 * len(tables)), squeeze=False)
    levels = {} if noise_free is None else noise_free.set_index("table")
    for row, name in enumerate(tables):
        for col, (label, keep) in enumerate((("epsilon < 1", lambda e: e < 1), ("epsilon >= 1", lambda e: e >= 1))):
            ax = axes[row][col]
            log = log_small and col == 0
            floors: list[float] = []
            for cal in [c for c in CALIBRATION_STYLE if c in set(summary.calibration)]:
                part = summary[(summary.table == name) & (summary.calibration == cal)]
                part = part[keep(part.epsilon)].sort_values("epsilon")
                if part.empty:
                    continue
                colour, tag = CALIBRATION_STYLE[cal]
                mean, sd = part[f"{metric}_mean"], part[f"{metric}_sd"].fillna(0)
                low, high = (mean - sd).clip(lower=lower), (mean + sd).clip(upper=upper)
                if log and (mean > 0).any():
                    # A band reaching 0 has no place on a log axis: it runs to the panel's floor instead.
                    floor = float(mean[mean > 0].min()) / 3
                    low = low.clip(lower=floor)
                    floors.append(floor)
                ax.plot(part.epsilon, mean, color=colour, lw=1.2, label=tag)
                ax.fill_between(part.epsilon, low, high, color=colour, alpha=0.18, lw=0)
            if metric == "n_released":
                ax.axhline(float(summary[summary.table == name].n.iloc[0]), color="black", lw=0.8, label="true n")
            if name in getattr(levels, "index", ()):
                level = float(levels.loc[name, metric])
                if level > 0 or not log:
                    ax.axhline(level, color="grey", lw=0.9, ls=":", label="no noise (LP and rounding alone)")
                    if level > 0:
                        floors.append(level / 1.5)
            if col == 0:
                # Most of what happens below epsilon = 1 happens below 0.1: a log epsilon axis shows it.
                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                ax.xaxis.set_minor_formatter(NullFormatter())
            if log:
                ax.set_yscale("log")
                if floors:
                    ax.set_ylim(bottom=min(floors))
            ax.set_title(f"{name}, {label}" + (" (log scales)" if log else " (log epsilon)" if col == 0 else ""),
                         fontsize=9)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(labelsize=8)
            if row == len(tables) - 1:
                ax.set_xlabel(f"epsilon ({neighbours} neighbours)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(f"{title}\nmean (line) and mean ± 1 sd (band); simulation-mode noise", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=90, format="png"))
    plt.close(fig)


# --- the report -------------------------------------------------------------------------------------
def _grid_text(grid: SweepGrid, meta: dict) -> list[str]:
    eps = grid.epsilons
    return [
        f"Grid: {len(grid.tables)} tables × {len(grid.calibrations)} calibrations × {len(eps)} values of epsilon "
        f"({eps[0]:g} to {eps[-1]:g}) × {grid.repetitions} repetitions = {grid.runs} releases, each with the "
        "consistency LP, rounding and a refit of the paper's model.",
        "Mechanisms: Fourier (Barak et al., the paper's Table 1) for the binary tables, Efron–Stein (Table 2) "
        "for the others. Calibrations: paper (the paper's formulas, which is what the paper plotted: a reproduction "
        "preset, not a privacy guarantee) and exact (noise at the exact L1 sensitivity). Verdicts are judged on the "
        "paper-calibration runs; the exact ones are shown beside them.",
        f"Privacy: every epsilon here is for {grid.neighbours} neighbours (data sets that differ by one "
        + ("added or removed record" if grid.neighbours == "add-remove" else "changed record") + ").",
        f"Noise: simulation mode (seeded numpy, master seed {meta['master_seed']}; every run's seed is in "
        "sweep/runs.parquet and replays it alone). Not secure noise: this is an experiment, not a release.",
        f"Wall time {meta['wall_seconds']} s with {meta['jobs']} worker process(es) on {meta['machine']['cpus']} CPUs "
        f"({meta['machine']['cpu']}), Python {meta['machine']['python']}; {meta['runs_computed_in_this_call']} of "
        f"{meta['runs']} runs computed in this call.",
    ]


def _lp_text(repro: "Reproduction") -> list[str]:
    nf = repro.noise_free
    lines = [
        "The consistency LP has many optimal tables (the paper's Remark 3); the released table, n', its G2 and "
        "the MLE distance depend on which one the solver returns. With no noise at all (b* = 0):",
    ]
    for row in nf.itertuples(index=False):
        lines.append(
            f"{row.table}: n' {row.n_released:.0f} (n = {row.n}), max L1 margin error {row.max_l1_error:.0f}, "
            f"|G2 difference| {row.g2_abs_difference:.1f}, MLE L1 {row.mle_l1:.3f}; "
            + (f"{row.lp_fractional_cells} fractional cells in the LP's table, and plain rounding of them moved the "
               f"released margins by up to {row.max_l1_error:.0f}." if row.lp_fractional_cells else
               "the LP's table is integral.")
        )
    lines.append("These no-noise levels are the dotted grey lines in the figures. The table below replays runs of "
                 "the sweep from their seeds and solves the LP again for the optimal tables with the smallest and the "
                 "largest total (b held at b*), each rounded as a release is (every run: lp_optimal_set.csv).")
    return lines


def _table8_text(repro: "Reproduction") -> list[str]:
    from .evaluation import table8_findings

    return table8_findings(repro.table8)


def _lp_range_display(lp_range: pd.DataFrame) -> pd.DataFrame:
    """Means over the replayed runs, rounded to whole records, with headers a reader can follow."""
    frame = lp_range.copy()
    for column in frame.columns[4:]:
        frame[column] = frame[column].round().astype("int64")
    return frame.rename(columns={
        "runs": "runs", "n_released": "mean n' as solved", "n_released_min": "mean n' at min total",
        "n_released_max": "mean n' at max total", "widest_n_range": "widest n' range",
        "max_l1_error": "mean max L1 error as solved", "max_l1_error_at_min_total": "... at min total",
        "max_l1_error_at_max_total": "... at max total",
    })


FINDING_COLUMNS = ("subject", "table", "paper_says", "run_paper_calibration", "run_exact_calibration", "rule", "verdict")
FINDING_HEADERS = ("", "table", "the paper says", "this run, paper calibration", "this run, exact calibration",
                   "rule", "verdict")


def findings_frame(findings) -> pd.DataFrame:
    frame = pd.DataFrame([[getattr(f, c) for c in FINDING_COLUMNS] for f in findings], columns=FINDING_COLUMNS)
    frame.columns = list(FINDING_HEADERS)
    return frame


def render_markdown(repro: Reproduction, grid: SweepGrid, meta: dict) -> str:
    lines = ["# Reproduction of Yang, Fienberg & Rinaldo, section 6", ""]
    lines += [f"- {t}" for t in _grid_text(grid, meta)]
    lines += ["", "## Where the run agrees with the paper, and where it does not", "",
              _markdown_table(findings_frame(repro.findings)), "",
              "## What the LP leaves open", ""]
    lines += [f"- {t}" for t in _lp_text(repro)]
    lines += ["", _markdown_table(_lp_range_display(repro.lp_range))]
    lines += ["", "## Table 7", "", _markdown_table(repro.table7), "",
              "## Table 8 (noise scale and L1 bound multiplier at epsilon = 0.01, 1, 2)", "",
              _markdown_table(repro.table8), ""]
    lines += [f"- {t}" for t in _table8_text(repro)]
    lines += ["", "## Figures", ""]
    for name, _, title in FIGURES:
        lines += [f"### {title}", "", f"![{title}]({name})", ""]
    lines += ["The paper shows Figures 5 and 6 for the Edwards table only; here every table has a row. Figure 4 is "
              "split at epsilon = 1 like the others.", "",
              "Per-epsilon means and standard deviations are in summary.csv; every run is in sweep/runs.parquet."]
    return "\n".join(lines) + "\n"


def render_html(repro: Reproduction, grid: SweepGrid, meta: dict) -> str:
    from jinja2 import Environment

    template = Environment(autoescape=True).from_string(
        """<!doctype html><html><head><meta charset="utf-8"><title>Reproduction: Yang, Fienberg & Rinaldo section 6</title>
<style>body{font-family:sans-serif;max-width:75em;margin:2em auto}table{border-collapse:collapse;font-size:80%}
td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}img{max-width:100%}
.scroll{overflow-x:auto;max-width:100%}</style></head><body>
<h1>Reproduction of Yang, Fienberg &amp; Rinaldo, section 6</h1>
<ul>{% for t in grid_text %}<li>{{ t }}</li>{% endfor %}</ul>
<h2>Where the run agrees with the paper, and where it does not</h2><div class="scroll">{{ findings }}</div>
<h2>What the LP leaves open</h2>
<ul>{% for t in lp_text %}<li>{{ t }}</li>{% endfor %}</ul><div class="scroll">{{ lp_range }}</div>
<h2>Table 7</h2><div class="scroll">{{ table7 }}</div>
<h2>Table 8 (noise scale and L1 bound multiplier at epsilon = 0.01, 1, 2)</h2><div class="scroll">{{ table8 }}</div>
<ul>{% for t in table8_text %}<li>{{ t }}</li>{% endfor %}</ul>
<h2>Figures</h2>{% for name, title in figures %}<h3>{{ title }}</h3><img src="{{ name }}" alt="{{ title }}">{% endfor %}
<p>The paper shows Figures 5 and 6 for the Edwards table only; here every table has a row.</p>
</body></html>"""
    )
    from markupsafe import Markup

    return template.render(
        grid_text=_grid_text(grid, meta), lp_text=_lp_text(repro), table8_text=_table8_text(repro),
        lp_range=Markup(_lp_range_display(repro.lp_range).to_html(index=False, na_rep="")),
        findings=Markup(findings_frame(repro.findings).to_html(index=False, na_rep="")),
        table7=Markup(repro.table7.to_html(index=False, na_rep="")),
        table8=Markup(repro.table8.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.6g}")),
        figures=[(name, title) for name, _, title in FIGURES],
    )


def _markdown_table(frame: pd.DataFrame) -> str:
    def cell(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return ""
        # Markdown tables: escape the column separator and the start of an HTML tag, nothing else.
        return f"{v:.6g}" if isinstance(v, float) else str(v).replace("|", "\\|").replace("<", "&lt;")

    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])
