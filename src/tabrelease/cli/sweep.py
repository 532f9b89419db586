"""`tabrelease sweep`: simulated releases over a grid of tables, mechanisms, calibrations, epsilon and repetitions."""

from __future__ import annotations

import os
import re

from ._common import (add_spec_arguments, add_table_arguments_for_many, epsilon_list, load_many_from_args, name_list,
                      non_negative_int, positive_int, report_dropped, spec_settings_from_args)

# What a sweep varies over its grid, or sets itself (simulation, the master seed), in place of `release`'s settings;
# bound_delta, xlsx, out_sep and out_bom concern a published bundle's audit, workbook and CSV files, which a sweep
# does not write.
SWEEP_VARIES = ("epsilon", "mechanism", "calibration", "margins", "simulate", "seed", "bound_delta", "xlsx",
                "out_sep", "out_bom")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="risk-utility sweep: many simulated releases over a grid, each measured by a refit",
        description="Simulated releases over tables x mechanisms x calibrations x epsilon x repetitions. Every run's "
        "seed derives from --seed and the run's coordinates, so each run replays alone. Results (one row per run) go "
        "to OUT/runs.parquet and OUT/runs.csv, per-margin errors to OUT/margin_errors.*; a killed sweep continues "
        "with --resume.",
    )
    parser.add_argument("tables", metavar="TABLE", nargs="+", help="built-in table names, or files read as "
                        "`release` reads its table (the same input settings apply to every file)")
    parser.add_argument("--epsilons", required=True, type=epsilon_list, metavar="SPEC",
                        help="comma list (0.1,0.5,1) or START:STOP:STEP, STOP excluded (0.005:2:0.01)")
    parser.add_argument("--repetitions", required=True, type=positive_int, metavar="N")
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--margins", default=None, metavar="SPEC",
                        help="margins to release (one table only; default: each table's paper model)")
    add_execution_arguments(parser)
    parser.add_argument("--mechanisms", default=None, type=name_list, metavar="M[,M...]",
                        help="the mechanisms compared (default: planned, what `release` publishes)")
    parser.add_argument("--calibrations", default=None, type=name_list, metavar="exact|paper[,...]",
                        help="the calibrations compared (default: exact)")
    # Every other setting of `release`, held fixed over the grid (a sweep is simulated: its --seed is the master seed).
    add_spec_arguments(parser, omit=SWEEP_VARIES)
    add_table_arguments_for_many(parser)
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (runs, seconds, files)")
    parser.set_defaults(run=run)


def add_execution_arguments(parser) -> None:
    parser.add_argument("--seed", type=non_negative_int, default=0, help="master seed (default 0)")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="local worker processes (default: the CPUs available)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run on a Dask distributed cluster (e.g. tcp://host:8786) instead of local processes (with "
                        "--engine dask, microdata are counted on it too)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def default_jobs() -> int:
    from ..sweeps import available_cpus

    return available_cpus()


def run(args) -> int:
    from ..errors import TabreleaseError
    from ..models import parse_model
    from ..sweeps import make_grid, run_sweep
    from ..sweeps.summary import write_sweep_summary
    from ..spec import spec_from_settings

    if args.resume and args.force:
        raise TabreleaseError("--resume and --force contradict each other; give one")
    tables = load_many_from_args(args)
    _check_names(args.tables, tables)
    margins = None
    if args.margins is not None:
        # A workload that names no variable (all-2-way) is every table's own; margins named by their variables are
        # one table's (a new user's trial: several tables with --margins all-2-way had been refused).
        if len(tables) != 1 and not re.fullmatch(r"(?i)\s*(all-\d+-way\s*)+", args.margins):
            raise TabreleaseError("--margins names one table's variables, so it applies to a sweep over one table; "
                                  "sweep several tables with their paper models, or a workload such as all-2-way")
        margins = []
        for table in tables:
            model = parse_model(args.margins, table)
            report_dropped(model, table)
            margins.append(model.generators)
    settings = spec_settings_from_args(args, omit=SWEEP_VARIES)
    spec = spec_from_settings({**settings, "mechanism": (args.mechanisms or ("planned",))[0], "simulate": True,
                               "seed": args.seed}, epsilon=1.0)
    grid = make_grid(tables, args.epsilons, args.repetitions, spec=spec, margins=margins,
                     mechanisms=args.mechanisms, calibrations=args.calibrations)
    result = run_sweep(grid, args.out, jobs=args.scheduler or args.jobs or default_jobs(),
                       resume=args.resume, force=args.force, progress=None if not args.quiet else False)
    files = result.files + write_sweep_summary(result.runs, args.out)
    if args.json:
        from ._common import print_json

        print_json({"runs": grid.runs, "computed_now": result.computed_runs, "seconds": result.seconds,
                    "noise_mode": "simulation", "out": os.path.abspath(args.out),
                    "files": [os.path.join(os.path.abspath(args.out), name) for name in files]})
        return 0
    print(f"{grid.runs} runs ({result.computed_runs} computed now) in {result.seconds:.1f} s; simulation-mode noise")
    for name in files:
        print(f"  {os.path.join(args.out, name)}")
    return 0


def _check_names(given, tables) -> None:
    """Refuse a table from a file named as a built-in table is (by its stem) but holding other counts: its runs,
    summary and figures would be labelled as that table's (a methodologist's trial: a file rochdale.csv holding
    another table swept as "rochdale"), as the frontier refuses it."""
    from ..errors import TabreleaseError
    from ..tables import BUILTIN_TABLES, holds_builtin_counts

    for source, table in zip(given, tables):
        if table.name in BUILTIN_TABLES and source != table.name and not holds_builtin_counts(table.name, table):
            raise TabreleaseError(f"the file {source} is named {table.name!r}, as a built-in table is, but holds "
                                  "other counts: rename the file (a table from a file is named by its stem)")
