"""Why the audit's simulated error understated the realised error on Rochdale with every two-way margin
(reports/benchmarks/error_model.txt, when the audit simulated on the released table): suspects measured, and the
world the audit now simulates on.

    python benchmarks/bench_error_model_rochdale.py > reports/benchmarks/error_model_rochdale.txt

* Empty cells: the share of empty cells in the true table, and in released tables (10 releases at each epsilon):
  the simulation's world was the released table, and non-negative fitting removes more error the more cells are
  empty.
* Rounding: the audit does not simulate it. At epsilon 0.5, the realised mean L1 of rounded and of unrounded
  releases (200 each), and the stated mean on the released table with and without simulated rounding (3 releases,
  60 runs each).
* The world: at each epsilon, the stated mean L1 of 10 releases simulated on the released table (the audit's world
  before) and on the released margins' world (`error_model.released_world`, the audit's world since; since 2cc1ffb
  the audit also varies its total), against the realised mean L1 of 50 further releases of the true table.

Every figure is computed by this run.
"""

from __future__ import annotations

import time

import numpy as np

import tabrelease as tr
from tabrelease import frontier
from tabrelease.error_model import released_world, simulate_errors
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.planner import with_post_processing
from tabrelease.testing import plan_at


def mean_l1(plan, table, noise, runs: int) -> float:
    truth = [table.margin_counts(g) for g in plan.margins]
    return float(np.mean([[np.abs(np.asarray(m, float) - t).sum()
                           for m, t in zip(run_plan(plan, table.counts, noise).released_margins, truth)]
                          for _ in range(runs)]))


def main() -> None:
    start = time.perf_counter()
    table = tr.builtin_table("rochdale")
    margins = frontier.workload_margins(table, "all-2-way")
    print(f"Rochdale ({table.n} records, {table.cells} cells), every two-way margin, the default release")
    print(f"true table: share of empty cells {float((table.counts == 0).mean()):.3f}")
    for epsilon in frontier.EPSILONS:
        plan = plan_at(table.shape, margins, epsilon)
        empty = [float((np.asarray(run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7)).table) == 0)
                       .mean()) for r in range(10)]
        blocks = ", ".join(f"{b.query} {b.variables}" for b in plan.design.blocks)
        print(f"eps {epsilon:g}: released tables' share of empty cells, mean of 10: {np.mean(empty):.3f} "
              f"(measured: {blocks})")
    plan = plan_at(table.shape, margins, 0.5)
    rounded = mean_l1(plan, table, SimulationNoise(seed=77), 200)
    unrounded = mean_l1(with_post_processing(plan, rounding="none"), table, SimulationNoise(seed=78), 200)
    print(f"eps 0.5: realised mean L1 of 200 rounded releases {rounded:.2f}, of 200 unrounded releases "
          f"{unrounded:.2f}")
    stated, stated_rounded = [], []
    for r in range(3):
        released = np.asarray(run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7)).table)
        stated.append(np.mean(list(simulate_errors(plan, released).mean_l1.values())))
        stated_rounded.append(np.mean(list(simulate_errors(plan, released, rounded=True).mean_l1.values())))
    print(f"eps 0.5: stated mean L1 over 3 releases simulated on the released table, rounding not simulated "
          f"{np.mean(stated):.2f}, "
          f"rounding simulated {np.mean(stated_rounded):.2f}")
    print("realised / stated mean L1, the audit simulating on the released table, then on the released margins' world "
          "(10 releases; realised: 50 further releases)")
    for epsilon in frontier.EPSILONS:
        plan = plan_at(table.shape, margins, epsilon)
        realised = mean_l1(plan, table, SimulationNoise(seed=79), 50)
        on_table, on_world = [], []
        for r in range(10):
            released = np.asarray(run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7)).table)
            on_table.append(np.mean(list(simulate_errors(plan, released).mean_l1.values())))
            on_world.append(np.mean(list(simulate_errors(plan, released_world(plan, released)[0]).mean_l1.values())))
        print(f"eps {epsilon:g}: realised {realised:.2f}; on the released table {realised / np.mean(on_table):.3f}, "
              f"on the released margins' world {realised / np.mean(on_world):.3f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
