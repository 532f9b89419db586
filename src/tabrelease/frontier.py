"""The frontier: what each release strategy costs in accuracy at each epsilon, on the same tables.

For each table (a built-in one, or one read from a file: `table_label` names it), workload (the built-in table's
model, the paper's or the outside tables' from tables/*.json; every two-way margin; every three-way margin) and
epsilon, every strategy releases the margins `repetitions` times (fewer where a slow strategy says so) with seeded
simulation noise (exact calibration, add-remove neighbours), and the released margins are compared with the truth:
the largest and the mean L1 error over the margins, |n' - n|, and whether the output is integer, non-negative and
mutually consistent. The strategies:

| strategy             | measurements                                  | guarantee                       |
|----------------------|-----------------------------------------------|---------------------------------|
| planned              | the planned mechanism (release's default)     | central epsilon-DP              |
| paper-lp             | the paper's Fourier / Efron-Stein, equal      | central epsilon-DP              |
|                      | scales, then the L-infinity LP                |                                 |
| paper-least-squares  | the same noisy coefficients, least squares    | central epsilon-DP              |
| cells, margins       | every cell / every margin's cells (DMT s.3)   | central epsilon-DP              |
| gaussian-copula,     | dummy-coded counts, synthetic records         | central epsilon-DP              |
| copula-id            | (Asghar et al.)                               |                                 |
| planned-gaussian,    | Gaussian planned release; relaxed adaptive    | (epsilon, delta)-DP, 1e-6       |
| rap, rap-adaptive    | projection, T = 1 and two rounds              |                                 |
| randomized-response  | each record's cell, k-ary randomized response | local epsilon-DP                |
| sensitive-attributes | noise only on sets with the sensitive one     | one attribute, replace          |

`paper-least-squares` is least squares without planning: it isolates what the plan adds.
Nothing here is hand-typed into the report: every number and verdict is computed from the runs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from .errors import TabreleaseError
from .spec import SIMULATION, ReleaseSpec, loss_of, unit_of
from .tables import margin_counts

@dataclass(frozen=True)
class Strategy:
    """One way to release: a spec (a mechanism of the registry with its options, its privacy unit and delta, and how
    it is post-processed), run at each point's epsilon.

    `stream` fixes the strategy's noise seeds (so adding a strategy leaves the others' draws unchanged). Strategies
    that may measure the same thing share a stream (common random numbers): planned, cells and hdmm-marginals all
    measure the full table at some points, and there they draw the very same noise, so that their difference is
    that of their designs, not of their draws (planned and cells-least-squares are then the same release); a spec's
    delta is given to (epsilon, delta)-DP mechanisms, which are compared at the same epsilon; `from_strategy`
    re-estimates another strategy's very measurements with this one's estimator and rounding (no new noise);
    `sensitive` gives the spec the table's sensitive attribute (FRONTIER_SENSITIVE) as its privacy unit."""

    name: str
    spec: ReleaseSpec
    stream: int
    from_strategy: str | None = None
    sensitive: bool = False
    repetitions: int | None = None  # at most this many runs per point (slow strategies); None: the task's
    guarantee: str = "central epsilon-DP"  # the class it is compared within (a weaker class is never "better")
    why: str = ""  # what the strategy does, for the report's comparison (a description, not a verdict)


def _spec(mechanism: str, delta: float | None = None, **settings) -> ReleaseSpec:
    """A strategy's spec at epsilon 1 (each point rescales it), in simulation mode."""
    return ReleaseSpec(loss=loss_of(1.0, delta), mechanism=mechanism, mode=SIMULATION, **settings)


