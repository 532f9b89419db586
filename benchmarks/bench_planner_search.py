"""The planner's searches by its own L-BFGS (`tabrelease._minimise`) against the same searches by scipy's L-BFGS-B.

    python benchmarks/bench_planner_search.py > reports/benchmarks/planner_search.txt

The planner calls `minimise(value_and_gradient, x0, bounds=..., max_iter=...)`; here that call is also routed to
`scipy.optimize.minimize(method="L-BFGS-B")` with the same bounds and iteration limit (what the planner ran before),
and both plans' total expected squared error over the workload is compared, at a whitened sensitivity of 1 (the
planner's objective; lower is better). The searches are non-convex and multi-start, so the two optimisers can end
in different local optima from the same starts. Cases: the frontier's seven tables with their model's margins and
every two-way margin (the default plan), and synthetic shapes with one-, two- and three-way, chain and nested
workloads, the superset candidates on and off, add-remove and replace neighbours.
"""

from __future__ import annotations

import platform
import time
from itertools import combinations

import numpy as np
from scipy.optimize import minimize

import tabrelease as tr
import tabrelease.planning as planning
from tabrelease import frontier
from tabrelease._minimise import MinimiseResult, minimise
from tabrelease.mechanisms.planned import GLOBAL_MAX_CELLS

SAME = 1e-6


def scipy_minimise(value_and_gradient, x0, *, bounds=None, max_iter=15000):
    found = minimize(value_and_gradient, x0, jac=True, method="L-BFGS-B",
                     bounds=None if bounds is None else [bounds] * len(x0), options={"maxiter": max_iter})
    return MinimiseResult(found.x, float(found.fun), int(found.nit), bool(found.success))


def cases():
    for name in frontier.FRONTIER_TABLES:
        table = tr.builtin_table(name)
        for workload in frontier.WORKLOADS:
            margins = tuple(tuple(m) for m in frontier.workload_margins(table, workload))
            yield f"{name} {workload} (default)", table.shape, margins, GLOBAL_MAX_CELLS, "add-remove"
    shapes = [(2, 2, 2), (2,) * 4, (2,) * 5, (2,) * 6, (2,) * 8, (3, 4, 7, 2), (3,) * 4, (4, 4, 4, 4, 3, 3, 2, 2),
              (3,) * 6, (2, 3, 4, 5), (5, 5, 5), (2, 2, 3, 3, 4)]
    for shape in shapes:
        d = len(shape)
        workloads = {"1-way": [(i,) for i in range(d)], "2-way": list(combinations(range(d), 2))}
        if d >= 3:
            workloads.update({"3-way": list(combinations(range(d), 3))[:6], "chain": [(i, i + 1) for i in range(d - 1)],
                              "nested": [(0,), (1,), (0, 1), (1, 2)]})
        for name, margins in workloads.items():
            for supersets in (0, GLOBAL_MAX_CELLS):
                for neighbours in ("add-remove", "replace"):
                    yield (f"{'x'.join(map(str, shape))} {name} supersets={'on' if supersets else 'off'} {neighbours}",
                           shape, tuple(margins), supersets, neighbours)


def plan_error(shape, margins, supersets, neighbours, search) -> tuple[float, float, int]:
    planning.minimise = search
    planning._plan_measurements.cache_clear(), planning.plan_marginals.cache_clear()
    start = time.perf_counter()
    design = planning.plan_measurements(shape, margins, superset_cells=supersets, neighbours=neighbours)
    seconds = time.perf_counter() - start
    return planning._total_error(design, margins), seconds, len(design.blocks)


def main() -> None:
    rows, seconds = [], {"ours": 0.0, "scipy": 0.0}
    for label, shape, margins, supersets, neighbours in cases():
        ours, s_ours, b_ours = plan_error(shape, margins, supersets, neighbours, minimise)
        theirs, s_theirs, b_theirs = plan_error(shape, margins, supersets, neighbours, scipy_minimise)
        seconds["ours"] += s_ours
        seconds["scipy"] += s_theirs
        rows.append((label, ours / theirs, b_ours, b_theirs))
    planning.minimise = minimise
    ratios = np.array([r[1] for r in rows])
    default = np.array([r[1] for r in rows if "(default)" in r[0]])
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; {len(rows)} plans; "
          f"searching: ours {seconds['ours']:.1f} s, scipy's L-BFGS-B {seconds['scipy']:.1f} s (imports excluded)")
    print("total expected squared error of our plan / scipy's (lower is better; 'same' within 1e-6):")
    for title, r in (("frontier defaults", default), ("all plans", ratios)):
        print(f"  {title}: {len(r)} plans, same {int((abs(r - 1) <= SAME).sum())}, better {int((r < 1 - SAME).sum())}, "
              f"worse {int((r > 1 + SAME).sum())}; smallest ratio {r.min():.4f}, largest {r.max():.4f}")
    print(f"{'case':<52} {'ours/scipy':>10} {'blocks':>12}")
    for label, ratio, b_ours, b_theirs in rows:
        print(f"{label:<52} {ratio:>10.6f} {b_ours:>5} / {b_theirs:<5}")


if __name__ == "__main__":
    main()
