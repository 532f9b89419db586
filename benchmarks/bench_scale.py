"""Time and peak memory of a default (planned) release with its audit, against table size (issue 12).

    python benchmarks/bench_scale.py

Each case runs in a fresh process (peak resident memory from the operating system, which includes the
drawn microdata frame): microdata rows are drawn (not timed), aggregated to the table (declared levels, timed),
and released with `publish_release` (simulation mode,
epsilon 1, all 2-way margins), audit and bundle included. Output committed in reports/benchmarks/scale.txt.
"""

from __future__ import annotations

import json
import subprocess
import sys

CASE = r"""
import itertools, json, resource, sys, tempfile, time
import numpy as np, pandas as pd
import tabrelease as tr
k, levels, rows, shape_of_margins = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
skew = rng.dirichlet(np.ones(levels), size=k)
people = pd.DataFrame({f"V{j}": rng.choice(levels, size=rows, p=skew[j]).astype(str) for j in range(k)})
start = time.perf_counter()
table = tr.table_from_microdata(people, levels={f"V{j}": [str(i) for i in range(levels)] for j in range(k)})
built = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    margins = (list(itertools.combinations(range(k), 2)) if shape_of_margins == "all-2-way"
               else [(j, (j + 1) % k) for j in range(k)])
    done = tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=margins, mode="simulation", seed=1),
                              f"{d}/out")
    integer = all(m.dtype.kind == "i" and m.min() >= 0 for m in done.release.released_margins)
end = time.perf_counter()
print(json.dumps({"cells": table.cells, "aggregate_s": built - start, "release_audit_s": end - built,
                  "released_cells": sum(m.size for m in done.release.released_margins), "integer": integer,
                  "held_as": "cells" if table.held_as_cells else "records",
                  "estimator": done.release.estimator, "consistency": done.release.consistency,
                  "refit": done.evaluation.g2_original is not None,
                  "mle_l1": done.evaluation.mle_l1 is not None,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


CASES = [(10, 2, "all-2-way"), (12, 2, "all-2-way"), (13, 2, "all-2-way"), (14, 2, "all-2-way"),
         (16, 2, "all-2-way"), (8, 4, "all-2-way"), (8, 10, "all-2-way"), (12, 10, "all-2-way"),
         (16, 10, "all-2-way"), (20, 10, "all-2-way"), (20, 10, "ring")]


def main() -> None:
    import math

    print("epsilon 1, simulation mode, 10^6 microdata rows; release = plan, measure, estimate, round, audit, bundle")
    print("peak MB is the process's peak resident memory, the drawn microdata frame included; G2 / MLE L1: whether "
          "the audit's refit gave G² of the original table and the MLE distance (see each audit's refit note)")
    print(f"{'variables':>10} {'margins':>9} {'cells':>8} {'held as':>7} {'released':>8} {'aggregate s':>11} "
          f"{'release+audit s':>15} {'peak MB':>7} {'estimator':>19} {'consistency':>11} {'integer':>7} {'G2':>5} {'MLE L1':>6}")
    series = []
    for k, levels, margins in CASES:
        out = subprocess.run([sys.executable, "-c", CASE, str(k), str(levels), str(10**6), margins],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            print(f"{k:>4} x {levels:<3} {margins} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{k:>4} x {levels:<3} {margins:>9} {float(r['cells']):>8.2g} {r['held_as']:>7} {r['released_cells']:>8} "
              f"{r['aggregate_s']:>11.2f} {r['release_audit_s']:>15.2f} {r['peak_mb']:>7.0f} {r['estimator']:>19} "
              f"{r['consistency']:>11} {str(r['integer']):>7} {str(r['refit']):>5} {str(r['mle_l1']):>6}")
        if levels == 10 and margins == "all-2-way" and r["held_as"] == "records":
            series.append((r["released_cells"], r["release_audit_s"], r["peak_mb"]))
    if len(series) >= 2:
        # Growth rate: the slope of log(time) against log(released cells) between the smallest and largest case
        # of the 10-level series held as records (k = 12 to 20 variables; the table's cells grow from 10^12 to 10^20).
        (c0, t0, m0), (c1, t1, m1) = series[0], series[-1]
        print(f"growth, 10 levels, all 2-way margins: time ~ released cells^{math.log(t1 / t0) / math.log(c1 / c0):.2f}, "
              f"peak memory ~ released cells^{math.log(m1 / m0) / math.log(c1 / c0):.2f} "
              f"(released cells {c0} to {c1}; the table's cells do not enter)")


if __name__ == "__main__":
    main()
