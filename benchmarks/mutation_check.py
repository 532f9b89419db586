"""Mutation check of the privacy-critical code: does a test fail when a line is wrong?

Each target function (below) is changed one small edit at a time (an operator swapped, a constant moved, a condition
negated, min for max, ...), and the tests that cover its module run against the change; a change no test notices
"survives". The edits are made in a throw-away clone of the repository's HEAD, never in the working tree, and the
clone is imported through PYTHONPATH, so the installed package (an editable install of this checkout) is untouched.

Survivors are not all defects: some edits cannot change what the code computes (a bracket a root-finder widens
anyway, the sign of a symmetric noise draw, a boundary no input can reach). The report lists every survivor; the
note that quotes it says which are which.

Usage: python benchmarks/mutation_check.py > reports/benchmarks/mutation.txt   (about an hour on 2 CPUs)
"""

from __future__ import annotations

import ast
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TARGETS = """
src/tabrelease/noise.py::laplace_calibration
src/tabrelease/noise.py::gaussian_calibration
src/tabrelease/noise.py::SecureNoise.perturb
src/tabrelease/noise.py::SimulationNoise.perturb
src/tabrelease/noise.py::rr_probabilities
src/tabrelease/accounting.py::analytic_gaussian_delta
src/tabrelease/accounting.py::analytic_gaussian_sigma
src/tabrelease/accounting.py::gaussian_rho
src/tabrelease/accounting.py::zcdp_to_approx_dp
src/tabrelease/accounting.py::approx_dp_to_rho
src/tabrelease/accounting.py::pure_to_rho
src/tabrelease/accounting.py::group_pure
src/tabrelease/accounting.py::group_approx
src/tabrelease/accounting.py::group_rho
src/tabrelease/privacy.py::group_steps
src/tabrelease/privacy.py::group_loss
src/tabrelease/privacy.py::under_unit
src/tabrelease/privacy.py::cost_under_budget
src/tabrelease/privacy.py::PrivacyLoss.zcdp_rho
src/tabrelease/mechanisms/_base.py::calibration_loss
src/tabrelease/mechanisms/_base.py::recalibrate
src/tabrelease/mechanisms/_base.py::replace_factor
src/tabrelease/mechanisms/_base.py::Mechanism.guarantee
src/tabrelease/mechanisms/_coefficients.py::CoefficientMechanism.calibrate
src/tabrelease/mechanisms/_coefficients.py::integer_row_bound
src/tabrelease/mechanisms/planned.py::Planned.plan
src/tabrelease/mechanisms/planned.py::Planned.measure
src/tabrelease/planning.py::margin_changes
src/tabrelease/planning.py::MeasurementDesign.whitened_sensitivity
src/tabrelease/planning.py::MeasurementDesign.scales
src/tabrelease/ledger.py::_costs
src/tabrelease/ledger.py::_within
src/tabrelease/ledger.py::_check_fits
src/tabrelease/ledger.py::_status
""".split()

# The tests run against a change in a module: those of its subject (all: `-x` stops at the first failure).
TESTS = {
    "noise.py": ["test_release_noise.py", "test_randomized_response.py", "test_calibration_by_mechanism.py",
                 "test_guarantee_contract.py", "test_exact.py", "test_mechanisms.py", "test_mechanism_contract.py"],
    "accounting.py": ["test_accounting.py", "test_release_noise.py", "test_guarantee_contract.py", "test_account.py"],
    "privacy.py": ["test_account.py", "test_guarantee_contract.py", "test_ledger.py", "test_governance.py"],
    "ledger.py": ["test_ledger.py", "test_account.py", "test_governance.py"],
    "planning.py": ["test_planned_privacy.py", "test_calibration_by_mechanism.py"],
    "planned.py": ["test_planned_privacy.py", "test_calibration_by_mechanism.py", "test_guarantee_contract.py",
                   "test_planned.py"],
}
OTHER_TESTS = ["test_calibration_by_mechanism.py", "test_planned_privacy.py", "test_accounting.py",
               "test_guarantee_contract.py", "test_mechanism_contract.py", "test_release_noise.py", "test_exact.py",
               "test_randomized_response.py", "test_sensitive_attributes.py", "test_mechanisms.py"]