# The delta of the (epsilon, delta)-DP strategies: each is compared with the pure-epsilon ones at the same epsilon.
FRONTIER_DELTA = 1e-6
_DELTA_SHOWN = f"{FRONTIER_DELTA:.0e}".replace("e-0", "e-")  # 1e-6, as people write it
STRATEGY_LIST = (
    Strategy("planned", _spec("planned"), 2, why="measures what the released margins need (margins or their residuals) at "
             "scales planned to minimise their total expected error, then fits one consistent non-negative table "
             "by least squares and rounds it to integers under control"),
    Strategy("paper-lp", _spec("auto"), 1, why="the paper's mechanism: every Fourier or Efron-Stein coefficient of the "
             "margins' closure at one scale, then the L-infinity LP and plain rounding"),
    Strategy("paper-least-squares", _spec("auto", estimator="least-squares", rounding="controlled"), 1,
             from_strategy="paper-lp", why="the paper's very measurements post-processed as the planned release "
             "is: what planning adds over equal scales"),
    Strategy("cells", _spec("cells"), 2, why="noise on every cell of the full table (sensitivity 1), clipped and rounded: "
             "each released margin cell sums the noise of the cells it holds"),
    Strategy("cells-least-squares", _spec("cells", estimator="least-squares", rounding="controlled"), 2,
             from_strategy="cells", why="the very cells of the full table noised by `cells`, fitted by non-negative "
             "least squares with the total pinned and rounded under control (as the planned release is): one "
             "consistent integer table"),
    Strategy("margins", _spec("margins"), 3, why="noise on every cell of each margin independently (sensitivity: the number "
             "of margins): the margins need not agree with each other"),
    Strategy("gaussian-copula", _spec("gaussian-copula"), 4, why="synthetic records from a Gaussian copula fitted to noisy "
             "one-way and pairwise counts of the dummy-coded variables (Asghar et al.): consistent integer margins, "
             "but a model that cannot represent interactions beyond pairs"),
    Strategy("copula-id", _spec("copula-id"), 5, why="the copula's baseline: synthetic records with independent variables "
             "from noisy one-way counts only"),
    Strategy("randomized-response", _spec("randomized-response"), 6, guarantee="local epsilon-DP (n public)",
             why="each record's cell randomised by k-ary randomized response before anyone sees it, then unbiased "
             "margins, least squares and controlled rounding: no curator sees a true record, and a record keeps its "
             "own cell with probability e^epsilon / (e^epsilon + k - 1) for k cells"),
    Strategy("planned-gaussian", _spec("planned", FRONTIER_DELTA), 10, guarantee=f"(epsilon, delta)-DP, delta = {_DELTA_SHOWN}",
             why="the planned release with Gaussian noise on residual blocks (ResidualPlanner's closed form), "
             "least squares and controlled rounding"),
    Strategy("rap", _spec("rap", FRONTIER_DELTA), 8, repetitions=10, guarantee=f"(epsilon, delta)-DP, delta = {_DELTA_SHOWN}",
             why="relaxed adaptive projection with every margin measured at once (T = 1): Gaussian noise under "
             "rho-zCDP, then a relaxed synthetic dataset fitted by gradient descent to the noisy margins, rounded"),
    Strategy("rap-adaptive", _spec("rap", FRONTIER_DELTA, options={"rounds": 2}), 9, repetitions=10,
             guarantee=f"(epsilon, delta)-DP, delta = {_DELTA_SHOWN}",
             why="relaxed adaptive projection over two rounds: report-noisy-max picks the margins the current "
             "synthetic data answers worst, each measured with Gaussian noise, the data refitted after each"),
    Strategy("hdmm-marginals", _spec("hdmm-marginals"), 2, why="HDMM's marginals strategy (McKenna et al., VLDB 2018, "
             "OPT_M): Laplace noise on weighted marginals of every subset of the variables (the full table and "
             "marginals above the released ones included), the weights minimising the released margins' expected "
             "squared error, then non-negative least squares with the total pinned and controlled rounding"),
    Strategy("sensitive-attributes", _spec("sensitive-attributes", unit="replace"), 7, sensitive=True,
             guarantee="epsilon-DP for one sensitive attribute (replace neighbours; the other attributes public)",
             why="Fourier or Efron-Stein coefficients with noise only on those whose set holds the sensitive attribute "
             "(Dwork, McSherry and Talwar s.5), the others released exactly, then the LP"),
)
STRATEGIES = tuple(s.name for s in STRATEGY_LIST)
TABLES = ("edwards", "czech", "rochdale", "journey_to_work")  # the paper's (their places seed the draws)
# The frontier's default: the paper's four and three classic tables from outside it (tables/PROVENANCE.md).
FRONTIER_TABLES = TABLES + ("housing", "titanic", "minn38")
EPSILONS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
# What each table releases: its paper (or outside) model's margins, and every two-way margin (the default
# workloads); on request, every three-way margin (a table read from a file has no default model).
MODEL, ALL_TWO_WAY, ALL_THREE_WAY = "model", "all-2-way", "all-3-way"
WORKLOADS = (MODEL, ALL_TWO_WAY)
# Every workload a run may name; a workload's place here is its word in the seeds, so one added goes last.
WORKLOAD_CHOICES = WORKLOADS + (ALL_THREE_WAY,)
REPETITIONS = 50
MASTER_SEED = 20261122
# For the sensitive-attributes strategy: the attribute of each table that is treated as sensitive (the others
# public). A choice made for the comparison, not a claim about the data: the response or outcome variable.
FRONTIER_SENSITIVE: dict[str, tuple[str, ...]] = {
    "czech": ("F",),  # family anamnesis of coronary heart disease
    "rochdale": ("C",),  # husband unemployed
    "journey_to_work": ("C",),  # income category
    "housing": ("A",),  # satisfaction with housing
    "titanic": ("D",),  # survived
    "minn38": ("B",),  # what the graduate did after high school
}  # Edwards (loci of a fungus) has no attribute that is sensitive in this sense: the strategy is not run there
SENSITIVE_NOT_NAMED = "the frontier names a sensitive attribute only for " + ", ".join(FRONTIER_SENSITIVE)


@dataclass(frozen=True)
class FrontierTask:
    # A built-in table's name, a table's file (its path), or a table read already (a file read with the command
    # line's input settings); `table_label` names it.
    table: object
    epsilon: float
    repetitions: int
    master_seed: int
    strategies: tuple[str, ...] = STRATEGIES
    workload: str = MODEL


def strategy(name: str) -> Strategy:
    """The frontier strategy of this name (one of `STRATEGIES`).

    Parameters
    ----------
    name : str

    Returns
    -------
    Strategy

    Raises
    ------
    TabreleaseError
        No strategy has this name.
    """
    for s in STRATEGY_LIST:
        if s.name == name:
            return s
    raise TabreleaseError(f"unknown frontier strategy {name!r}; choose from {', '.join(STRATEGIES)}")


