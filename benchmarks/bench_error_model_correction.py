"""Can the audit's simulated error be corrected for the released table being smoother than the truth? An experiment.

    python benchmarks/bench_error_model_correction.py RELEASES EPSILONS > reports/benchmarks/error_model_correction.txt
    (committed: python benchmarks/bench_error_model_correction.py 10 0.05,2, one process, 2580 s)

For each frontier table and distinct workload at each epsilon, RELEASES default releases of the true table; for each,
the audit's simulation on the released table R (RUNS seeded releases of R by the plan), unrounded (u, as the audit
does) and rounded as released (r); and an iterated-bootstrap correction of each (uc, rc): every simulated release
R* of R is released once more, and each margin's simulated mean and quantile are multiplied by
mean error(R as reference) / mean error(R* as reference), the bias of using R for the truth estimated by that of
using R* for R. Prints realised / stated mean L1 and the 95% quantile's coverage per point, then their spread.
The audit keeps u (see reports/benchmarks/error_model.txt); this run is why the correction was not adopted.
"""

import sys, time
from concurrent.futures import ProcessPoolExecutor
import numpy as np
import tabrelease as tr
from tabrelease import frontier
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.planner import with_post_processing
from tabrelease.tables import margin_counts
from tabrelease.testing import plan_at

RUNS = 30
def sim(plan, ref, seed, runs=RUNS, keep=True):
    ref = np.rint(np.asarray(ref, float)).astype(np.int64)
    truth = [margin_counts(ref, g).astype(float) for g in plan.margins]
    noise = SimulationNoise(seed=seed)
    errs, tables = [], []
    for r in range(runs):
        rel = run_plan(plan, ref, noise)
        errs.append([np.abs(np.asarray(m, float) - t).sum() for m, t in zip(rel.released_margins, truth)])
        if keep: tables.append(np.asarray(rel.table, float))
    return np.array(errs), tables

def second(plan, tables, seed):
    noise = SimulationNoise(seed=seed); e2 = []
    for t in tables:
        ref = np.rint(t).astype(np.int64)
        tt = [margin_counts(ref, g).astype(float) for g in plan.margins]
        rel = run_plan(plan, ref, noise)
        e2.append([np.abs(np.asarray(m, float) - x).sum() for m, x in zip(rel.released_margins, tt)])
    return np.array(e2)

def point(args):
    name, workload, epsilon, releases = args
    table = tr.builtin_table(name)
    margins = frontier.workload_margins(table, workload)
    plan = plan_at(table.shape, margins, epsilon)
    un = with_post_processing(plan, rounding="none")
    truth = [table.margin_counts(g) for g in plan.margins]
    k = int(np.ceil(0.95 * RUNS)) - 1
    keys = ("u", "r", "uc", "rc")
    st = {x: [] for x in keys}; cov = {x: [] for x in keys}; real = []
    for r in range(releases):
        release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
        eu, tu = sim(un, release.table, 20261123)
        er, trr = sim(plan, release.table, 20261123)
        fu = eu.mean(0) / np.maximum(second(un, tu, 99).mean(0), 1e-12)
        fr = er.mean(0) / np.maximum(second(plan, trr, 99).mean(0), 1e-12)
        qu, qr = np.sort(eu, 0)[k], np.sort(er, 0)[k]
        means = {"u": eu.mean(0), "r": er.mean(0), "uc": eu.mean(0) * fu, "rc": er.mean(0) * fr}
        qs = {"u": qu, "r": qr, "uc": qu * fu, "rc": qr * fr}
        for i, (m, t) in enumerate(zip(release.released_margins, truth)):
            err = float(np.abs(np.asarray(m, float) - t).sum()); real.append(err)
            for x in keys:
                st[x].append(means[x][i]); cov[x].append(err <= qs[x][i])
    R = np.mean(real)
    return (name, workload, epsilon) + tuple(R / np.mean(st[x]) for x in keys) + tuple(np.mean(cov[x]) for x in keys)

if __name__ == "__main__":
    rel = int(sys.argv[1]); eps = [float(x) for x in sys.argv[2].split(",")]
    tasks, seen = [], set()
    for t in frontier.FRONTIER_TABLES:
        table = tr.builtin_table(t)
        for w in frontier.WORKLOADS:
            key = (t, tuple(map(tuple, frontier.workload_margins(table, w))))
            if key in seen: continue
            seen.add(key)
            tasks += [(t, w, e, rel) for e in eps]
    t0 = time.time()
    with ProcessPoolExecutor(1) as pool:
        rows = list(pool.map(point, tasks))
    print("table workload eps | ratio u r uc rc | coverage u r uc rc")
    for r in rows:
        print(f"{r[0]:<16} {r[1]:<10} {r[2]:>5g} | " + " ".join(f"{x:.3f}" for x in r[3:7]) + " | " + " ".join(f"{x:.1%}" for x in r[7:]))
    for j, lab in enumerate(("u", "r", "uc", "rc")):
        a = np.array([r[3 + j] for r in rows]); c = np.array([r[7 + j] for r in rows])
        print(lab, "ratio median", np.median(a).round(3), "range", a.min().round(3), a.max().round(3), "in0.9-1.1", int(((a >= .9) & (a <= 1.1)).sum()), "/", len(a), "| cov mean", c.mean().round(3), "range", c.min().round(3), c.max().round(3))
    print("time", round(time.time() - t0))
