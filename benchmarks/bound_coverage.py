"""How often the released margins' L1 error exceeds each bound, over repeated simulated releases.

    python benchmarks/bound_coverage.py [--repeats N] [--epsilon E] [--delta D]

A bound that holds with probability 1 - delta should be exceeded in at most a fraction delta
of releases. Prints, per table and calibration, the count of releases in which some margin's
error exceeds the paper's Theorem 1/3 bound and the bound derived in tabrelease.evaluation.
"""

from __future__ import annotations

import argparse

from tabrelease import builtin_table, default_model, evaluate_release, run_plan
from tabrelease.testing import plan_at
from tabrelease.loglinear import fit_loglinear
from tabrelease.noise import SimulationNoise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=0.05)
    args = parser.parse_args()
    print(f"epsilon {args.epsilon}, delta {args.delta}, {args.repeats} simulated releases (seed 2026) per row")
    for name in ("edwards", "czech", "rochdale", "journey_to_work"):
        table = builtin_table(name)
        model = default_model(table)
        original = fit_loglinear(table, model)
        for calibration in ("exact", "paper"):
            plan = plan_at(table.shape, model.generators, args.epsilon, calibration=calibration, mechanism="auto")
            noise = SimulationNoise(seed=2026)
            paper = derived = 0
            for _ in range(args.repeats):
                ev = evaluate_release(table, run_plan(plan, table.counts, noise), model, original_fit=original,
                                      bound_delta=args.delta)
                errors = ev.l1_error_by_margin
                paper += any(errors[m] > ev.paper_bound_by_margin[m] for m in errors)
                derived += any(errors[m] > ev.l1_bound_by_margin[m] for m in errors)
            print(f"{name:<16} {calibration:<6} paper theorem exceeded {paper:>4}/{args.repeats}   "
                  f"derived bound exceeded {derived:>4}/{args.repeats}")


if __name__ == "__main__":
    main()