def run_frontier(tables: Sequence[str] = FRONTIER_TABLES, epsilons: Sequence[float] = EPSILONS,
                 repetitions: int = REPETITIONS, master_seed: int = MASTER_SEED, executor=None,
                 strategies: Sequence[str] = STRATEGIES, progress: bool | None = False,
                 workloads: Sequence[str] = WORKLOADS) -> pd.DataFrame:
    """One row per (table, epsilon, repetition, strategy). `executor` (anything with `submit`) runs the
    (table, epsilon) tasks; by default they run here, one after another.

    Parameters
    ----------
    tables : sequence of str or ContingencyTable
        Built-in tables' names, paths of tables' files as `load_table` reads them (with every cell listed and the
        count column `count`), or tables read already; the runs name each by `table_label`, so no two may share a
        label, and a table from elsewhere may not take a built-in table's name.
    epsilons : sequence of float
    repetitions : int
        Runs per strategy at each point (a slow strategy's own `repetitions` caps it).
    master_seed : int
        Every run's noise seed derives from it, the table, epsilon, repetition and strategy's stream.
    executor : object with `submit`, or None
        Runs each (table, epsilon) task (`run_task`); None: an `InlineExecutor` (here, in turn). Not shut down.
    strategies : sequence of str
        Names of `STRATEGIES`; a strategy that re-estimates another's measurements needs that one too.
    progress : bool or None
        A progress bar on standard error (None: when it is a terminal).
    workloads : sequence of str
        Which margins each table releases: "model" (its default model's), "all-2-way" (every two-way margin) and
        "all-3-way" (every three-way margin).

    Returns
    -------
    pandas.DataFrame
        One row per run: table, workload, epsilon, repetition, strategy, mechanism, privacy, max_l1, mean_l1, abs_dn, n,
        integer, nonnegative, consistent and seconds.

    Raises
    ------
    TabreleaseError
        An unknown strategy or workload, or a strategy without the one whose measurements it re-estimates.
    """
    from .sweeps.driver import InlineExecutor

    chosen = tuple(strategy(name).name for name in strategies)
    for name in chosen:
        source = strategy(name).from_strategy
        if source is not None and source not in chosen:
            raise TabreleaseError(f"the {name} strategy re-estimates the {source} strategy's measurements; include it")
    for w in workloads:
        if w not in WORKLOAD_CHOICES:
            raise TabreleaseError(f"unknown frontier workload {w!r}; choose from {', '.join(WORKLOAD_CHOICES)}")
    check_frontier_tables(tables)
    if not any(not strategy(name).sensitive or table_label(t) in FRONTIER_SENSITIVE for t in tables for name in chosen):
        raise TabreleaseError(f"none of the chosen strategies runs on these tables: the sensitive-attributes strategy "
                              f"needs a table with a sensitive attribute ({', '.join(FRONTIER_SENSITIVE)})")
    executor = executor or InlineExecutor()
    tasks = [FrontierTask(t, float(e), int(repetitions), int(master_seed), chosen, w)
             for w in workloads for t in tables for e in epsilons]
    if progress is None:
        import sys

        progress = sys.stderr.isatty()
    from tqdm.auto import tqdm

    # Tasks (a table at one epsilon, every strategy) arrive whole: the bar says what is under way from the start.
    # A task's share of the bar is what it was expected to run: a strategy it finds it cannot run there (its "not
    # run") still ends its share, so the bar ends at its total.
    shares = [sum(min(int(repetitions), strategy(name).repetitions or int(repetitions)) for name in chosen
                  if not strategy(name).sensitive or table_label(t.table) in FRONTIER_SENSITIVE) for t in tasks]
    bar = tqdm(total=sum(shares), unit="release", desc="frontier", disable=not progress)
    bar.set_postfix_str(f"planning and starting {len(tasks)} tasks", refresh=True)
    futures = [executor.submit(run_task, task) for task in tasks]
    results = {}
    try:
        while len(results) < len(futures):
            for i, future in enumerate(futures):
                if i not in results and future.done():
                    results[i] = future.result()
                    bar.update(shares[i])
                    bar.set_postfix_str(f"{len(futures) - len(results)} tasks to come", refresh=False)
            bar.refresh()
            if len(results) < len(futures):
                time.sleep(0.25)
    finally:
        bar.close()
    not_run = [entry for i in range(len(futures)) for entry in results[i].attrs.get("not_run", [])]
    runs = pd.concat([results[i] for i in range(len(futures))], ignore_index=True)
    if runs.empty:
        raise TabreleaseError("none of the chosen strategies could be made at any point: "
                              + "; ".join(sorted({f"{name}: {why}" for *_, name, why in not_run})))
    runs.attrs["not_run"] = not_run
    runs.attrs["master_seed"] = int(master_seed)
    return runs


def table_label(source) -> str:
    """The name a frontier's rows, seeds and figures give a table: a built-in table's own name, the stem of its
    file's name (the name `load_table` gives it), so that a table's draws do not depend on the folder it is in, or a
    table's own name.

    Parameters
    ----------
    source : str or ContingencyTable
        A built-in table's name, the path of a table's file, or a table.

    Returns
    -------
    str
    """
    from .tables import BUILTIN_TABLES

    if not isinstance(source, str):
        return str(source.name)
    return source if source in BUILTIN_TABLES else Path(source).stem


def check_frontier_tables(tables) -> None:
    """Refuse tables a frontier cannot tell apart: two of one label (their rows, seeds and figures would be one
    table's), and a table from a file or elsewhere named as a built-in table is but holding other counts (it would
    take that table's seeds, its sensitive attribute and its place in the report's checks of the paper's tables).

    Parameters
    ----------
    tables : sequence of str or ContingencyTable
        As `run_frontier` takes them.

    Raises
    ------
    TabreleaseError
        Two tables share a label, or one not built in takes a built-in table's name.
    """
    from .tables import BUILTIN_TABLES, holds_builtin_counts, load_table

    labels = [table_label(t) for t in tables]
    for source, label in zip(tables, labels):
        if labels.count(label) > 1:
            raise TabreleaseError(f"the frontier's tables include {label!r} twice; name each table once (a table "
                                  "from a file is named by its file's stem)")
        if label in BUILTIN_TABLES and not (isinstance(source, str) and source == label):
            # A file's path is read; a table read already, passed through.
            if not holds_builtin_counts(label, load_table(source)):
                raise TabreleaseError(f"a table from a file is named {label!r}, as a built-in table is: rename the "
                                      "file (a table from a file is named by its file's stem)")


def _table_index(name: str) -> int:
    """The table's word in the seed: its place among the paper's tables (as before), or a hash of its name."""
    if name in TABLES:
        return TABLES.index(name)
    import hashlib

    return 100 + int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big")


