"""Risk-utility sweeps: many simulated releases over a grid, each measured by the log-linear refit.

A grid is tables x mechanisms x calibrations x epsilon x repetitions. The unit of work is a
grid point (one table, mechanism, calibration and epsilon, all its repetitions): its plan (basis,
LP) is shared with every other epsilon of the same table and mechanism, and its released tables
are refitted together as one stack.

Every run's noise seed is a hash of the master seed and the run's own coordinates (table name,
mechanism, calibration, epsilon, repetition), not of its position in the grid, so

* any single run can be replayed alone (`replay_run`, or `tabrelease release --simulate --seed`),
* adding tables or epsilons to a grid leaves the other runs' seeds unchanged, and
* the rows do not depend on how the work was split among processes or machines.

Sweeps are simulations: seeded numpy noise, never the secure sampler, and every row says so.
Results are written one grid point per file (atomically), so a killed sweep resumes where it
stopped; the assembled rows are the same whether or not it was interrupted, except for the
measured stage times.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._files import remove_own_outputs, write_frame_atomic, write_text_atomic
from .errors import TabreleaseError
from .models import Margin, default_model, maximal_margins
from .noise import SIMULATION, SimulationNoise, check_delta, check_epsilon
from .tables import ContingencyTable

# Columns measured with a clock: they differ from run to run of the same sweep.
TIMING_COLUMNS = ("seconds_noise", "seconds_lp", "seconds_round", "seconds_refit")
SWEEP_FILE = "sweep.json"
CHUNK_DIR = "chunks"
# Everything a sweep writes in its folder: what --force may delete there.
SWEEP_OUTPUTS = (SWEEP_FILE, CHUNK_DIR, "runs.parquet", "runs.csv", "margin_errors.parquet", "margin_errors.csv")


@dataclass(frozen=True, eq=False)
class SweepGrid:
    """What a sweep runs. Tables carry their counts, so workers (local or on a cluster) read no files."""

    tables: tuple[ContingencyTable, ...]
    margins: tuple[tuple[Margin, ...], ...]  # per table
    epsilons: tuple[float, ...]
    repetitions: int
    mechanisms: tuple[str, ...] = ("auto",)
    calibrations: tuple[str, ...] = ("exact",)
    neighbours: str = "add-remove"
    delta: float | None = None
    master_seed: int = 0

    def describe(self) -> dict:
        """The grid as plain data (no counts): saved beside the results and checked on --resume."""
        return {
            "tables": [t.name for t in self.tables],
            "table_fingerprints": [_counts_digest(t) for t in self.tables],
            "margins": [[list(g) for g in m] for m in self.margins],
            "epsilons": list(self.epsilons),
            "repetitions": self.repetitions,
            "mechanisms": list(self.mechanisms),
            "calibrations": list(self.calibrations),
            "neighbours": self.neighbours,
            "delta": self.delta,
            "master_seed": self.master_seed,
            "noise_mode": SIMULATION,
        }

    @property
    def runs(self) -> int:
        return len(self.tables) * len(self.mechanisms) * len(self.calibrations) * len(self.epsilons) * self.repetitions


@dataclass(frozen=True, eq=False)
class SweepChunk:
    """One grid point: every repetition of one table, mechanism, calibration and epsilon."""

    table: ContingencyTable
    margins: tuple[Margin, ...]
    mechanism: str
    calibration: str
    epsilon: float
    repetitions: int
    neighbours: str
    delta: float | None
    master_seed: int

    @property
    def key(self) -> str:
        label = f"{self.table.name}|{self.mechanism}|{self.calibration}|{self.neighbours}|{self.epsilon!r}"
        digest = hashlib.blake2b(label.encode(), digest_size=6).hexdigest()
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.table.name)
        return f"{safe}-{self.mechanism}-{self.calibration}-{self.epsilon:.6g}-{digest}"


def make_grid(
    tables: Sequence[ContingencyTable],
    epsilons: Iterable[float],
    repetitions: int,
    *,
    margins: Sequence[Sequence[Margin]] | None = None,
    mechanisms: Sequence[str] = ("auto",),
    calibrations: Sequence[str] = ("exact",),
    neighbours: str = "add-remove",
    delta: float | None = None,
    master_seed: int = 0,
) -> SweepGrid:
    """Check a grid; margins default to each table's paper model (tables/*.json), else its default model."""
    tables = tuple(tables)
    if not tables:
        raise TabreleaseError("a sweep needs at least one table")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise TabreleaseError(f"two tables in one sweep have the same name: {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    epsilons = tuple(float(check_epsilon(e)) for e in epsilons)
    if not epsilons:
        raise TabreleaseError("a sweep needs at least one epsilon")
    if len(set(epsilons)) != len(epsilons):
        raise TabreleaseError("an epsilon appears twice in the sweep grid")
    if int(repetitions) != repetitions or repetitions < 1:
        raise TabreleaseError(f"repetitions must be a positive whole number, not {repetitions!r}")
    if int(master_seed) != master_seed or master_seed < 0:
        raise TabreleaseError(f"the master seed must be a non-negative whole number, not {master_seed!r}")
    if delta is not None:
        delta = check_delta(delta)
    if margins is None:
        margins = [default_model(t).generators for t in tables]
    margins = tuple(tuple(maximal_margins(m)[0]) for m in margins)
    if len(margins) != len(tables):
        raise TabreleaseError("give one margin set per table")
    grid = SweepGrid(
        tables, margins, epsilons, int(repetitions), tuple(mechanisms), tuple(calibrations), neighbours,
        delta, int(master_seed),
    )
    # Fail before any work: every table x mechanism x calibration must make a valid plan.
    for table, m in zip(tables, margins):
        for mech in grid.mechanisms:
            for cal in grid.calibrations:
                _plan(table.shape, m, mech, cal, neighbours, delta)
    return grid


def grid_chunks(grid: SweepGrid) -> list[SweepChunk]:
    return [
        SweepChunk(table, m, mech, cal, eps, grid.repetitions, grid.neighbours, grid.delta, grid.master_seed)
        for table, m in zip(grid.tables, grid.margins)
        for mech in grid.mechanisms
        for cal in grid.calibrations
        for eps in grid.epsilons
    ]


def available_cpus() -> int:
    """The CPUs this process may run on (the affinity mask where there is one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_seed(master_seed: int, table: str, mechanism: str, calibration: str, epsilon: float, repetition: int) -> int:
    """The noise seed of one run: a hash of the master seed and the run's coordinates (63 bits)."""
    label = f"{int(master_seed)}|{table}|{mechanism}|{calibration}|{float(epsilon)!r}|{int(repetition)}"
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "big") >> 1


