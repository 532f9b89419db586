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
k, levels, rows = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
skew = rng.dirichlet(np.ones(levels), size=k)
people = pd.DataFrame({f"V{j}": rng.choice(levels, size=rows, p=skew[j]).astype(str) for j in range(k)})
start = time.perf_counter()
table = tr.table_from_microdata(people, levels={f"V{j}": [str(i) for i in range(levels)] for j in range(k)})
built = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    done = tr.publish_release(table, f"{d}/out", 1.0, list(itertools.combinations(range(k), 2)),
                              mode="simulation", seed=1)
end = time.perf_counter()
print(json.dumps({"cells": table.cells, "aggregate_s": built - start, "release_audit_s": end - built,
                  "estimator": done.release.estimator, "consistency": done.release.consistency,
                  "refit": done.evaluation.refit_note is None,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    print("all 2-way margins, epsilon 1, simulation mode; release = plan, measure, estimate, round, audit, bundle")
    print(f"{'variables':>10} {'rows':>9} {'cells':>9} {'aggregate s':>12} {'release+audit s':>16} {'peak MB':>8} "
          f"{'estimator':>20} {'consistency':>11} {'refit':>6}")
    for k, levels, rows in [(10, 2, 10**6), (12, 2, 10**6), (13, 2, 10**6), (14, 2, 10**6), (16, 2, 10**6),
                            (8, 4, 10**6)]:
        out = subprocess.run([sys.executable, "-c", CASE, str(k), str(levels), str(rows)], capture_output=True,
                             text=True, timeout=1800)
        if out.returncode != 0:
            print(f"{k:>4} x {levels:<3} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{k:>4} x {levels:<3} {rows:>9} {r['cells']:>9} {r['aggregate_s']:>12.2f} {r['release_audit_s']:>16.2f} "
              f"{r['peak_mb']:>8.0f} {r['estimator']:>20} {r['consistency']:>11} {str(r['refit']):>6}")


if __name__ == "__main__":
    main()
