"""`tabrelease ledger`: the privacy budget spent and remaining per table; set a table's budget."""

from __future__ import annotations

from ._common import positive_float, print_json


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="show the privacy budget spent and remaining per table, or set a table's budget",
        description="Show a privacy ledger (releases recorded with `release --ledger FILE`): per table, the releases, "
        "epsilon and delta spent under basic sequential composition, the budget and what remains. With --set-budget "
        "TABLE --epsilon E [--delta D], give that table a total budget.",
    )
    parser.add_argument("ledger", metavar="FILE")
    parser.add_argument("--set-budget", metavar="TABLE", help="a built-in table name or CSV path to give a budget")
    parser.add_argument("--epsilon", type=positive_float, help="the total epsilon budget (with --set-budget)")
    parser.add_argument("--delta", type=float, default=None, help="the total delta budget (default 0)")
    parser.add_argument("--count-column", default="count")
    parser.add_argument("--sparse", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..errors import TabreleaseError
    from ..ledger import ledger_summary, set_budget
    from ..tables import load_table

    if args.set_budget is not None:
        if args.epsilon is None:
            raise TabreleaseError("--set-budget needs --epsilon (the table's total budget)")
        table = load_table(args.set_budget, args.count_column, complete=not args.sparse)
        set_budget(args.ledger, table, args.epsilon, args.delta)
    elif args.epsilon is not None or args.delta is not None:
        raise TabreleaseError("--epsilon and --delta set a budget: give --set-budget TABLE too")
    rows = ledger_summary(args.ledger)
    if args.json:
        print_json({"ledger": args.ledger, "composition": "basic sequential (epsilons add, deltas add)",
                    "tables": [r.as_dict() for r in rows]})
        return 0
    print(f"{'table':<20} {'fingerprint':<14} {'releases':>8} {'eps spent':>10} {'eps budget':>10} {'eps left':>9} "
          f"{'delta spent':>11} {'delta left':>10}")
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.6g}"  # noqa: E731
        print(f"{r.table:<20} {r.fingerprint[:12]:<14} {r.releases:>8} {r.epsilon_spent:>10.6g} "
              f"{fmt(r.epsilon_budget):>10} {fmt(r.epsilon_remaining):>9} {r.delta_spent:>11.3g} {fmt(r.delta_remaining):>10}")
    print("composition: basic sequential (epsilons add, deltas add); '-' = no budget set")
    return 0