def _seed(task: FrontierTask, repetition: int, stream: int) -> int:
    words = [task.master_seed, _table_index(table_label(task.table)), int(round(task.epsilon * 1e6)), repetition,
             stream]
    if task.workload != MODEL:  # the model's draws are those of the runs made before workloads were added
        words.append(WORKLOAD_CHOICES.index(task.workload))
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1)


def plan_strategy(s: Strategy, table, margins, epsilon: float):
    """The plan a strategy releases with, on one table at one epsilon.

    Parameters
    ----------
    s : Strategy
    table : ContingencyTable
        Its shape, variables and (for a sensitive strategy) name are read.
    margins : sequence of tuple of int
        The margins released, as axis tuples.
    epsilon : float

    Returns
    -------
    MechanismPlan

    Raises
    ------
    TabreleaseError
        The strategy's spec cannot be planned for the table.
    KeyError
        A sensitive strategy on a table without a sensitive attribute in `FRONTIER_SENSITIVE`.
    """
    from .planner import plan_release

    spec = s.spec.with_epsilon(epsilon)
    if s.sensitive:
        spec = replace(spec, unit=unit_of("replace", sensitive=FRONTIER_SENSITIVE[table.name]))
    return plan_release(table.shape, margins, spec, table.variables)


def workload_margins(table, workload: str) -> list[tuple[int, ...]]:
    """The margins a frontier workload releases from a table.

    Parameters
    ----------
    table : ContingencyTable
    workload : {"model", "all-2-way", "all-3-way"}

    Returns
    -------
    list of tuple of int
        The default model's generators, or every pair of axes, or every triple (on a three-way table, the table).

    Raises
    ------
    TabreleaseError
        The table has no default model ("model"), or fewer variables than the workload's margins have.
    """
    from itertools import combinations

    from . import default_model

    if workload in (ALL_TWO_WAY, ALL_THREE_WAY):
        size = 2 if workload == ALL_TWO_WAY else 3
        if table.k < size:
            raise TabreleaseError(f"the {workload} workload needs a table of at least {size} variables; "
                                  f"{table.name} has {table.k}")
        return list(combinations(range(table.k), size))
    if not (table.metadata or {}).get("model"):  # a table read from a file: its margins are the workload's to say
        raise TabreleaseError(f"{table.name} has no default model, so no {MODEL} workload: choose the workloads "
                              f"{ALL_TWO_WAY} or {ALL_THREE_WAY}")
    return list(default_model(table).generators)


def run_task(task: FrontierTask) -> pd.DataFrame:
    """Every chosen strategy, `repetitions` times, on one table and workload at one epsilon.

    Parameters
    ----------
    task : FrontierTask
        The table (a built-in's name, a file's path, or a table read already), epsilon, repetitions, master seed,
        strategies (a sensitive strategy is skipped on a table without a sensitive attribute) and workload.

    Returns
    -------
    pandas.DataFrame
        One row per repetition and strategy, as `run_frontier`'s.
    """
    from .noise import SimulationNoise
    from .pipeline import release_from_measurements, run_plan
    from .tables import load_table

    table = load_table(task.table)  # a table read already is passed through
    label = table_label(task.table)
    margins = workload_margins(table, task.workload)
    truth = [margin_counts(table.counts, g) for g in margins]
    chosen = [strategy(name) for name in task.strategies]
    not_run = [(label, task.workload, task.epsilon, s.name, SENSITIVE_NOT_NAMED)
               for s in chosen if s.sensitive and label not in FRONTIER_SENSITIVE]
    chosen = [s for s in chosen if not s.sensitive or label in FRONTIER_SENSITIVE]
    # A strategy that re-estimates another's measurements runs after it, in whatever order they were named.
    chosen.sort(key=lambda s: s.from_strategy is not None)
    plans = {}
    for s in chosen:
        # A strategy that cannot be made at this point (two adaptive rounds over one margin) is not run here, and
        # the report says where and why; a strategy re-estimating its measurements goes with it.
        if s.from_strategy is not None and s.from_strategy not in plans:
            not_run.append((label, task.workload, task.epsilon, s.name, f"re-estimates {s.from_strategy}'s "
                            "measurements, which were not made here"))
            continue
        try:
            plans[s.name] = plan_strategy(s, table, margins, task.epsilon)
        except TabreleaseError as exc:
            not_run.append((label, task.workload, task.epsilon, s.name, str(exc)))
    chosen = [s for s in chosen if s.name in plans]
    rows = []
    for rep in range(task.repetitions):
        made = {}
        for s in chosen:
            if s.repetitions is not None and rep >= s.repetitions:
                continue
            start = time.perf_counter()
            if s.from_strategy is None:
                release = run_plan(plans[s.name], table.counts, SimulationNoise(_seed(task, rep, s.stream)))
                seconds = time.perf_counter() - start
            else:
                # The very same noisy measurements, post-processed otherwise.
                source = made[s.from_strategy]
                release = release_from_measurements(plans[s.name], source.measurements)
                seconds = time.perf_counter() - start + source.timings["noise"]
            made[s.name] = release
            rows.append(_row(task, label, rep, s.name, release, truth, table.n, seconds))
    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    frame.attrs["not_run"] = not_run
    return frame


# noise_mode in every row, so that a copy of the file, away from its report, still says that seeded simulation
# noise made it (the frontier has no release mode).
RUN_COLUMNS = ("table", "workload", "epsilon", "repetition", "strategy", "mechanism", "privacy", "noise_mode",
               "max_l1", "mean_l1", "abs_dn", "n", "integer", "nonnegative", "consistent", "seconds")


