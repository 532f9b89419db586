"""Time of fits from margins alone (loglinear.margins_fit) on tables far too large to hold.

    python benchmarks/bench_margins_fit.py

Microdata with dependence between neighbouring variables are drawn (not timed). For each model it prints the
time to compute the needed margins by np.bincount, the time of the fit itself (margins already computed and
cached), and what the fit reports.
"""

from __future__ import annotations

import math
import time

import numpy as np

from tabrelease.loglinear.margins_fit import fit_loglinear_from_margins, margins_of_microdata


def markov_records(n: int, k: int, levels: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.empty((n, k), np.int64)
    x[:, 0] = rng.integers(0, levels, n)
    for j in range(1, k):
        stay = rng.random(n) < 0.5
        x[:, j] = np.where(stay, (x[:, j - 1] + rng.integers(0, 2, n)) % levels, rng.integers(0, levels, n))
    return x


def cached(margin):
    store = {}

    def lookup(axes):
        if axes not in store:
            store[axes] = margin(axes)
        return store[axes]

    return lookup, store


def run(label, generators, k, levels, records, clique_margins=False):
    shape = (levels,) * k
    data = markov_records(records, k, levels, 0)
    margin, store = cached(margins_of_microdata(data, shape))
    start = time.perf_counter()
    fit = fit_loglinear_from_margins(generators, shape, margin, clique_margins=clique_margins)
    first = time.perf_counter() - start  # margins by bincount + fit
    start = time.perf_counter()
    fit = fit_loglinear_from_margins(generators, shape, margin, clique_margins=clique_margins)
    again = time.perf_counter() - start  # fit only (margins cached)
    print(f"{label}: {k} variables x {levels} levels (10^{round(math.log10(fit.cells))} cells), {records} records, "
          f"{len(fit.generators)} generators, largest clique {fit.tree.largest_clique_cells(shape)} cells, "
          f"{len(fit.tree.cliques)} cliques")
    print(f"    margins + fit {first:.3f} s, fit alone {again:.3f} s; closed form {fit.closed_form}, "
          f"converged {fit.converged} in {fit.iterations} cycles, facial set exact {fit.facial_set_exact}, "
          f"MLE exists {fit.mle_exists}")


if __name__ == "__main__":
    k = 20
    run("chain of 2-way margins", [(i, i + 1) for i in range(k - 1)], k, 10, 10**6)
    run("star of 2-way margins", [(0, i) for i in range(1, k)], k, 10, 10**6)
    band = [(i, j) for i in range(12) for j in range(i + 1, 12) if j - i <= 4]
    run("2-way margins within distance 4 (non-decomposable)", band, 12, 10, 10**6)
    run("the same, with observed clique margins", band, 12, 10, 10**6, clique_margins=True)
    cycle = [(i, (i + 1) % 20) for i in range(20)]
    run("cycle of 2-way margins (non-decomposable)", cycle, 20, 10, 10**6, clique_margins=True)
