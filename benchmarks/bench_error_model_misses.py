"""Where the audit's promise misses at small epsilon, which of the things it cannot see decides it: the truth's
total, the truth's margins (the world is built on the released, noisy ones), or the truth's pattern of empty and
dense cells within them.

    python benchmarks/bench_error_model_misses.py [--releases N] [--truth-runs M] [--jobs J] \
        > reports/benchmarks/error_model_misses.txt

The audit (`error_model.released_table_errors`) simulates a release on a world built from the release alone: the
released margins' world (`error_model.released_world`), each run's world of a total the truth's may have had given
the released total. The validation benchmark (`benchmarks/bench_error_model.py`) measures its stated mean L1
against the realised one. Here, at every frontier table and workload at epsilon 0.05 and 0.1 (where it misses), the
same N releases of the true table (the validation's seeds; its first N where the validation took more) are
audited five ways, each stated mean against the realised mean of M further releases of the true table (the
validation's stream):

* ``audit``: the audit as released (its batches), the validation's own column where it took N releases;
* ``true total``: the audit's world (its shape) at the truth's total n, every run (no conditioning on the released
  total): what the audit would state if the release told it n;
* ``true shape``: the truth's own table scaled to the released total, each run's world of a total the truth's may
  have had given the released total, as the audit does: what it would state if the release told it the shape;
* ``true pattern``: the truth's table fitted by IPF to the released margins (started from the truth plus 1e-6 a
  cell, so that a released margin cell over empty true cells can be met), at the released total, each run's world
  of a total the truth's may have had, as the audit does: the released margins, noise and all, with the truth's
  pattern of empty and dense cells within them. ``true shape`` has the truth's margins as well;
* ``truth``: the true table itself at n: what a simulation of the truth states (the simulation's runs are not
  rounded; the realised releases are).

The last four use one batch of 120 runs each (seeded from the release as the audit seeds its own). Each prints
realised / stated (means over releases and margins) with its standard error (as the validation's: delta method, a
release's mean over margins the unit), and the coverage of the release's own realised error by the 95% quantile
stated (the 115th smallest of 120 runs; the audit's own). Also printed: the standard deviation of the plan's noise in
the released total (`error_model.total_noise_sd`, from the plan's scales) over n; the share of the N releases whose
released total is 0 (an all-empty released table, whose world is empty); and the share whose audit says the release
barely tells its total (`error_model.TOTAL_UNCERTAIN`).

The reading: where ``true total`` is near 1 and ``audit`` is not, the release's noisy total decides the miss; where
``true shape`` is and ``true pattern`` is not, the noise in the released margins the world is built on does; where
``true pattern`` is, the pattern of empty and dense cells within them does. None is public:
the attribution needs the truth, which is why it is a benchmark and not a feature. Every figure is computed by this
run.
"""

from __future__ import annotations

import platform

import numpy as np
from bench_error_model import _errors, run_points  # the validation's: its errors, points and command line

import tabrelease as tr
from tabrelease import error_model as em
from tabrelease import frontier
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.testing import plan_at

EPSILONS = (0.05, 0.1)
VARIANT_RUNS = 120
VARIANTS = ("audit", "true total", "true pattern", "true shape", "truth")


def _at_total(plan, fitted: np.ndarray, total: float, *, seed: int) -> np.ndarray:
    """VARIANT_RUNS releases of `fitted`'s shape scaled to `total`, each rounded at random afresh ([seed, 2]), the
    noise from `seed`: the (runs x margins) L1 errors, each against its own world."""
    rng = np.random.default_rng([seed, 2])
    worlds = [em._rounded_at_random(em._shape_of(fitted) * total, rng) for _ in range(VARIANT_RUNS)]
    return em._simulated_runs(plan, worlds, seed=seed, rounded=False)[0]


def _true_pattern(plan, truth: np.ndarray, released: np.ndarray) -> np.ndarray:
    """The truth's table fitted by IPF to the released table's margins over the plan's margins, started from the
    truth plus 1e-6 a cell."""
    from tabrelease.loglinear.ipf import ipf_to_margins
    from tabrelease.tables import margin_counts

    generators = [tuple(sorted(g)) for g in plan.margins]
    targets = [margin_counts(released.astype(float), g) for g in generators]
    fitted, _, _ = ipf_to_margins(targets, generators, truth.shape, start=truth + 1e-6, tol=1e-2,
                                  max_iter=em.WORLD_IPF_CYCLES)
    return fitted


