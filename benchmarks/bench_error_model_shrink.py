"""A candidate for the audit's world, measured against the audit as it is, release by release: the released margins
shrunk toward the fit of their own sub-margins before the world is built. An experiment; the audit does not do it.

    python benchmarks/bench_error_model_shrink.py [--releases N] [--jobs J] > reports/benchmarks/error_model_shrink.txt

Why: the validation (`benchmarks/bench_error_model.py`) misses where the audit's world, built on the released
margins, is sparser or smoother than the truth because of the noise in those margins (Rochdale's two-way margins at
epsilon 0.05 and 0.1; journey to work's coverage at epsilon 0.05 and 0.1; `bench_error_model_misses.py`: with the
truth's margins the misses go). The candidate shrinks each released margin toward the lower-order model's (the
fit, by IPF, of the released table's margins over every margin's subsets one variable smaller; the uniform table
where the margins are one-way), by a James-Stein share: keep = max(0, 1 - D0 / D), D the sum over the plan's margins
of the squared departure of the released margins from the lower-order fit's, D0 its mean over K releases of the
lower-order fit itself (rounded at random, released by the plan without rounding, each refitted): the departure the
noise alone makes. The world is then built as the audit builds it (`error_model._unrounded_world`), on the table
q + keep (released - q), q the lower-order fit; everything else in the audit is unchanged.

Per point, N default releases of the true table (the validation's seeds, 1000 r + 7), each audited both ways
(`error_model.released_table_errors`, the candidate by replacing the world), against 300 further releases of the
true table for the realised mean (the stream SimulationNoise(7_000_001)): realised / stated mean L1 and the stated
95% quantile's coverage of each release's own error, both ways on the same releases (so their difference is
measured more precisely than either; the standard error printed beside the change is that of the mean over releases
of each release's own change of realised / its stated mean), the mean keep share, and each margin's realised / stated
range. Every figure
is computed by this run.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tabrelease as tr
from tabrelease import error_model as em
from tabrelease import frontier
from tabrelease.loglinear.ipf import ipf_to_margins
from tabrelease.models import maximal_margins
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.planner import with_post_processing
from tabrelease.tables import margin_counts
from tabrelease.testing import plan_at

POINTS = (("rochdale", "all-2-way", 0.05), ("rochdale", "all-2-way", 0.1), ("journey_to_work", "model", 0.05),
          ("journey_to_work", "model", 0.1), ("edwards", "all-2-way", 0.1), ("czech", "all-2-way", 0.05))
NOISE_RELEASES = 8  # K: releases of the lower-order fit for the departure the noise alone makes
TRUTH_RUNS = 300


def lower_order_fit(plan, counts: np.ndarray) -> np.ndarray:
    """The IPF fit of `counts`' margins over each plan margin's subsets one variable smaller (uniform where none)."""
    generators = list(maximal_margins(s for g in plan.margins for s in itertools.combinations(sorted(g), len(g) - 1)
                                      if s)[0])
    if not generators:
        return np.full(counts.shape, counts.sum() / counts.size)
    fitted, _, _ = ipf_to_margins([margin_counts(counts, g) for g in generators], generators, counts.shape, tol=1e-3,
                                  max_iter=em.WORLD_IPF_CYCLES)
    return fitted


def departure(plan, counts: np.ndarray) -> tuple[float, np.ndarray]:
    """The squared departure of `counts`' margins from the lower-order fit's, and that fit."""
    lower = lower_order_fit(plan, counts)
    return sum(float(((margin_counts(counts, g) - margin_counts(lower, g)) ** 2).sum()) for g in plan.margins), lower


def shrunk_world(plan, released: np.ndarray, seed: int) -> tuple[np.ndarray, float]:
    """The candidate world (before its rounding) and the keep share."""
    released = np.asarray(released, float)
    observed, lower = departure(plan, released)
    bare = with_post_processing(plan, rounding="none")
    rng = np.random.default_rng([seed, 5])
    noise_only = [departure(plan, np.asarray(run_plan(bare, em._rounded_at_random(lower, rng),
                                                      SimulationNoise(seed=seed + k)).table, float))[0]
                  for k in range(NOISE_RELEASES)]
    keep = max(0.0, 1.0 - float(np.mean(noise_only)) / observed) if observed > 0 else 0.0
    return em._unrounded_world(plan, lower + keep * (released - lower))[0], keep


def point(args) -> dict:
    name, workload, epsilon, releases = args
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    truth = [table.margin_counts(g) for g in plan.margins]

    def errors(release):
        return np.array([np.abs(np.asarray(m, float) - t).sum() for m, t in zip(release.released_margins, truth)])

    noise = SimulationNoise(seed=7_000_001)
    realised = np.array([errors(run_plan(plan, table.counts, noise)) for _ in range(TRUTH_RUNS)])
    as_is, candidate, covered_as_is, covered_candidate, keeps = [], [], [], [], []
    unrounded_world = em._unrounded_world
    for r in range(releases):
        release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
        own = errors(release)
        found, _ = em.released_table_errors(release)
        world, keep = shrunk_world(plan, release.table, seed=em.audit_seed(plan, release.table) + 101)
        em._unrounded_world = lambda plan, table, world=world: (world, "the candidate world")
        try:
            shrunk, _ = em.released_table_errors(release)
        finally:
            em._unrounded_world = unrounded_world
        keeps.append(keep)
        for found_, stated, covered in ((found, as_is, covered_as_is), (shrunk, candidate, covered_candidate)):
            stated.append([found_.mean_l1[g] for g in plan.margins])
            covered.append(own <= np.array([found_.quantile_l1[g] for g in plan.margins]))
    as_is, candidate = np.array(as_is), np.array(candidate)
    paired = realised.mean() / candidate.mean(axis=1) - realised.mean() / as_is.mean(axis=1)
    return {"point": f"{name} {workload} {epsilon:g}", "releases": releases, "keep": float(np.mean(keeps)),
            "as_is": float(realised.mean() / as_is.mean()), "candidate": float(realised.mean() / candidate.mean()),
            "change_se": float(paired.std(ddof=1) / np.sqrt(releases)),
            "cover_as_is": float(np.mean(covered_as_is)), "cover_candidate": float(np.mean(covered_candidate)),
            "margins_as_is": realised.mean(axis=0) / as_is.mean(axis=0),
            "margins_candidate": realised.mean(axis=0) / candidate.mean(axis=0)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        found = list(pool.map(point, [(*p, args.releases) for p in POINTS]))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; per point "
          f"{args.releases} default releases audited as the audit does and with the candidate world (K = "
          f"{NOISE_RELEASES}), {TRUTH_RUNS} further releases for the realised mean; "
          f"{time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'point':<30} {'keep':>6} {'realised/stated as is':>22} {'candidate':>10} {'change (se)':>14} "
          f"{'coverage as is':>15} {'candidate':>10}  by margin as is / candidate")
    for r in found:
        change = r["candidate"] - r["as_is"]
        print(f"{r['point']:<30} {r['keep']:>6.3f} {r['as_is']:>22.3f} {r['candidate']:>10.3f} "
              f"{change:>+7.3f} ({r['change_se']:.3f}) {r['cover_as_is']:>15.1%} {r['cover_candidate']:>10.1%}  "
              f"{r['margins_as_is'].min():.3f}-{r['margins_as_is'].max():.3f} / "
              f"{r['margins_candidate'].min():.3f}-{r['margins_candidate'].max():.3f}")


if __name__ == "__main__":
    main()