# --- one grid point (runs in a worker) ------------------------------------------------------------
_PLANS: dict = {}
_FITS: dict = {}


def _plan(shape, margins, mechanism, calibration, neighbours, delta):
    from .mechanisms import plan_release

    key = (tuple(shape), tuple(margins), mechanism, calibration, neighbours, delta)
    if key not in _PLANS:
        # Built at epsilon 1 once per worker; each grid point only rescales the noise.
        _PLANS[key] = plan_release(
            shape, margins, 1.0, mechanism=mechanism, neighbours=neighbours, delta=delta, calibration=calibration
        )
    return _PLANS[key]


def _original_fit(table: ContingencyTable, margins):
    from .loglinear import fit_loglinear
    from .models import HierarchicalModel

    key = (table.name, _counts_digest(table), tuple(margins))
    if key not in _FITS:
        _FITS[key] = fit_loglinear(table, HierarchicalModel(tuple(margins), table.k))
    return _FITS[key]


def run_chunk(chunk: SweepChunk) -> pd.DataFrame:
    """All repetitions of one grid point: release, then refit the released tables as one stack."""
    from .loglinear import one_blas_thread

    with one_blas_thread():
        return _run_chunk(chunk)


def _run_chunk(chunk: SweepChunk) -> pd.DataFrame:
    from .evaluation import evaluate_releases
    from .mechanisms import with_epsilon
    from .release import run_plan

    table = chunk.table
    plan = with_epsilon(
        _plan(table.shape, chunk.margins, chunk.mechanism, chunk.calibration, chunk.neighbours, chunk.delta),
        chunk.epsilon,
    )
    original = _original_fit(table, chunk.margins)
    # Seeds key on the mechanism actually run ("auto" resolved), the name each row records, so
    # replay_run with a row's own coordinates finds its seed.
    seeds = [
        run_seed(chunk.master_seed, table.name, plan.mechanism, chunk.calibration, chunk.epsilon, r)
        for r in range(chunk.repetitions)
    ]
    releases = [run_plan(plan, table.counts, SimulationNoise(seed)) for seed in seeds]
    start = time.perf_counter()
    evaluations = evaluate_releases(table, releases, original.model, original_fit=original)
    refit_each = (time.perf_counter() - start) / len(releases)
    rows = []
    for rep, (seed, release, ev) in enumerate(zip(seeds, releases, evaluations)):
        cal = release.noise
        rows.append({
            "run_id": f"{table.name}/{chunk.mechanism}/{chunk.calibration}/{chunk.epsilon!r}/{rep}",
            "table": table.name,
            "mechanism": release.mechanism,
            "calibration": chunk.calibration,
            "neighbours": chunk.neighbours,
            "epsilon": chunk.epsilon,
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
            "l1_error_by_margin": json.dumps(ev.l1_error_by_margin),
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
            "seconds_refit": refit_each,
        })
    return pd.DataFrame(rows)


