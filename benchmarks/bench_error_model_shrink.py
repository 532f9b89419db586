"""The audit's world with and without its shrink toward the lower-order fit, release by release
(`error_model.shrunk_toward_lower_order`): the released margins shrunk toward the fit of their own sub-margins before
the world is built, as the audit does since stop 48, against the world built on the released margins as they are.

    python benchmarks/bench_error_model_shrink.py [--releases N] [--jobs J] > reports/benchmarks/error_model_shrink.txt

Why: the validation (`benchmarks/bench_error_model.py`) missed where the audit's world, built on the released
margins, is sparser or smoother than the truth because of the noise in those margins (Rochdale's two-way margins at
epsilon 0.05 and 0.1; journey to work's coverage at epsilon 0.05 and 0.1; `bench_error_model_misses.py`: with the
truth's margins the misses go). The shrink moves each released margin toward the lower-order model's (the fit, by
IPF, of the released table's margins over every margin's subsets one variable smaller; the uniform table where the
margins are one-way), by a James-Stein share: keep = max(0, 1 - D0 / D), D the sum over the plan's margins of the
squared departure of the released margins from the lower-order fit's, D0 its mean over 8 releases of the lower-order
fit itself (rounded at random, released by the plan without rounding, each refitted): the departure the noise alone
makes. Before it was adopted this benchmark compared it, as a candidate with seeds of its own, against the audit of
the time (`git show 896cb23:reports/benchmarks/error_model_shrink.txt`).

Per point, N default releases of the true table (the validation's seeds, 1000 r + 7), each audited both ways
(`error_model.released_table_errors`; without the shrink by replacing it with the released table as it is), against
300 further releases of the true table for the realised mean (the stream SimulationNoise(7_000_001)): realised /
stated mean L1 and the stated 95% quantile's coverage of each release's own error, both ways on the same releases (so
their difference is measured more precisely than either; the standard error printed beside the change is that of
the mean over releases of each release's own change of realised / its stated mean), the mean keep share, and each
margin's realised / stated range. Every figure is computed by this run. The committed output (304de5d, stop 48) was run
before the world's correction for the fit's bias (stop 49), which a run now makes in both arms;
`benchmarks/bench_error_model_bias.py` compares that step the same way (`paired_audits`).
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
          ("journey_to_work", "model", 0.1), ("edwards", "all-2-way", 0.1), ("czech", "all-2-way", 0.05))
TRUTH_RUNS = 300


def paired_audits(args, step: str, without) -> tuple[dict, list]:
    """One point's N releases (the validation's seeds, 1000 r + 7), each audited with `error_model.<step>` replaced by
    `without` and as the audit does, against TRUTH_RUNS further releases of the true table (the stream
    SimulationNoise(7_000_001)): the comparison's figures (realised / stated both ways, the paired change's standard
    error, coverage both ways, each margin's realised / stated both ways), and the audits as the audit does them."""
    name, workload, epsilon, releases = args
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    truth = [table.margin_counts(g) for g in plan.margins]

    def errors(release):
        return np.array([np.abs(np.asarray(m, float) - t).sum() for m, t in zip(release.released_margins, truth)])

    noise = SimulationNoise(seed=7_000_001)
    realised = np.array([errors(run_plan(plan, table.counts, noise)) for _ in range(TRUTH_RUNS)])
    as_is, candidate, covered_as_is, covered_candidate, audits = [], [], [], [], []
    kept = getattr(em, step)
    for r in range(releases):
        release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
        own = errors(release)
        setattr(em, step, without)
        try:
            without_step, _ = em.released_table_errors(release)
        finally:
            setattr(em, step, kept)
        found, _ = em.released_table_errors(release)
        audits.append(found)
        for found_, stated, covered in ((without_step, as_is, covered_as_is), (found, candidate, covered_candidate)):
            stated.append([found_.mean_l1[g] for g in plan.margins])
            covered.append(own <= np.array([found_.quantile_l1[g] for g in plan.margins]))
    as_is, candidate = np.array(as_is), np.array(candidate)
    paired = realised.mean() / candidate.mean(axis=1) - realised.mean() / as_is.mean(axis=1)
    return {"point": f"{name} {workload} {epsilon:g}", "releases": releases,
            "as_is": float(realised.mean() / as_is.mean()), "candidate": float(realised.mean() / candidate.mean()),
            "change_se": float(paired.std(ddof=1) / np.sqrt(releases)),
            "cover_as_is": float(np.mean(covered_as_is)), "cover_candidate": float(np.mean(covered_candidate)),
            "margins_as_is": realised.mean(axis=0) / as_is.mean(axis=0),
            "margins_candidate": realised.mean(axis=0) / candidate.mean(axis=0)}, audits


def point(args) -> dict:
    found, audits = paired_audits(args, "shrunk_toward_lower_order",
                                  lambda plan, counts: (np.asarray(counts, float), None))
    # The share kept, as the audit states it (shrinking again would repeat its 8 fits).
    found["keep"] = float(np.mean([float(a.reference.split(em.SHRUNK_TOWARD_LOWER_ORDER)[1].split(";")[0])
                                   for a in audits]))
    return found


def run(point, points) -> tuple:
    """Parse --releases and --jobs, compute `point` at each of `points` in processes: the arguments, the results in
    order, the seconds taken."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        found = list(pool.map(point, [(*p, args.releases) for p in points]))
    return args, found, time.perf_counter() - start


def main() -> None:
    args, found, seconds = run(point, POINTS)
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; per point "
          f"{args.releases} default releases audited without the shrink and with it, as the audit does (K = "
          f"{em.SHRINK_RELEASES}), {TRUTH_RUNS} further releases for the realised mean; "
          f"{seconds:.0f} s on {args.jobs} processes")
    print(f"{'point':<30} {'keep':>6} {'realised/stated unshrunk':>25} {'shrunk':>7} {'change (se)':>14} "
          f"{'coverage unshrunk':>18} {'shrunk':>7}  by margin unshrunk / shrunk")
    for r in found:
        change = r["candidate"] - r["as_is"]
        print(f"{r['point']:<30} {r['keep']:>6.3f} {r['as_is']:>25.3f} {r['candidate']:>7.3f} "
              f"{change:>+7.3f} ({r['change_se']:.3f}) {r['cover_as_is']:>18.1%} {r['cover_candidate']:>7.1%}  "
              f"{r['margins_as_is'].min():.3f}-{r['margins_as_is'].max():.3f} / "
              f"{r['margins_candidate'].min():.3f}-{r['margins_candidate'].max():.3f}")


if __name__ == "__main__":
    main()
