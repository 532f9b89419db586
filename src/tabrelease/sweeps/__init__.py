"""Risk-utility sweeps: many simulated releases over a grid, each measured by the log-linear refit.

* `grid`: what a sweep runs, and the seed of every run (`make_grid`, `run_seed`);
* `worker`: one grid point (`run_chunk`, `replay_run`), with per-thread caches;
* `driver`: where grid points go (`run_sweep` with an executor) and what is written.

Sweeps are simulations: seeded numpy noise, never the secure sampler, and every row says so.
"""

from .driver import SWEEP_OUTPUTS, TIMING_COLUMNS, InlineExecutor, SweepResult, deterministic_columns, run_sweep
from .._cpus import available_cpus
from .grid import SweepChunk, SweepGrid, grid_chunks, make_grid, run_seed
from .worker import replay_run, run_chunk

__all__ = [
    "InlineExecutor", "SWEEP_OUTPUTS", "SweepChunk", "SweepGrid", "SweepResult", "TIMING_COLUMNS", "available_cpus",
    "deterministic_columns", "grid_chunks", "make_grid", "replay_run", "run_chunk", "run_seed", "run_sweep",
]
