"""How much of a sweep its summary takes: summary.csv and the four SVG figures against the sweep's own runs.

    python benchmarks/bench_sweep_summary.py [--repetitions R] [--jobs J]

A sweep of 1,000 simulated releases by default (Edwards and Czech, the default mechanism and the paper's, five values
of epsilon, R = 50 repetitions), then `write_sweep_summary` on its runs, each timed on the wall clock. The goal
(issue 25): the summary at most 10% of the sweep's time. Prints both times and the share.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import tabrelease as tr
from tabrelease.sweeps.summary import write_sweep_summary

GOAL = 0.10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    tables = [tr.builtin_table("edwards"), tr.builtin_table("czech")]
    grid = tr.make_grid(tables, [0.1, 0.25, 0.5, 1.0, 2.0], args.repetitions, mechanisms=["planned", "auto"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        start = time.perf_counter()
        result = tr.run_sweep(grid, out, jobs=args.jobs, progress=False)
        sweep_s = time.perf_counter() - start
        start = time.perf_counter()
        files = write_sweep_summary(result.runs, out)
        summary_s = time.perf_counter() - start
    share = summary_s / (sweep_s + summary_s)
    print(f"sweep: {len(result.runs)} releases in {sweep_s:.2f} s ({args.jobs} job(s))")
    print(f"summary: {', '.join(files)} in {summary_s:.3f} s")
    print(f"summary share of the whole: {100 * share:.1f}% (goal <= {100 * GOAL:.0f}%: "
          f"{'met' if share <= GOAL else 'not met'})")


if __name__ == "__main__":
    main()
