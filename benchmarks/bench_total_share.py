"""Where the default loses at small epsilon on sparse tables, is it the noisy total? A budget share on the total.

    python benchmarks/bench_total_share.py [--repetitions N] [--jobs J] > reports/benchmarks/total_share.txt

Why: on ICU's 3,072 cells (200 patients; `bench_frontier_heldout.py --large`) the default is up to 2.2 times the
independence baseline `copula-id` at epsilon 0.05, and there its design is noise on every cell: the released total is
then the sum of 3,072 noisy cells (standard deviation 1,568 at epsilon 0.05, eight times n), which the fit's
non-negativity cannot correct, as it corrects the noise in the cells' interactions on a sparse table. The planner
minimises the unbiased reconstruction's expected squared error, in which the total is a small part; after the
non-negative fit it is most of what is left. This measures how much of the gap the total is, two ways:

* ``public total``: the planned release with n published exactly (`--public-total`; a different guarantee, between
  tables of equal n: a reference for what the total costs, not a strategy to compare);
* ``share r``: the default's design with one more block, the total itself, given a share r of the privacy loss (its
  Laplace scale set so that it spends r of epsilon: the plan's whitened sensitivity then holds the total's change of
  one per record, and the calibration is the plan's own, checked below against epsilon), fitted as the default is.

Each point prints the default's mean max-L1 error over the repetitions and each variant's ratio to it, with the
ratio's standard error (delta method over the runs, the runs paired by seed; the variants' noise is not the
default's, since their designs differ). The tables are the frontier's seven, at its model and all-2-way workloads,
and the held-out ICU and Arrests at every two- and three-way margin, at epsilon 0.05, 0.1 and 1. The finding it
supports or not is in the summary lines, computed from the run; nothing is typed in. The variants are not the
default: choosing the share needs to know whether the total's noise is large against n, which only the data tells
(a budget share spent to learn it, as AIM spends one on its first margins, is the next step this benchmark informs).
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

import tabrelease as tr
from tabrelease import frontier
from tabrelease.error_model import total_noise_sd
from tabrelease.measurements import MARGIN_CELLS
from tabrelease.mechanisms import get_mechanism
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.planning import PlannedBlock, canonical_scale
from tabrelease.tables import load_table, margin_counts

HELD_OUT = Path(__file__).parent / "data" / "heldout"
POINTS_TABLES = frontier.FRONTIER_TABLES + tuple(str(HELD_OUT / f"{n}.csv") for n in ("arrests", "icu"))
EPSILONS = (0.05, 0.1, 1.0)
SHARES = (0.05, 0.1, 0.2)
SEED = 20261201


def with_total_share(plan, share: float, epsilon: float):
    """The planned `plan` with the total measured too, at a Laplace scale that spends `share` of epsilon (add-remove
    neighbours: the total changes by one per record, as every other block's row of changes says of its own)."""
    design = plan.design
    if design.public_total or design.neighbours != "add-remove" or design.distribution != "laplace":
        raise SystemExit("the share is defined here for Laplace plans under add-remove neighbours with n not public")
    beta = np.array([b.relative_scale for b in design.blocks])
    rest = float((design.changes / beta).sum(axis=1).max())  # the other blocks' whitened sensitivity
    total = PlannedBlock(MARGIN_CELLS, (), canonical_scale((1 - share) / (share * rest)))  # 1/beta = share/(1-share) rest
    changes = np.column_stack([design.changes, np.ones((design.changes.shape[0], 1))])
    shared = replace(design, blocks=design.blocks + (total,), changes=changes)
    out = get_mechanism("planned").rescale(replace(plan, design=shared), epsilon)
    # The calibration spends epsilon in all, share of it on the total.
    sensitivity = shared.whitened_sensitivity()
    assert abs(sensitivity / out.calibration.scale - epsilon) < 1e-9 * epsilon
    assert abs((1 / total.relative_scale) / sensitivity - share) < 1e-6
    return out


def _max_l1(release, truth) -> float:
    return max(float(np.abs(np.asarray(m, float) - t).sum()) for m, t in zip(release.released_margins, truth))


def point(args) -> dict:
    name, workload, epsilon, repetitions = args
    table = load_table(name)
    margins = frontier.workload_margins(table, workload)
    truth = [margin_counts(table.counts, g) for g in margins]
    planned = frontier.plan_strategy(frontier.strategy("planned"), table, margins, epsilon)
    public = frontier.plan_strategy(frontier.Strategy("public", frontier._spec("planned", options={"public_total": True}),
                                                      0), table, margins, epsilon)
    plans = {"default": planned, "public total": public,
             **{f"share {s:g}": with_total_share(planned, s, epsilon) for s in SHARES}}
    errors = {k: [] for k in plans}
    for rep in range(repetitions):
        for k, plan in plans.items():
            errors[k].append(_max_l1(run_plan(plan, table.counts, SimulationNoise(SEED + 1000 * rep)), truth))
    return {"table": Path(name).stem, "workload": workload, "epsilon": epsilon, "n": table.n,
            "cells": int(np.prod(table.shape)), "sd_over_n": total_noise_sd(planned) / table.n,
            "errors": {k: np.array(v) for k, v in errors.items()}}


def ratio_and_se(variant: np.ndarray, default: np.ndarray) -> tuple[float, float]:
    """mean(variant) / mean(default) and its standard error by the delta method over paired runs."""
    a, b = variant.mean(), default.mean()
    r = a / b
    cov = np.cov(variant, default, ddof=1)
    var = (cov[0, 0] / a**2 + cov[1, 1] / b**2 - 2 * cov[0, 1] / (a * b)) * r**2 / len(variant)
    return float(r), float(np.sqrt(max(var, 0.0)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    tasks = []
    for t in POINTS_TABLES:
        table = load_table(t)
        workloads = frontier.WORKLOADS if table.metadata and table.metadata.get("model") else (
            frontier.ALL_TWO_WAY, frontier.ALL_THREE_WAY)
        seen = set()
        for w in workloads:
            key = tuple(map(tuple, frontier.workload_margins(table, w)))
            if key in seen:  # a model of every two-way margin: the same point
                continue
            seen.add(key)
            tasks += [(t, w, e, args.repetitions) for e in EPSILONS]
    with ProcessPoolExecutor(args.jobs) as pool:
        found = list(pool.map(point, tasks))
    seconds = time.perf_counter() - start
    variants = ["public total"] + [f"share {s:g}" for s in SHARES]
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; {args.repetitions} "
          f"runs a point (seeded, paired across variants), {len(found)} points; {seconds:.0f} s on {args.jobs} "
          "processes")
    print(f"{'table':<16} {'workload':<10} {'eps':>5} {'cells':>6} {'n':>6} {'sd/n':>6} {'default':>9}  "
          + "  ".join(f"{v:>17}" for v in variants))
    table_rows = []
    for r in found:
        default = r["errors"]["default"]
        cells = []
        for v in variants:
            ratio, se = ratio_and_se(r["errors"][v], default)
            cells.append((ratio, se))
        table_rows.append((r, cells))
        print(f"{r['table']:<16} {r['workload']:<10} {r['epsilon']:>5g} {r['cells']:>6} {r['n']:>6} "
              f"{r['sd_over_n']:>6.2f} {default.mean():>9.1f}  "
              + "  ".join(f"{ratio:>9.3f} ({se:.3f})" for ratio, se in cells))
    print()
    for i, v in enumerate(variants):
        ratios = np.array([cells[i][0] for _, cells in table_rows])
        ses = np.array([cells[i][1] for _, cells in table_rows])
        better = [(r, c[i]) for r, c in table_rows if c[i][0] + 2 * c[i][1] < 1]
        worse = sum(1 for _, c in table_rows if c[i][0] - 2 * c[i][1] > 1)
        print(f"{v}: ratio to the default median {np.median(ratios):.3f}, range {ratios.min():.3f} to "
              f"{ratios.max():.3f}; below 1 by more than twice its standard error at {len(better)} of "
              f"{len(table_rows)} points, above at {worse} (standard error median {np.median(ses):.3f})")
        for r, (ratio, se) in better:
            print(f"    {r['table']} {r['workload']} eps {r['epsilon']:g}: {ratio:.3f} (se {se:.3f}), the default's "
                  f"total noise sd / n {r['sd_over_n']:.2f}")


if __name__ == "__main__":
    main()
