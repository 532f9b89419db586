"""Least-squares fits of Gaussian plans whose residual blocks are dense rows over the cells, written over the cells
and over the table's margins (`consistency.fits_over_margins`).

    python benchmarks/bench_dense_residual_fit.py > reports/benchmarks/dense_residual_fit.txt

A Gaussian plan measures Efron-Stein residual blocks; each coefficient of a two-way table's interaction block is a
dense row over every cell, so that over its cells a 42 x 22 table's fit is 861 dense rows over 924 cells (a new
user's release took 48-59 s a fit there). Over margins each coefficient is 2^|S| margin cells. For two-way tables
of random Poisson(5) counts (seeded), every cell a margin of the plan, epsilon 1 and delta 1e-6, this prints, per
shape and form, the time of the first fit (it builds the problem) and the median of the next `FITS` (each a fresh
noise draw, fitted as a simulation's runs are, without the refinement), and then the largest difference between
the two forms' fitted cells and a released table of each (the default rounding, refined) over the same noise.
The cells' form is timed only up to `MOST_CELLS_OVER_CELLS` cells (its time grows as the cells cubed). Past
`GLOBAL_MAX_CELLS` cells (4,096) the fit is on the margins (`LocalLeastSquaresProblem`), whose coefficient rows are
written directly over the residuals (`coefficient_rows`): the form column says "on the margins" there, and the
threshold does not apply. Every figure is computed by this run.
"""

from __future__ import annotations

import platform
import time
from dataclasses import replace

import numpy as np

import tabrelease as tr
from tabrelease import consistency, estimate
from tabrelease.mechanisms.planned import GLOBAL_MAX_CELLS
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import measure, release_from_measurements, run_plan
from tabrelease.planner import with_post_processing
from tabrelease.testing import plan_at

SHAPES = ((20, 20), (30, 22), (42, 22), (60, 40), (100, 50), (120, 80))
FITS = 5
MOST_CELLS_OVER_CELLS = 1000
OVER_CELLS = 10**15  # a threshold above every problem: the cells' form


def _fits(plan, counts, threshold: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(first fit's seconds, median of the next FITS, the first fit's table, a released table) at this threshold."""
    consistency.DENSE_QUERY_ENTRIES = threshold
    estimate._least_squares_problem.cache_clear()
    bare = with_post_processing(plan, rounding="none")
    bare = replace(bare, estimator=bare.estimator.for_simulation())
    times, first_table = [], None
    for seed in range(FITS + 1):
        measurements = measure(bare, counts, SimulationNoise(seed=seed))
        start = time.perf_counter()
        table = np.asarray(release_from_measurements(bare, measurements).table, float)
        times.append(time.perf_counter() - start)
        first_table = table if first_table is None else first_table
    released = np.asarray(run_plan(plan, counts, SimulationNoise(seed=0)).table)
    return times[0], float(np.median(times[1:])), first_table, released


def main() -> None:
    default = consistency.DENSE_QUERY_ENTRIES
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; Gaussian plans "
          f"(epsilon 1, delta 1e-6) of two-way tables of Poisson(5) counts; the threshold of the margins' form "
          f"{default} entries; times in seconds")
    print(f"{'shape':>8} {'cells':>6} {'form':<14} {'first fit':>9} {'next fits (median)':>19}")
    for shape in SHAPES:
        counts = np.random.default_rng(1).poisson(5, shape)
        plan = plan_at(shape, [(0, 1)], 1.0, delta=1e-6)
        signature = [(b.query, tuple(b.variables), plan.design.basis_kind) for b in plan.design.blocks]
        found = {}
        local = counts.size > GLOBAL_MAX_CELLS
        forms = [("margins", 0)] + ([("cells", OVER_CELLS)] if counts.size <= MOST_CELLS_OVER_CELLS else [])
        for form, threshold in forms:
            found[form] = _fits(plan, counts, threshold)
            first, median = found[form][:2]
            label = "on the margins" if local else "over " + form
            print(f"{'x'.join(map(str, shape)):>8} {counts.size:>6} {label:<14} {first:>9.2f} {median:>19.3f}")
        consistency.DENSE_QUERY_ENTRIES = default
        used = "margins" if consistency.fits_over_margins(shape, signature) else "cells"
        if local:
            continue
        if "cells" in found:
            gap = float(np.abs(found["margins"][2] - found["cells"][2]).max())
            same = bool(np.array_equal(found["margins"][3], found["cells"][3]))
            print(f"{'':>8} {'':>6} largest difference of the fitted cells {gap:.2e}; released tables identical: "
                  f"{same}; the default fits over {used}")
        else:
            print(f"{'':>8} {'':>6} the default fits over {used}")
    consistency.DENSE_QUERY_ENTRIES = default
    estimate._least_squares_problem.cache_clear()


if __name__ == "__main__":
    main()
