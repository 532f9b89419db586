"""How long planning takes, first in a process (issue "best release": <= 200 ms for tables of <= 8 variables).

    python benchmarks/bench_planning.py > reports/benchmarks/planning.txt

Each row runs in a fresh Python process: `import tabrelease`, then one `plan_release` of the default (planned)
mechanism, timed from before the import of the planning code to the plan (the imports it needs, scipy.optimize
among them, included), then the same plan again with the design cache cleared (warm imports). The candidates are
every subset's margin where the fit is over the cells (<= 2^12 cells), else the released margins' closure.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

CASES = [  # (label, shape, margins or "all-2-way" / "model:<table>")
    ("rochdale model (2^8)", None, "model:rochdale"),
    ("czech model (2^6)", None, "model:czech"),
    ("minn38 model (3x4x7x2)", None, "model:minn38"),
    ("2^8 all 2-way", [2] * 8, "all-2-way"),
    ("3^8 all 2-way (6561 cells: closure)", [3] * 8, "all-2-way"),
    ("4x4x4x4x3x3x2x2 all 2-way", [4, 4, 4, 4, 3, 3, 2, 2], "all-2-way"),
    ("2^12 all 2-way (12 variables)", [2] * 12, "all-2-way"),
]

CHILD = r"""
import json, sys, time
from itertools import combinations
start = time.perf_counter()
import tabrelease as tr
from tabrelease.planner import plan_release
from tabrelease import planning
shape, margins = json.loads(sys.argv[1]), sys.argv[2]
if margins.startswith("model:"):
    table = tr.builtin_table(margins[6:])
    shape, margins = table.shape, tr.default_model(table).generators
else:
    margins = list(combinations(range(len(shape)), 2))
spec = tr.ReleaseSpec(loss=tr.loss_of(1.0))
begin = time.perf_counter()
plan = plan_release(shape, margins, spec)
first = time.perf_counter() - begin
planning._plan_measurements.cache_clear()
begin = time.perf_counter()
plan_release(shape, margins, spec)
again = time.perf_counter() - begin
print(json.dumps({"first_ms": 1000 * first, "again_ms": 1000 * again, "blocks": len(plan.design.blocks),
                  "notes": [n for n in plan.notes if "candidate" in n]}))
"""


def main() -> None:
    import tabrelease as tr

    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; one fresh process "
          "per row; milliseconds")
    print(f"{'case':<38} {'first plan':>11} {'again':>8} {'blocks':>7}")
    for label, shape, margins in CASES:
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(shape), margins], capture_output=True,
                              text=True, check=True)
        row = json.loads(done.stdout)
        print(f"{label:<38} {row['first_ms']:>11.0f} {row['again_ms']:>8.0f} {row['blocks']:>7}"
              + (f"  ({row['notes'][0][:60]}...)" if row["notes"] else ""))


if __name__ == "__main__":
    main()
