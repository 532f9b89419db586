"""Wall time of one noise-aware model test of a Rochdale-sized table (2^8 cells) with 500 bootstrap releases.

    python benchmarks/bench_model_test.py > reports/benchmarks/model_test.txt

A release of the built-in rochdale table (margins [AB][AC][BC][DE], epsilon 1, simulated), then
`tabrelease test DIR/public --model [AB][AC][DE] --bootstrap 500` from the command line, three times in fresh
processes; the median is printed. The goal (issue "inference"): at most 30 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r"
        subprocess.run([sys.executable, "-m", "tabrelease", "release", "rochdale", "--epsilon", "1", "--margins",
                        "[AB][AC][BC][DE]", "--simulate", "--seed", "1", "--out", str(out)], check=True,
                       capture_output=True)
        command = [sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model", "[AB][AC][DE]",
                   "--bootstrap", "500"]
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            walls.append(time.perf_counter() - start)
    print("tabrelease test (rochdale, 2^8 cells, margins [AB][AC][BC][DE] released at epsilon 1; model [AB][AC][DE]; "
          "500 bootstrap releases), 3 fresh processes")
    print(f"wall s: {', '.join(f'{w:.1f}' for w in walls)}; median {statistics.median(walls):.1f} (goal <= 30)")
    print("its output:")
    print(done.stdout.rstrip())


if __name__ == "__main__":
    main()
