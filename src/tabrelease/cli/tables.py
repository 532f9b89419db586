"""`tabrelease tables`: the built-in tables."""

from __future__ import annotations

from ._common import print_json


def register(subparsers) -> None:
    parser = subparsers.add_parser("tables", help="list the built-in tables", description="List the built-in tables.")
    parser.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..tables import describe_builtin_tables

    rows = describe_builtin_tables()
    if args.json:
        print_json(rows)
        return 0
    header = f"{'name':<16} {'paper':<9} {'shape':<16} {'n':>6} {'zero cells':>10}  model"
    print(header)
    print("-" * len(header))
    for row in rows:
        shape = "x".join(map(str, row["shape"]))
        paper = row['paper_table'] or "-"
        print(f"{row['name']:<16} {paper:<9} {shape:<16} {row['n']:>6} {row['zero_cells']:>10}  {row['model']}")
    return 0
