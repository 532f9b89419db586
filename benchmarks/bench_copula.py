"""The DP Gaussian copula (gaussian-copula) and its cop-ID baseline beside the margin mechanisms: error and time.

    python benchmarks/bench_copula.py [--seeds N]

Error: mean over N seeds (simulation mode) of the L1 error summed over the paper-model margins of Czech and journey to
work, at epsilon = 1 and with the noise effectively off (epsilon = 1e6: the copula's model and sampling error).
Time: median and maximum of 5 releases of all two-way margins of random tables of 1024 cells and n = 14,000
(what the frontier runs), after one warm-up. Output committed in reports/benchmarks/copula.txt.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd

import tabrelease as tr
from tabrelease.spec import ReleaseSpec, loss_of
from tabrelease.workflow import release_margins
from tabrelease.tables import margin_counts


def _random_table(shape, n, rng):
    counts = rng.multinomial(n, rng.dirichlet(np.full(int(np.prod(shape)), 0.5))).reshape(shape)
    names = [f"v{i}" for i in range(len(shape))]
    index = pd.MultiIndex.from_product([range(k) for k in shape], names=names)
    return tr.table_from_frame(pd.DataFrame({"count": counts.ravel()}, index=index).reset_index())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    for name in ("czech", "journey_to_work"):
        table = tr.builtin_table(name)
        for epsilon, mechanisms in ((1.0, ("gaussian-copula", "copula-id", "margins", "planned")),
                                    (1e6, ("gaussian-copula", "copula-id"))):
            for mechanism in mechanisms:
                errors = []
                for seed in range(args.seeds):
                    rel = release_margins(table,
                                          ReleaseSpec(loss=loss_of(epsilon), mechanism=mechanism, mode="simulation",
                                                      seed=seed))
                    errors.append(sum(np.abs(m - margin_counts(table.counts, g)).sum()
                                      for g, m in zip(rel.margins, rel.released_margins)))
                print(f"{name:16s} epsilon={epsilon:<6g} {mechanism:16s} mean L1 {np.mean(errors):8.1f} (n={table.n})")
    rng = np.random.default_rng(0)
    for shape in ((2,) * 10, (4,) * 5, (2, 4, 2, 4, 2, 4, 2)):
        table = _random_table(shape, 14000, rng)
        margins = list(itertools.combinations(range(len(shape)), 2))
        for mechanism in ("gaussian-copula", "copula-id"):
            release_margins(table,
                            ReleaseSpec(loss=loss_of(1.0), margins=margins, mechanism=mechanism, mode="simulation",
                                        seed=0))
            seconds = []
            for seed in range(5):
                start = time.perf_counter()
                release_margins(table,
                                ReleaseSpec(loss=loss_of(1.0), margins=margins, mechanism=mechanism, mode="simulation",
                                            seed=seed))
                seconds.append(time.perf_counter() - start)
            print(f"{'x'.join(map(str, shape)):16s} {mechanism:16s} median {np.median(seconds):.3f} s, "
                  f"max {max(seconds):.3f} s")


if __name__ == "__main__":
    main()
