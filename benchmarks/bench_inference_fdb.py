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

import argparse
import time

import numpy as np

from bench_inference import SHAPES, observed_g2, paired_experiment, replicate_g2, study_releases

ALPHA = 0.05


def fdb_p_value(observed: float, first: np.ndarray, second: np.ndarray) -> float:
    """The fast double bootstrap's p-value from the first-level statistics `first` and the second-level ones
    `second` (one per first-level replicate), in the (1 + count) / (1 + B) form of the plain one."""
    bootstrap = len(first)
    plain = (1 + np.sum(first >= observed)) / (bootstrap + 1)
    # The critical value whose second-level tail share is the plain p-value: the (1 - p*) quantile of tau**.
    critical = np.quantile(second, min(max(1.0 - plain, 0.0), 1.0), method="inverted_cdf")
    return float((1 + np.sum(first >= critical)) / (bootstrap + 1))


def _tables(args) -> list[tuple[float, float]]:
    from tabrelease.inference import _release_chunk

    shape_index, epsilon, first, last, bootstrap = args
    shape, true_model = SHAPES[shape_index][1], SHAPES[shape_index][3]
    generators = tuple(tuple(g) for g in true_model)
    found = []
    for t, plan, _, released in study_releases(shape_index, epsilon, first, last):
        g2, fitted = observed_g2(plan, released, generators)
        total = int(round(float(released[0].sum())))
        draws = np.random.default_rng([t, 99])  # bench_inference_correction.py's first stage: the same replicates
        tables = [draws.multinomial(total, (fitted / fitted.sum()).ravel()).reshape(shape) for _ in range(bootstrap)]
        first_level = _release_chunk(plan, tables, [int(draws.integers(2**62)) for _ in range(bootstrap)])
        tau, worlds = replicate_g2(plan, first_level, generators)
        second_draws = np.random.default_rng([t, 101])
        replicate_totals = np.rint(first_level[0].sum(axis=tuple(range(1, first_level[0].ndim)))).astype(int)
        tables2 = [second_draws.multinomial(m, (w / w.sum()).ravel()).reshape(shape)
                   for m, w in zip(replicate_totals, worlds)]
        second_level = _release_chunk(plan, tables2, [int(second_draws.integers(2**62)) for _ in range(bootstrap)])
        tau2, _ = replicate_g2(plan, second_level, generators)
        observed = g2 - 1e-9 * max(g2, 1.0)
        found.append((float((1 + np.sum(tau >= observed)) / (bootstrap + 1)), fdb_p_value(observed, tau, tau2)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--epsilons", default="0.5,2")
    parser.add_argument("--bootstrap", type=int, default=99)
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