def point(args) -> dict:
    name, workload, epsilon, releases, truth_runs = args
    table = tr.builtin_table(name)
    plan = plan_at(table.shape, frontier.workload_margins(table, workload), epsilon)
    truth = [table.margin_counts(g) for g in plan.margins]
    counts = np.asarray(table.counts)
    n = float(counts.sum())
    k = em.upper_order_statistic(VARIANT_RUNS, 0.95) - 1
    stated = {v: [] for v in VARIANTS}
    covered = {v: [] for v in VARIANTS}
    empty = flagged = 0
    uncertain = em.TOTAL_UNCERTAIN.partition("{")[0]
    for r in range(releases):
        release = run_plan(plan, counts, SimulationNoise(seed=1000 * r + 7))
        own = np.array(_errors(release, truth))
        released = np.asarray(release.table)
        empty += int(released.sum() == 0)
        seed = em.audit_seed(plan, released)
        found, note = em.released_table_errors(release, level=0.95)
        if found is None:
            raise SystemExit(f"{name}: {note}")
        flagged += int(uncertain in found.reference)
        stated["audit"].append([found.mean_l1[g] for g in plan.margins])
        covered["audit"].append(own <= np.array([found.quantile_l1[g] for g in plan.margins]))
        fitted, _ = em._unrounded_world(plan, released)
        runs = {"true total": _at_total(plan, fitted, n, seed=seed + 1),
                "true pattern": em._conditioned_batch(plan, _true_pattern(plan, counts, released),
                                                      runs=VARIANT_RUNS, seed=seed + 7),
                "true shape": em._conditioned_batch(plan, counts * (released.sum() / n), runs=VARIANT_RUNS,
                                                    seed=seed + 3),
                "truth": _at_total(plan, counts.astype(float), n, seed=seed + 5)}
        for v, errors in runs.items():
            stated[v].append(errors.mean(axis=0))
            covered[v].append(own <= np.sort(errors, axis=0)[k])
    noise = SimulationNoise(seed=7_000_001)  # the validation's stream for the realised error
    realised = np.array([_errors(run_plan(plan, counts, noise), truth) for _ in range(truth_runs)]).mean(axis=1)
    ratio, ratio_se = {}, {}
    for v in VARIANTS:
        per_release = np.asarray(stated[v]).mean(axis=1)
        ratio[v] = float(realised.mean() / per_release.mean())
        ratio_se[v] = float(ratio[v] * np.hypot(realised.std(ddof=1) / np.sqrt(len(realised)) / realised.mean(),
                                                per_release.std(ddof=1) / np.sqrt(releases) / per_release.mean()))
    return {"table": name, "workload": workload, "epsilon": epsilon, "n": n,
            "total_sd": em.total_noise_sd(plan), "empty": empty / releases, "flagged": flagged / releases,
            "ratio": ratio, "ratio_se": ratio_se, "coverage": {v: float(np.mean(covered[v])) for v in VARIANTS}}


def main() -> None:
    args, found, rows, seconds = run_points(point, EPSILONS)
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; per point "
          f"{args.releases} default releases (the validation's seeds), each audited as released and stated four "
          f"more ways ({VARIANT_RUNS} runs each), against {args.truth_runs} further releases of the true table; "
          f"{len(found)} distinct points; {seconds:.0f} s on {args.jobs} processes")
    print("realised / stated mean L1 +- its standard error, and [coverage of the release's own error by the stated "
          "95% quantile]; 'flagged': the share of releases whose audit says the release barely tells its total")
    head = "".join(f"{v:>25}" for v in VARIANTS)
    print(f"{'table':<16} {'workload':<10} {'eps':>5} {'sd / n':>7} {'empty':>6} {'flagged':>7}{head}")
    for (t, w, e), source in rows:
        r = found[source]
        cells = "".join(f"{r['ratio'][v]:>9.3f} +-{r['ratio_se'][v]:.3f} [{r['coverage'][v]:>5.1%}]" for v in VARIANTS)
        same = "" if source[1] == w else f"  (the same margins as {source[1]})"
        print(f"{t:<16} {w:<10} {e:>5g} {r['total_sd'] / r['n']:>7.3f} {r['empty']:>6.0%} {r['flagged']:>7.0%}"
              f"{cells}{same}")
    distinct = list(found.values())
    print()
    print(f"over the {len(distinct)} distinct points, realised / stated within 0.9-1.1 at:")
    for v in VARIANTS:
        ratios = np.array([r["ratio"][v] for r in distinct])
        print(f"  {v:<12} {int(np.sum((ratios >= 0.9) & (ratios <= 1.1))):>3} of {len(distinct)} (range "
              f"{ratios.min():.3f} to {ratios.max():.3f}); coverage within 93%-97% at "
              f"{sum(1 for r in distinct if 0.93 <= r['coverage'][v] <= 0.97)}")


if __name__ == "__main__":
    main()