def _row(task, label, rep, name, release, truth, n, seconds) -> dict:
    errors = [float(np.abs(np.asarray(m, float) - t).sum()) for m, t in zip(release.released_margins, truth)]
    released = [np.asarray(m, float) for m in release.released_margins]
    return {
        "table": label, "workload": task.workload, "epsilon": task.epsilon, "repetition": rep, "strategy": name,
        "mechanism": release.mechanism, "privacy": release.privacy, "noise_mode": release.noise_mode,
        "max_l1": max(errors), "mean_l1": float(np.mean(errors)),
        "abs_dn": abs(release.n_released - n), "n": n,
        "integer": all(np.array_equal(m, np.round(m)) for m in released),
        "nonnegative": all(float(m.min()) >= 0 for m in released),
        "consistent": bool(release.consistent), "seconds": seconds,
    }


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of each metric, and the share of integer / consistent outputs.

    Parameters
    ----------
    runs : pandas.DataFrame
        As `run_frontier` returns it.

    Returns
    -------
    pandas.DataFrame
        One row per table, strategy and epsilon: runs; the noise mode that made them; the mean and sd of max_l1,
        mean_l1 and abs_dn; the shares of integer, non-negative and consistent outputs; the median seconds.
    """
    from .sweeps.summary import noise_modes

    grouped = runs.groupby(["table", "workload", "strategy", "epsilon"], sort=False)
    summary = grouped.agg(
        runs=("max_l1", "size"), noise_mode=("noise_mode", noise_modes),
        max_l1_mean=("max_l1", "mean"), max_l1_sd=("max_l1", "std"),
        mean_l1_mean=("mean_l1", "mean"), mean_l1_sd=("mean_l1", "std"),
        abs_dn_mean=("abs_dn", "mean"), abs_dn_sd=("abs_dn", "std"),
        integer_share=("integer", "mean"), nonnegative_share=("nonnegative", "mean"),
        consistent_share=("consistent", "mean"), seconds_median=("seconds", "median"),
    ).reset_index()
    return summary


def error_ratio(numerator, denominator):
    """Mean error over mean error, elementwise: 1 where both are 0 (an exact release ties another), infinite where
    only the denominator is (a review's trial: at epsilon 20, 0/0 had made NaN, and the report's winner and checks
    came from the strategies left); NaN only where one side was not run.

    Parameters
    ----------
    numerator, denominator : pandas.Series or float

    Returns
    -------
    pandas.Series or float
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        out = numerator / denominator
    both_zero = (numerator == 0) & (denominator == 0)
    if isinstance(out, pd.Series):
        return out.mask(both_zero, 1.0)
    return 1.0 if both_zero else out


def ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """Planned against each comparator: ratio of mean max-L1 error, per table and epsilon.

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise` returns it.

    Returns
    -------
    pandas.DataFrame
        Columns table, epsilon and "planned / OTHER" for each other strategy in the summary (none without planned).
    """
    wide = summary.pivot_table(index=["table", "workload", "epsilon"], columns="strategy", values="max_l1_mean")
    out = pd.DataFrame(index=wide.index)
    for other in STRATEGIES[1:]:
        if other in wide.columns and "planned" in wide.columns:
            out[f"planned / {other}"] = error_ratio(wide["planned"], wide[other])
    return out.reset_index()


def acceptance(summary: pd.DataFrame, runs: pd.DataFrame) -> list[dict]:
    """The issue's checks, computed from the runs: each with its measured figure and whether it holds.

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise` returns it.
    runs : pandas.DataFrame
        As `run_frontier` returns it.

    Returns
    -------
    list of dict
        Each with `check` (what is checked), `figure` (what was measured, as text) and `holds` (bool); a check
        whose strategies or tables were not run is left out.
    """
    r = ratios(summary)
    checks = []
    low = r[(r["epsilon"] <= 0.1) & r["table"].isin(["edwards", "rochdale", "journey_to_work"])]
    if len(low):
        worst = float(low["planned / paper-lp"].max())
        checks.append({"check": "planned mean max-L1 <= 0.5 x paper LP at epsilon <= 0.1 (Edwards, Rochdale, "
                                "journey to work)", "figure": f"worst ratio {worst:.3f}", "holds": worst <= 0.5})
    if "planned / paper-lp" in r:
        worst = float(r["planned / paper-lp"].max())
        checks.append({"check": "planned mean max-L1 <= 0.5 x paper LP at every epsilon and table (target)",
                       "figure": f"worst ratio {worst:.3f}", "holds": worst <= 0.5})
    if "planned / paper-least-squares" in r:
        worst = float(r["planned / paper-least-squares"].max())
        checks.append({"check": "planned never worse than least squares on equal-scale measurements",
                       "figure": f"worst ratio {worst:.3f}", "holds": worst <= 1.0})
    central = summary[[strategy(name).guarantee == strategy("planned").guarantee for name in summary["strategy"]]]
    if "planned" in set(central["strategy"]) and central["strategy"].nunique() > 1:
        points = central.pivot_table(index=["table", "workload", "epsilon"], columns="strategy", values="max_l1_mean")
        to_best = error_ratio(points["planned"], points.min(axis=1)).dropna()
        median, worst = float(to_best.median()), float(to_best.max())
        compared = [n for n in dict.fromkeys(central["strategy"]) if n != "planned"]
        every = set(compared) | {"planned"} >= {n for n in STRATEGIES if strategy(n).guarantee == strategy("planned").guarantee}
        among = "" if every else f" among those run ({', '.join(compared)})"
        runs_a_point = int(central["runs"].min())
        checks.append({"check": "planned mean max-L1 within 1.03x (median) and 1.10x (worst) of the best central "
                                f"epsilon-DP strategy{among} at each (table, workload, epsilon)",
                       "figure": f"median {median:.3f}, worst {worst:.3f} over {len(to_best)} points "
                                 f"({runs_a_point} runs a point or more)",
                       "holds": median <= 1.03 and worst <= 1.10})
    planned = runs[runs["strategy"] == "planned"]
    if len(planned):
        share = float((planned["integer"] & planned["nonnegative"] & planned["consistent"]).mean())
        checks.append({"check": "planned releases integer, non-negative and mutually consistent",
                       "figure": f"{share:.1%} of {len(planned)} releases", "holds": share == 1.0})
    return checks


