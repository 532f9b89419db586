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

from ..errors import TabreleaseError
from .._files import remove_own_outputs, write_frame_atomic, write_text_atomic
from ..sweeps import SweepGrid, available_cpus, make_grid, run_sweep
from .claims import compare_with_paper, findings_frame
from .tables import PAPER_TABLES, reproduce_table7, reproduce_table8, table8_findings

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
    ("figure1_sample_size.svg", "n_released", "Figure 1: sample size of the released table"),
    ("figure2_max_l1_margin_error.svg", "max_l1_error", "Figure 2: maximal L1 error of the released margins"),
    ("figure3_g2_difference.svg", "g2_abs_difference", "Figure 3: |G2 of released - G2 of original|"),
    ("figure4_mle_l1.svg", "mle_l1", "Figure 4: L1 distance between the MLEs of original and released tables"),
    ("figure5_lp_infeasible.svg", "lp_infeasible", "Figure 5: fraction of runs with b* > 0 (LP infeasible)"),
    ("figure6_lp_b.svg", "lp_b", "Figure 6: optimal b of the consistency LP"),
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
    """The paper's grid: its four tables, mechanism "auto", exact and paper calibration.

    Parameters
    ----------
    quick : bool
        7 epsilons and 8 repetitions (`QUICK_EPSILONS`) instead of the paper's 200 and 50.
    master_seed : int

    Returns
    -------
    SweepGrid
    """
    from ..tables import builtin_table

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
    """Run the experiment into OUT/sweep/ and write figures, tables and the report into OUT.

    Parameters
    ----------
    out : path
        The folder; with `force`, only a reproduction's own outputs in it are replaced.
    quick : bool
        The quick grid (see `paper_grid`).
    jobs : int
        Local worker processes.
    scheduler : str or None
        A Dask scheduler's address; used instead of `jobs` when given.
    resume : bool
        Continue the sweep in OUT/sweep/ (the same grid).
    force : bool
        Start over in a folder that is not empty.
    progress : bool or None
        A progress bar on standard error (None: when it is a terminal).
    master_seed : int

    Returns
    -------
    Reproduction
        The summaries, tables, findings and LP ranges written, with the wall time and run counts.

    Raises
    ------
    TabreleaseError
        `out` is not empty without `resume` or `force`; or the sweep refuses (see `run_sweep`).
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (resume or force):
        raise TabreleaseError(f"{out} already exists and is not empty; use --resume to continue it or --force to start over")
    if force and out.exists() and not resume:
        # Only what a reproduction writes; other files in the folder (a .gitignore, notes) stay.
        remove_own_outputs(out, REPRODUCTION_OUTPUTS)
    out.mkdir(parents=True, exist_ok=True)
    grid = paper_grid(quick, master_seed)
    started = time.perf_counter()
    result = run_sweep(grid, out / "sweep", jobs=scheduler or jobs, resume=resume and (out / "sweep").exists(),
                       progress=progress)
    summary = summarise(result.runs)
    table7 = reproduce_table7()

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
    from .. import __version__

    meta["tool_version"] = __version__
    write_text_atomic(out / "reproduction.json", json.dumps(meta, indent=2))
    repro = Reproduction(out, summary, table7, table8, findings, noise_free, lp_range_summary(lp_set), wall,
                         result.computed_runs, grid.runs)
    write_text_atomic(out / "report.md", render_markdown(repro, grid, meta))
    write_text_atomic(out / "report.html", render_html(repro, grid, meta))
    return repro


def machine_description() -> dict:
    """The machine the experiment ran on, for reproduction.json and the report.

    Returns
    -------
    dict
        `cpus` (available to this process), `cpu` (its model), `system`, `python` and `numpy` versions.
    """
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
    """Mean and standard deviation of each figure's quantity per table, calibration and epsilon.

    Parameters
    ----------
    runs : pandas.DataFrame
        The sweep's rows, one per run.

    Returns
    -------
    pandas.DataFrame
        One row per table, calibration and epsilon: runs, `<metric>_mean` and `<metric>_sd` for each of
        `METRICS`, n, noise_scale and epsilon_actual.
    """
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


# --- what the LP leaves open ------------------------------------------------------------------------
class _RecordingNoise:
    """Delegates to a noise source and keeps the noisy values it returned (to re-solve the LP on them)."""

    def __init__(self, source):
        self.source, self.mode, self.seed, self.noisy = source, source.mode, getattr(source, "seed", None), None

    def perturb(self, values, calibration, integer_scale=None, integers=None):
        self.noisy = self.source.perturb(values, calibration, integer_scale, integers)
        return self.noisy


def _paper_plan(table, margins, epsilon, calibration="exact"):
    from ..planner import plan_release

    from ..spec import SIMULATION, ReleaseSpec, loss_of

    return plan_release(table.shape, margins, ReleaseSpec(loss=loss_of(epsilon), mechanism="auto",
                                                          calibration=calibration, mode=SIMULATION))


def noise_free_levels(grid: SweepGrid) -> pd.DataFrame:
    """Each figure's quantity for a release with no noise at all: what the LP and rounding do alone.

    The LP's optimum is rarely unique (the paper's Remark 3); with exact coefficients b* = 0 and
    the LP returns some non-negative table with the original margins, but not the original table,
    so the released table's G2 and MLE already differ from the original's.

    Parameters
    ----------
    grid : SweepGrid
        Its tables and margins are read.

    Returns
    -------
    pandas.DataFrame
        One row per table: n, n_released, max_l1_error, g2_abs_difference, mle_l1, lp_infeasible, lp_b,
        lp_fractional_cells and coefficient_integer_scale (what turns b* into counts).
    """
    from ..evaluation import evaluate_release
    from ..pipeline import run_plan
    from ..models import HierarchicalModel
    from ..noise import NoNoise

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

    Parameters
    ----------
    grid : SweepGrid
        The sweep's grid (its seeds are replayed).
    epsilons : sequence of float
        Each is replaced by the grid's nearest epsilon.
    repetitions : int
        Runs replayed per grid point (at most the grid's).

    Returns
    -------
    pandas.DataFrame
        One row per replayed run: its coordinates and seed, n, b*, and n' and the max L1 margin error as solved,
        at the smallest total and at the largest.
    """
    from ..pipeline import run_plan
    from ..rounding import round_table
    from ..noise import SimulationNoise
    from ..sweeps import run_seed
    from ..tables import margin_counts

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


