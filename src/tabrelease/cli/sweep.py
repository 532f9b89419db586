"""`tabrelease sweep`: simulated releases over a grid of tables, mechanisms, calibrations, epsilon and repetitions."""

from __future__ import annotations

import os

from ._common import epsilon_list, name_list, non_negative_int, positive_float, positive_int, report_dropped


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="risk-utility sweep: many simulated releases over a grid, each measured by a refit",
        description="Simulated releases over tables x mechanisms x calibrations x epsilon x repetitions. Every run's "
        "seed derives from --seed and the run's coordinates, so each run replays alone. Results (one row per run) go "
        "to OUT/runs.parquet and OUT/runs.csv, per-margin errors to OUT/margin_errors.*; a killed sweep continues "
        "with --resume.",
    )
    parser.add_argument("tables", metavar="TABLE", nargs="+", help="built-in table names or long-format CSV paths")
    parser.add_argument("--epsilons", required=True, type=epsilon_list, metavar="SPEC",
                        help="comma list (0.1,0.5,1) or START:STOP:STEP, STOP excluded (0.005:2:0.01)")
    parser.add_argument("--repetitions", required=True, type=positive_int, metavar="N")
    parser.add_argument("--out", required=True, metavar="DIR")
    add_execution_arguments(parser)
    parser.add_argument("--mechanisms", default="auto", type=name_list, metavar="M[,M...]")
    parser.add_argument("--calibrations", default="exact", type=name_list, metavar="exact|paper[,...]")
    parser.add_argument("--neighbours", default="add-remove", choices=("add-remove", "replace"))
    parser.add_argument("--delta", type=positive_float, default=None, help="for the gaussian mechanism")
    parser.add_argument("--margins", default=None, metavar="SPEC",
                        help="margins to release (one table only; default: each table's paper model)")
    parser.add_argument("--count-column", default="count")
    parser.add_argument("--sparse", action="store_true", help="a CSV may omit zero cells")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (runs, seconds, files)")
    parser.set_defaults(run=run)


def add_execution_arguments(parser) -> None:
    parser.add_argument("--seed", type=non_negative_int, default=0, help="master seed (default 0)")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="local worker processes (default: the CPUs available)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run on a Dask distributed cluster (e.g. tcp://host:8786) instead of local processes")
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
    from ..tables import load_table

    if args.resume and args.force:
        raise TabreleaseError("--resume and --force contradict each other; give one")
    tables = [load_table(t, args.count_column, complete=not args.sparse) for t in args.tables]
    margins = None
    if args.margins is not None:
        if len(tables) != 1:
            raise TabreleaseError("--margins applies to a sweep over one table; sweep several tables with their paper models")
        model = parse_model(args.margins, tables[0])
        report_dropped(model, tables[0])
        margins = [model.generators]
    grid = make_grid(
        tables, args.epsilons, args.repetitions, margins=margins, mechanisms=args.mechanisms,
        calibrations=args.calibrations, neighbours=args.neighbours, delta=args.delta, master_seed=args.seed,
    )
    result = run_sweep(grid, args.out, jobs=args.jobs or default_jobs(), scheduler=args.scheduler,
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