EPSILON_BANDS = (("small epsilon (<= 0.1)", 0.0, 0.1), ("moderate epsilon (0.25 to 0.5)", 0.25, 0.5),
                 ("large epsilon (>= 1)", 1.0, float("inf")))


def comparison(summary: pd.DataFrame) -> list[str]:
    """The report's written comparison: which strategy to choose when, and why. Every claim is counted from the
    summary (which strategy had the lowest mean max-L1 error at each table and epsilon, and each one's error as a
    multiple of that lowest one, within each class of guarantee); the "why" is each strategy's description.

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise` returns it.

    Returns
    -------
    list of str
        Markdown lines (bullets under a bold heading per class of guarantee).
    """
    lines = []
    summary = summary.assign(guarantee=[strategy(name).guarantee for name in summary["strategy"]])
    for guarantee in dict.fromkeys(summary["guarantee"]):
        part = summary[summary["guarantee"] == guarantee]
        names = list(dict.fromkeys(part["strategy"]))
        lines.append(f"**{guarantee}** ({', '.join(names)})")
        lines.append("")
        if len(names) > 1:
            best = part.groupby(["table", "workload", "epsilon"])["max_l1_mean"].transform("min")
            part = part.assign(to_best=error_ratio(part["max_l1_mean"], best))
            for label, low, high in EPSILON_BANDS:
                band = part[(part["epsilon"] >= low) & (part["epsilon"] <= high)]
                if band.empty:
                    continue
                # Strategies that drew the same noise for the same measurements tie exactly: each is counted.
                winners = band.loc[band["to_best"] <= 1 + 1e-9, "strategy"]
                points = band.groupby(["table", "workload", "epsilon"]).ngroups
                said = ", ".join(f"{name} at {n} of {points}" for name, n in winners.value_counts().items())
                lines.append(f"- {label}: the lowest mean max-L1 error was {said} (table, workload, epsilon) points "
                             "(a tie counts for each).")
            # By the median ratio, then the worst: strategies tied at the best on most points are told apart by how
            # far they fall behind elsewhere (the order of the summary's rows never decides).
            ranked = (part.groupby("strategy", sort=False)["to_best"].agg(["median", "min", "max"])
                      .rename_axis("strategy").reset_index()
                      .assign(order=lambda f: [STRATEGIES.index(n) if n in STRATEGIES else len(STRATEGIES)
                                               for n in f["strategy"]])
                      .sort_values(["median", "max", "order"]).set_index("strategy"))
            shown = "; ".join(f"{name} {row['median']:.2f} ({row['min']:.2f} to {row['max']:.2f})"
                              for name, row in ranked.iterrows())
            lines.append(f"- error as a multiple of the lowest at each point, median (range): {shown}.")
            # Strategies that released the very same margins at every point (the same design on the same noise) are
            # one choice, said as such: neither is ahead of the other (the order of the names never decides).
            errors = part.pivot_table(index=["table", "workload", "epsilon"], columns="strategy", values="max_l1_mean")
            top = ranked.index[0]
            same = [n for n in ranked.index if n == top or bool(np.allclose(errors[n], errors[top], rtol=1e-12,
                                                                               atol=0, equal_nan=True))]
            if len(same) > 1:
                named = ", ".join(same[:-1]) + f" and {same[-1]}"
                lines.append(f"- so, within this guarantee, {named} (equal at every point) are the ones "
                             "to choose unless a point above says otherwise for your epsilon.")
            else:
                lines.append(f"- so, within this guarantee, {top} is the one to choose unless a point above says "
                             "otherwise for your epsilon.")
            shares = part.groupby("strategy", sort=False)[["consistent_share", "integer_share"]].mean()
            for name, row in shares.iterrows():
                if row["consistent_share"] < 1 or row["integer_share"] < 1:
                    lines.append(f"- but the output of {name} was mutually consistent in {row['consistent_share']:.0%} and "
                                 f"integer in {row['integer_share']:.0%} of its runs: a reader may find margins that "
                                 "disagree.")
        reference = summary[summary["strategy"] == "planned"].set_index(["table", "workload", "epsilon"])["max_l1_mean"]
        if guarantee != strategy("planned").guarantee and len(reference):
            for name in names:
                ratio = error_ratio(part[part["strategy"] == name].set_index(["table", "workload", "epsilon"])[
                    "max_l1_mean"], reference)
                ratio = ratio.dropna()
                if len(ratio):
                    lines.append(f"- the error of {name} is a median {ratio.median():.2f} times the planned release's "
                                 f"(from {ratio.min():.2f} to {ratio.max():.2f}), under its own guarantee.")
        for name in names:
            lines.append(f"- how {name} works: {strategy(name).why}.")
        lines.append("")
    classes = list(dict.fromkeys(summary["guarantee"]))
    if len(classes) > 1:  # said only where the run compared strategies of more than one class
        lines.append(f"Guarantees are not interchangeable: compare within a class (this run has {len(classes)}: "
                     f"{'; '.join(classes)}).")
    return lines


def _units_in_words(summary: pd.DataFrame) -> str:
    """The neighbour relations of the strategies the run compared, in words: each strategy's own unit."""
    by_unit = {}
    for name in dict.fromkeys(summary["strategy"]):
        by_unit.setdefault(strategy(name).spec.neighbours, []).append(name)
    if len(by_unit) == 1:
        return f"{next(iter(by_unit))} neighbours"
    usual = max(by_unit, key=lambda u: len(by_unit[u]))
    others = "; ".join(f"{u} for {', '.join(names)}" for u, names in by_unit.items() if u != usual)
    return f"{usual} neighbours ({others})"


