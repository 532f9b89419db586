"""`tabrelease ledger`: make a ledger, verify it, show the budget spent and remaining per dataset, set budgets."""

from __future__ import annotations

from ._common import positive_float, print_json

ACTIONS = ("init", "verify", "show")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="make (init), verify or show a privacy ledger; set a dataset's budget",
        description="A privacy ledger records every release made with `release --ledger FILE` against the dataset it "
        "is drawn from. `ledger init FILE` makes a new ledger and its key (FILE.key, owner-only); `ledger verify FILE` "
        "checks its chain of MACs (an edited, deleted or reordered record is found); `ledger FILE` (or `ledger show "
        "FILE`) shows, per dataset, the releases, epsilon and delta spent under basic sequential composition, the "
        "budget and what remains; with --set-budget DATASET --epsilon E [--delta D] it sets that dataset's budget.",
    )
    parser.add_argument("words", nargs="+", metavar="[init|verify|show] FILE")
    parser.add_argument("--set-budget", metavar="DATASET", help="the dataset (a built-in table's name, or the name "
                        "given with release --dataset) whose total budget to set")
    parser.add_argument("--epsilon", type=positive_float, help="the total epsilon budget (with --set-budget)")
    parser.add_argument("--delta", type=float, default=None, help="the total delta budget (default 0)")
    parser.add_argument("--budget-neighbours", choices=("add-remove", "replace"), default="add-remove",
                        help="the guarantee the budget bounds: add-remove (default; releases that publish n exactly, "
                        "with --public-total or replace neighbours, are refused) or replace (n treated as known; an "
                        "add-remove release costs 2 epsilon)")
    parser.add_argument("--releases", action="store_true", help="list every release the ledger records (time, "
                        "dataset, mechanism, epsilon, margins, noise mode, output folder, and whether it failed)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..errors import TabreleaseError
    from ..ledger import init_ledger, ledger_summary, set_budget, verify_ledger

    if len(args.words) == 1:
        action, path = "show", args.words[0]
    elif len(args.words) == 2 and args.words[0] in ACTIONS:
        action, path = args.words
    else:
        raise TabreleaseError(f"give FILE, or one of {', '.join(ACTIONS)} then FILE")
    if action == "init":
        made = init_ledger(path)
        print(f"made the ledger {made} (key: {made}.key, owner-only, or $TABRELEASE_LEDGER_KEY)")
        return 0
    if action == "verify":
        problems = verify_ledger(path)
        for problem in problems:
            print(f"FAILED: {problem}")
        print("intact: every record's MAC and the head check out" if not problems else
              f"{len(problems)} problem(s): nothing can be spent or set until an auditor resolves them")
        return 0 if not problems else 1
    if args.set_budget is not None:
        if args.epsilon is None:
            raise TabreleaseError("--set-budget needs --epsilon (the dataset's total budget)")
        set_budget(path, args.set_budget, args.epsilon, args.delta, neighbours=args.budget_neighbours)
    elif args.epsilon is not None or args.delta is not None:
        raise TabreleaseError("--epsilon and --delta set a budget: give --set-budget DATASET too")
    if args.releases:
        from ..ledger import ledger_entries

        entries = ledger_entries(path)
        fields = ("time", "dataset", "mechanism", "epsilon", "delta", "neighbours", "total_public", "margins",
                  "noise_mode", "output", "failed")
        if args.json:
            print_json({"ledger": path, "releases": [{f: e.get(f) for f in fields} for e in entries]})
            return 0
        print(f"{'time':<25} {'dataset':<16} {'mechanism':<14} {'epsilon':>8} {'delta':>7} {'mode':<10} margins -> output")
        for e in entries:
            failed = f"  FAILED ({e['failed']})" if e["failed"] else ""
            print(f"{e['time']:<25} {e['dataset']:<16} {e['mechanism']:<14} {e['epsilon']:>8.4g} {e['delta']:>7.2g} "
                  f"{e['noise_mode']:<10} {''.join(e['margins'])} -> {e['output']}{failed}")
        print(f"{len(entries)} release(s)")
        return 0
    rows = ledger_summary(path)
    if args.json:
        print_json({"ledger": path, "composition": "basic sequential (epsilons add, deltas add)",
                    "datasets": [r.as_dict() for r in rows]})
        return 0
    print(f"{'dataset':<20} {'tables':>6} {'releases':>8} {'neighbours':>10} {'eps spent':>10} {'eps budget':>10} "
          f"{'eps left':>9} {'delta spent':>11} {'delta left':>10}")
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.6g}"  # noqa: E731
        print(f"{r.dataset:<20} {len(r.fingerprints):>6} {r.releases:>8} {r.neighbours:>10} {r.epsilon_spent:>10.6g} "
              f"{fmt(r.epsilon_budget):>10} {fmt(r.epsilon_remaining):>9} {r.delta_spent:>11.3g} {fmt(r.delta_remaining):>10}")
    print("composition: basic sequential (epsilons add, deltas add) under the neighbour relation shown: under replace, "
          "an add-remove release counts 2 epsilon; '-' = no budget set; 'tables': distinct tables (keyed fingerprints) "
          "released under the dataset")
    for r in rows:
        if len(r.fingerprints) > 1:
            print(f"NOTE: {r.dataset} was released from {len(r.fingerprints)} different tables (the data changed "
                  "between releases, or another file was given the same dataset name): one budget covers them")
    return 0