OPERATORS = [(r" \* ", " / "), (r" / ", " * "), (r" \+ ", " - "), (r" - ", " + "), (r" <= ", " < "), (r" < ", " <= "),
             (r" >= ", " > "), (r" > ", " >= "), (r"\bmax\(", "min("), (r"\bmin\(", "max("), (r"\*\* 2", "** 1"),
             (r"(?<![\w.])2(?![\w.])", "3"), (r"(?<![\w.])1(?![\w.])", "2"), (r"(?<![\w.])0\.5(?![\w.])", "0.25"),
             (r" == ", " != "), (r" != ", " == "), (r"\bnot ", ""), (r" and ", " or "), (r" or ", " and "),
             (r"\bTrue\b", "False"), (r"\bFalse\b", "True"), (r"(?<![\w.])0(?![\w.])", "1"),
             (r"\.epsilon\b", ".epsilon_actual"), (r"\bis None\b", "is not None")]


def body_lines(path: Path, name: str) -> tuple[int, int]:
    """The first and last line of a function's body (its docstring left out)."""
    node = ast.parse(path.read_text())
    for part in name.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body[0].lineno, node.end_lineno


def mutants(path: Path, first: int, last: int):
    lines = path.read_text().splitlines(keepends=True)
    for i in range(first - 1, last):
        code = lines[i].split("#", 1)[0]
        if not code.strip() or code.strip().startswith(("raise ", '"', "'", 'f"')) or "Error(" in code:
            continue
        for pattern, replacement in OPERATORS:
            for match in re.finditer(pattern, code):
                before = code[:match.start()]
                if before.count('"') % 2 or before.count("'") % 2:  # inside a string
                    continue
                changed = lines[i][:match.start()] + replacement + lines[i][match.end():]
                yield i + 1, changed.strip(), lines[:i] + [changed] + lines[i + 1:]


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=None, help="only the targets whose names contain this text")
    args = parser.parse_args()
    targets = [t for t in TARGETS if args.targets is None or args.targets in t]
    started = time.time()
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "repo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        env = {"PYTHONPATH": str(clone / "src"), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
               "HOME": str(Path.home())}
        rows, survivors = [], []
        for target in targets:
            relative, name = target.split("::")
            path = clone / relative
            original = path.read_text()
            first, last = body_lines(path, name)
            tests = [f"tests/{t}" for t in TESTS.get(Path(relative).name, OTHER_TESTS)]
            for line, changed, lines in list(mutants(path, first, last)):
                path.write_text("".join(lines))
                try:
                    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                           *tests], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
                    killed = done.returncode != 0
                except subprocess.TimeoutExpired:
                    killed = True
                finally:
                    path.write_text(original)
                rows.append((target, line, changed, killed))
                if not killed:
                    survivors.append((target, line, changed))
                print(f"{'killed  ' if killed else 'SURVIVED'} {target}:{line}: {changed}", file=sys.stderr, flush=True)
    print(f"python {platform.python_version()}, {platform.machine()}; the privacy-critical functions of HEAD "
          f"{head}, {len(targets)} functions, {len(rows)} changes, each against its module's tests "
          f"(`python benchmarks/mutation_check.py{'' if args.targets is None else f' --targets {args.targets}'}`); "
          f"{time.time() - started:.0f} s on one process")
    print(f"killed {sum(k for *_, k in rows)} of {len(rows)}; survived {len(survivors)}:")
    for target, line, changed in survivors:
        print(f"  {target}:{line}: {changed}")
    print(json.dumps({"functions": len(targets), "changes": len(rows), "survived": len(survivors)}))


if __name__ == "__main__":
    main()
