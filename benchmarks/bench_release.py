"""Per-stage cost of one release of each built-in table with its default mechanism.

    python benchmarks/bench_release.py [--repeats N]

Plans (basis, calibration, LP) are built once per table, as a sweep would; each repetition
draws simulation noise, solves the warm-started LP, rounds, and refits the model. Prints
median milliseconds per stage. A benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from tabrelease import builtin_table, default_model, evaluate_release, run_plan
from tabrelease.testing import plan_at
from tabrelease.loglinear import fit_loglinear
from tabrelease.noise import SimulationNoise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
          f"numpy {np.__version__}; epsilon {args.epsilon}; {args.repeats} releases per table")
    print(f"{'table':<16} {'plan ms':>8} {'noise ms':>9} {'LP ms':>7} {'round ms':>9} {'refit ms':>9} {'total ms':>9}")
    for name in ("edwards", "czech", "rochdale", "journey_to_work"):
        table = builtin_table(name)
        model = default_model(table)
        start = time.perf_counter()
        plan = plan_at(table.shape, model.generators, args.epsilon, mechanism="auto")
        plan_ms = 1000 * (time.perf_counter() - start)
        original = fit_loglinear(table, model)
        noise = SimulationNoise(seed=1)
        stages = {"noise": [], "lp": [], "round": [], "refit": [], "total": []}
        for _ in range(args.repeats):
            start = time.perf_counter()
            release = run_plan(plan, table.counts, noise)
            mid = time.perf_counter()
            evaluate_release(table, release, model, original_fit=original)
            end = time.perf_counter()
            for key in ("noise", "lp", "round"):
                stages[key].append(1000 * release.timings[key])
            stages["refit"].append(1000 * (end - mid))
            stages["total"].append(1000 * (end - start))
        med = {k: statistics.median(v) for k, v in stages.items()}
        print(f"{name:<16} {plan_ms:>8.1f} {med['noise']:>9.3f} {med['lp']:>7.2f} {med['round']:>9.3f} "
              f"{med['refit']:>9.2f} {med['total']:>9.2f}")


if __name__ == "__main__":
    main()
