"""The audit's 95% quantile's coverage at large epsilon, with a tie at the quantile counted at random.

    python benchmarks/bench_error_model_ties.py [--releases N] [--truth-runs M] [--jobs J] \
        > reports/benchmarks/error_model_ties.txt

Why: the audit's runs round their margins as the release does (`error_model._rounded_like`), so their errors, like a
rounded release's, are integers, and so is the stated quantile (the k-th smallest of the runs' errors). A realised
error equal to it is covered, and at large epsilon, where a margin errs by a few counts, such ties carry much of the
mass: even a simulation that describes the realised error exactly covers more than k / (runs + 1), the validation's
benchmark for a perfect audit (`benchmarks/bench_error_model.py`), which holds for continuous errors. Counting a tie
at random (`bench_error_model.covered_at_random`: a realised error equal to the quantile covered with probability
j / (tied + 1), j the quantile's place among the tied runs) makes k / (runs + 1) exact for any errors. Here, at the
validation's points at epsilon 1 and 2 (its releases, seeds and adaptive release count), both counts side by side.
Every figure is computed by this run.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
from bench_error_model import COVERAGE_TARGET, point, run_points

import tabrelease as tr

EPSILONS = (1.0, 2.0)


def main() -> None:
    args, found, rows, seconds = run_points(point, EPSILONS, more_releases=True)
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; the validation's "
          f"points at epsilon 1 and 2 ({args.releases} releases each, more where its ratio's standard error asked), "
          f"each audited as released; {len(found)} distinct points; {seconds:.0f} s on {args.jobs} processes")
    print(f"{'table':<16} {'workload':<10} {'eps':>4} {'realised/stated':>16} {'coverage':>9} {'(se)':>6} "
          f"{'ties at random':>15} {'(se)':>6} {'k/(runs+1)':>11}")
    for (t, w, e), source in rows:
        r = found[source]
        same = "" if source[1] == w else f"  (the same margins as {source[1]})"
        print(f"{Path(t).stem:<16} {w:<10} {e:>4g} {r['ratio']:>16.3f} {r['coverage']:>9.1%} {r['coverage_se']:>6.1%} "
              f"{r['coverage_random']:>15.1%} {r['coverage_random_se']:>6.1%} {r['expected_coverage']:>11.1%}{same}")
    distinct = list(found.values())
    low, high = COVERAGE_TARGET
    pairs = np.array([r["pairs"] for r in distinct])
    print()
    for key, what in (("coverage", "a tie covered"), ("coverage_random", "a tie counted at random")):
        values = np.array([r[key] for r in distinct])
        pooled = float(np.sum(values * pairs) / pairs.sum())
        print(f"{what}: pooled {pooled:.1%}; within {low:.0%}-{high:.0%} at "
              f"{int(np.sum((values >= low) & (values <= high)))} of {len(distinct)} points (per point "
              f"{values.min():.1%} to {values.max():.1%})")
    print(f"a simulation describing the realised error exactly: "
          f"{np.sum([r['expected_coverage'] * r['pairs'] for r in distinct]) / pairs.sum():.1%} in expectation "
          "(k / (runs + 1); exact with ties counted at random)")


if __name__ == "__main__":
    main()
