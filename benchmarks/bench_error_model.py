"""Does the audit's simulated error describe the realised error? Realised / stated, and the quantile's coverage.

    python benchmarks/bench_error_model.py [--releases N] [--truth-runs M] [--jobs J] [--ratio-se S] \
        [--most-releases K] > reports/benchmarks/error_model.txt

For each frontier table, workload (the model's margins; every two-way margin) and epsilon, the default release is
drawn from the true table (seeded simulation noise, rounding as released):

* N releases with the audit's figures, computed as the audit computes them: seeded releases by the same plan of
  the released margins' world, each run's world of a total the truth's may have had given the release's total
  (`error_model.released_table_errors`, `error_model.released_world`), in as many batches of 60 as a first batch
  estimates make the runs' mean known to 3% (`error_model.audit_batches`). Their mean is the stated mean L1 error
  of a margin, their quantile (`error_model.upper_order_statistic`: the 58th smallest of 60, the 286th of 300) the
  stated 95% quantile;
* M further releases of the true table, without the audit (a release is cheap, its audit is not): the realised mean
  L1 error of each margin.

Per point it prints:

* realised / stated mean L1 (means over releases and margins) with the ratio's standard error (delta method, a
  release's mean over margins as the unit; numerator and denominator from different releases, so independent). Each
  release's audit seeds its runs from its released table (`error_model.audit_seed`), so the audits' own Monte Carlo
  error varies from release to release and the standard errors take it in. At small epsilon one
  release's error varies so much that the audited releases alone would estimate the realised mean no better than
  the target's width (Edwards, 70 records): hence the M. Where the first N releases leave the ratio's standard
  error above S (0.02), the point takes as many more as would make it about S, at most K in all (400), and M
  grows in proportion (`releases_wanted`: the count is set once from the first releases' standard error, not by
  where the ratio lies against the band; the bias it can add is about 0.001, in a reviewer's scratch simulation).
  With 50 releases at every point, Edwards' ratios at epsilon 0.05 had standard errors about half the band's
  half-width, too wide to tell a miss of the band from the releases' luck (`git show
  54b4f96:reports/benchmarks/error_model.txt`);
* the same ratio for the plan's unbiased expected L1 (before non-negativity);
* coverage: the share of the N releases' (release, margin) pairs whose realised error is at most the stated 95%
  quantile, with its standard error (a release's share as the unit); a simulation that described the realised
  error exactly would cover k / (runs + 1) in expectation (58 / 61 = 95.1% at 60 runs) were the errors
  continuous: rounded, they are integers, a realised error equal to the quantile is covered, and the coverage of a
  true quantile exceeds that where a margin errs by a few counts (large epsilon);
* the audit's runs (their median over the N releases);
* each margin's own realised / stated mean, the lowest and highest of the point's margins ("margins");
* the plan's union-bound quantile's coverage.

The targets (issue "best release"): realised / stated within 0.9-1.1 at every point; coverage 93-97%. Points whose
workloads are the same margins (a model of every two-way margin) are computed once and printed under both. Every
figure here is computed by this run; nothing is typed in.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from math import ceil
from pathlib import Path

import numpy as np
from scipy.stats import norm

import tabrelease as tr
from tabrelease import frontier
from tabrelease.error_model import AUDIT_RUNS, MEAN_RELATIVE_SE, released_table_errors, upper_order_statistic
from tabrelease.mechanisms import get_mechanism
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.testing import plan_at

RATIO_TARGET = (0.9, 1.1)
COVERAGE_TARGET = (0.93, 0.97)
# Where the first releases leave realised / stated with a standard error above RATIO_SE, the point takes more
# (`releases_wanted`), at most MOST_RELEASES: a fifth of the target's half-width, so that a point's ratio is known
# to well within the band.
RATIO_SE = 0.02
MOST_RELEASES = 400


def _errors(release, truth) -> list[float]:
    return [float(np.abs(np.asarray(m, float) - t).sum()) for m, t in zip(release.released_margins, truth)]


def _ratio_and_se(realised: np.ndarray, stated: np.ndarray) -> tuple[float, float]:
    """Realised / stated mean L1 (means over releases and margins) and its standard error (delta method, a release's
    mean over margins the unit; numerator and denominator from different releases, so independent)."""
    per_release_real, per_release_stated = realised.mean(axis=1), stated.mean(axis=1)
    real_mean, stated_mean = per_release_real.mean(), per_release_stated.mean()
    ratio = real_mean / stated_mean
    return float(ratio), float(ratio * np.hypot(per_release_real.std(ddof=1) / np.sqrt(len(realised)) / real_mean,
                                                per_release_stated.std(ddof=1) / np.sqrt(len(stated)) / stated_mean))


def releases_wanted(releases: int, ratio_se: float, target_se: float, most: int) -> int:
    """How many audited releases would make the ratio's standard error about `target_se`, were the first `releases`'
    spread to hold (it falls as one over the square root of the releases): at least `releases`, at most
    max(`most`, `releases`); `releases` where `target_se` is not positive.

    The count is set once, from the first releases' standard error, and never from where the ratio lies against the
    target band: it is not a rule that stops when the ratio comes inside. The standard error is the ratio times its
    relative standard errors, so the count does move with the first releases' ratio and spreads; a scratch
    simulation (a reviewer's, lognormal errors) put the bias that can add to the ratio at about 0.001, against
    standard errors of 0.02-0.03. Where the errors are heavy-tailed the first releases understate their spread, and
    the final standard error stays above `target_se` (Edwards at epsilon 0.05: 0.026 after 268 releases)."""
    if target_se <= 0 or ratio_se <= target_se:
        return releases
    return int(max(releases, min(most, ceil(releases * (ratio_se / target_se) ** 2))))


# The frontier's workloads, every three-way margin among them (for the held-out tables, which have no default model:
# `bench_error_model_heldout.py`); kept under these names for the benchmarks that import them from here.
ALL_THREE_WAY = frontier.ALL_THREE_WAY
workload_margins = frontier.workload_margins


def covered_at_random(error: float, quantile: float, below: int, tied: int, k: int) -> float:
    """The probability that a realised `error` comes at or before the `k`-th smallest of the runs' errors
    (`quantile`; `below` runs err less, `tied` as much) when ties are put in random order: 1 below the quantile, 0
    above it, and, equal to it, j / (tied + 1) with j = k - below the quantile's place among the tied runs. For a
    simulation that describes the realised error exactly, the realised error and the runs are exchangeable and its
    rank among them, ties at random, is uniform: the expectation is k / (runs + 1) however discrete the errors
    (rounded releases err by integers, and a realised error equal to the quantile is often covered)."""
    if error < quantile:
        return 1.0
    if error > quantile:
        return 0.0
    return (k - below) / (tied + 1)


def point(args) -> dict:
    name, workload, epsilon, releases, truth_runs = args[:5]
    target_se, most = args[5:7] if len(args) > 5 else (0.0, releases)  # no target: the first releases only
    table = tr.load_table(name)  # a built-in table's name, or a held-out table's path
    margins = workload_margins(table, workload)
    plan = plan_at(table.shape, margins, epsilon)
    planned = get_mechanism("planned").expected_errors(plan)
    truth = [table.margin_counts(g) for g in plan.margins]
    audited, stated, quantile, covered_union, runs, further, covered_random = [], [], [], [], [], [], []
    noise = SimulationNoise(seed=7_000_001)  # one stream for the further releases (the audited used 1000 r + 7)

    def audit(first: int, last: int, truth_runs: int) -> None:
        for r in range(first, last):
            release = run_plan(plan, table.counts, SimulationNoise(seed=1000 * r + 7))
            found, note = released_table_errors(release, level=0.95)
            if found is None:
                raise SystemExit(f"{name}: {note}")
            errors = _errors(release, truth)
            audited.append(errors)
            runs.append(found.runs)
            stated.append([found.mean_l1[g] for g in plan.margins])
            quantile.append([found.quantile_l1[g] for g in plan.margins])
            # The coverage with a tie at the quantile counted at random (`covered_at_random`).
            covered_random.append([covered_at_random(e, found.quantile_l1[g], *found.ties[g], found.order_statistic)
                                   for e, g in zip(errors, plan.margins)])
            covered_union.append([e <= planned[g].l1_quantile(0.05) for e, g in zip(errors, plan.margins)])
        further.extend(_errors(run_plan(plan, table.counts, noise), truth) for _ in range(truth_runs - len(further)))

    audit(0, releases, truth_runs)
    # Where the first releases leave the ratio imprecise (a small table at small epsilon, whose error varies most
    # from release to release), more: as many as the standard error alone asks for, the further releases of the true
    # table growing in proportion, so that the realised mean's share of the standard error stays as small.
    _, first_se = _ratio_and_se(np.array(further) if further else np.array(audited), np.array(stated))
    wanted = releases_wanted(releases, first_se, target_se, most)
    if wanted > releases:
        audit(releases, wanted, ceil(truth_runs * wanted / releases))
    releases = wanted
    audited, stated, quantile = np.array(audited), np.array(stated), np.array(quantile)
    realised = np.array(further) if further else audited
    ratio, ratio_se = _ratio_and_se(realised, stated)
    real_mean = realised.mean()
    covered = audited <= quantile
    unbiased = np.mean([planned[g].expected_l1 for g in plan.margins])
    # Each margin's own realised / stated mean: a point's ratio averages its margins, and can hide one margin the
    # audit understates behind others it overstates.
    by_margin = realised.mean(axis=0) / stated.mean(axis=0)
    by_margin_se = by_margin * np.hypot(realised.std(axis=0, ddof=1) / np.sqrt(len(realised)) / realised.mean(axis=0),
                                        stated.std(axis=0, ddof=1) / np.sqrt(releases) / stated.mean(axis=0))
    return {"table": name, "workload": workload, "epsilon": epsilon, "ratio": ratio,
            "ratio_se": ratio_se, "ratio_unbiased": float(real_mean / unbiased),
            "coverage": float(covered.mean()),
            "coverage_se": float(covered.mean(axis=1).std(ddof=1) / np.sqrt(releases)),
            "coverage_random": float(np.mean(covered_random)),
            "coverage_random_se": float(np.mean(covered_random, axis=1).std(ddof=1) / np.sqrt(releases)),
            "by_margin": [float(v) for v in by_margin], "by_margin_se": [float(v) for v in by_margin_se],
            "coverage_union": float(np.mean(covered_union)), "pairs": audited.size, "releases": releases,
            "realised_runs": len(realised),
            "audit_runs": runs, "expected_coverage": float(np.mean([upper_order_statistic(n, 0.95) / (n + 1)
                                                                    for n in runs]))}


def _tasks(releases: int, truth_runs: int, epsilons=frontier.EPSILONS, more: tuple = (), *,
           tables=frontier.FRONTIER_TABLES, workloads=frontier.WORKLOADS):
    """The distinct points (each task's arguments: table, workload, epsilon, releases, further releases, then
    `more`), and for each printed (table, workload, epsilon) the distinct point it is."""
    tasks, rows, seen = [], [], {}
    for t in tables:
        table = tr.load_table(t)
        for w in workloads:
            key = (t, tuple(map(tuple, workload_margins(table, w))))
            first = seen.setdefault(key, w)
            for e in epsilons:
                if first == w:
                    tasks.append((t, w, e, releases, truth_runs, *more))
                rows.append(((t, w, e), (t, first, e)))
    return tasks, rows


def run_points(point, epsilons=frontier.EPSILONS, *, more_releases: bool = False, tables=frontier.FRONTIER_TABLES,
               workloads=frontier.WORKLOADS):
    """Parse the command line (--releases, --truth-runs, --jobs; with `more_releases`, --ratio-se and
    --most-releases too, passed on to each task), compute `point` at every distinct point of `tables` (built-in
    names or paths) and `workloads` in processes: the arguments, the distinct points' results by (table, workload,
    epsilon), the printed rows (each with the distinct point it is) and the seconds taken."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--releases", type=int, default=50)
    parser.add_argument("--truth-runs", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=2)
    if more_releases:
        parser.add_argument("--ratio-se", type=float, default=RATIO_SE)
        parser.add_argument("--most-releases", type=int, default=MOST_RELEASES)
    args = parser.parse_args()
    start = time.perf_counter()
    more = (args.ratio_se, args.most_releases) if more_releases else ()
    tasks, rows = _tasks(args.releases, args.truth_runs, epsilons, more, tables=tables, workloads=workloads)
    with ProcessPoolExecutor(args.jobs) as pool:
        found = {(r["table"], r["workload"], r["epsilon"]): r for r in pool.map(point, tasks)}
    return args, found, rows, time.perf_counter() - start


