"""Running a grid: where the grid points go (one code path for every executor), what is written, and resume.

`run_sweep` hands each grid point to an executor: anything with `submit(fn, arg)` returning a
future with `done()` and `result()`: the standard library's pools, or a Dask `Client`, given as `jobs`. Otherwise it
builds one itself: none (the grid points run here, one after another) for `jobs=1`, a local process
pool for more, a Dask client for a scheduler's address (`jobs="tcp://host:8786"`). Results are written one grid point per file
(atomically) as they arrive, so a killed sweep resumes where it stopped; the assembled rows are the
same whether or not it was interrupted, except for the measured stage times.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .._files import labels_protected, remove_own_outputs, write_frame_atomic, write_text_atomic
from ..errors import TabreleaseError
from .grid import SweepChunk, SweepGrid, grid_chunks
from .summary import SUMMARY_OUTPUTS
from .worker import exit_with_sweep, run_chunk

# Columns measured with a clock: they differ from run to run of the same sweep.
TIMING_COLUMNS = ("seconds_noise", "seconds_lp", "seconds_round", "seconds_refit")
SWEEP_FILE = "sweep.json"
# A sweep's outputs are computed from the true counts (each run's n, the original table's fit, the errors against
# it): like a bundle's internal/, never for publication (a reviewer's trial found them world-readable and unmarked).
INTERNAL_NOTE = ("internal: computed from the tables' true counts (their n, the original table's fit and each run's "
                 "errors against them); not for publication")
CHUNK_DIR = "chunks"
# Everything a sweep writes in its folder: what --force may delete there.
SWEEP_OUTPUTS = (SWEEP_FILE, CHUNK_DIR, "runs.parquet", "runs.csv", "margin_errors.parquet", "margin_errors.csv",
                 *SUMMARY_OUTPUTS)


@dataclass(frozen=True, eq=False)
class SweepResult:
    runs: pd.DataFrame  # one row per run
    margin_errors: pd.DataFrame  # one row per run and released margin
    computed_runs: int  # runs computed by this call (the rest were found on disk)
    seconds: float
    out: Path | None = None
    files: tuple[str, ...] = field(default=())


class InlineExecutor:
    """Runs each task when it is submitted, here: the executor of a one-process sweep."""

    def submit(self, fn, *args):
        """Call `fn(*args)` now and hand back its outcome as a finished future.

        Parameters
        ----------
        fn : callable
            The task.
        *args
            Its arguments.

        Returns
        -------
        concurrent.futures.Future
            Already done: its `result()` is what `fn` returned, or raises what `fn` raised.
        """
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever asks for the result, as a pool would
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """Nothing to do (no task is ever pending): the signature of `concurrent.futures.Executor.shutdown`.

        Parameters
        ----------
        wait : bool
            Ignored.
        cancel_futures : bool
            Ignored.
        """
        pass


def local_executor(jobs: int):
    """`jobs` worker processes, started clean (forkserver on Linux: no inherited threads or solver state). Each
    worker ends as soon as this process has (`exit_with_sweep`): a sweep killed outright leaves no workers
    computing for nobody.

    Parameters
    ----------
    jobs : int
        Number of worker processes (1: an `InlineExecutor`, no process is started).

    Returns
    -------
    InlineExecutor or concurrent.futures.ProcessPoolExecutor
        The caller shuts it down.
    """
    if jobs == 1:
        return InlineExecutor()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver" if sys.platform.startswith("linux") else "spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=exit_with_sweep,
                               initargs=(os.getpid(),))


def dask_client(scheduler: str):
    """A Dask client connected to a running scheduler, for `run_sweep(jobs="tcp://...")`.

    Parameters
    ----------
    scheduler : str
        The scheduler's address, e.g. "tcp://host:8786".

    Returns
    -------
    distributed.Client
        Not set as the default client; the caller closes it.

    Raises
    ------
    TabreleaseError
        Dask (`distributed`) is not installed, or the scheduler cannot be reached within 10 seconds.
    """
    try:
        from distributed import Client
    except ImportError:
        raise TabreleaseError("--scheduler needs Dask: pip install 'tabrelease[dask]'") from None
    try:
        return Client(scheduler, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise TabreleaseError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def run_sweep(
    grid: SweepGrid,
    out: str | os.PathLike | None = None,
    *,
    jobs=1,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    on_chunk: Callable[[SweepChunk], None] | None = None,
) -> SweepResult:
    """Run a sweep's grid points, locally or on a cluster, and gather its rows.

    Parameters
    ----------
    grid : SweepGrid
    out : path or None
        With it, each grid point is written to OUT/chunks/ as soon as it is done, and the assembled rows to
        OUT/runs.{parquet,csv} and OUT/margin_errors.{parquet,csv}.
    jobs : int, str or executor
        Where the grid points run: a number of local worker processes; a Dask scheduler's address
        ("tcp://host:8786"); or an executor with `submit` (used and left open; one built here is shut down here).
    resume : bool
        Compute only the grid points missing from OUT/chunks/ (the grid must be the one saved in OUT/sweep.json).
    force : bool
        Replace an existing `out`.
    progress : bool or None
        A progress bar on standard error (None: when it is a terminal).
    on_chunk : callable or None
        Called with each grid point as it is done.

    Returns
    -------
    SweepResult
        The rows of every run and of every released margin, how many runs this call computed, and the files
        written under `out`.

    Raises
    ------
    TabreleaseError
        `jobs` is not a positive whole number, an executor or an address; `out` is not empty (without `force`
        or `resume`) or holds a different sweep; `resume` without `out`; the Dask scheduler cannot be reached.
    """
    started = time.perf_counter()
    executor = scheduler = None
    if isinstance(jobs, str):
        scheduler, jobs = jobs, 1
    elif hasattr(jobs, "submit"):
        executor, jobs = jobs, 1
    elif isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TabreleaseError(f"--jobs must be a positive whole number, not {jobs!r}")
    chunks = grid_chunks(grid)
    own = None
    if scheduler is not None:
        own = executor = dask_client(scheduler)  # an unreachable cluster fails before any file is made
    done: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    chunk_dir = None
    try:
        if out is not None:
            out = Path(out)
            chunk_dir = _prepare_output(out, grid, resume, force)
            for chunk in chunks:
                runs_path, margins_path = _chunk_paths(chunk_dir, chunk)
                if runs_path.exists() and margins_path.exists():
                    done[chunk.key] = (pd.read_parquet(runs_path), pd.read_parquet(margins_path))
        elif resume:
            raise TabreleaseError("--resume needs --out: the results of the interrupted sweep are read from there")
        pending = [c for c in chunks if c.key not in done]
        if executor is None and pending:
            own = executor = local_executor(jobs)
        if progress is None:
            progress = sys.stderr.isatty()
        from tqdm.auto import tqdm

        bar = tqdm(total=grid.runs, initial=grid.runs - len(pending) * grid.repetitions, unit="run",
                   disable=not progress, desc="sweep", file=sys.stderr)
        # A grid point's runs arrive together, after its plan is built and its worker has started: until the first
        # does, the bar says what is under way and its clock keeps moving (it sat at 0 for ~18 s before).
        workers = getattr(executor, "_max_workers", None)
        bar.set_postfix_str(f"planning and starting {workers or ''} workers".replace("  ", " "), refresh=True)

        def tick(running: int) -> None:
            bar.set_postfix_str(f"{running} grid points ({running * grid.repetitions} runs) to come", refresh=False)
            bar.refresh()

        try:
            for chunk, (runs, margins) in _as_completed(executor, pending, tick if progress else None):
                if chunk_dir is not None:
                    runs_path, margins_path = _chunk_paths(chunk_dir, chunk)
                    # The margins file first: a chunk counts as done once its runs file exists beside it.
                    write_frame_atomic(margins, margins_path)
                    write_frame_atomic(runs, runs_path)
                done[chunk.key] = (runs, margins)
                bar.update(len(runs))
                if on_chunk is not None:
                    on_chunk(chunk)
        finally:
            bar.close()
    finally:
        if own is not None:
            _close(own)
    runs = pd.concat([done[c.key][0] for c in chunks], ignore_index=True)
    margin_errors = pd.concat([done[c.key][1] for c in chunks], ignore_index=True)
    files: tuple[str, ...] = ()
    if out is not None:
        files = _write_results(out, runs, margin_errors)
    return SweepResult(runs, margin_errors, len(pending) * grid.repetitions, time.perf_counter() - started, out, files)


def _as_completed(executor, pending: list[SweepChunk], tick: Callable[[int], None] | None = None):
    """Each grid point's result as soon as it is ready, whatever the executor (polling `done()` is what
    the standard library's and Dask's futures have in common). `tick(running)`, if given, is called about
    twice a second while waiting, with the number of grid points still to come."""
    if not pending:
        return
    futures = [(executor.submit(run_chunk, chunk), chunk) for chunk in pending]
    last_tick = time.perf_counter()
    try:
        while futures:
            ready = [(f, c) for f, c in futures if f.done()]
            if not ready:
                time.sleep(0.02)
                if tick is not None and time.perf_counter() - last_tick >= 0.5:
                    tick(len(futures))
                    last_tick = time.perf_counter()
                continue
            for future, chunk in ready:
                futures.remove((future, chunk))
                yield chunk, future.result()
    except BaseException:
        for future, _ in futures:
            future.cancel()
        raise


def _close(executor) -> None:
    if type(executor).__module__.startswith("distributed"):
        executor.close()  # a Dask client: its shutdown() would stop the cluster itself
    else:
        executor.shutdown(wait=True, cancel_futures=True)


def _chunk_paths(chunk_dir: Path, chunk: SweepChunk) -> tuple[Path, Path]:
    return chunk_dir / f"{chunk.key}.parquet", chunk_dir / f"{chunk.key}.margins.parquet"


def _prepare_output(out: Path, grid: SweepGrid, resume: bool, force: bool) -> Path:
    description = grid.describe()
    saved = out / SWEEP_FILE
    if resume:
        if not saved.exists():
            raise TabreleaseError(f"nothing to resume in {out}: it has no {SWEEP_FILE}")
        from .._files import read_side_file

        try:
            previous = json.loads(read_side_file(saved, "sweep file"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise TabreleaseError(f"{saved} is not a sweep's description (not valid JSON); start over with "
                                  "--force") from None
        if not isinstance(previous, dict):
            raise TabreleaseError(f"{saved} is not a sweep's description; start over with --force")
        previous_grid = {k: previous.get(k) for k in description}
        if previous_grid != description:
            differing = sorted(k for k in description if previous.get(k) != description[k])
            raise TabreleaseError(f"{out} holds a different sweep (differs in {', '.join(differing)}); resume with the same grid")
    else:
        if out.exists() and any(out.iterdir()):
            if not force:
                raise TabreleaseError(f"{out} already exists and is not empty; use --resume to continue it or --force to start over")
            remove_own_outputs(out, SWEEP_OUTPUTS)
        made = not out.exists()
        out.mkdir(parents=True, exist_ok=True)
        if made:  # owner-only, as a release bundle's folder is: its runs hold the true n and the original's G2
            os.chmod(out, 0o700)
        from .. import __version__

        from ..models import margin_label
        from ..tables import people_names

        # Each table's margins by their variables' names for people, beside the letters the rows name them by (a
        # methodologist's trial: nothing in the folder said which variables [AC] was).
        named = {t.name: {margin_label(g, t.letters): [people_names(t)[0][j] for j in g] for g in m}
                 for t, m in zip(grid.tables, grid.margins)}
        write_text_atomic(saved, json.dumps({**description, "tool_version": __version__, "internal": INTERNAL_NOTE,
                                             "margin_names": named}, indent=2))
    chunk_dir = out / CHUNK_DIR
    chunk_dir.mkdir(exist_ok=True)
    return chunk_dir


def _write_results(out: Path, runs: pd.DataFrame, margin_errors: pd.DataFrame) -> tuple[str, ...]:
    written = []
    for name, frame in (("runs", runs), ("margin_errors", margin_errors)):
        write_frame_atomic(frame, out / f"{name}.parquet")
        # Table names come from file names (=cmd.csv): in the CSV copy they must not become formulas.
        write_frame_atomic(labels_protected(frame), out / f"{name}.csv")
        written += [f"{name}.parquet", f"{name}.csv"]
    return tuple(written)


def deterministic_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows without the measured stage times: what must agree between two runs of a sweep.

    Parameters
    ----------
    runs : pandas.DataFrame
        A sweep's rows (`SweepResult.runs`).

    Returns
    -------
    pandas.DataFrame
        A copy without the columns of `TIMING_COLUMNS` that it has.
    """
    return runs.drop(columns=[c for c in TIMING_COLUMNS if c in runs.columns])
