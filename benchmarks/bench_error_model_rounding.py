"""How much the release's rounding changes its error, and how well the audit's cheap stand-in for it follows.

    python benchmarks/bench_error_model_rounding.py [--runs R] [--jobs J] > reports/benchmarks/error_model_rounding.txt

The audit's runs are not rounded (a controlled rounding is most of a release's time); each run's margins are instead
rounded as `error_model._rounded_like` says (with the default controlled rounding: each margin cell to its nearest
integer). Per point (the frontier's tables with their model and every two-way margin, the held-out tables of
`bench_error_model_heldout.py` with every two- and three-way margin, at epsilon 0.5 and 2), R releases of the true
table from the same noise three ways: as released (the plan's controlled rounding), unrounded (the fit), and the fit's
margins rounded as the audit now rounds them; each way's mean L1 error over the releases and margins, the last two
over the first, and each way's 95% quantile of each margin's L1 error over the releases (the 96th smallest of 100),
the last two over the first (their mean over the margins). Every figure is computed by this run.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from bench_error_model import workload_margins
from bench_error_model_heldout import HELD_OUT

import tabrelease as tr
from tabrelease import error_model as em
from tabrelease import frontier
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import measure, release_from_measurements
from tabrelease.planner import with_post_processing
from tabrelease.tables import margin_counts
from tabrelease.testing import plan_at

EPSILONS = (0.5, 2.0)


def points() -> list[tuple[str, str, float]]:
    found, seen = [], set()
    for tables, workloads in ((frontier.FRONTIER_TABLES, frontier.WORKLOADS), (HELD_OUT, ("all-2-way", "all-3-way"))):
        for t in tables:
            table = tr.load_table(t)
            for w in workloads:
                key = (t, tuple(workload_margins(table, w)))
                if key in seen:  # a model of every two-way margin: the same margins
                    continue
                seen.add(key)
                found += [(t, w, e) for e in EPSILONS]
    return found


def point(args) -> dict:
    name, workload, epsilon, runs = args
    table = tr.load_table(name)
    plan = plan_at(table.shape, workload_margins(table, workload), epsilon)
    bare = with_post_processing(plan, rounding="none")
    counts = np.asarray(table.counts)
    truth = [margin_counts(counts.astype(float), g) for g in plan.margins]

    def l1(margins) -> list[float]:
        return [float(np.abs(np.asarray(m, float) - t).sum()) for m, t in zip(margins, truth)]

    per_margin = {"rounded": [], "unrounded": [], "audit": []}
    for r in range(runs):
        drawn = measure(plan, counts, SimulationNoise(seed=5_000_000 + r))
        fit = release_from_measurements(bare, drawn)
        per_margin["rounded"].append(l1(release_from_measurements(plan, drawn).released_margins))
        per_margin["unrounded"].append(l1(fit.released_margins))
        per_margin["audit"].append(l1(em._rounded_like(fit, plan.margins, plan.rounding)))
    ways = {way: [float(np.mean(row)) for row in rows] for way, rows in per_margin.items()}
    k = em.upper_order_statistic(runs, 0.95) - 1
    quantiles = {way: np.sort(np.array(per_margin[way]), axis=0)[k] for way in per_margin}
    return {"table": Path(name).stem, "workload": workload, "epsilon": epsilon, "rounding": plan.rounding,
            **{k: float(np.mean(v)) for k, v in ways.items()},
            "q_unrounded": float(np.mean(quantiles["unrounded"] / quantiles["rounded"])),
            "q_audit": float(np.mean(quantiles["audit"] / quantiles["rounded"])),
            "audit_se": float(np.std(np.array(ways["audit"]) / np.mean(ways["rounded"])
                                     - np.array(ways["rounded"]) / np.mean(ways["rounded"]), ddof=1) / np.sqrt(runs))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(point, [(*p, args.runs) for p in points()]))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; per point "
          f"{args.runs} releases of the true table, the same noise three ways; {len(rows)} points; "
          f"{time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'table':<16} {'workload':<10} {'eps':>4} {'rounding':<11} {'mean L1 rounded':>15} {'unrounded / it':>15} "
          f"{'audit / it':>11} {'(se)':>7} {'q95 unrounded / it':>19} {'q95 audit / it':>15}")
    for r in rows:
        print(f"{r['table']:<16} {r['workload']:<10} {r['epsilon']:>4g} {r['rounding']:<11} {r['rounded']:>15.3f} "
              f"{r['unrounded'] / r['rounded']:>15.3f} {r['audit'] / r['rounded']:>11.3f} {r['audit_se']:>7.3f} "
              f"{r['q_unrounded']:>19.3f} {r['q_audit']:>15.3f}")
    unrounded = np.array([r["unrounded"] / r["rounded"] for r in rows])
    audit = np.array([r["audit"] / r["rounded"] for r in rows])
    print()
    print(f"unrounded / rounded: {unrounded.min():.3f} to {unrounded.max():.3f} (median {np.median(unrounded):.3f}); "
          f"the audit's rounding / rounded: {audit.min():.3f} to {audit.max():.3f} (median {np.median(audit):.3f})")
    for way in ("unrounded", "audit"):
        q = np.array([r[f"q_{way}"] for r in rows])
        print(f"95% quantile, {way} / rounded (mean over margins): {q.min():.3f} to {q.max():.3f} (median "
              f"{np.median(q):.3f})")


if __name__ == "__main__":
    main()
