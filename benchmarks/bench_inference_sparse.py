"""The noise-aware test's size where released margins hold cells released as 0 (a new user's trial, stop 46).

    python benchmarks/bench_inference_sparse.py [--tables N] [--bootstrap B] > reports/inference/sparse.txt

Tables are drawn from a known [AB][C] model with strong effects (log-linear terms normal with sd 1.5, seeded), n =
2000; every two-way margin is released by the default plan (simulation noise, seeded), and the true model [AB][C] is
tested by `inference.margins_model_test` with B bootstrap releases. Per point: the share of tables whose test
rejected the true model at 0.05, overall, among releases whose margins hold at least one cell released as 0, and
among the others; with each share's standard error, and the smallest expected cell of a released margin (N times
its probability). A test of exact size rejects 5% (B + 1 a multiple of 20: the
p-value's grid holds 0.05). Every figure is computed by this run.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tabrelease as tr
from tabrelease.inference import margins_model_test
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import run_plan
from tabrelease.planner import plan_release
from tabrelease.spec import SIMULATION, ReleaseSpec, loss_of

POINTS = [((3, 2, 4), 4, 1.0), ((3, 2, 4), 4, 0.1), ((4, 3, 5), 5, 1.0), ((4, 3, 5), 5, 0.1)]  # shape, seed, eps
MARGINS, TRUE_MODEL, N = [(0, 1), (1, 2), (0, 2)], [(0, 1), (2,)], 2000


def true_probabilities(shape, seed: int) -> np.ndarray:
    """[AB][C] with each term's log-linear parameters drawn normal (sd 1.5): strong effects, small cells."""
    rng = np.random.default_rng(seed)
    log_p = np.zeros(shape)
    for g in TRUE_MODEL:
        term = rng.normal(0.0, 1.5, [shape[a] for a in g])
        log_p = log_p + np.expand_dims(term, [a for a in range(len(shape)) if a not in g])
    p = np.exp(log_p)
    return p / p.sum()


def point(args) -> dict:
    shape, seed, epsilon, tables, bootstrap = args
    p = true_probabilities(shape, seed)
    plan = plan_release(shape, MARGINS, ReleaseSpec(loss=loss_of(epsilon), mode=SIMULATION, seed=0), None)
    rng = np.random.default_rng([seed, 21])
    rejected, zeros = [], []
    for t in range(tables):
        counts = rng.multinomial(N, p.ravel()).reshape(shape)
        released = [np.asarray(m, float) for m in run_plan(plan, counts, SimulationNoise(seed=2_100_000 + t))
                    .released_margins]
        _, p_value, _, _ = margins_model_test(plan, released, TRUE_MODEL, bootstrap=bootstrap, seed=t,
                                              intervals=False)
        rejected.append(p_value <= 0.05)
        zeros.append(any(np.any(m == 0) for m in released))
    smallest = min(float(N * p.sum(axis=tuple(a for a in range(len(shape)) if a not in g)).min()) for g in MARGINS)
    return {"shape": shape, "epsilon": epsilon, "smallest": smallest,
            "rejected": np.array(rejected), "zeros": np.array(zeros)}


def _share(flags: np.ndarray) -> str:
    if flags.size == 0:
        return f"{'-':>16}"
    share = flags.mean()
    return f"{share:>7.1%} ({np.sqrt(share * (1 - share) / flags.size):.1%}, {flags.size:>3})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--bootstrap", type=int, default=59)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        found = list(pool.map(point, [(s, seed, e, args.tables, args.bootstrap) for s, seed, e in POINTS]))
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; [AB][C] true, "
          f"every two-way margin released (default plan), n = {N}, {args.tables} tables a point, B = "
          f"{args.bootstrap}; {time.perf_counter() - start:.0f} s on {args.jobs} processes")
    print("share of tables whose test rejected the true model at 0.05 (its standard error, tables)")
    print(f"{'shape':<8} {'eps':>5} {'smallest margin cell':>20} {'all':>20} {'with a released 0':>20} "
          f"{'without':>20}")
    for r in found:
        rej, z = r["rejected"], r["zeros"]
        print(f"{'x'.join(map(str, r['shape'])):<8} {r['epsilon']:>5g} {r['smallest']:>20.2f} {_share(rej):>20} "
              f"{_share(rej[z]):>20} {_share(rej[~z]):>20}")


if __name__ == "__main__":
    main()
