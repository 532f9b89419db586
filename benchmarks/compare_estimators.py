"""The same noisy coefficients post-processed two ways: the paper's LP with plain rounding, and least squares
with the total pinned and controlled rounding. Both released margins are compared with the truth.

    python benchmarks/compare_estimators.py [--runs N] [--epsilons 0.1,1]

Per table (paper model, default mechanism, exact calibration, simulation noise seeded 0..N-1) and epsilon:
the mean max-L1 margin error and mean |n' - n| of each, their ratio, and the median seconds of each
post-processing. Output committed in reports/benchmarks/estimators.txt.
"""

from __future__ import annotations

import argparse

import numpy as np

import tabrelease as tr
from tabrelease.testing import plan_at
from tabrelease.noise import SimulationNoise
from tabrelease.planner import with_post_processing
from tabrelease.tables import margin_counts


def max_error(table, release):
    return max(float(np.abs(margin_counts(table.counts, g) - m).sum())
               for g, m in zip(release.margins, release.released_margins))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--epsilons", default="0.1,1")
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    print(f"{args.runs} runs per row; LP = linf-lp + nearest rounding, LS = least-squares + controlled rounding")
    print(f"{'table':<16} {'eps':>5} {'LP max L1':>10} {'LS max L1':>10} {'ratio':>6} {'LP |dn|':>8} {'LS |dn|':>8} "
          f"{'LP ms':>7} {'LS ms':>7}")
    for name in ("edwards", "czech", "rochdale", "journey_to_work"):
        table = tr.builtin_table(name)
        for eps in epsilons:
            lp_plan = plan_at(table.shape, tr.default_model(table).generators, eps, mechanism="auto")
            ls_plan = with_post_processing(lp_plan, "least-squares", "controlled")
            rows = []
            for seed in range(args.runs):
                lp = tr.run_plan(lp_plan, table.counts, SimulationNoise(seed))
                ls = tr.release_from_measurements(ls_plan, lp.measurements)  # the same noisy coefficients
                rows.append((max_error(table, lp), max_error(table, ls), abs(lp.n_released - table.n),
                             abs(ls.n_released - table.n), lp.timings["lp"] + lp.timings["round"],
                             ls.timings["estimate"] + ls.timings["round"]))
            r = np.array(rows)
            print(f"{name:<16} {eps:>5g} {r[:, 0].mean():>10.1f} {r[:, 1].mean():>10.1f} "
                  f"{r[:, 1].mean() / r[:, 0].mean():>6.2f} {r[:, 2].mean():>8.1f} {r[:, 3].mean():>8.1f} "
                  f"{1000 * np.median(r[:, 4]):>7.2f} {1000 * np.median(r[:, 5]):>7.2f}")


if __name__ == "__main__":
    main()
