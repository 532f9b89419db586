"""`tabrelease table8`: the paper's Table 8 beside what its formulas and exact calibration give."""

from __future__ import annotations

from ._common import print_json


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "table8",
        help="reproduce the paper's Table 8 (noise scales and L1 bound constants)",
        description="The Yang-Fienberg-Rinaldo Table 8 as printed, beside the values its formulas give with the true "
        "downward closures, and beside exact calibration.",
    )
    parser.add_argument("--neighbours", default="add-remove", choices=("add-remove", "replace"))
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..paper.tables import reproduce_table8, table8_findings

    frame = reproduce_table8(neighbours=args.neighbours)
    findings = table8_findings(frame)
    if args.json:
        rows = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
        print_json({"rows": rows, "findings": findings})
        return 0
    cols = ["table", "epsilon", "printed_B", "true_B", "printed_scale", "paper_formula_scale", "exact_scale",
            "paper_scale_actual_epsilon", "printed_bound_multiplier", "paper_formula_bound_multiplier"]
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print()
    for finding in findings:
        print(f"- {finding}")
    return 0
