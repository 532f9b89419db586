"""Coverage of the noise-aware model test (`tabrelease test`), and the nominal test beside it.

    python benchmarks/bench_inference.py [--tables T] [--power-tables P] [--bootstrap B] [--jobs J] \
        [--shapes NAME,NAME] > reports/inference/coverage.txt

For each shape and epsilon, T tables are drawn from a known hierarchical model, each released by the default plan
(two-way margins, simulation noise); on each release the true model is tested (the noise-aware p-value from B
bootstrap releases, and the nominal chi-squared one) and, on the first P of them, so is a model missing one true
interaction (power: each model tested costs a bootstrap per table, and the targets bind on the true model's figures,
so those get the most tables). Printed
per point: the share of tables whose p-value is at most 0.05, for each test and model, and the share of the true
model's cell probabilities over each of its margins that fall inside their 95% noise-aware intervals. The targets
(issue "inference"): the noise-aware test rejects the true model in 3-7% of tables; the intervals cover 93-97%.
Every figure is computed by this run.
"""

from __future__ import annotations

import argparse
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

import numpy as np

# (name, shape, the released margins (None: every two-way margin), the true model's generators, the model missing one
# of its interactions, n). On 2^8 six two-way margins are released: all 28 take 1.5 s a release (the controlled
# rounding), too slow for 200 tables x 2 models x 100 bootstrap releases per point here.
SHAPES = [
    ("2x2x2", (2, 2, 2), None, [(0, 1), (2,)], [(0,), (1,), (2,)], 1000),
    ("3x3x4", (3, 3, 4), None, [(0, 1), (1, 2)], [(0, 1), (2,)], 2000),
    ("2^8", (2,) * 8, [(0, 1), (1, 2), (0, 2), (3, 4), (5, 6), (6, 7)], [(0, 1), (1, 2), (3, 4), (5,), (6, 7)],
     [(0, 1), (1, 2), (3,), (4,), (5,), (6, 7)], 2000),
]
EPSILONS = (0.5, 1.0, 2.0)
ALPHA = 0.05


def _true_probabilities(shape, generators, rng) -> np.ndarray:
    """A log-linear model's cell probabilities: a random interaction of strength about 1 per generator."""
    log_p = np.zeros(shape)
    for g in generators:
        term = rng.normal(0.0, 1.0, [shape[a] for a in g])
        log_p += np.expand_dims(term, [a for a in range(len(shape)) if a not in g])
    p = np.exp(log_p)
    return p / p.sum()


def study_releases(shape_index: int, epsilon: float, first: int, last: int):
    """The study's releases number first to last - 1 of one shape and epsilon, as (t, plan, the true cell
    probabilities, the released margins): the tables drawn in one seeded order (the experiments reuse them)."""
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import run_plan
    from tabrelease.testing import plan_at

    _, shape, margins, true_model, _, n = SHAPES[shape_index]
    margins = margins or [(a, b) for a in range(len(shape)) for b in range(a + 1, len(shape))]
    plan = plan_at(shape, margins, epsilon)
    rng = np.random.default_rng([len(shape), int(epsilon * 100), 7])
    p = _true_probabilities(shape, true_model, rng)
    for t in range(last):
        counts = rng.multinomial(n, p.ravel()).reshape(shape)
        if t >= first:
            release = run_plan(plan, counts, SimulationNoise(seed=10_000 + t))
            yield t, plan, p, [np.asarray(m, float) for m in release.released_margins]


class ExperimentTable(NamedTuple):
    """One of an experiment's tables: the study's release of it, the true model's G² and fit, and the first stage of
    the bootstrap (`bootstrap` releases drawn from the fit with the released total, by `draws`, which the experiment
    may go on drawing from)."""

    t: int
    plan: object
    generators: tuple
    margins: tuple
    released: list
    g2: float
    fitted: np.ndarray
    total: int
    draws: np.random.Generator
    first_stage: list


def experiment_releases(args):
    """An experiment's tables of the true model: `args` is (shape index, epsilon, first, last, bootstrap); yields an
    `ExperimentTable` for each of the study's tables first to last - 1 (the first stage drawn by
    numpy.random.default_rng([t, 99]), as both experiments draw it)."""
    from tabrelease.inference import _model_g2

    shape_index, epsilon, first, last, bootstrap = args
    generators = tuple(tuple(g) for g in SHAPES[shape_index][3])
    for t, plan, _, released in study_releases(shape_index, epsilon, first, last):
        margins = tuple(tuple(m) for m in plan.margins)
        g2, fitted = _model_g2(released, margins, generators, plan.shape)
        total = int(round(float(released[0].sum())))
        draws = np.random.default_rng([t, 99])
        first_stage = released_draws(plan, [fitted] * bootstrap, [total] * bootstrap, draws)
        yield ExperimentTable(t, plan, generators, margins, released, float(g2), fitted, total, draws, first_stage)


def released_draws(plan, worlds, totals, draws) -> list[np.ndarray]:
    """One table drawn from each world (multinomial, its total), then the noise seeds, all from `draws`; each table
    released by the plan: the released margins stacked over the tables."""
    from tabrelease.inference import _release_chunk

    tables = [draws.multinomial(int(m), (w / w.sum()).ravel()).reshape(plan.shape) for w, m in zip(worlds, totals)]
    return _release_chunk(plan, tables, [int(draws.integers(2**62)) for _ in tables])


