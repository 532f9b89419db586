"""Census-scale input (issue 24): wide tables, counts aggregated elsewhere, and microdata rows, each case in a fresh
process with its wall time and peak resident memory (from the operating system).

    python benchmarks/bench_census.py [--quick]

1. Wide tables: planning (check and plan) and a whole simulated release, audit included, of all two-way margins of
   30, 50 and 100 binary variables and of 100 three-level variables (20,000 people, one row each, held as records).
2. A long Parquet table of distinct records with a count column (10^6 records over 20 variables of 2 to 12 levels,
   about 10^13 cells), released in release mode with a ledger (two two-way margins), through the command line.
3. Microdata rows (20 variables of 2 to 12 levels, Parquet) from 10^6 to 10^8 rows: the command-line release of all
   190 two-way margins (a simulated release, audit included) by each counting engine (--engine arrow, the default,
   streaming; dask on a local cluster of 2 workers; pandas, which reads the file whole, at the smallest size only),
   beside DuckDB's own count of the same margins from the same file in the same run (when duckdb is installed): one
   query with GROUPING SETS (its fastest) and 190 separate GROUP BY queries (its leanest). Then each one's growth
   exponent (the slope of log time against log rows, smallest to largest size).

--quick runs the smallest case of each. Output committed in reports/benchmarks/census.txt.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

SIZES = [2, 3, 4, 5, 6, 8, 10, 12] * 2 + [2, 3, 4, 5]  # levels of the 20 variables

WIDE = r"""
import itertools, json, resource, sys, tempfile, time
import numpy as np, pandas as pd
import tabrelease as tr
from tabrelease.workflow import prepare_release
k, levels = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
people = pd.DataFrame({f"V{j}": rng.integers(0, levels, 20000).astype(str) for j in range(k)})
table = tr.table_from_microdata(people, levels={f"V{j}": [str(i) for i in range(levels)] for j in range(k)},
                                name=f"wide{k}")
spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=list(itertools.combinations(range(k), 2)), mode="simulation",
                      seed=1)
start = time.perf_counter()
prepare_release(table, spec)
planned = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    done = tr.publish_release(table, spec, f"{d}/out")
end = time.perf_counter()
print(json.dumps({"margins": len(spec.margins), "plan_s": planned - start, "release_s": end - planned,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "consistency": done.release.consistency}))
"""

MAKE_FILE = r"""
import json, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
rows, path, distinct = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "distinct"
sizes = json.loads(sys.argv[4])
rng = np.random.default_rng(1)
chunk = rows if distinct else min(rows, 10**7)  # rows are written a chunk at a time (10^8 rows never held)
writer, written = None, 0
while written < rows:
    n = min(chunk, rows - written)
    codes = np.column_stack([rng.integers(0, s, size=n, dtype=np.int8) for s in sizes])
    if distinct:
        codes = np.unique(codes, axis=0)
    columns = {f"var{j:02d}": pa.DictionaryArray.from_arrays(pa.array(codes[:, j]),
                                                             pa.array([f"l{i}" for i in range(s)]))
               for j, s in enumerate(sizes)}
    if distinct:
        columns["count"] = pa.array(rng.integers(1, 200, size=len(codes)))
    batch = pa.table(columns)
    writer = writer or pq.ParquetWriter(path, batch.schema)
    writer.write_table(batch, row_group_size=10**6)
    written += n
    last = len(codes)
writer.close()
print(last if distinct else rows)
"""

DUCKDB_SETS = r"""
import json, sys, time, itertools
import duckdb
path, k = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
names = [f"var{j:02d}" for j in range(k)]
sets = ", ".join(f"({a}, {b})" for a, b in itertools.combinations(names, 2))
start = time.perf_counter()
con.execute(f"SELECT {', '.join(names)}, count(*) FROM read_parquet('{path}') GROUP BY GROUPING SETS ({sets})").fetchall()
print(json.dumps({"s": time.perf_counter() - start}))
"""

DUCKDB = r"""
import json, resource, sys, time, itertools
import duckdb
path, k = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
names = [f"var{j:02d}" for j in range(k)]
start = time.perf_counter()
for a, b in itertools.combinations(names, 2):
    con.execute(f"SELECT {a}, {b}, count(*) FROM read_parquet('{path}') GROUP BY {a}, {b}").fetchall()
