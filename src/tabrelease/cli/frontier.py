"""`tabrelease frontier`: every release strategy's error against epsilon, on the built-in tables or tables from
files."""

from __future__ import annotations

import json
import sys
import time

from ._common import epsilon_list, name_list

# How a table's file is read (`spec.INPUT_SETTINGS`): a frontier releases the table's cells, so not microdata.
FILE_SETTINGS = ("count_column", "sparse", "levels", "metadata", "sheet", "sep", "encoding", "decimal", "thousands")


def register(subparsers) -> None:
    from ._common import _add_settings
    from ..spec import INPUT_SETTINGS

    parser = subparsers.add_parser(
        "frontier",
        help="error against epsilon of every release strategy on the built-in tables or tables from files (report "
        "and figures)",
        description="The planned release, the paper's LP, least squares without planning, cells and margins and the "
        "other strategies, on each built-in table with its paper model and with every two-way margin, or on tables "
        "from files (long tables: a count column) with every two- or three-way margin: mean and spread of the max and "
        "mean L1 margin error, |n' - n|, integer/consistent shares, one figure per table, ratios, and the checks of "
        "the planned release.",
    )
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--epsilon", type=epsilon_list, default=None, help="default 0.05,0.1,0.25,0.5,1,2")
    parser.add_argument("--repetitions", type=int, default=None, help="runs per point (default 50)")
    parser.add_argument("--tables", type=name_list, default=None,
                        help="built-in table names, or files of long tables (a count column; read as the options "
                        "below say), each named by its file's stem; default: the paper's four tables and housing, "
                        "titanic, minn38")
    parser.add_argument("--workloads", type=name_list, default=None,
                        help="which margins each table releases: model (its default model's), all-2-way (every "
                        "two-way margin), all-3-way (every three-way margin); default model and all-2-way")
    parser.add_argument("--strategies", type=name_list, default=None,
                        help="run only these strategies (default: every one)")
    parser.add_argument("--keep-others", action="store_true",
                        help="with --strategies and --force: keep the other strategies' rows of the runs.csv already "
                        "in --out (the same tables, workloads, epsilons and repetitions; their seeds do not depend "
                        "on which strategies run) and rewrite the report from all of them")
    parser.add_argument("--seed", type=int, default=None, help="the master seed every run's seed is made from "
                        "(default 20261122, the committed frontier's): another gives independent draws, to check a "
                        "ranking on runs it was not read from")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--force", action="store_true", help="replace the frontier files in an existing --out")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (releases, seconds, files)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_settings(parser, [setting for setting in INPUT_SETTINGS if setting.name in FILE_SETTINGS])
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..errors import TabreleaseError
    from ..frontier import (EPSILONS, FRONTIER_TABLES, MASTER_SEED, REPETITIONS, STRATEGIES, WORKLOAD_CHOICES, WORKLOADS,
                            check_frontier_tables, run_frontier, strategy, table_label, workload_margins,
                            write_frontier)
    from ..spec import source_from_settings
    from ..sweeps.driver import local_executor
    from ..tables import BUILTIN_TABLES, counts_digest, load_table
    from ..workflow import read_source

    workloads = args.workloads or WORKLOADS
    for name in workloads:
        if name not in WORKLOAD_CHOICES:
            raise TabreleaseError(f"unknown frontier workload {name!r}; choose from {', '.join(WORKLOAD_CHOICES)}")
    from pathlib import Path

    # Built-in tables go by name (their tasks read them); a file is read here, as its input settings say, so that a
    # bad file or workload is refused before any process starts, and its tasks carry the table.
    settings = {name: getattr(args, name) for name in FILE_SETTINGS}
    tables = []
    for name in args.tables or FRONTIER_TABLES:
        if name in BUILTIN_TABLES:
            tables.append(name)
            continue
        if not Path(name).is_file():
            raise TabreleaseError(f"{name!r} is neither a built-in table ({', '.join(BUILTIN_TABLES)}) nor a file")
        tables.append(read_source(source_from_settings(name, settings)))
    check_frontier_tables(tables)
    for table in tables:
        for workload in workloads:
            workload_margins(load_table(table), workload)

    from ..spec import EPSILON_RANGE

    epsilons = args.epsilon or EPSILONS
    seed = MASTER_SEED if args.seed is None else args.seed
    # Each file table's counts, digested once: recorded beside the runs, and what --keep-others checks kept rows by.
    fingerprints = {table_label(t): counts_digest(load_table(t)) for t in tables if table_label(t) not in BUILTIN_TABLES}
    low, high = EPSILON_RANGE
    for epsilon in epsilons:  # as a release takes them (1e-7 had run for minutes, 701 past the sampler's domain)
        if not low <= epsilon <= high:
            raise TabreleaseError(f"the frontier takes an epsilon between {low:g} and {high:g}, as a release does, "
                                  f"not {epsilon!r}")
    if len(set(epsilons)) != len(epsilons):  # the same seeded runs twice had counted as twice the runs
        raise TabreleaseError("an epsilon appears twice in --epsilon")
    if Path(args.out).exists() and not args.force and any(Path(args.out).iterdir()):
        raise TabreleaseError(f"{args.out} exists and is not empty; choose another --out or pass --force")
    repetitions = REPETITIONS if args.repetitions is None else args.repetitions
    if repetitions < 2 or args.jobs < 1:
        raise TabreleaseError("--repetitions must be at least 2 and --jobs at least 1")
    from .._limits import MAX_REPETITIONS, MAX_RUNS

    if repetitions > MAX_REPETITIONS:
        raise TabreleaseError(f"--repetitions {repetitions:,} is more than {MAX_REPETITIONS:,}, the most runs per "
                              "point")
    points = len(tables) * len(workloads) * len(args.epsilon or EPSILONS)
    if points * repetitions > MAX_RUNS:
        raise TabreleaseError(f"{points} points x {repetitions:,} repetitions are more than {MAX_RUNS:,} runs of each "
                              "strategy, the most one frontier runs: fewer epsilons, tables, workloads or repetitions")
    chosen = tuple(strategy(n).name for n in (args.strategies or STRATEGIES))
    kept = None
    if args.keep_others:
        kept = _kept_rows(args, chosen, tables, workloads, epsilons, repetitions, seed, fingerprints)
    start = time.perf_counter()
    executor = local_executor(args.jobs)
    try:
        runs = run_frontier(tables, epsilons, repetitions, executor=executor, master_seed=seed,
                            progress=None if not args.quiet else False, workloads=workloads,
                            strategies=chosen + tuple(n for n in _sources(chosen) if n not in chosen))
    finally:
        executor.shutdown()
    not_run = [entry for entry in runs.attrs.get("not_run", []) if entry[3] in chosen]
    runs = runs[runs["strategy"].isin(chosen)]
    if kept is not None:
        import pandas as pd

        runs = pd.concat([kept, runs], ignore_index=True)
        # In the registry's order, as a full run lists them: the report's order then does not depend on which
        # strategies were run again.
        order = runs["strategy"].map({name: i for i, name in enumerate(STRATEGIES)}).fillna(len(STRATEGIES))
        runs = runs.iloc[order.argsort(kind="stable")].reset_index(drop=True)
        runs.attrs["kept"] = sorted(set(kept["strategy"]))
    runs.attrs["not_run"] = not_run
    runs.attrs["master_seed"], runs.attrs["fingerprints"] = seed, fingerprints
    command = "tabrelease " + " ".join(sys.argv[1:]) if "frontier" in sys.argv[1:2] else "tabrelease frontier"
    out = write_frontier(args.out, runs, seconds=time.perf_counter() - start, command=command)
    if args.json:
        from ._common import print_json

        print_json({"releases": len(runs), "seconds": time.perf_counter() - start, "noise_mode": "simulation",
                    "out": str(out.resolve()), "files": sorted(str(p.resolve()) for p in out.iterdir())})
        return 0
    print(f"{len(runs)} releases in {time.perf_counter() - start:.1f} s (simulation-mode noise); "
          f"report: {out / 'report.md'}")
    return 0