def lp_range_summary(lp_set: pd.DataFrame) -> pd.DataFrame:
    """Means of `lp_optimal_set`'s rows per table, calibration and epsilon, and the widest range of n'.

    Parameters
    ----------
    lp_set : pandas.DataFrame
        As `lp_optimal_set` returns it.

    Returns
    -------
    pandas.DataFrame
        One row per table, calibration and epsilon.
    """
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
    "paper": ("#D55E00", "paper calibration (what the paper plotted; reproduction preset)"),
    "exact": ("#0072B2", "exact calibration"),
}


def plot_metric(summary: pd.DataFrame, metric: str, title: str, path: Path, noise_free: pd.DataFrame | None = None,
                neighbours: str = "add-remove") -> None:
    """Mean and a mean +- 1 sd band (kept inside the quantity's range) against epsilon, one row per
    table, split at epsilon = 1 as in the paper; the no-noise level and, in Figure 1, the true n. An SVG file
    (`charts`).

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise` returns it.
    metric : str
        A key of `METRICS`.
    title : str
        The figure's title.
    path : Path
        The SVG file written (atomically).
    noise_free : pandas.DataFrame or None
        As `noise_free_levels` returns it; None: no no-noise line.
    neighbours : str
        The unit, for the epsilon axis's label.
    """
    from .. import charts

    ylabel, lower, upper, log_small = AXES[metric]
    tables = list(dict.fromkeys(summary.table))
    levels = {} if noise_free is None else noise_free.set_index("table")
    panels = []
    for name in tables:
        for col, (label, keep) in enumerate((("epsilon < 1", lambda e: e < 1), ("epsilon >= 1", lambda e: e >= 1))):
            log = log_small and col == 0
            # Most of what happens below epsilon = 1 happens below 0.1: a log epsilon axis shows it.
            panel = charts.Panel(title=f"{name}, {label}" + (" (log scales)" if log else " (log epsilon)" if col == 0
                                                             else ""),
                                 xlabel=f"epsilon ({neighbours} neighbours)", ylabel=ylabel, xlog=col == 0, ylog=log)
            floors: list[float] = []
            span = []
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
                panel.band(part.epsilon, low, high, colour=colour, opacity=0.18)
                panel.line(part.epsilon, mean, colour=colour, width=1.6, label=tag)
                span += [float(part.epsilon.min()), float(part.epsilon.max())]
            if not span:
                continue
            ends = [min(span), max(span)]
            if metric == "n_released":
                n = float(summary[summary.table == name].n.iloc[0])
                panel.line(ends, [n, n], colour="#000000", width=1.0, label="true n")
            if name in getattr(levels, "index", ()):
                level = float(levels.loc[name, metric])
                if level > 0 or not log:
                    panel.line(ends, [level, level], colour="#777777", width=1.2, dash="2 3",
                               label="no noise (LP and rounding alone)")
                    if level > 0:
                        floors.append(level / 1.5)
            if log and floors:
                panel.ylim = (min(floors), panel.data_range(1)[1])
            panels.append(panel)
    svg = charts.render(panels, columns=2, width=1000, panel_height=210,
                        title=f"{title}: mean (line) and mean ± 1 sd (band); simulation-mode noise",
                        description=title)
    write_text_atomic(path, svg)


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