print(json.dumps({"s": time.perf_counter() - start, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(argv: list[str], timeout: float = 1800) -> tuple[str, float, float]:
    """(stdout, wall s, peak MB of the child) of a command run under /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r") as report:
        done = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", report.name, *argv], capture_output=True,
                              text=True, timeout=timeout)
        wall, peak_kb = report.read().split()[-2:]
    if done.returncode != 0:
        raise SystemExit(f"bench_census: {' '.join(argv[:6])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout, float(wall), float(peak_kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    py = sys.executable
    print("1. wide tables: all two-way margins of k variables of L levels (20,000 people held as records); the")
    print("   release is timed after the plan, in the same process")
    print(f"   {'k':>4} {'L':>3} {'margins':>8} {'plan s':>8} {'release s':>10} {'peak MB':>8}  consistency")
    for k, levels in ([(30, 2)] if args.quick else [(30, 2), (50, 2), (100, 2), (100, 3)]):
        out, wall, peak = _run([py, "-c", WIDE, str(k), str(levels)])
        row = json.loads(out.strip().splitlines()[-1])
        print(f"   {k:>4} {levels:>3} {row['margins']:>8} {row['plan_s']:>8.1f} {row['release_s']:>10.1f} "
              f"{peak:>8.0f}  {row['consistency']}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        levels = {f"var{j:02d}": [f"l{i}" for i in range(s)] for j, s in enumerate(SIZES)}
        (tmp / "levels.json").write_text(json.dumps(levels))
        print("2. a long Parquet table of distinct records with counts, released with a ledger (release mode)")
        rows = 10**5 if args.quick else 10**6
        distinct = _run([py, "-c", MAKE_FILE, str(rows), str(tmp / "long.parquet"), "distinct", json.dumps(SIZES)])[0]
        cells = 1
        for s in SIZES:
            cells *= s
        subprocess.run([py, "-m", "tabrelease", "ledger", "init", str(tmp / "ledger.json")], check=True,
                       capture_output=True)
        _, wall, peak = _run([py, "-m", "tabrelease", "release", str(tmp / "long.parquet"), "--sparse", "--levels",
                              str(tmp / "levels.json"), "--epsilon", "1", "--margins", "[var00,var01][var02,var03]",
                              "--ledger", str(tmp / "ledger.json"), "--out", str(tmp / "long-out")])
        print(f"   {int(distinct):,} distinct records over {len(SIZES)} variables ({cells:.3g} cells): "
              f"{wall:.1f} s, peak {peak:.0f} MB")
        print("3. microdata rows (Parquet, 20 variables): all 190 two-way margins, a simulated release with its audit")
        print("   by each engine, and DuckDB's count of the same margins from the same file (wall s, peak MB of the process)")
        try:
            import duckdb  # noqa: F401
            have_duckdb = True
        except ImportError:
            have_duckdb = False
        margins = "".join(f"[var{a:02d},var{b:02d}]" for a in range(20) for b in range(a + 1, 20))
        sizes = [10**6] if args.quick else [10**6, 10**7, 2 * 10**7, 10**8]
        engines = {"arrow": sizes, "dask": sizes[:2], "pandas": sizes[:1]}
        print(f"   {'rows':>12}  {'engine':<22} {'wall s':>8} {'peak MB':>8}")
        timings: dict[str, dict[int, float]] = {}
        for rows in sizes:
            path = tmp / f"people-{rows}.parquet"
            _run([py, "-c", MAKE_FILE, str(rows), str(path), "rows", json.dumps(SIZES)], timeout=3600)
            for engine, at in engines.items():
                if rows not in at:
                    continue
                _, wall, peak = _run([py, "-m", "tabrelease", "release", str(path), "--microdata", "--levels",
                                      str(tmp / "levels.json"), "--epsilon", "1", "--simulate", "--seed", "1",
                                      "--engine", engine, "--margins", margins, "--out", str(tmp / "out"), "--force"],
                                     timeout=3600)
                timings.setdefault(f"tabrelease --engine {engine}", {})[rows] = wall
                print(f"   {rows:>12,}  {'tabrelease ' + engine:<22} {wall:>8.1f} {peak:>8.0f}", flush=True)
            if have_duckdb:
                for name, script in (("DuckDB GROUPING SETS", DUCKDB_SETS), ("DuckDB 190 GROUP BYs", DUCKDB)):
                    _, wall, peak = _run([py, "-c", script, str(path), "20"], timeout=3600)
                    timings.setdefault(name, {})[rows] = wall
                    print(f"   {rows:>12,}  {name:<22} {wall:>8.1f} {peak:>8.0f}", flush=True)
                duck = min(timings["DuckDB GROUPING SETS"][rows], timings["DuckDB 190 GROUP BYs"][rows])
                ours = timings["tabrelease --engine arrow"][rows]
                print(f"   {rows:>12,}  the default release / DuckDB's faster count: {ours / duck:.2f}")
            path.unlink()
        print("   growth exponents (time ~ rows^b, from the smallest to the largest size each ran at):")
        for name, by_rows in timings.items():
            if len(by_rows) > 1:
                small, large = min(by_rows), max(by_rows)
                slope = math.log(by_rows[large] / by_rows[small]) / math.log(large / small)
                print(f"     {name:<28} b = {slope:.2f} ({small:,} to {large:,} rows)")


if __name__ == "__main__":
    main()
