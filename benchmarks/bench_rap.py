"""Seconds per RAP release (simulation mode) on the built-in tables: the default (T = 1) and an adaptive plan.

Run: python benchmarks/bench_rap.py > reports/benchmarks/rap.txt  (one warm-up release first: imports and OpenDP's
first calls)."""

import os
import platform
import statistics
import time

from tabrelease import builtin_table, default_model
from tabrelease.testing import plan_at
from tabrelease.pipeline import run_plan
from tabrelease.noise import SimulationNoise
from tabrelease.tables import BUILTIN_TABLES


def seconds(table, options, draws=3):
    gens = default_model(table).generators
    times = []
    for seed in range(draws):
        start = time.perf_counter()
        plan = plan_at(table.shape, gens, 1.0, mechanism="rap", delta=1e-6, options=options)
        run_plan(plan, table, SimulationNoise(seed))
        times.append(time.perf_counter() - start)
    return len(gens), statistics.median(times), max(times)


if __name__ == "__main__":
    import tabrelease as tr

    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, tabrelease "
          f"{tr.__version__}; load average before: {os.getloadavg()[0]:.2f}; seconds per release, median and max of 3")
    seconds(builtin_table("edwards"), None, 1)
    for name in BUILTIN_TABLES:
        table = builtin_table(name)
        m, med, top = seconds(table, None)
        line = f"{name:16s} shape {str(table.shape):22s} n {int(table.n):6d} m {m}  T=1: median {med:.2f} s max {top:.2f} s"
        if m >= 2:
            _, med2, top2 = seconds(table, {"rounds": 2, "queries_per_round": m // 2})
            line += f" | T=2, K={m // 2}: median {med2:.2f} s max {top2:.2f} s"
        print(line, flush=True)
