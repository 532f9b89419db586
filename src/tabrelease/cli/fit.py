"""`tabrelease fit`: refit a hierarchical log-linear model to a table."""

from __future__ import annotations

from ..errors import TabreleaseError
from ._common import add_table_arguments, load_from_args, positive_float, print_json


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="fit a hierarchical log-linear model (MLE or extended MLE)",
        description="Fit a hierarchical log-linear model by IPF (finished by Newton where IPF is slow); where zero "
        "margins make the MLE not exist, fit the extended MLE on the facial set and adjust the degrees of freedom.",
    )
    add_table_arguments(parser)
    parser.add_argument("--model", help="bracket notation, e.g. '[AB][BC]' or all-2-way; default: the built-in "
                        "table's paper model")
    parser.add_argument("--tol", type=positive_float, default=None, help="tolerance on the fitted margins, in counts")
    parser.add_argument("--max-iter", type=int, default=None, help="cap on IPF cycles plus Newton steps")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a summary")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..loglinear import fit_summary

    if args.max_iter is not None and args.max_iter < 1:
        raise TabreleaseError("--max-iter must be at least 1")
    table = load_from_args(args)
    if args.model is None and not (table.metadata or {}).get("model"):
        from ..tables.model import names_not_shown

        # Said here in fit's own terms (the library's message also names release's --margins and the API's); by
        # letter only where the names are a first row not known to be a header (they may be a record's values).
        names = table.letters if names_not_shown(table) else table.variables
        # An unsaturated example: independence of two variables; else two-way terms (of the first three variables).
        pairs = ("".join(f"[{v}]" for v in names) if len(names) <= 2 else
                 "".join(f"[{a},{b}]" for a, b in [(names[0], names[1]), (names[0], names[2]), (names[1], names[2])]))
        called = ", ".join(v if v == c else f"{c} ({v})" for c, v in zip(table.letters, names))
        raise TabreleaseError(f"this table has no default model: name one with --model, e.g. '{pairs}' (its "
                              f"variables, by letter or name: {called})")
    summary = fit_summary(table, args.model, tol=args.tol, max_iter=args.max_iter)
    if args.json:
        print_json(summary)
        return 0
    print(format_summary(summary))
    return 0


def format_summary(s: dict) -> str:
    lines = [
        f"table        {s['table']}  ({'x'.join(map(str, s['shape']))}, n = {s['n']}, {s['zero_cells']} of {s['cells']} cells zero)",
        f"model        {s['model']}" + (f"   (dropped as contained in others: {', '.join(s['dropped_generators'])})" if s["dropped_generators"] else ""),
        *([f"             {s['model_named']}"] if s.get("model_named") and s["model_named"] != s["model"] else []),
        f"MLE          {'exists' if s['mle_exists'] else 'does not exist: extended MLE on the facial set'}"
        f" ({s['facial_set_size']} of {s['cells']} cells)",
        f"G2           {s['g2']:.2f}",
        f"Pearson X2   {s['pearson_x2']:.2f}",
        f"df           {s['df']} nominal, {s['df_adjusted']} adjusted for zeros",
        f"fit          {s['iterations']} iterations (IPF cycles + Newton steps), "
        f"{'converged' if s['converged'] else 'DID NOT CONVERGE'}",
        f"L1 to uniform {s['l1_to_uniform']:.3f}  (total variation {s['l1_to_uniform'] / 2:.3f})",
    ]
    paper = s.get("paper")
    if paper:
        lines.append("")
        lines.append("the paper (Yang, Fienberg & Rinaldo, Table 7 and Section 6) prints, beside this tool's values:")
        lines.append(f"  G2 {paper['g2']:.2f} (tool {s['g2']:.2f}), df {paper['df']} (tool {s['df']} nominal, "
                     f"{s['df_adjusted']} adjusted), L1 to uniform {paper['l1_to_uniform']:.2f} (tool {s['l1_to_uniform']:.2f})")
        lines.append("  the printed G2 is not reproduced by these verified counts under any labelling; see tables/PROVENANCE.md")
    return "\n".join(lines)
