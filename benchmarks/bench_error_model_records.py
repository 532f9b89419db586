"""What the audit states, and what the release errs, at tables of one shape with fewer or more records: Edwards' table
(70 records), empty, thinned to about half, and doubled up to eightfold, at epsilon 0.05 and 0.1.

    python benchmarks/bench_error_model_records.py [--releases N] [--truth-runs M] [--jobs J] \
        > reports/benchmarks/error_model_records.txt

Why: the validation (`benchmarks/bench_error_model.py`) finds the audit overstating the error of Edwards' releases at
epsilon 0.05 (realised / stated mean L1 about 0.8 for every two-way margin), where the noise in the released total has
a standard deviation about three times the table's 70 records. The audit reads only the release; a release tells
the table's total to within that noise. This measures, at truths of Edwards' shape and of 0 to 560 records (the table
times k, k = 0, 1, 2, 4, 8, and the table thinned at random to half, each cell a binomial draw with probability 1/2,
seed 3), how the realised mean L1 moves with the number of records, how the audit's stated mean moves, and how far
apart the releases of those truths are (their released totals' mean and standard deviation, and the share of
releases that are empty: all-zero tables, identical whatever the truth).

Per (workload, epsilon, truth): the plan is the one the default release makes for Edwards' shape at that epsilon (it
depends on the shape, the margins and epsilon, not on the counts); N releases of the truth (the validation's seeds,
1000 r + 7) each audited as released (`error_model.released_table_errors`); M further releases of the truth for the
realised mean (the validation's stream, SimulationNoise(7_000_001)). Printed: realised and stated mean L1 (means over
releases and margins), realised / stated with its standard error (the validation's delta method), the coverage of
each release's own error by its stated 95% quantile, and the released totals. Every figure is computed by this run.
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
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.tables import margin_counts
from tabrelease.testing import plan_at

from bench_error_model import _ratio_and_se

TABLE = "edwards"
POINTS = (("all-2-way", 0.05), ("model", 0.05), ("all-2-way", 0.1), ("model", 0.1))
# k: the table times k; "half": thinned at random to about half (THINNING_SEED).
TRUTHS = (0, "half", 1, 2, 4, 8)
THINNING_SEED = 3


def truth_of(k) -> tuple[np.ndarray, str]:
    """The truth's counts and how they were made from the table."""
    counts = tr.builtin_table(TABLE).counts
    if k == "half":
        return np.random.default_rng(THINNING_SEED).binomial(counts, 0.5), "thinned to half"
    return counts * k, ("empty" if k == 0 else "the table" if k == 1 else f"the table x {k}")


def point(args) -> dict:
    workload, epsilon, k, releases, truth_runs = args
    table = tr.builtin_table(TABLE)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    counts, made = truth_of(k)
    truth = [margin_counts(counts, g) for g in plan.margins]

    def errors(release) -> list[float]:
        return [float(np.abs(np.asarray(m, float) - t).sum()) for m, t in zip(release.released_margins, truth)]

    own, stated, covered, totals = [], [], [], []
    for r in range(releases):
        release = run_plan(plan, counts, SimulationNoise(seed=1000 * r + 7))
        found, note = released_table_errors(release, level=0.95)
        if found is None:
            raise SystemExit(f"{TABLE} x {k}: {note}")
        own.append(errors(release))
        stated.append([found.mean_l1[g] for g in plan.margins])
        covered.append(np.array(own[-1]) <= np.array([found.quantile_l1[g] for g in plan.margins]))
        totals.append(float(np.asarray(release.table).sum()))
    noise = SimulationNoise(seed=7_000_001)
    realised = np.array([errors(run_plan(plan, counts, noise)) for _ in range(truth_runs)])
    stated, totals = np.array(stated), np.array(totals)
    ratio, ratio_se = _ratio_and_se(realised, stated)
    return {"workload": workload, "epsilon": epsilon, "made": made, "records": int(counts.sum()),
            "realised": float(realised.mean()), "stated": float(stated.mean()), "ratio": ratio, "ratio_se": ratio_se,
            "coverage": float(np.mean(covered)), "total_mean": float(totals.mean()),
            "total_sd": float(totals.std(ddof=1)), "empty": float(np.mean(totals == 0))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=80)
    parser.add_argument("--truth-runs", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    tasks = [(w, e, k, args.releases, args.truth_runs) for w, e in POINTS for k in TRUTHS]
    with ProcessPoolExecutor(args.jobs) as pool:
        found = list(pool.map(point, tasks))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; truths of "
          f"{TABLE}'s shape; per truth {args.releases} default releases audited, {args.truth_runs} further releases "
          f"for the realised mean; {time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'workload':<10} {'eps':>5} {'truth':<16} {'records':>7} {'realised':>9} {'stated':>8} "
          f"{'realised/stated':>15} {'(se)':>7} {'coverage':>9} {'released total':>17} {'empty':>6}")
    for r in found:
        print(f"{r['workload']:<10} {r['epsilon']:>5g} {r['made']:<16} {r['records']:>7d} {r['realised']:>9.1f} "
              f"{r['stated']:>8.1f} {r['ratio']:>15.3f} {r['ratio_se']:>7.3f} {r['coverage']:>9.1%} "
              f"{r['total_mean']:>9.1f} ± {r['total_sd']:>5.1f} {r['empty']:>6.1%}")
    print()
    for w, e in POINTS:
        rows = sorted((r for r in found if (r["workload"], r["epsilon"]) == (w, e)), key=lambda r: r["records"])
        low, table = rows[0], next(r for r in rows if r["made"] == "the table")
        high = next(r for r in rows if r["records"] == 2 * table["records"])
        inside = [r["made"] for r in rows if 0.9 <= r["ratio"] <= 1.1]
        print(f"{w} eps {e:g}: from {low['records']} to {high['records']} records the realised mean L1 moved "
              f"x{high['realised'] / low['realised']:.2f}, the stated x{high['stated'] / low['stated']:.2f}; the "
              f"released totals' means moved {high['total_mean'] - low['total_mean']:.1f}, "
              f"{(high['total_mean'] - low['total_mean']) / low['total_sd']:.2f} of their standard deviation at "
              f"{low['records']} records; realised / stated {min(r['ratio'] for r in rows):.3f} to "
              f"{max(r['ratio'] for r in rows):.3f}, within 0.9-1.1 at {len(inside)} of {len(rows)} truths"
              f"{' (' + ', '.join(inside) + ')' if inside else ''}")


if __name__ == "__main__":
    main()
