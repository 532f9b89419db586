"""What the in-memory CSV reader (`--engine pandas`, and every long table) costs, by how the file is written.

    python benchmarks/bench_csv_reader.py > reports/benchmarks/csv_reader.txt

Microdata of six text variables of four levels, 10^6 and 3 x 10^6 rows, written three ways: plain; every field
quoted (as R's write.csv and many exports write labels); every field padded with a space. Each file is read by
`tables.readers.read_csv_frame` in a fresh process, through the reader as it is (pandas' C parser wherever it gives
what the careful reader gives: a quoted file's rows are first counted by the csv module), and with that fast path
turned off (the careful reader: Python's csv module, every row kept as a list, which quoted files took until
2026-12-03). Per file and reader: the fastest of three runs' wall seconds and the largest peak resident memory.
Every figure is computed by this run; the two readers' frames are checked equal.
"""

from __future__ import annotations

import csv
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

MEASURE = """
import resource, sys, time
from tabrelease.tables import readers
if sys.argv[2] == "careful":
    readers._fast_frame = lambda *a, **k: None
start = time.perf_counter()
frame = readers.read_csv_frame(sys.argv[1])
seconds = time.perf_counter() - start
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(frame), frame.iloc[:, 0].str.len().sum())
"""


def measure(path: Path, reader: str) -> tuple[float, float, str]:
    best, peak, check = float("inf"), 0.0, ""
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", MEASURE, str(path), reader], capture_output=True, text=True,
                             check=True).stdout.split()
        best, peak, check = min(best, float(out[0])), max(peak, int(out[1]) / 1024), " ".join(out[2:])
    return best, peak, check


def main() -> None:
    rng = np.random.default_rng(20261203)
    print(f"# the in-memory CSV reader; python {platform.python_version()}, pandas {pd.__version__}, "
          f"{platform.machine()}")
    print(f"{'rows':>10} {'written':>8} {'reader':>8} {'seconds':>8} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for rows in (1_000_000, 3_000_000):
            frame = pd.DataFrame({c: rng.choice(["north", "south", "east", "west"], rows) for c in "pqrstu"})
            for written in ("plain", "quoted", "padded"):
                path = Path(folder) / f"{written}{rows}.csv"
                if written == "padded":
                    frame.apply(lambda column: " " + column).to_csv(path, index=False)
                else:
                    frame.to_csv(path, index=False, quoting=csv.QUOTE_ALL if written == "quoted" else
                                 csv.QUOTE_MINIMAL)
                checks = set()
                for reader in ("fast", "careful"):
                    seconds, peak, check = measure(path, reader)
                    checks.add(check)
                    print(f"{rows:>10,} {written:>8} {reader:>8} {seconds:>8.2f} {peak:>9.0f}")
                assert len(checks) == 1, "the two readers read different frames"
                path.unlink()


if __name__ == "__main__":
    main()