def _sources(chosen):
    """The strategies whose measurements a chosen one re-estimates (run, not reported, when not chosen)."""
    from ..frontier import strategy

    return [strategy(n).from_strategy for n in chosen if strategy(n).from_strategy is not None]


def _kept_rows(args, chosen, tables, workloads, epsilons, repetitions, seed, fingerprints):
    """The rows of the strategies not rerun, from the runs.csv in --out; refused unless that run is of the same
    points and repetitions."""
    from pathlib import Path

    import pandas as pd

    from ..errors import TabreleaseError

    if args.strategies is None or not args.force:
        raise TabreleaseError("--keep-others keeps the rows of the strategies not in --strategies: give both "
                              "--strategies and --force")
    path = Path(args.out) / "runs.csv"
    if not path.is_file():
        raise TabreleaseError(f"--keep-others needs a previous frontier in {args.out} (no runs.csv there)")
    from ..frontier import RUN_COLUMNS

    try:
        old = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise TabreleaseError(f"--keep-others cannot read {path}: {type(exc).__name__}") from None
    if "noise_mode" not in old:
        # A runs.csv written before the column: every frontier has been made by simulation noise (it has no
        # release mode), so its rows are marked as what made them.
        old = old.assign(noise_mode="simulation")
    if set(RUN_COLUMNS) - set(old.columns):
        raise TabreleaseError(f"{path} is not a frontier's runs.csv (it lacks "
                              f"{', '.join(sorted(set(RUN_COLUMNS) - set(old.columns)))}): run every strategy")
    old = old[list(RUN_COLUMNS)]
    from ..frontier import table_label
    from ..tables import load_table

    points = {(table_label(t), w, float(e)) for t in tables for w in workloads for e in epsilons}
    have = set(zip(old["table"], old["workload"], old["epsilon"].astype(float)))
    if have != points or int(old["repetition"].max()) + 1 != repetitions:
        raise TabreleaseError(f"the frontier in {args.out} is of other points or repetitions: run every strategy")
    # A table's file may hold other counts than it did under the same name: its kept rows must be of its n, and of
    # its counts (`fingerprints`, against those in RUN_FILE: a file with 300 counts moved and the same n had been
    # kept; a review's trial). A built-in table is the same counts by its name. And of the same master seed.
    from ..frontier import MASTER_SEED, RUN_FILE

    try:
        described = json.loads((Path(args.out) / RUN_FILE).read_text())
    except (OSError, ValueError):
        described = {}
    recorded = described.get("tables", {}) if isinstance(described, dict) else {}
    if (described.get("master_seed", MASTER_SEED) if isinstance(described, dict) else MASTER_SEED) != seed:
        raise TabreleaseError(f"the frontier in {args.out} was drawn from another --seed: run every strategy")
    for t in tables:
        n = load_table(t).n
        if set(old.loc[old["table"] == table_label(t), "n"].astype(int)) != {int(n)}:
            raise TabreleaseError(f"the frontier in {args.out} released another table named {table_label(t)!r} (of "
                                  "another n): run every strategy")
        if table_label(t) in fingerprints and recorded.get(table_label(t)) != fingerprints[table_label(t)]:
            raise TabreleaseError(f"the frontier in {args.out} released other counts as {table_label(t)!r} (or did "
                                  f"not record them in {RUN_FILE}): run every strategy")
    return old[~old["strategy"].isin(chosen)]
