"""Does the audit's simulated error describe the realised error? Realised / stated, and the quantile's coverage.

    python benchmarks/bench_error_model.py [--releases N] [--jobs J] > reports/benchmarks/error_model.txt

For each frontier table, workload (the model's margins; every two-way margin) and epsilon, the default release is
drawn N times from the true table (seeded simulation noise, rounding as released). For each release the audit's
figures are computed as the audit computes them: 60 seeded releases of the *released* table by the same plan
(`error_model.released_table_errors`). Per point it prints:

* realised / stated mean L1: the mean over releases and margins of the realised L1 error, over the mean of the
  stated (simulated) means; and the same for the plan's unbiased expected L1 (before non-negativity);
* coverage: the share of (release, margin) pairs whose realised L1 error is at most the stated 95% quantile,
  beside the share for the plan's union-bound quantile.

The targets (issue "best release"): realised / stated within 0.9-1.1 at every point; coverage 93-97%. Every
figure here is computed by this run; nothing is typed in.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tabrelease as tr
from tabrelease import frontier
from tabrelease.error_model import released_table_errors
from tabrelease.mechanisms import get_mechanism
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.testing import plan_at


def point(args) -> dict:
    name, workload, epsilon, releases = args
    table = tr.builtin_table(name)
    margins = frontier.workload_margins(table, workload)
    plan = plan_at(table.shape, margins, epsilon)
    planned = get_mechanism("planned").expected_errors(plan)
    truth = [table.margin_counts(g) for g in plan.margins]
    realised, stated, unbiased, covered, covered_union = [], [], [], [], []
    for r in range(releases):
        release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
        found, note = released_table_errors(release, level=0.95)
        if found is None:
            raise SystemExit(f"{name}: {note}")
        for g, m, t in zip(plan.margins, release.released_margins, truth):
            error = float(np.abs(np.asarray(m, float) - t).sum())
            realised.append(error)
            stated.append(found.mean_l1[g])
            unbiased.append(planned[g].expected_l1)
            covered.append(error <= found.quantile_l1[g])
            covered_union.append(error <= planned[g].l1_quantile(0.05))
    return {"table": name, "workload": workload, "epsilon": epsilon, "cells": table.cells, "n": table.n,
            "ratio": float(np.mean(realised) / np.mean(stated)),
            "ratio_unbiased": float(np.mean(realised) / np.mean(unbiased)),
            "coverage": float(np.mean(covered)), "coverage_union": float(np.mean(covered_union)),
            "pairs": len(realised)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    tasks = [(t, w, e, args.releases) for t in frontier.FRONTIER_TABLES for w in frontier.WORKLOADS
             for e in frontier.EPSILONS]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(point, tasks))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; "
          f"{args.releases} default releases per point, each with the audit's simulation (60 releases of the "
          f"released table); {time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'table':<16} {'workload':<10} {'eps':>5} {'realised/stated':>16} {'realised/unbiased':>18} "
          f"{'coverage':>9} {'union cover':>12}")
    for r in rows:
        print(f"{r['table']:<16} {r['workload']:<10} {r['epsilon']:>5g} {r['ratio']:>16.3f} "
              f"{r['ratio_unbiased']:>18.3f} {r['coverage']:>9.1%} {r['coverage_union']:>12.1%}")
    ratios = np.array([r["ratio"] for r in rows])
    unbiased = np.array([r["ratio_unbiased"] for r in rows])
    pairs = np.array([r["pairs"] for r in rows])
    coverage = float(np.sum([r["coverage"] * r["pairs"] for r in rows]) / pairs.sum())
    union = float(np.sum([r["coverage_union"] * r["pairs"] for r in rows]) / pairs.sum())
    inside = int(np.sum((ratios >= 0.9) & (ratios <= 1.1)))
    print()
    print(f"realised / stated (simulated) mean L1: median {np.median(ratios):.3f}, range {ratios.min():.3f} to "
          f"{ratios.max():.3f}; within 0.9-1.1 at {inside} of {len(rows)} points")
    print(f"realised / the plan's unbiased expected L1: median {np.median(unbiased):.3f}, range {unbiased.min():.3f} "
          f"to {unbiased.max():.3f}")
    cover = np.array([r["coverage"] for r in rows])
    print(f"95% quantile coverage over all (release, margin) pairs: simulated {coverage:.1%} (per point "
          f"{cover.min():.0%} to {cover.max():.0%}); the plan's union bound {union:.1%}")


if __name__ == "__main__":
    main()
