"""Wall time of one simulated release from the command line, start-up included.

    python benchmarks/bench_startup.py [--runs N]

Runs `tabrelease release rochdale --epsilon 1 --simulate --seed 1 --out DIR` N times (after one
warm-up) in fresh processes and prints the median, minimum and maximum wall time, and the
imports that cost most in one run (python -X importtime). The goal: at most 0.6 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "release"
        command = [sys.executable, "-m", "tabrelease", "release", "rochdale", "--epsilon", "1", "--simulate",
                   "--seed", "1", "--force", "--out", str(out)]
        subprocess.run(command, check=True, capture_output=True)  # warm-up (file cache)
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            walls.append(time.perf_counter() - start)
        trace = subprocess.run([sys.executable, "-X", "importtime", *command[1:]], check=True, capture_output=True,
                               text=True).stderr
    print(f"tabrelease release rochdale --epsilon 1 --simulate --seed 1: {args.runs} runs")
    print(f"wall s: median {statistics.median(walls):.3f}, min {min(walls):.3f}, max {max(walls):.3f} (goal <= 0.6)")
    rows = []
    for line in trace.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  "):
            rows.append((int(parts[1]), parts[2].strip()))
    print("top-level imports, cumulative ms:")
    for micros, name in sorted(rows, reverse=True)[:8]:
        print(f"  {micros / 1000:7.1f}  {name}")


if __name__ == "__main__":
    main()