def main() -> None:
    args, found, rows, seconds = run_points(point, more_releases=True)
    print(header(args, len(found), seconds))
    print_points(found, rows)


def header(args, distinct: int, seconds: float, *, tables: str = "") -> str:
    """The output's first line: the run's versions, its releases and audits, its points (`tables`, where given, says
    which tables) and its time."""
    return (f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; {tables}per "
            f"point {args.releases} default releases (more where realised / stated's standard error was above "
            f"{args.ratio_se:g}: as many as make it about that, at most {args.most_releases}; the 'releases' column) "
            f"each with the audit's simulation (releases of the released margins' world, each run's of a total the "
            f"truth's may have had given the release's total, in as many batches of {AUDIT_RUNS} as a first batch "
            f"estimates make the runs' mean known to {MEAN_RELATIVE_SE:.0%}), and {args.truth_runs} further releases "
            f"of the true table for the realised error (as many more in proportion where the point took more "
            f"releases); {distinct} distinct points; {seconds:.0f} s on {args.jobs} processes")


def print_points(found: dict, rows: list) -> None:
    """The validation's rows, one per printed point (a table by its name, or a held-out table's path by its file's
    stem), then its summary over the distinct points."""
    print(f"{'table':<16} {'workload':<10} {'eps':>5} {'realised/stated':>16} {'(se)':>7} {'realised/unbiased':>18} "
          f"{'coverage':>9} {'(se)':>6} {'ties rand':>9} {'union cover':>12} {'audit runs':>11} {'releases':>9} "
          f"{'margins':>8}")
    for (t, w, e), source in rows:
        r = found[source]
        same = "" if source[1] == w else f"  (the same margins as {source[1]})"
        print(f"{Path(t).stem:<16} {w:<10} {e:>5g} {r['ratio']:>16.3f} {r['ratio_se']:>7.3f} "
              f"{r['ratio_unbiased']:>18.3f} {r['coverage']:>9.1%} {r['coverage_se']:>6.1%} "
              f"{r['coverage_random']:>9.1%} "
              f"{r['coverage_union']:>12.1%} {int(np.median(r['audit_runs'])):>11} {r['releases']:>9} "
              f"{min(r['by_margin']):>5.3f}-{max(r['by_margin']):.3f}{same}")
    distinct = list(found.values())
    ratios = np.array([r["ratio"] for r in distinct])
    se = np.array([r["ratio_se"] for r in distinct])
    unbiased = np.array([r["ratio_unbiased"] for r in distinct])
    pairs = np.array([r["pairs"] for r in distinct])
    low, high = RATIO_TARGET
    inside = int(np.sum((ratios >= low) & (ratios <= high)))
    # Outside by more than twice its standard error: a point whose ratio sits at the edge of the target is, by chance
    # alone, one time in 44 (a screen, not a test; the points share their seeds).
    clearly_out = [r for r in distinct
                   if r["ratio"] + 2 * r["ratio_se"] < low or r["ratio"] - 2 * r["ratio_se"] > high]
    print()
    print(f"over the {len(distinct)} distinct points:")
    print(f"realised / stated (simulated) mean L1: median {np.median(ratios):.3f}, range {ratios.min():.3f} to "
          f"{ratios.max():.3f}; within {low:g}-{high:g} at {inside} of {len(distinct)} points; standard error "
          f"median {np.median(se):.3f}, largest {se.max():.3f}")
    print(f"  outside {low:g}-{high:g} by more than twice the standard error at {len(clearly_out)} points"
          + "".join(f"\n    {Path(r['table']).stem} {r['workload']} eps {r['epsilon']:g}: {r['ratio']:.3f} "
                    f"(se {r['ratio_se']:.3f})" for r in clearly_out))
    margins = np.concatenate([r["by_margin"] for r in distinct])
    margins_se = np.concatenate([r["by_margin_se"] for r in distinct])
    print(f"  by margin (each margin's realised / stated mean, the 'margins' column): within {low:g}-{high:g} for "
          f"{int(np.sum((margins >= low) & (margins <= high)))} of {len(margins)} (point, margin) pairs, range "
          f"{margins.min():.3f} to {margins.max():.3f}; outside by more than twice its standard error for "
          f"{int(np.sum((margins + 2 * margins_se < low) | (margins - 2 * margins_se > high)))}")
    print(f"realised / the plan's unbiased expected L1: median {np.median(unbiased):.3f}, range {unbiased.min():.3f} "
          f"to {unbiased.max():.3f}")
    coverage = float(np.sum([r["coverage"] * r["pairs"] for r in distinct]) / pairs.sum())
    union = float(np.sum([r["coverage_union"] * r["pairs"] for r in distinct]) / pairs.sum())
    cover = np.array([r["coverage"] for r in distinct])
    lo_c, hi_c = COVERAGE_TARGET
    print(f"95% quantile coverage over all (release, margin) pairs: {coverage:.1%} (per point {cover.min():.0%} to "
          f"{cover.max():.0%}); the plan's union bound {union:.1%}")
    inside_c = int(np.sum((cover >= lo_c) & (cover <= hi_c)))
    clearly_c = sum(1 for r in distinct if r["coverage"] + 2 * r["coverage_se"] < lo_c
                    or r["coverage"] - 2 * r["coverage_se"] > hi_c)
    print(f"  within {lo_c:.0%}-{hi_c:.0%} at {inside_c} of {len(distinct)} points; outside by more than twice its "
          f"standard error at {clearly_c}; a simulation describing the realised error exactly covers "
          f"{np.sum([r['expected_coverage'] * r['pairs'] for r in distinct]) / pairs.sum():.1%} in expectation "
          "(k / (runs + 1), over the audits)")
    # The same with a tie at the quantile counted at random (`covered_at_random`): k / (runs + 1) is then exact
    # however discrete the errors (the 'ties rand' column).
    at_random = np.array([r["coverage_random"] for r in distinct])
    clearly_r = sum(1 for r in distinct if r["coverage_random"] + 2 * r["coverage_random_se"] < lo_c
                    or r["coverage_random"] - 2 * r["coverage_random_se"] > hi_c)
    print(f"  a tie at the quantile counted at random: {float(np.sum(at_random * pairs) / pairs.sum()):.1%} pooled; "
          f"within {lo_c:.0%}-{hi_c:.0%} at {int(np.sum((at_random >= lo_c) & (at_random <= hi_c)))} of "
          f"{len(distinct)} points; outside by more than twice its standard error at {clearly_r}")
    # What a simulation describing the realised error exactly would score per point: a point's coverage is an
    # estimate from N releases, so even such a simulation misses the band at some points. Its coverage of a (release,
    # margin) pair is p = k / (runs + 1); a point's share over N releases of m margins has standard deviation between
    # sqrt(p (1 - p) / (N m)) (the margins of a release err independently) and sqrt(p (1 - p) / N) (all alike), and
    # is measured at each point (which takes in how alike its margins err; where that is 0, every release covering
    # every margin, the all-alike bound's). Normal approximation; the points independent.
    def within_band(r, sd: float) -> float:
        p = r["expected_coverage"]
        return float(norm.cdf((hi_c - p) / sd) - norm.cdf((lo_c - p) / sd))

    def binomial_sd(r, draws: int) -> float:
        return float(np.sqrt(r["expected_coverage"] * (1 - r["expected_coverage"]) / draws))

    alike = sum(within_band(r, binomial_sd(r, r["releases"])) for r in distinct)
    independent = sum(within_band(r, binomial_sd(r, r["pairs"])) for r in distinct)
    print(f"  such a simulation would be within {lo_c:.0%}-{hi_c:.0%} at {alike:.1f} to {independent:.1f} of "
          f"{len(distinct)} points in expectation (normal approximation; a release's margins erring all alike, or "
          "independently)")
    chances = np.array([within_band(r, r["coverage_se"] if r["coverage_se"] > 0 else binomial_sd(r, r["releases"]))
                        for r in distinct])
    print(f"  at each point's measured standard error: {chances.sum():.1f} of {len(distinct)} in expectation, "
          f"standard deviation {np.sqrt(np.sum(chances * (1 - chances))):.1f}")

if __name__ == "__main__":
    main()