def plot_table(summary: pd.DataFrame, table: str, path: Path, workload: str = MODEL) -> None:
    """One table's mean max-L1 error (with its sd) against epsilon, a line per strategy, on log axes: one panel per
    class of guarantee (a weaker class is not compared with a stronger), one colour and marker per strategy across
    panels, the default (`planned`) drawn thicker, the legend above the panels (it hides no curve). An SVG file.

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise` returns it.
    table : str
        The table drawn.
    path : Path
        The SVG file written.
    workload : str, default "model"
        The workload drawn.
    """
    from . import charts
    from ._files import write_text_atomic

    part = summary[(summary["table"] == table) & (summary["workload"] == workload)]
    order = list(dict.fromkeys(summary["strategy"]))  # the same style for a strategy in every figure
    panels = []
    for guarantee in dict.fromkeys(strategy(name).guarantee for name in part["strategy"]):
        panel = charts.Panel(title=guarantee, xlabel="epsilon", ylabel="max L1 error (mean ± sd)", xlog=True,
                             ylog=True)
        names = [n for n in dict.fromkeys(part["strategy"]) if strategy(n).guarantee == guarantee]
        for name in sorted(names, key=lambda n: n == "planned"):  # the default last: on top of any it ties with
            s = part[part["strategy"] == name].sort_values("epsilon")
            colour, marker = charts.style_of(order.index(name))
            mean, sd = s["max_l1_mean"].to_numpy(float), s["max_l1_sd"].to_numpy(float)
            # A bar's foot below zero has no place on a log axis: it stops at a tenth of the mean.
            panel.errorbars(s["epsilon"], np.maximum(mean - sd, mean / 10), mean + sd, colour=colour)
            panel.line(s["epsilon"], mean, colour=colour, marker=marker, width=3.2 if name == "planned" else 1.5,
                       label=f"{name} (default)" if name == "planned" else name)
        panels.append(panel)
    runs = int(part["runs"].max()) if len(part) else 0
    svg = charts.render(panels, columns=2 if len(panels) > 1 else 1, width=1000, panel_height=300,
                        title=f"{table}, {workload} margins: error against epsilon, {runs} runs per point",
                        description=f"{table}, {workload} margins: max L1 error against epsilon per strategy")
    write_text_atomic(path, svg)


def _workloads_in_words(summary: pd.DataFrame) -> str:
    """The workloads the run has, in words, in the order of its rows (the report's header said both whatever ran)."""
    words = {MODEL: "each table's paper model (workload `model`)", ALL_TWO_WAY: "every two-way margin (`all-2-way`)",
             ALL_THREE_WAY: "every three-way margin (`all-3-way`)"}
    return " and ".join(words.get(w, f"workload `{w}`") for w in dict.fromkeys(summary["workload"]))


def write_frontier(out: str | Path, runs: pd.DataFrame, *, seconds: float, command: str) -> Path:
    """runs.csv, summary.csv, ratios.csv, one figure per table and report.md, all from `runs`.

    Parameters
    ----------
    out : path
        The folder (made if missing; files of the same names in it are replaced).
    runs : pandas.DataFrame
        As `run_frontier` returns it (`runs.attrs["master_seed"]`, if set, is reported).
    seconds : float
        How long the runs took, for the report.
    command : str
        The command that made them, for the report.

    Returns
    -------
    Path
        `out`.
    """
    out = Path(out)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    from .tables import BUILTIN_TABLES

    files = sorted(set(runs["table"]) - set(BUILTIN_TABLES))
    if made and files:  # owner-only, as a sweep's: its rows hold the files' true n and errors against their counts
        os.chmod(out, 0o700)
    _remove_old_figures(out)
    summary = summarise(runs)
    table_of_ratios = ratios(summary)
    runs.to_csv(out / "runs.csv", index=False)
    (out / RUN_FILE).write_text(json.dumps({"master_seed": int(runs.attrs.get("master_seed", MASTER_SEED)),
                                            "tables": runs.attrs.get("fingerprints") or {}},
                                           indent=1, sort_keys=True) + "\n")
    summary.to_csv(out / "summary.csv", index=False, float_format="%.6g")
    # The epsilon as written (not to four places: 1e-7 had been written 0.0000, 0.0025 and 0.003 alike).
    table_of_ratios.assign(epsilon=[f"{e:.10g}" for e in table_of_ratios["epsilon"]]).to_csv(
        out / "ratios.csv", index=False, float_format="%.4f")
    figures = []
    for table, workload in dict.fromkeys(zip(summary["table"], summary["workload"])):
        figures.append(f"{table}.svg" if workload == MODEL else f"{table}-{workload}.svg")
        plot_table(summary, table, out / figures[-1], workload)
    lines = [
        "# The frontier: error against epsilon, by release strategy",
        "",
        f"Made by `{command}` in {seconds:.0f} s; simulation-mode noise (seeded, master seed "
        f"{int(runs.attrs.get('master_seed', MASTER_SEED))}), exact calibration, {_units_in_words(summary)}, "
        f"{_workloads_in_words(summary)}. Every number below is computed from `runs.csv`."
        + (f" The rows of {', '.join(runs.attrs['kept'])} were kept from the run before in the same folder (the same "
           "seeds: a strategy's draws do not depend on which others run); the others were run by this command."
           if runs.attrs.get("kept") else "")
        + (f" Internal: the rows of {', '.join(files)} are computed from the true counts of those files (their n, "
           "and each run's error against them); not for publication." if files else ""),
        "",
        "## Checks",
        "",
        "| check | measured | holds |",
        "|---|---|---|",
    ]
    for c in acceptance(summary, runs):
        lines.append(f"| {c['check']} | {c['figure']} | {'yes' if c['holds'] else 'NO'} |")
    missing = runs.attrs.get("not_run", []) + _points_without_rows(runs)
    lines += _not_run_lines(missing)
    lines += _precision_lines(summary)
    lines += ["", "## Which to choose, and why", "", "Counted from the runs below, within each class of guarantee.", ""]
    lines += comparison(summary)
    shown_ratios = table_of_ratios.assign(epsilon=[f"{e:g}" for e in table_of_ratios["epsilon"]])
    lines += ["", "## Ratio of mean max-L1 error (planned / other)", ""]
    lines += (["'not run': a strategy with no runs at the point (see Not run above).", ""] if missing else [])
    lines += [_markdown(shown_ratios, "%.3f"), ""]
    lines += ["## Every point", "", "Mean (sd) of the largest and the mean L1 margin error, |n' - n|, and the share "
              "of integer, non-negative, consistent outputs.", ""]
    shown = summary.assign(
        max_l1=[f"{m:.4g} ({s:.3g})" for m, s in zip(summary["max_l1_mean"], summary["max_l1_sd"])],
        mean_l1=[f"{m:.4g} ({s:.3g})" for m, s in zip(summary["mean_l1_mean"], summary["mean_l1_sd"])],
        abs_dn=[f"{m:.4g} ({s:.3g})" for m, s in zip(summary["abs_dn_mean"], summary["abs_dn_sd"])],
        ok=[f"{a:.0%} / {b:.0%} / {c:.0%}" for a, b, c in zip(summary["integer_share"],
                                                             summary["nonnegative_share"],
                                                             summary["consistent_share"])],
        ms=[f"{1000 * v:.1f}" for v in summary["seconds_median"]],
    )[["table", "workload", "strategy", "epsilon", "runs", "max_l1", "mean_l1", "abs_dn", "ok", "ms"]]
    lines += [_markdown(shown.rename(columns={"ok": "integer / non-neg / consistent", "ms": "median ms"}), "%g"), ""]
    lines += [f"![{f[:-4]}]({quote(f)})" for f in figures]  # a file's stem may hold spaces
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out


