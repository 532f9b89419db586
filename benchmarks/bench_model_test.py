"""Wall time of one noise-aware model test of a Rochdale-sized table (2^8 cells) with 500 bootstrap releases.

    python benchmarks/bench_model_test.py > reports/benchmarks/model_test.txt

A release of the built-in rochdale table (margins [AB][AC][BC][DE], epsilon 1, simulated), then
`tabrelease test DIR/public --model [AB][AC][DE] --bootstrap 500` from the command line, three times in fresh
processes; the median is printed. The goal (issue "inference"): at most 30 s.

A replicate costs one release by the published plan, so the test's time follows the plan's: the same table with every
two-way margin released (28) costs far more per release (the controlled rounding's search). Its time per replicate
is measured too (the test run with 40 replicates, alone and with `--jobs 2`), and what 500 would take is printed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


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
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r"
        subprocess.run([sys.executable, "-m", "tabrelease", "release", "rochdale", "--epsilon", "1", "--margins",
                        "".join(f"[{a}{b}]" for i, a in enumerate("ABCDEFGH") for b in "ABCDEFGH"[i + 1:]), "--simulate", "--seed", "1", "--out", str(out)], check=True, capture_output=True)
        print("rochdale with every two-way margin released (28), model [AB][CD][EF][GH] plus every main effect, "
              "40 bootstrap releases:")
        for jobs in (1, 2):
            base = [sys.executable, "-m", "tabrelease", "test", str(out / "public"), "--model", "[AB][CD][EF][GH]",
                    "--bootstrap"]
            # The fixed cost (start-up, reading, planning, fits) from a run of 19, the minimum, subtracted.
            few, many = (_wall(base + [str(b), "--jobs", str(jobs)]) for b in (19, 40))
            per = (many - few) / 21
            print(f"  --jobs {jobs}: 40 in {many:.1f} s, 19 in {few:.1f} s: {per:.2f} s per replicate, so about "
                  f"{few + per * (500 - 19):.0f} s for 500")


if __name__ == "__main__":
    main()