def replay_run(grid: SweepGrid, table: str, mechanism: str, calibration: str, epsilon: float, repetition: int):
    """Re-run one run of a sweep alone; returns (Release, ReleaseEvaluation)."""
    from .evaluation import evaluate_release
    from .mechanisms import plan_release
    from .release import run_plan

    index = [t.name for t in grid.tables].index(table)
    tab, margins = grid.tables[index], grid.margins[index]
    plan = plan_release(tab.shape, margins, epsilon, mechanism=mechanism, neighbours=grid.neighbours,
                        delta=grid.delta, calibration=calibration)
    seed = run_seed(grid.master_seed, table, plan.mechanism, calibration, epsilon, repetition)
    release = run_plan(plan, tab.counts, SimulationNoise(seed))
    return release, evaluate_release(tab, release, _original_fit(tab, margins).model)


# --- the driver -------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SweepResult:
    runs: pd.DataFrame  # one row per run
    margin_errors: pd.DataFrame  # one row per run and released margin
    computed_runs: int  # runs computed by this call (the rest were found on disk)
    seconds: float
    out: Path | None = None
    files: tuple[str, ...] = field(default=())


def run_sweep(
    grid: SweepGrid,
    out: str | os.PathLike | None = None,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    on_chunk: Callable[[SweepChunk], None] | None = None,
) -> SweepResult:
    """Run a sweep, locally (`jobs` processes) or on a Dask cluster (`scheduler` address).

    With `out`, each grid point is written to OUT/chunks/ as soon as it is done, and the
    assembled rows to OUT/runs.{parquet,csv} and OUT/margin_errors.{parquet,csv}. `resume`
    computes only the grid points missing from OUT/chunks/ (the grid must be the one saved
    in OUT/sweep.json). Progress goes to standard error when it is a terminal, unless
    `progress=False`.
    """
    started = time.perf_counter()
    if int(jobs) != jobs or jobs < 1:
        raise TabreleaseError(f"--jobs must be a positive whole number, not {jobs!r}")
    chunks = grid_chunks(grid)
    client = _dask_client(scheduler) if scheduler is not None else None  # an unreachable cluster fails before any file is made
    done: dict[str, pd.DataFrame] = {}
    chunk_dir = None
    if out is not None:
        out = Path(out)
        chunk_dir = _prepare_output(out, grid, resume, force)
        for chunk in chunks:
            path = chunk_dir / f"{chunk.key}.parquet"
            if path.exists():
                done[chunk.key] = pd.read_parquet(path)
    elif resume:
        raise TabreleaseError("--resume needs --out: the results of the interrupted sweep are read from there")
    pending = [c for c in chunks if c.key not in done]
    if progress is None:
        progress = sys.stderr.isatty()
    from tqdm.auto import tqdm

    bar = tqdm(total=grid.runs, initial=grid.runs - len(pending) * grid.repetitions, unit="run",
               disable=not progress, desc="sweep", file=sys.stderr)

    def finished(chunk: SweepChunk, frame: pd.DataFrame) -> None:
        if chunk_dir is not None:
            write_frame_atomic(frame, chunk_dir / f"{chunk.key}.parquet")
        done[chunk.key] = frame
        bar.update(len(frame))
        if on_chunk is not None:
            on_chunk(chunk)

    try:
        for chunk, frame in _execute(pending, jobs, client):
            finished(chunk, frame)
    finally:
        bar.close()
        if client is not None:
            client.close()
    runs = pd.concat([done[c.key] for c in chunks], ignore_index=True)
    margin_errors = _margin_errors(runs)
    files: tuple[str, ...] = ()
    if out is not None:
        files = _write_results(out, runs, margin_errors)
    return SweepResult(runs, margin_errors, len(pending) * grid.repetitions, time.perf_counter() - started, out, files)


