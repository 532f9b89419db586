"""Wall time of the test suite's tiers: the unit tier and the whole suite, in one process and on `-n 2` workers
(where pytest-xdist is installed; `.ci/run` runs the whole suite on two).

    python benchmarks/time_suite.py [--out reports/benchmarks/test_suite_timing.txt] [--skip-parallel]

Run from the repository's root with the interpreter whose tabrelease is to be tested. Each command runs once, in
turn; the file records each command, its wall time, the CPU time of the processes it ran, pytest's last line,
the machine's CPU count and its load average before each run (the goals assume an idle machine: unit tier at most
60 s, the whole suite at most 4 minutes).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name: str, args: list[str]) -> dict:
    command = PYTEST + args
    load = os.getloadavg()[0]
    cpu, start = _children_cpu(), time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.monotonic() - start, _children_cpu() - cpu
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    print(f"{name}: {wall:.1f} s, exit {done.returncode}", file=sys.stderr)
    return {"name": name, "command": shlex.join(["python"] + command[1:]), "wall": wall, "cpu": cpu,
            "code": done.returncode, "last": lines[-1] if lines else "", "load": load}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "test_suite_timing.txt")
    parser.add_argument("--skip-parallel", action="store_true", help="do not run the suite on -n 2 workers")
    args = parser.parse_args()
    runs = [run("unit tier, one process", ["-m", "unit", "tests"]),
            run("whole suite, one process", ["tests"])]
    if not args.skip_parallel and importlib.util.find_spec("xdist") is not None:
        runs.append(run("unit tier, 2 workers", ["-m", "unit", "-n", "2", "tests"]))
        runs.append(run("whole suite, 2 workers (what .ci/run runs)", ["-n", "2", "tests"]))
    lines = [f"machine: {platform.machine()}, {os.cpu_count()} CPUs, CPython {platform.python_version()}, "
             f"{platform.system()} {platform.release()}",
             "each command run once from the repository's root; wall = elapsed time, cpu = user + system time of "
             "the processes it ran; load = the 1-minute load average just before",
             ""]
    for r in runs:
        lines += [f"{r['name']}: wall {r['wall']:.1f} s, cpu {r['cpu']:.1f} s, load {r['load']:.2f}, exit {r['code']}",
                  f"  $ {r['command']}",
                  f"  {r['last']}",
                  ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines).rstrip() + "\n")
    print(args.out.read_text(), end="")


if __name__ == "__main__":
    main()
