"""An experiment: does the fast double bootstrap calibrate the noise-aware model test where the noise weighs most?

    python benchmarks/bench_inference_fdb.py [--tables T] [--epsilons E,E] [--bootstrap B] \
        > reports/inference/fdb.txt

Committed: `reports/inference/fdb.txt` (`--tables 1000 --epsilons 0.5`). Not adopted (see the README).

The coverage study (`bench_inference.py`) finds the plain parametric bootstrap a little liberal on 3x3x4 at epsilon
0.5: the bootstrap world is the model fitted to the released margins, not the truth, and the null distribution of
G² through the release depends on the world (how the noise, the non-negative fit and rounding weigh on its small
cells). The fast double bootstrap (Davidson & MacKinnon, "Improving the reliability of bootstrap tests with the fast
double bootstrap", Computational Statistics & Data Analysis 51, 2007) corrects a bootstrap p-value for the estimated
world at the cost of one more release per replicate: each replicate's released margins are refitted to the model,
one table is drawn from that world and released, and its G² (tau**) is kept. With tau* the first-level replicates'
G² and p* their p-value, the FDB p-value is the share of tau* at or above the (1 - p*) quantile of tau**.

On the coverage study's tables (the same seeds), each table's true model is tested; printed per epsilon: the share
of tables whose p-value is at most 0.05, for the plain bootstrap and the FDB from the very same first-level
replicates (paired), with the share's standard error. Every figure is computed by this run.
"""

from __future__ import annotations

import time

import numpy as np

from bench_inference import SHAPES, experiment_parser, experiment_releases, paired_experiment, released_draws

ALPHA = 0.05


def fdb_p_value(observed: float, first: np.ndarray, second: np.ndarray) -> float:
    """The fast double bootstrap's p-value from the first-level statistics `first` and the second-level ones
    `second` (one per first-level replicate), in the (1 + count) / (1 + B) form of the plain one."""
    from tabrelease.inference import _bootstrap_p_value

    plain = _bootstrap_p_value(observed, first)
    # The critical value whose second-level tail share is the plain p-value: the (1 - p*) quantile of tau**.
    critical = np.quantile(second, min(max(1.0 - plain, 0.0), 1.0), method="inverted_cdf")
    return float((1 + np.sum(first >= critical)) / (len(first) + 1))


def _tables(args) -> list[tuple[float, float]]:
    from tabrelease.inference import _bootstrap_p_value, _model_g2

    found = []
    for e in experiment_releases(args):
        # bench_inference_correction.py's first stage: the same replicates.
        tau, worlds = _model_g2(e.first_stage, e.margins, e.generators, e.plan.shape, 1)
        replicate_totals = np.rint(e.first_stage[0].sum(axis=tuple(range(1, e.first_stage[0].ndim)))).astype(int)
        second_level = released_draws(e.plan, worlds, replicate_totals, np.random.default_rng([e.t, 101]))
        tau2, _ = _model_g2(second_level, e.margins, e.generators, e.plan.shape, 1)
        found.append((_bootstrap_p_value(e.g2, tau), fdb_p_value(e.g2, tau, tau2)))
    return found


def main() -> None:
    parser = experiment_parser()
    parser.add_argument("--shape", type=int, default=1, help="index into bench_inference.SHAPES (1: 3x3x4)")
    args = parser.parse_args()
    start = time.perf_counter()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    rows = [(epsilon, np.mean(found[:, 0] <= ALPHA), np.mean(found[:, 1] <= ALPHA),
             np.mean((found[:, 0] <= ALPHA) != (found[:, 1] <= ALPHA)))
            for epsilon, found in paired_experiment(_tables, args.shape, epsilons, args.tables,
                                                    args.bootstrap).items()]
    name = SHAPES[args.shape][0]
    print(f"{name} (the coverage study's released margins), {args.tables} tables per epsilon (the coverage study's "
          f"first), the true model tested with {args.bootstrap} first-level replicates and as many second-level "
          f"ones; {time.perf_counter() - start:.0f} s on 2 processes")
    se = np.sqrt(ALPHA * (1 - ALPHA) / args.tables)
    print(f"share of tables whose p-value is at most {ALPHA} (a share's standard error at 5%: {se:.1%}):")
    print(f"{'eps':>4} {'plain bootstrap':>16} {'fast double bootstrap':>22} {'tables where they differ':>24}")
    for epsilon, plain, fdb, differ in rows:
        print(f"{epsilon:>4g} {plain:>16.1%} {fdb:>22.1%} {differ:>24.1%}")


if __name__ == "__main__":
    main()