def experiment_parser() -> argparse.ArgumentParser:
    """The options every paired experiment takes: its tables per epsilon, the epsilons, the bootstrap replicates."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--epsilons", default="0.5,2")
    parser.add_argument("--bootstrap", type=int, default=99)
    return parser


def paired_experiment(tables_function, shape_index: int, epsilons, tables: int, bootstrap: int) -> dict:
    """An experiment's per-table pairs of p-values, per epsilon, over the study's first `tables` tables, in two
    processes (halves of the tables): `tables_function((shape_index, epsilon, first, last, bootstrap))` gives the
    pairs of tables first to last - 1."""
    found = {}
    with ProcessPoolExecutor(2) as pool:
        for epsilon in epsilons:
            half = tables // 2
            parts = pool.map(tables_function, [(shape_index, epsilon, 0, half, bootstrap),
                                               (shape_index, epsilon, half, tables, bootstrap)])
            found[epsilon] = np.array([r for part in parts for r in part])
    return found


def point(args) -> dict:
    from tabrelease.inference import margins_model_test

    shape_index, epsilon, tables, power_tables, bootstrap = args
    name, shape, _, true_model, smaller, _ = SHAPES[shape_index]
    found = {"aware_true": [], "naive_true": [], "aware_smaller": [], "naive_smaller": []}
    covered = []
    for t, plan, p, released in study_releases(shape_index, epsilon, 0, tables):
        for label, model in (("true", true_model), ("smaller", smaller))[:1 if t >= power_tables else 2]:
            _, aware, naive, intervals = margins_model_test(plan, released, model, bootstrap=bootstrap, seed=t)
            found[f"aware_{label}"].append(aware <= ALPHA)
            found[f"naive_{label}"].append(naive <= ALPHA)
            if label == "true":  # the true model's cell probabilities over each of its margins, in their intervals
                for g, (_, low, high) in zip(true_model, intervals):
                    truth = p.sum(axis=tuple(a for a in range(len(shape)) if a not in g))
                    covered.extend(((low <= truth) & (truth <= high)).ravel().tolist())
    return {"shape": name, "cells": int(np.prod(shape)), "epsilon": epsilon, "tables": tables,
            "power_tables": min(power_tables, tables),
            "coverage": float(np.mean(covered)), **{k: float(np.mean(v)) if v else None for k, v in found.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--power-tables", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=99)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--shapes", default=",".join(s[0] for s in SHAPES),
                        help="the shapes to run, by name (default: all)")
    args = parser.parse_args()
    if not 0 <= args.power_tables <= args.tables or args.bootstrap < 39:
        parser.error("--power-tables is 0 to --tables, and --bootstrap at least 39 (95% intervals)")
    shapes = [s for s in SHAPES if s[0] in args.shapes.split(",")]
    if len(shapes) != len(set(args.shapes.split(","))):
        parser.error(f"--shapes names some of {', '.join(s[0] for s in SHAPES)}")
    start = time.perf_counter()
    tasks = [(SHAPES.index(shape), e, args.tables, args.power_tables, args.bootstrap) for shape in shapes
             for e in EPSILONS]
    with ProcessPoolExecutor(args.jobs) as pool:
        # The largest shape's points first, so that no slow point runs alone at the end.
        rows = list(pool.map(point, tasks[::-1]))[::-1]
    import tabrelease as tr

    print(f"python {platform.python_version()}, tabrelease {tr.__version__}; {args.tables} tables per point (the "
          f"smaller model tested on {rows[0]['power_tables']} of them), {args.bootstrap} bootstrap releases per test; "
          f"released by the default plan (simulation); {time.perf_counter() - start:.0f} s on {args.jobs} processes")
    for name, shape, margins, *_ in shapes:
        from tabrelease.tables import margin_title

        names = [chr(ord("A") + a) for a in range(len(shape))]
        print(f"  {name}: " + ("every two-way margin" if margins is None else
                               "".join(margin_title(names, m) for m in margins)))
    print(f"share of tables whose p-value is at most {ALPHA} (the true model; the model missing one true interaction)")
    print("and the share of the true model's margin cell probabilities inside their 95% noise-aware intervals")
    print(f"{'shape':<7} {'cells':>5} {'eps':>4} {'true: noise-aware':>18} {'true: nominal':>14} "
          f"{'power: noise-aware':>19} {'power: nominal':>15} {'interval coverage':>18}")

    def share(x) -> str:  # the smaller model's columns are empty without --power-tables
        return "-" if x is None else f"{x:.1%}"

    for r in rows:
        print(f"{r['shape']:<7} {r['cells']:>5} {r['epsilon']:>4g} {r['aware_true']:>18.1%} {r['naive_true']:>14.1%} "
              f"{share(r['aware_smaller']):>19} {share(r['naive_smaller']):>15} {r['coverage']:>18.1%}")
    aware = np.array([r["aware_true"] for r in rows])
    inside = int(np.sum((aware >= 0.03) & (aware <= 0.07)))
    # The sampling error of a share over T tables: a point at 5% reads between about 2% and 8% with T = 200.
    se = float(np.sqrt(ALPHA * (1 - ALPHA) / args.tables))
    print()
    print(f"noise-aware rejection of the true model: {aware.min():.1%} to {aware.max():.1%}; within 3-7% at {inside} "
          f"of {len(rows)} points (one table share's standard error at 5%: {se:.1%})")
    coverage = np.array([r["coverage"] for r in rows])
    print(f"interval coverage: {coverage.min():.1%} to {coverage.max():.1%}; within 93-97% at "
          f"{int(np.sum((coverage >= 0.93) & (coverage <= 0.97)))} of {len(rows)} points")


if __name__ == "__main__":
    main()