def _not_run_lines(not_run) -> list[str]:
    """The report's section on the strategies a run chose but could not make at some points, each with its reason
    and points (nothing where every chosen strategy ran everywhere)."""
    if not not_run:
        return []
    points: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = {}
    for table, workload, epsilon, name, why in not_run:
        points.setdefault((name, why), {}).setdefault((table, workload), []).append(epsilon)
    lines = ["", "## Not run", "", "Chosen, but not made at these points, so not among the strategies compared "
             "there:", ""]
    for (name, why), where in points.items():
        said = "; ".join(f"{table} {workload} at epsilon {', '.join(f'{e:g}' for e in sorted(eps))}"
                         for (table, workload), eps in where.items())
        lines.append(f"- {name} ({said}): {why}")
    return lines


# Beside runs.csv: the master seed, and each file table's fingerprint (`tables.counts_digest`) by its label, so that
# `--keep-others` keeps rows only of the very seeds and counts it releases again. (Runs made before it was written
# were made with MASTER_SEED, which is what its absence means.)
RUN_FILE = "frontier.json"


def _remove_old_figures(out: Path) -> None:
    """The figures a previous report in `out` named (its ``![...](file.svg)`` lines), removed before new ones are
    drawn: a run on other tables had left the old tables' figures beside the new report (a review's trial)."""
    import re
    from urllib.parse import unquote

    try:
        old = (out / "report.md").read_text()
    except OSError:
        return
    for name in re.findall(r"^!\[[^\]]*\]\(([^)/]+\.svg)\)$", old, flags=re.MULTILINE):
        path = out / unquote(name)
        if path.is_file() and not path.is_symlink():
            path.unlink()


def _precision_lines(summary: pd.DataFrame) -> list[str]:
    """How precisely the runs know each mean: the standard error of a point's mean max-L1 error (its sd over the
    square root of its runs) as a share of the mean, the median and largest over the points (a review's trial: a
    strategy was recommended on 2 runs a point, with no word of their error)."""
    known = summary[summary["max_l1_mean"] > 0]
    if known.empty:
        return []
    share = known["max_l1_sd"] / np.sqrt(known["runs"]) / known["max_l1_mean"]
    return ["", "## Precision", "", f"Each point's mean is over {int(summary['runs'].min())} to "
            f"{int(summary['runs'].max())} runs; its standard error is a median {share.median():.1%} of the mean "
            f"(largest {share.max():.1%}). Ratios and rankings closer than about twice that are within the runs' "
            "own error: more --repetitions tell them apart."]


def _points_without_rows(runs: pd.DataFrame) -> list[tuple]:
    """(table, workload, epsilon, strategy, why) for each point of the runs at which a strategy that has rows
    elsewhere has none and no reason is recorded: rows kept from an earlier run (`--keep-others`) carry no reasons,
    so a sensitive strategy on a table without a sensitive attribute is said as the run says it, any other as
    missing from runs.csv."""
    attrs_reason = {(t, w, e, n) for t, w, e, n, _ in runs.attrs.get("not_run", [])}
    present = set(zip(runs["table"], runs["workload"], runs["epsilon"], runs["strategy"]))
    points = list(dict.fromkeys(zip(runs["table"], runs["workload"], runs["epsilon"])))
    out = []
    for name in dict.fromkeys(runs["strategy"]):
        for table, workload, epsilon in points:
            if (table, workload, epsilon, name) in present or (table, workload, epsilon, name) in attrs_reason:
                continue
            sensitive = name in STRATEGIES and strategy(name).sensitive and table not in FRONTIER_SENSITIVE
            why = (SENSITIVE_NOT_NAMED if sensitive else "no rows of it at this point in runs.csv")
            out.append((table, workload, float(epsilon), name, why))
    return out


def _markdown(frame: pd.DataFrame, float_format: str) -> str:
    def cell(v):
        if isinstance(v, float) and np.isnan(v):
            return "not run"
        return float_format % v if isinstance(v, float) else str(v)

    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])
