"""`tabrelease reproduce`: the paper's experiment (section 6), its figures, Tables 7-8 and a report."""

from __future__ import annotations

import dataclasses
import os

from .sweep import add_execution_arguments, default_jobs


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="reproduce the paper's experiment: Figures 1-6, Tables 7-8, report (HTML and Markdown)",
        description="Yang, Fienberg & Rinaldo section 6: epsilon 0.005 to 1.995 step 0.01, 50 repetitions, the four "
        "tables, exact and paper calibration (40,000 releases per calibration). --quick runs a coarse grid.",
    )
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--quick", action="store_true", help="a coarse grid (7 epsilons x 8 repetitions), for a demo")
    add_execution_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (runs, seconds, files)")
    parser.set_defaults(run=run, seed=None)


def run(args) -> int:
    from ..errors import TabreleaseError
    from ..paper.reproduce import DEFAULT_MASTER_SEED, reproduce

    if args.resume and args.force:
        raise TabreleaseError("--resume and --force contradict each other; give one")
    result = reproduce(
        args.out, quick=args.quick, jobs=args.jobs or default_jobs(), scheduler=args.scheduler, resume=args.resume,
        force=args.force, progress=None if not args.quiet else False,
        master_seed=DEFAULT_MASTER_SEED if args.seed is None else args.seed,
    )
    if args.json:
        from ._common import print_json

        out = os.path.abspath(args.out)
        print_json({"runs": result.total_runs, "computed_now": result.computed_runs, "seconds": result.wall_seconds,
                    "noise_mode": "simulation", "out": out, "report": os.path.join(out, "report.html"),
                    "findings": [dataclasses.asdict(f) for f in result.findings]})
        return 0
    print(f"{result.total_runs} releases ({result.computed_runs} computed now) in {result.wall_seconds:.1f} s; "
          "simulation-mode noise")
    print(f"report: {os.path.join(args.out, 'report.html')} (and report.md)")
    return 0
