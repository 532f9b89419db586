"""The audit's world with and without its correction for the non-negative fit's bias, release by release
(`error_model.corrected_for_the_fits_bias`): the world's margins moved, in 3 rounds, by the released margins less the
mean margins of 8 releases of it, as the audit does since stop 49, against the world without that step.

    python benchmarks/bench_error_model_bias.py [--releases N] [--jobs J] > reports/benchmarks/error_model_bias.txt

Why: a non-negative fit with its total pinned biases an empty or small cell up and a dense one down, so the released
margins are flatter than the truth's, and a world built on them is too; where the validation
(`benchmarks/bench_error_model.py`) missed most (Rochdale's two-way margins at epsilon 0.05 and 0.1), the audit
understated the error. Per point, N default releases of the true table (the validation's seeds, 1000 r + 7), each
audited both ways (`error_model.released_table_errors`; without the correction by replacing it with the world as it
is), against 300 further releases of the true table for the realised mean (the stream SimulationNoise(7_000_001)):
realised / stated mean L1 and the stated 95% quantile's coverage of each release's own error, both ways on the same
releases (so their difference is measured more precisely than either; the standard error printed beside the change
is that of the mean over releases of each release's own change of realised / its stated mean), and each margin's
realised / stated range. Every figure is computed by this run.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tabrelease as tr
from tabrelease import error_model as em
from tabrelease import frontier
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.testing import plan_at

POINTS = (("rochdale", "all-2-way", 0.05), ("rochdale", "all-2-way", 0.1), ("journey_to_work", "model", 0.05),
          ("journey_to_work", "model", 0.1), ("edwards", "all-2-way", 0.05), ("edwards", "all-2-way", 0.1),
          ("czech", "all-2-way", 0.05))
TRUTH_RUNS = 300


def point(args) -> dict:
    name, workload, epsilon, releases = args
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    truth = [table.margin_counts(g) for g in plan.margins]

    def errors(release):
        return np.array([np.abs(np.asarray(m, float) - t).sum() for m, t in zip(release.released_margins, truth)])

    noise = SimulationNoise(seed=7_000_001)
    realised = np.array([errors(run_plan(plan, table.counts, noise)) for _ in range(TRUTH_RUNS)])
    as_is, candidate, covered_as_is, covered_candidate = [], [], [], []
    corrected = em.corrected_for_the_fits_bias
    for r in range(releases):
        release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
        own = errors(release)
        em.corrected_for_the_fits_bias = lambda plan, world, released, seed: (np.asarray(world, float), None)
        try:
            uncorrected, _ = em.released_table_errors(release)
        finally:
            em.corrected_for_the_fits_bias = corrected
        found, _ = em.released_table_errors(release)
        for found_, stated, covered in ((uncorrected, as_is, covered_as_is), (found, candidate, covered_candidate)):
            stated.append([found_.mean_l1[g] for g in plan.margins])
            covered.append(own <= np.array([found_.quantile_l1[g] for g in plan.margins]))
    as_is, candidate = np.array(as_is), np.array(candidate)
    paired = realised.mean() / candidate.mean(axis=1) - realised.mean() / as_is.mean(axis=1)
    return {"point": f"{name} {workload} {epsilon:g}", "releases": releases,
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
          f"{args.releases} default releases audited without the correction and with it, as the audit does ("
          f"{em.BIAS_ROUNDS} rounds of {em.BIAS_RELEASES} releases), {TRUTH_RUNS} further releases for the realised "
          f"mean; "
          f"{time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print(f"{'point':<30} {'realised/stated uncorrected':>28} {'corrected':>10} {'change (se)':>14} "
          f"{'coverage uncorrected':>21} {'corrected':>10}  by margin uncorrected / corrected")
    for r in found:
        change = r["candidate"] - r["as_is"]
        print(f"{r['point']:<30} {r['as_is']:>28.3f} {r['candidate']:>10.3f} "
              f"{change:>+7.3f} ({r['change_se']:.3f}) {r['cover_as_is']:>21.1%} {r['cover_candidate']:>10.1%}  "
              f"{r['margins_as_is'].min():.3f}-{r['margins_as_is'].max():.3f} / "
              f"{r['margins_candidate'].min():.3f}-{r['margins_candidate'].max():.3f}")


if __name__ == "__main__":
    main()
