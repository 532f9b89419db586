"""One grid point, as a worker runs it: release every repetition, then refit the released tables as one stack.

A plan holds a stateful HiGHS object (its LP is re-solved in place), so the caches of plans and of
the original tables' fits are per thread: a Dask worker with several threads, or any thread pool,
never lets two runs share one solver at once.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from dataclasses import replace

import numpy as np
import pandas as pd

from ..errors import TabreleaseError
from ..noise import SimulationNoise
from ..schemas import SWEEP_MARGIN_ROW, SWEEP_ROW, check_columns
from ..tables import ContingencyTable, counts_digest
from .grid import SweepChunk, SweepGrid, plan_for, run_seed

_LOCAL = threading.local()
# How often a worker that cannot wait on its sweep's process (no pidfd) looks whether it is still there.
SWEEP_POLL_SECONDS = 0.5


def exit_with_sweep(sweep_pid: int) -> None:
    """Make this worker process end as soon as the sweep's process (`sweep_pid`, which started the pool) has ended.

    A sweep killed with SIGKILL cannot stop its pool, and its workers used to compute their grid points to the end
    (minutes) for nobody. The worker's own parent is no guide on Linux: there it is the forkserver, which stays up
    while any worker holds the pipe it watches, so neither prctl(PR_SET_PDEATHSIG) nor a change of parent comes. A
    daemon thread waits instead on a pidfd of the sweep's process (Linux 5.3+: readable the moment it ends, and
    never confused with a later process of the same id); elsewhere it polls every `SWEEP_POLL_SECONDS` whether that
    process exists or this one has been orphaned. A worker holds nothing to clean up: the sweep's process writes
    every result.

    Parameters
    ----------
    sweep_pid : int
        The process id of the sweep (the process that made the pool).
    """
    parent = os.getppid()
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(sweep_pid)
        except ProcessLookupError:  # it ended before this worker got here
            os._exit(1)
        except OSError:  # a kernel without pidfds, or not allowed: poll
            pidfd = None

    def watch() -> None:
        if pidfd is not None:
            import select

            select.select([pidfd], [], [])
        else:
            while os.getppid() == parent and _exists(sweep_pid):
                time.sleep(SWEEP_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="tabrelease-sweep-watch", daemon=True).start()


def _exists(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill would terminate it: the pool's own checks are all there is
        return True
    from .._files import process_alive

    return process_alive(pid)


def _cache(name: str) -> dict:
    if not hasattr(_LOCAL, name):
        setattr(_LOCAL, name, {})
    return getattr(_LOCAL, name)


def cached_plan(table: ContingencyTable, margins, spec):
    """The grid point's plan at epsilon 1, built once per thread (each epsilon rescales it).

    Parameters
    ----------
    table : ContingencyTable
    margins : sequence of tuple of int
        The margins released, as axis tuples.
    spec : ReleaseSpec
        The grid point's spec (its epsilon is replaced by 1).

    Returns
    -------
    MechanismPlan
        At epsilon 1, shared with later calls in this thread: rescale it (`with_epsilon`), do not change it.
    """
    plans = _cache("plans")
    at_one = spec.with_epsilon(1.0)
    # Keyed by the mechanism's name: each chunk arrives with its own copy of the mechanism object.
    key = (table.shape, tuple(table.variables), tuple(margins), replace(at_one, mechanism=spec.mechanism_name))
    if key not in plans:
        plans[key] = plan_for(table, margins, at_one)
    return plans[key]


def original_fit(table: ContingencyTable, margins):
    """The log-linear fit of the confidential table under the released margins' model, built once per thread.

    Parameters
    ----------
    table : ContingencyTable
    margins : sequence of tuple of int
        The model's generators, as axis tuples.

    Returns
    -------
    LogLinearFit
        Shared with later calls in this thread (keyed by the table's name, counts and margins).
    """
    from ..loglinear import fit_loglinear
    from ..models import HierarchicalModel

    fits = _cache("fits")
    key = (table.name, counts_digest(table), tuple(margins))
    if key not in fits:
        fits[key] = fit_loglinear(table, HierarchicalModel(tuple(margins), table.k))
    return fits[key]


def run_chunk(chunk: SweepChunk) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All repetitions of one grid point: (one row per run, one row per run and released margin).

    Parameters
    ----------
    chunk : SweepChunk

    Returns
    -------
    tuple of (pandas.DataFrame, pandas.DataFrame)
        The runs (columns of `schemas.SWEEP_ROW`) and the L1 error of each run's released margins (columns
        `run_id`, `margin`, `l1_error`).
    """
    from ..loglinear import one_blas_thread

    with one_blas_thread():
        return _run_chunk(chunk)


def _run_chunk(chunk: SweepChunk) -> tuple[pd.DataFrame, pd.DataFrame]:
    from ..evaluation import evaluate_releases
    from ..mechanisms import with_epsilon
    from ..pipeline import run_plan

    table = chunk.table
    plan = with_epsilon(cached_plan(table, chunk.margins, chunk.spec), chunk.epsilon)
    original = original_fit(table, chunk.margins)
    # Seeds and run ids key on the mechanism actually run ("auto" resolved), the name each row records,
    # so replay_run with a row's own coordinates finds its seed.
    seeds = [
        run_seed(chunk.master_seed, table.name, plan.mechanism, chunk.calibration, chunk.epsilon, r)
        for r in range(chunk.repetitions)
    ]
    releases = [run_plan(plan, table.counts, SimulationNoise(seed)) for seed in seeds]
    evaluations = evaluate_releases(table, releases, original.model, original_fit=original)
    rows, margin_rows = [], []
    for rep, (seed, release, ev) in enumerate(zip(seeds, releases, evaluations)):
        cal = release.noise
        run_id = f"{table.name}/{plan.mechanism}/{chunk.calibration}/{chunk.epsilon!r}/{rep}"
        rows.append({
            "run_id": run_id,
            "table": table.name,
            "mechanism": release.mechanism,
            "calibration": chunk.calibration,
            "neighbours": chunk.neighbours,
            "epsilon": chunk.epsilon,
            "delta": cal.delta,
            "repetition": rep,
            "seed": seed,
            "noise_mode": release.noise_mode,
            "noise_distribution": cal.distribution,
            "noise_scale": cal.scale,
            "sensitivity": cal.sensitivity,
            "epsilon_actual": cal.epsilon_actual,
            "epsilon_holds": cal.epsilon_holds,
            "n": ev.n,
            "n_released": ev.n_released,
            "n_drift": ev.n_released - ev.n,
            "max_l1_error": ev.max_l1_error,
            "g2_original": ev.g2_original,
            "g2_released": ev.g2_released,
            "g2_difference": ev.g2_difference,
            "mle_l1": ev.mle_l1,
            "mle_total_variation": ev.mle_total_variation,
            "refit_converged": ev.released_fit_converged,
            "lp_b": ev.lp_b,
            "lp_infeasible": ev.lp_infeasible,
            "seconds_noise": release.timings.get("noise", np.nan),
            "seconds_lp": release.timings.get("lp", np.nan),
            "seconds_round": release.timings.get("round", np.nan),
            "seconds_refit": ev.refit_seconds,
        })
        margin_rows += [(run_id, margin, error) for margin, error in ev.l1_error_by_margin.items()]
    runs = pd.DataFrame(rows)
    margins = pd.DataFrame(margin_rows, columns=["run_id", "margin", "l1_error"])
    check_columns(runs, SWEEP_ROW)
    check_columns(margins, SWEEP_MARGIN_ROW)
    return runs, margins


def replay_run(grid: SweepGrid, table: str, mechanism: str, calibration: str, epsilon: float, repetition: int):
    """Re-run one run of a sweep alone; returns (Release, ReleaseEvaluation).

    Parameters
    ----------
    grid : SweepGrid
        The sweep's grid (the same master seed and settings).
    table : str
        The table's name, one of the grid's.
    mechanism : str
        The mechanism as the run's row records it (seeds key on the mechanism actually run).
    calibration : str
    epsilon : float
    repetition : int
        The run's number within its grid point.

    Returns
    -------
    tuple of (Release, ReleaseEvaluation)
        The same release as the sweep's run, and its evaluation against the confidential table.

    Raises
    ------
    TabreleaseError
        `table` is not one of the grid's, or the mechanism and calibration cannot be planned for it.
    """
    from ..evaluation import evaluate_release
    from ..pipeline import run_plan

    names = [t.name for t in grid.tables]
    if table not in names:
        raise TabreleaseError(f"the grid has no table {table!r}; it has {', '.join(names)}")
    index = names.index(table)
    tab, margins = grid.tables[index], grid.margins[index]
    plan = plan_for(tab, margins, grid.point_spec(mechanism, calibration, epsilon, tab.shape))
    seed = run_seed(grid.master_seed, table, plan.mechanism, calibration, epsilon, repetition)
    release = run_plan(plan, tab.counts, SimulationNoise(seed))
    return release, evaluate_release(tab, release, original_fit(tab, margins).model)