def _execute(pending: list[SweepChunk], jobs: int, client):
    if not pending:
        return
    if client is not None:
        yield from _execute_dask(pending, client)
    elif jobs == 1:
        for chunk in pending:
            yield chunk, run_chunk(chunk)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # forkserver: workers start clean (no inherited threads or solver state) but cheaply.
        context = multiprocessing.get_context("forkserver" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {pool.submit(run_chunk, chunk): chunk for chunk in pending}
            try:
                for future in as_completed(futures):
                    yield futures[future], future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def _dask_client(scheduler: str):
    try:
        from distributed import Client
    except ImportError:
        raise TabreleaseError("--scheduler needs Dask: pip install 'tabrelease[dask]'") from None
    try:
        return Client(scheduler, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise TabreleaseError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def _execute_dask(pending: list[SweepChunk], client):
    from distributed import as_completed

    futures = client.map(run_chunk, pending, pure=False)
    by_key = {f.key: chunk for f, chunk in zip(futures, pending)}
    with client.as_current():
        for future in as_completed(futures):
            yield by_key[future.key], future.result()


def _prepare_output(out: Path, grid: SweepGrid, resume: bool, force: bool) -> Path:
    description = grid.describe()
    saved = out / SWEEP_FILE
    if resume:
        if not saved.exists():
            raise TabreleaseError(f"nothing to resume in {out}: it has no {SWEEP_FILE}")
        previous = json.loads(saved.read_text())
        previous_grid = {k: previous.get(k) for k in description}
        if previous_grid != description:
            differing = sorted(k for k in description if previous.get(k) != description[k])
            raise TabreleaseError(f"{out} holds a different sweep (differs in {', '.join(differing)}); resume with the same grid")
    else:
        if out.exists() and any(out.iterdir()):
            if not force:
                raise TabreleaseError(f"{out} already exists and is not empty; use --resume to continue it or --force to start over")
            remove_own_outputs(out, SWEEP_OUTPUTS)
        out.mkdir(parents=True, exist_ok=True)
        from . import __version__

        write_text_atomic(saved, json.dumps({**description, "tool_version": __version__}, indent=2))
    chunk_dir = out / CHUNK_DIR
    chunk_dir.mkdir(exist_ok=True)
    return chunk_dir


def _margin_errors(runs: pd.DataFrame) -> pd.DataFrame:
    records = [
        (run_id, margin, error)
        for run_id, errors in zip(runs["run_id"], runs["l1_error_by_margin"])
        for margin, error in json.loads(errors).items()
    ]
    return pd.DataFrame(records, columns=["run_id", "margin", "l1_error"])


def _write_results(out: Path, runs: pd.DataFrame, margin_errors: pd.DataFrame) -> tuple[str, ...]:
    written = []
    for name, frame in (("runs", runs), ("margin_errors", margin_errors)):
        write_frame_atomic(frame, out / f"{name}.parquet")
        write_frame_atomic(frame, out / f"{name}.csv")
        written += [f"{name}.parquet", f"{name}.csv"]
    return tuple(written)


def _counts_digest(table: ContingencyTable) -> str:
    return hashlib.blake2b(np.ascontiguousarray(table.counts).tobytes() + repr(table.shape).encode(), digest_size=8).hexdigest()


def deterministic_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows without the measured stage times: what must agree between two runs of a sweep."""
    return runs.drop(columns=[c for c in TIMING_COLUMNS if c in runs.columns])
