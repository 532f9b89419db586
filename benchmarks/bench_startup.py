"""Wall time of one simulated release from the command line, start-up included, against `import numpy`.

    python benchmarks/bench_startup.py [--runs N]

Compiles the package's bytecode first (as `pip install .` does), then runs `python -c "import numpy"` and
`tabrelease release rochdale --epsilon 1 --simulate --seed 1 --out DIR` alternately, N times each (after one
warm-up of each), in fresh processes, and prints both medians, their ratio (the goal: at most 6), the imports that
cost most in one release (python -X importtime), and what the release no longer imports (scipy.sparse, jsonschema,
jinja2 with the audit page's former template), timed the same way. Interleaved, so that the machine's load weighs
on all alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 6.0
# One release in one process with its steps timed (the median of `--runs` such processes is printed).
_PHASES = r"""
import json, sys, time
start = time.perf_counter()
import tabrelease.bundle as bundle, tabrelease.error_model as error_model, tabrelease.evaluation as evaluation
import tabrelease.workflow as workflow
seconds = {}
def timed(module, name, key):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t
    setattr(module, name, wrapper)
timed(workflow, "prepare_release", "check and plan")
timed(workflow, "preload_release_modules", "preload before the charge")
timed(workflow, "run_plan", "measure, fit, round")
timed(error_model, "released_table_errors",
      f"audit: simulated fits (batches of {error_model.AUDIT_RUNS})")
timed(evaluation, "evaluate_release", "audit: evaluation in all")
timed(bundle, "write_release_bundle", "write the bundle")
seconds["start-up and imports"] = time.perf_counter() - start
from tabrelease.cli import main
main(sys.argv[1:])
seconds["whole process (in it)"] = time.perf_counter() - start
print(json.dumps(seconds))
"""


# Import jinja2 and compile the audit page's template (argv[1]: a file holding it), as the release did before the
# page was written in Python.
_JINJA = r'''
import sys
import jinja2
jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(open(sys.argv[1]).read())
'''


def _old_audit_template() -> str:
    """The audit page's jinja2 template from the commit before it was replaced (git show 7ecf980)."""
    source = subprocess.run(["git", "show", "7ecf980:src/tabrelease/reports.py"], capture_output=True, text=True,
                            check=True).stdout
    names: dict = {}
    exec(source[source.index("PAGE_STYLE = "):source.index("def render_audit_html(")], names)  # two constants
    return names["_AUDIT_TEMPLATE"]


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    # The package's bytecode, compiled as `pip install .` compiles it (an editable install under
    # PYTHONDONTWRITEBYTECODE would compile every module in every process, which no installed copy does).
    import compileall

    import tabrelease

    compileall.compile_dir(str(Path(tabrelease.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "release"
        release = [sys.executable, "-m", "tabrelease", "release", "rochdale", "--epsilon", "1", "--simulate",
                   "--seed", "1", "--force", "--out", str(out)]
        numpy = [sys.executable, "-c", "import numpy"]
        _wall(numpy), _wall(release)  # warm-up (file cache)
        walls = {"numpy": [], "release": []}
        for _ in range(args.runs):
            walls["numpy"].append(_wall(numpy))
            walls["release"].append(_wall(release))
        phases = []
        for _ in range(args.runs):
            done = subprocess.run([sys.executable, "-c", _PHASES, *release[3:]], check=True, capture_output=True,
                                  text=True)
            phases.append(json.loads(done.stdout.strip().splitlines()[-1]))
        trace = subprocess.run([sys.executable, "-X", "importtime", *release[1:]], check=True, capture_output=True,
                               text=True).stderr
    numpy_s, release_s = statistics.median(walls["numpy"]), statistics.median(walls["release"])
    print(f"{args.runs} interleaved pairs of fresh processes (tabrelease's bytecode compiled first, as pip install "
          f"compiles it)")
    print(f"python -c 'import numpy': median {numpy_s:.3f} s (min {min(walls['numpy']):.3f}, "
          f"max {max(walls['numpy']):.3f})")
    print(f"tabrelease release rochdale --epsilon 1 --simulate --seed 1: median {release_s:.3f} s "
          f"(min {min(walls['release']):.3f}, max {max(walls['release']):.3f})")
    ratios = [r / n for r, n in zip(walls["release"], walls["numpy"])]
    print(f"release / import numpy: {release_s / numpy_s:.2f} (ratio of medians; pairwise median "
          f"{statistics.median(ratios):.2f}); goal <= {GOAL:g}: {'met' if release_s / numpy_s <= GOAL else 'not met'}")
    print("steps of the release, median s over as many processes (the audit's simulation is part of the evaluation):")
    for key in phases[0]:
        print(f"  {statistics.median(p[key] for p in phases):7.3f}  {key}")
    rows = []
    for line in trace.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  "):
            rows.append((int(parts[1]), parts[2].strip()))
    print("top-level imports of the release, cumulative ms:")
    for micros, name in sorted(rows, reverse=True)[:8]:
        print(f"  {micros / 1000:7.1f}  {name}")
    # What the release no longer imports, each in fresh processes interleaved with `import numpy` (the dependency
    # notes in the README quote these).
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False) as held:
        held.write(_old_audit_template())
    others = {"import numpy, scipy.sparse": ["import numpy, scipy.sparse"], "import jsonschema": ["import jsonschema"],
              "import jinja2, compile the audit page's former template": [_JINJA, held.name]}
    timed = {name: [] for name in ["import numpy", *others]}
    try:
        for _ in range(args.runs):
            timed["import numpy"].append(_wall(numpy))
            for name, code in others.items():
                timed[name].append(_wall([sys.executable, "-c", *code]))
    finally:
        Path(held.name).unlink()
    print(f"imports a release no longer makes, median s over {args.runs} fresh processes each, interleaved:")
    for name, walls_of in timed.items():
        print(f"  {statistics.median(walls_of):7.3f}  {name}")


if __name__ == "__main__":
    main()
