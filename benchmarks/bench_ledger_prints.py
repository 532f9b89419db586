"""What the ledger's fingerprints cost a release: the table's own and its margins'.

    python benchmarks/bench_ledger_prints.py > reports/benchmarks/ledger_prints.txt

Every release charged to a ledger fingerprints its table before its noise is drawn (`ledger.table_prints`: the
non-zero cells', the multiset, the order-free, the canonical and, for tables held as cells, the legacy fingerprint)
and, since the ledger recognises data released in part under a second dataset id, the canonical fingerprints of its
one- and two-way margins (`ledger.margin_prints`). Here both, in one process, on tables of k binary variables
(Poisson(2) counts: dense), on a sparse one (k = 20, 2,000 records), and on tables held as records (k = 20 and 40,
100,000 records; k = 8 of 60 levels, 400,000 records). Per table: the fastest of three timings of each, and how many
margins were fingerprinted. Every figure is computed by this run.
"""

from __future__ import annotations

import platform
import time

import numpy as np

from tabrelease import ContingencyTable
from tabrelease.ledger import margin_prints, table_prints
from tabrelease.tables.model import MicrodataTable

KEY = b"a ledger's key of at least 32 characters"


def fastest(call, repeats: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return best, result


def binary(k: int, counts: np.ndarray, name: str):
    return ContingencyTable(tuple(f"v{i}" for i in range(k)), tuple(("0", "1") for _ in range(k)), counts, name=name)


def tables():
    rng = np.random.default_rng(20261128)
    for k in (6, 8, 10, 12, 16, 20, 22):
        yield f"{k} binary variables, dense", binary(k, rng.poisson(2.0, (2,) * k), f"dense{k}")
    sparse = np.zeros((2,) * 20, np.int64)
    np.add.at(sparse.reshape(-1), rng.integers(0, 2**20, 2000), 1)
    yield "20 binary variables, 2,000 records", binary(20, sparse, "sparse20")
    codes = rng.integers(0, 2, (100_000, 20))
    yield "20 binary variables, 100,000 records held as records", MicrodataTable(
        tuple(f"v{i}" for i in range(20)), tuple(("0", "1") for _ in range(20)), codes, name="records20")
    codes = rng.integers(0, 60, (400_000, 8))
    yield "8 variables of 60 levels, 400,000 records held as records", MicrodataTable(
        tuple(f"v{i}" for i in range(8)), tuple(tuple(str(j) for j in range(60)) for _ in range(8)), codes,
        name="records8")
    codes = rng.integers(0, 3, (100_000, 40))
    yield "40 variables of 3 levels, 100,000 records held as records", MicrodataTable(
        tuple(f"v{i}" for i in range(40)), tuple(("0", "1", "2") for _ in range(40)), codes, name="records40")


def main() -> None:
    print(f"# ledger fingerprints per release; python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()}")
    print(f"{'table':<60}{'cells':>22}{'table s':>10}{'margins':>9}{'margins s':>11}")
    for label, table in tables():
        own, _ = fastest(lambda: table_prints(table, KEY))
        theirs, printed = fastest(lambda: margin_prints(table, KEY))
        print(f"{label:<60}{table.cells:>22.4g}{own:>10.3f}{len(printed):>9}{theirs:>11.3f}")


if __name__ == "__main__":
    main()
