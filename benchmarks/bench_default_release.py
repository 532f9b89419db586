"""How long a default release of each built-in table takes after import (issue: the best release, <= 50 ms).

    python benchmarks/bench_default_release.py [--runs N]

Times `tabrelease.release_margins(table, epsilon)` in this process, after one warm-up call that
loads the libraries and plans the design (kept: it depends on the shape and margins only): measuring,
least squares, controlled rounding. "cold" is that warm-up call with the plan and the least-squares
operators cleared first, as for the first release of a new table and margins in a process. Simulation
mode (seeded) and release mode (OpenDP's samplers) separately. Prints the median, the 90th percentile
and the maximum over N runs at each epsilon, and the share of controlled roundings proved closest
(gap 0) within their node limit (deterministic: no clock stops a solver). Output committed in reports/benchmarks/default_release.txt.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import tabrelease as tr
from tabrelease import estimate as _estimate
from tabrelease import planning as _planning


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; "
          f"{args.runs} runs per row after one warm-up; milliseconds")
    print(f"{'table':<16} {'mode':<10} {'eps':>5} {'median':>7} {'p90':>7} {'max':>7} {'proved closest':>15} "
          f"{'cold':>6}")
    for name in ("edwards", "czech", "rochdale", "journey_to_work"):
        table = tr.builtin_table(name)
        for mode in ("simulation", "release"):
            for epsilon in (0.1, 1.0):
                # cold: the design planned and the least-squares operators built again, as for a new table
                _planning._plan_measurements.cache_clear()
                _estimate._least_squares_problem.cache_clear()
                start = time.perf_counter()
                tr.release_margins(table,
                                   tr.ReleaseSpec(loss=tr.loss_of(epsilon), mode=mode,
                                                  seed=0 if mode == "simulation" else None))
                cold = 1000 * (time.perf_counter() - start)
                times, proved = [], 0
                for run in range(args.runs):
                    seed = run + 1 if mode == "simulation" else None
                    start = time.perf_counter()
                    release = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(epsilon), mode=mode, seed=seed))
                    times.append(time.perf_counter() - start)
                    proved += release.rounding_gap == 0.0
                ms = 1000 * np.array(times)
                print(f"{name:<16} {mode:<10} {epsilon:>5g} {np.median(ms):>7.1f} {np.percentile(ms, 90):>7.1f} "
                      f"{ms.max():>7.1f} {proved:>9d}/{args.runs} {cold:>6.1f}")


if __name__ == "__main__":
    main()
