"""What a sweep costs: per-stage time per release and the wall time of a slice of the paper's grid.

    python benchmarks/bench_sweep.py [--every 10] [--jobs 2] [--calibration exact]

Runs every N-th epsilon of the paper's grid (0.005 to 1.995 step 0.01) with its 50 repetitions
on the four tables, in worker processes as `tabrelease reproduce` does, and scales the wall time
to the full grid (40,000 releases per calibration). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time

from tabrelease import builtin_table, make_grid, run_sweep
from tabrelease.paper.reproduce import PAPER_EPSILONS, PAPER_REPETITIONS, PAPER_TABLES, machine_description


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--calibration", default="exact")
    args = parser.parse_args()
    epsilons = PAPER_EPSILONS[:: args.every]
    grid = make_grid([builtin_table(n) for n in PAPER_TABLES], epsilons, PAPER_REPETITIONS,
                     mechanisms=("auto",), calibrations=(args.calibration,), master_seed=1)  # the paper's mechanism
    start = time.perf_counter()
    result = run_sweep(grid, jobs=args.jobs, progress=False)
    wall = time.perf_counter() - start
    runs = result.runs
    machine = machine_description()
    print(f"machine: {machine['cpus']} CPUs ({machine['cpu']}), Python {machine['python']}, numpy {machine['numpy']}")
    print(f"grid: {len(epsilons)} epsilons (every {args.every}th of the paper's 200) x {PAPER_REPETITIONS} repetitions x "
          f"{len(PAPER_TABLES)} tables, {args.calibration} calibration = {len(runs)} releases; {args.jobs} worker processes")
    print(f"{'table':<16} {'noise ms':>9} {'LP ms':>7} {'round ms':>9} {'refit ms':>9} {'total ms':>9}")
    stages = ["seconds_noise", "seconds_lp", "seconds_round", "seconds_refit"]
    for name in PAPER_TABLES:
        part = runs[runs.table == name][stages].mean() * 1000
        print(f"{name:<16} {part.iloc[0]:>9.3f} {part.iloc[1]:>7.2f} {part.iloc[2]:>9.3f} {part.iloc[3]:>9.2f} "
              f"{part.sum():>9.2f}")
    cpu = runs[stages].sum().sum()
    full = wall * len(PAPER_EPSILONS) / len(epsilons)
    print(f"wall {wall:.1f} s for {len(runs)} releases ({1000 * wall / len(runs):.2f} ms each); stage time summed over "
          f"workers {cpu:.1f} s")
    print(f"scaled to the full grid (40,000 releases, one calibration): about {full:.0f} s wall with {args.jobs} workers")


if __name__ == "__main__":
    main()
