"""Argument helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any


def add_table_arguments(parser) -> None:
    parser.add_argument("table", metavar="TABLE", help="a built-in table name, or a CSV or Parquet file: long format "
                        "(a count column) or, with --microdata, one row per person")
    parser.add_argument("--count-column", default="count", help="name of the count column in a CSV (default: count)")
    parser.add_argument(
        "--sparse", action="store_true", help="a CSV may omit zero cells (by default every cell must be listed)"
    )
    parser.add_argument("--microdata", action="store_true", help="the file has one row per person (no count "
                        "column); it is counted straight into the margins a release needs")
    parser.add_argument("--variables", type=name_list, metavar="V1,V2,...", help="with --microdata: the columns "
                        "to tabulate (default: all)")
    parser.add_argument("--levels", metavar="FILE", help="a JSON file declaring each variable's levels in order, "
                        '{"sex": ["f", "m"], ...}: needed in release mode for a --sparse table')
    parser.add_argument("--metadata", metavar="FILE", help="a JSON file declaring the variables in order, each "
                        "one's levels in order and optional label and level_labels (the shape of tables/*.json)")
    parser.add_argument("--sheet", default=None, help="the sheet of an .xlsx workbook (default: the first); needs "
                        "the excel extra (openpyxl)")
    parser.add_argument("--sep", choices=("comma", "semicolon", "tab", "pipe"), default=None,
                        help="the CSV field separator (default: detected from the header among , ; tab |)")
    parser.add_argument("--encoding", default="utf-8",
                        help="the CSV text encoding (default utf-8, with or without a BOM; e.g. latin-1, cp1252)")
    parser.add_argument("--decimal", default=None, help="the decimal mark of the count column (default . or, with "
                        "--thousands ., a comma); counts "
                        "must still be whole numbers")
    parser.add_argument("--thousands", default=None, help="the thousands mark of the count column, e.g. . or ' "
                        "(default none)")


SEPARATOR_NAMES = {"comma": ",", "semicolon": ";", "tab": "\t", "pipe": "|"}


def csv_options_from_args(args):
    from ..tables import CsvOptions

    sep = getattr(args, "sep", None)
    return CsvOptions(sep=None if sep is None else SEPARATOR_NAMES[sep],
                      encoding=getattr(args, "encoding", "utf-8"),
                      decimal=getattr(args, "decimal", None), sheet=getattr(args, "sheet", None),
                      thousands=getattr(args, "thousands", None))


def load_from_args(args):
    from ..tables import load_input

    return load_input(args.table, microdata=getattr(args, "microdata", False),
                      variables=getattr(args, "variables", None), levels_file=getattr(args, "levels", None),
                      metadata_file=getattr(args, "metadata", None), count_column=args.count_column,
                      sparse=args.sparse, csv_options=csv_options_from_args(args))


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return value


def epsilon_list(text: str) -> tuple[float, ...]:
    from .._limits import MAX_EPSILONS

    try:
        if ":" in text:
            start, stop, step = (float(p) for p in text.split(":"))
            if step <= 0 or stop <= start:
                raise ValueError
            span = (stop - start) / step - 1e-9
            if not span <= MAX_EPSILONS:  # counted before any value is made (and inf or nan is no count)
                raise argparse.ArgumentTypeError(f"{text!r} gives more than {MAX_EPSILONS:,} epsilons, the most "
                                                 "one grid may have")
            count = math.ceil(span)
            values = tuple(round(start + i * step, 12) for i in range(count))
        else:
            parts = text.split(",")
            if any(not p.strip() for p in parts):  # "1,,2" or a trailing comma: a value left out by mistake
                raise argparse.ArgumentTypeError(f"{text!r} has an empty value between commas")
            values = tuple(float(p) for p in parts)
            if len(values) > MAX_EPSILONS:
                raise argparse.ArgumentTypeError(f"{len(values):,} epsilons are more than {MAX_EPSILONS:,}, the most "
                                                 "one grid may have")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of numbers or START:STOP:STEP") from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every epsilon must be a positive finite number")
    return values


def name_list(text: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    return names


def _whole_number(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
        return value

    return parse


positive_int = _whole_number(1)
non_negative_int = _whole_number(0)


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, allow_nan=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(value):
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def report_dropped(model, table) -> None:
    """Say which asked-for margins were dropped as inside another (on standard error, so --json stays one document)."""
    from ..models import margin_label

    if model.dropped:
        labels = ", ".join(margin_label(g, table.letters) for g in model.dropped)
        print(f"note: not planned separately, being inside another margin (sum that one to get it): {labels}",
              file=sys.stderr)


def budget_line(status) -> str:
    """What a dataset has spent and has left, in words: under which unit, by which accounting."""
    if status.rho_budget is not None:
        return (f"spent rho {status.rho_spent:.6g} of {status.rho_budget:.6g} (zCDP, {status.unit}), "
                f"{status.rho_remaining:.6g} remains")
    if status.unit == "none":
        return "no unit covers all its releases, so no total can be stated"
    if status.epsilon_budget is None:
        return f"spent epsilon {status.epsilon_spent:.6g} ({status.unit}); no budget set"
    return (f"spent epsilon {status.epsilon_spent:.6g} of {status.epsilon_budget:g} ({status.unit}), "
            f"{status.epsilon_remaining:.6g} remains")