def render_markdown(repro: Reproduction, grid: SweepGrid, meta: dict) -> str:
    """The report as Markdown (report.md).

    Parameters
    ----------
    repro : Reproduction
    grid : SweepGrid
    meta : dict
        What reproduction.json records (master seed, wall time, jobs, machine, runs).

    Returns
    -------
    str
    """
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


def _wrapping_headers(frame: pd.DataFrame) -> pd.DataFrame:
    """The same table with headers a browser can wrap (paper_formula_bound_multiplier -> paper formula bound
    multiplier): sixteen unbreakable column names ran Table 8 off the right of the page."""
    return frame.rename(columns=lambda c: str(c).replace("_", " "))


def render_html(repro: Reproduction, grid: SweepGrid, meta: dict) -> str:
    """The report as one HTML page (report.html; the figures are files beside it).

    Parameters
    ----------
    repro : Reproduction
    grid : SweepGrid
    meta : dict
        What reproduction.json records (master seed, wall time, jobs, machine, runs).

    Returns
    -------
    str
        The page (values escaped).
    """
    from jinja2 import Environment

    from ..reports import PAGE_STYLE

    # The audit page's look, wider for Table 8's columns. A body cell breaks inside a word only where the word alone
    # is wider than its column (breaking anywhere let the findings table squeeze "Figure 1" into pieces); a header
    # may break anywhere (Table 8's long column names would otherwise push it off the page).
    template = Environment(autoescape=True).from_string(
        """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Reproduction: Yang, Fienberg & Rinaldo section 6</title><style>""" + PAGE_STYLE + """
body { max-width: 75rem; } table { font-size: 0.9rem; } td { overflow-wrap: break-word; } th { overflow-wrap: anywhere; }
.paper { border-left: 4px solid #2166ac; padding: 0.2rem 0.8rem; background: #f7fafd; }
</style></head><body>
<h1>Reproduction of Yang, Fienberg &amp; Rinaldo, section 6</h1>
<p class="paper">A reproduction preset: the paper's mechanisms and formulas as printed, run on the built-in tables.
Every number below is computed by this run, beside what the paper says.</p>
<ul>{% for t in grid_text %}<li>{{ t }}</li>{% endfor %}</ul>
<h2>Where the run agrees with the paper, and where it does not</h2><div class="scroll">{{ findings }}</div>
<h2>What the LP leaves open</h2>
<ul>{% for t in lp_text %}<li>{{ t }}</li>{% endfor %}</ul><div class="scroll">{{ lp_range }}</div>
<h2>Table 7</h2><div class="scroll">{{ table7 }}</div>
<h2>Table 8 (noise scale and L1 bound multiplier at epsilon = 0.01, 1, 2)</h2><div class="scroll">{{ table8 }}</div>
<ul>{% for t in table8_text %}<li>{{ t }}</li>{% endfor %}</ul>
<h2>Figures</h2>{% for name, title in figures %}<figure><img src="{{ name }}" alt="{{ title }}"><figcaption>{{ title }}</figcaption></figure>{% endfor %}
<p>The paper shows Figures 5 and 6 for the Edwards table only; here every table has a row.</p>
</body></html>"""
    )
    from markupsafe import Markup

    return template.render(
        grid_text=_grid_text(grid, meta), lp_text=_lp_text(repro), table8_text=_table8_text(repro),
        lp_range=Markup(_lp_range_display(repro.lp_range).to_html(index=False, na_rep="")),
        findings=Markup(findings_frame(repro.findings).to_html(index=False, na_rep="")),
        table7=Markup(_wrapping_headers(repro.table7).to_html(index=False, na_rep="")),
        table8=Markup(_wrapping_headers(repro.table8).to_html(index=False, na_rep="", float_format=lambda v: f"{v:.6g}")),
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

