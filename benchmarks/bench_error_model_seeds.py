"""How much do the audit's simulated figures depend on its seed? The Monte Carlo error of the stated mean.

    python benchmarks/bench_error_model_seeds.py [--seeds S] > reports/benchmarks/error_model_seeds.txt

The audit states each margin's mean L1 error from seeded simulated releases, in as many batches as a first batch
estimates make their mean known to 3% (`error_model.released_table_errors`). Its seed comes from the released table
(`error_model.audit_seed`: the root `AUDIT_SEED` followed by a hash of the table), so a release's figures carry one
draw of the simulation's Monte Carlo error. Here one default release per point (simulation noise, seed 7) is audited
with S other roots in place of `AUDIT_SEED`; printed per point: the stated mean L1 (the
mean over margins) at the audit's own seed, its mean and standard deviation over the S seeds, and that standard
deviation relative to the mean: the Monte Carlo error of a stated figure, against which a target of realised /
stated within 0.9-1.1 is to be read; then the audit's runs at its own seed and their median over the S seeds.
Every figure is computed by this run.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tabrelease as tr
from tabrelease import error_model, frontier
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.testing import plan_at

POINTS = [("rochdale", "all-2-way", 0.05), ("rochdale", "all-2-way", 0.25), ("edwards", "all-2-way", 0.25),
          ("edwards", "model", 0.1), ("journey_to_work", "model", 2.0), ("czech", "model", 0.05)]


def point(args) -> str:
    (name, workload, epsilon), seeds = args
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    release = run_plan(plan, table.counts, SimulationNoise(seed=7))

    runs = []

    def stated() -> float:
        found, note = error_model.released_table_errors(release)
        if found is None:
            raise SystemExit(f"{name}: {note}")
        runs.append(found.runs)
        return float(np.mean(list(found.mean_l1.values())))

    own = stated()
    audit_seed = error_model.AUDIT_SEED
    values = []
    try:
        for s in range(seeds):
            error_model.AUDIT_SEED = 1_000_003 + 7919 * s  # read by audit_seed at each call
            values.append(stated())
    finally:
        error_model.AUDIT_SEED = audit_seed
    values = np.array(values)
    sd = values.std(ddof=1)
    return (f"{name:<16} {workload:<10} {epsilon:>5g} {own:>12.2f} {values.mean():>14.2f} {sd:>10.2f} "
            f"{sd / values.mean():>10.1%} {runs[0]:>10} {int(np.median(runs[1:])):>11}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(point, [(p, args.seeds) for p in POINTS]))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; one default "
          f"release per point (simulation noise, seed 7), its audit's simulation (batches of {error_model.AUDIT_RUNS} "
          f"runs, as many as a first batch estimates make the runs' mean "
          f"known to {error_model.MEAN_RELATIVE_SE:.0%}) at the audit's seed and at {args.seeds} others; "
          f"{time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'table':<16} {'workload':<10} {'eps':>5} {'audit seed':>12} {'mean of seeds':>14} {'sd':>10} "
          f"{'sd / mean':>10} {'audit runs':>10} {'median runs':>11}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
