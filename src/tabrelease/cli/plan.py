"""`tabrelease plan`: the expected error of each released margin at each epsilon, before anything is drawn."""

from __future__ import annotations

import argparse
import json

from ..errors import TabreleaseError
from ..spec import EPSILON_RANGE, PLANNING_EPSILON_RANGE, SETTING_NAMES
from ._common import (add_spec_arguments, add_table_arguments, dropped_note, epsilon_list, load_from_args,
                      positive_float, report_dropped)

# The settings a plan reads (no counts are drawn, so nothing about noise, post-processing or outputs).
PLAN_SETTINGS = ("delta", "neighbours", "margins", "public_total", "plan_objective", "plan_candidates")
UPPER_FIGURE = ("an upper figure: the normal approximation is one for Laplace noise (a cell measured by one Laplace "
                "draw errs by sd / sqrt(2) on average, 11% less than the normal's sd sqrt(2 / pi)), and non-negativity "
                "lowers the error on sparse or small tables, rounding to counts where the noise is small; "
                "--reference TABLE (a public table like this one: an old census, a synthetic one) gives the epsilon of "
                "the fitted, rounded release")


LEVELS_READ_NOTE = ("the levels were read from the data (microdata or a --sparse table, without --levels): the shape, "
                    "and so this plan, shows which values occur; declare every variable's levels with --levels FILE "
                    "for a plan that reads nothing of the data")


def _at_the_floor(epsilon: float | None) -> bool:
    """Whether the search for the epsilon a target needs stopped at the smallest a release takes."""
    return epsilon is not None and epsilon <= EPSILON_RANGE[0] * (1 + 1e-9)


def _shown(epsilon: float | None) -> str:
    """An epsilon a target needs, as the terminal shows it: "beyond" the largest a release takes, "at most" the
    smallest (the search stops at both), else the value."""
    if epsilon is None:
        return f"beyond {EPSILON_RANGE[1]:g}"
    return f"at most {EPSILON_RANGE[0]:g}" if _at_the_floor(epsilon) else f"{epsilon:.4g}"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="expected error of each margin at each epsilon, before any noise is drawn",
        description="What a release would cost in accuracy, before spending any epsilon: per released margin and "
        "epsilon, the expected L1 error and per-cell standard deviation of the planned mechanism, beside the "
        "paper mechanism's (the unbiased linear reconstruction of each one's measurements). Reads only the "
        "table's variables and levels: no count enters the plan, and nothing is charged.",
    )
    add_table_arguments(parser)
    parser.add_argument("--epsilon", type=epsilon_list, help="one epsilon or a comma list (0.1,0.5,1)")
    parser.add_argument("--target-l1", type=positive_float, metavar="ERROR",
                        help="instead of --epsilon: the epsilon each margin needs for an expected L1 error of at most "
                        "ERROR counts")
    parser.add_argument("--reference", metavar="TABLE",
                        help="with --target-l1: a public table of the same variables and levels (one released "
                        "before, or one of a published total), read as the table is; the error is then the fitted "
                        "release's, simulated on it (non-negativity in view), not the unbiased figure")
    add_spec_arguments(parser, omit=tuple(n for n in SETTING_NAMES if n not in PLAN_SETTINGS))
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..models import default_model, margin_label, parse_model
    from ..forecast import expected_errors_table, total_noise_sds
    from ..tables import margin_title, people_names

    from ..spec import spec_from_settings

    spec = spec_from_settings({n: getattr(args, n) for n in PLAN_SETTINGS}, epsilon=1.0)
    if (args.epsilon is None) == (args.target_l1 is None):
        raise TabreleaseError("give --epsilon (the errors it gives) or --target-l1 (the epsilon an error needs), "
                              "one of the two")
    table = load_from_args(args)
    from ..tables import LEVELS_FROM_DATA

    # Read from data that need not show every level: the shape (and the plan) says which values occur, and a plan
    # said to be "computed from the shape and margins only" must say where that shape came from (a new user's trial).
    shape_note = (LEVELS_READ_NOTE,) if table.metadata.get(LEVELS_FROM_DATA) else ()
    model = default_model(table) if args.margins is None else parse_model(args.margins, table)
    dropped = dropped_note(model, table)
    if not args.json:  # with --json it is among the document's notes
        report_dropped(model, table)
    # Margins are shown by their variables' names for people; the letters (which depend on the variables read) only
    # beside them in --json, as a compact alias.
    names, _ = people_names(table)
    if args.reference is not None and args.target_l1 is None:
        raise TabreleaseError("--reference applies to --target-l1 (the epsilon a target error needs)")
    if args.target_l1 is not None:
        from ..forecast import epsilon_for_target

        reference = None if args.reference is None else _reference_counts(args, table)
        runs = relative_se = None
        if reference is not None:
            from ..forecast import target_runs

            runs, relative_se = target_runs(table.shape, model.generators, args.target_l1, spec, reference)
        needed = epsilon_for_target(table.shape, model.generators, args.target_l1, spec, reference=reference,
                                    runs=runs)
        precision = None if runs is None else (
            f"simulated with {runs} releases an epsilon (the same seeds at every epsilon): a margin's mean error is "
            f"known to about {relative_se:.1%} at its unbiased epsilon, by a first batch there (its relative standard "
            f"error; at the smaller epsilon found it can be larger)")
        rows = [{"margin": margin_title(names, g), "letters": margin_label(g, table.letters),
                 "target_l1": args.target_l1, "epsilon_needed": e} for g, e in needed.items()]
        reachable = [e for e in needed.values() if e is not None]
        overall = max(reachable) if len(reachable) == len(needed) else None
        if args.json:
            notes = ([precision] if reference is not None else [UPPER_FIGURE]) + ([dropped] if dropped else []) \
                + list(shape_note)
            if overall is None:  # null in `epsilon_needed`: said, as the terminal says "beyond"
                notes.append(f"a margin's epsilon_needed is null where the target is beyond reach at epsilon "
                             f"{EPSILON_RANGE[1]:g}, the largest a release takes")
            if any(_at_the_floor(e) for e in needed.values()):  # as the terminal says "at most"
                notes.append(f"a margin's epsilon_needed of {EPSILON_RANGE[0]:g} is the smallest a release takes: "
                             "the target is met there, and perhaps at less")
            _print_json(table, spec, "epsilon_for_target", rows, reference is not None, notes=notes,
                        target_l1=args.target_l1, epsilon_needed_for_all=overall)
            return 0
        how = ("computed from the shape and margins only: the unbiased figure, an upper one" if reference is None else
               f"the fitted release's mean error, simulated on the reference {args.reference}")
        print(f"{table.name}: the epsilon each margin needs for an expected L1 error of at most {args.target_l1:g} "
              f"({spec.mechanism_name} mechanism; {how})")
        width = max(12, *(len(r["margin"]) for r in rows))
        for r in rows:
            print(f"{r['margin']:<{width}} {_shown(r['epsilon_needed']):>12}")
        print(f"all margins at once: epsilon {_shown(overall)} (the plan is made for all of them together)")
        if any(_at_the_floor(e) for e in needed.values()):
            print(f"at most {EPSILON_RANGE[0]:g}: the smallest epsilon a release takes meets the target (and perhaps "
                  "less would)")
        if reference is None:  # where the fit's non-negativity helps (sparse tables), the figure overspends
            print(UPPER_FIGURE)
        else:
            print(precision)
        for note in shape_note:
            print(f"note: {note}")
        return 0
    low, high = PLANNING_EPSILON_RANGE
    for epsilon in args.epsilon:  # past this range the planning arithmetic overflows
        if not low <= epsilon <= high:
            raise TabreleaseError(f"plan takes an epsilon between {low:g} and {high:g} (past them its arithmetic "
                                  f"fails), not {epsilon!r}")
    rows = expected_errors_table(table.shape, model.generators, args.epsilon, spec)
    totals = total_noise_sds(table.shape, model.generators, args.epsilon, spec)
    rows = [{"margin": margin_title(names, row["axes"]), "letters": margin_label(row["axes"], table.letters),
             **{k: v for k, v in row.items() if k != "axes"}} for row in rows]
    from ..forecast import _plan

    notes = [note for note in _plan(table.shape, model.generators, spec, args.epsilon[0]).notes
             if "candidate" in note or "measured only" in note]  # what the plan did not consider, in its own words
    notes += shape_note
    if args.json:
        notes += [dropped] if dropped else []
        _print_json(table, spec, "expected_errors", rows, False,
                    notes=notes + ([rows[0]["paper_note"]] if rows[0]["paper_note"] else []),
                    total_noise=[t for t in totals if t["total_noise_sd"] is not None])
        return 0
    noise = "Gaussian" if spec.delta else "Laplace"
    print(f"{table.name}: expected error of each released margin ({spec.mechanism}, {noise}, {spec.neighbours} "
          f"neighbours{', public total' if spec.option('public_total') else ''}); computed from the shape and margins "
          "only")
    width = max(12, *(len(r["margin"]) for r in rows))
    print(f"{'margin':<{width}} {'cells':>5} {'epsilon':>8} {'E L1 ' + spec.mechanism_name:>15} {'cell sd':>9} "
          f"{'E L1 every cell':>16} {'E L1 ' + rows[0]['paper_mechanism'] + '*':>18} {'ratio':>6}")
    for r in rows:
        paper, every_cell = r["paper_expected_l1"], r["cells_expected_l1"]
        shown = "-" if every_cell is None else f"{every_cell:.4g}"
        theirs, ratio = ("-", "-") if paper is None else (f"{paper:.4g}", f"{r['expected_l1'] / paper:.2f}")
        print(f"{r['margin']:<{width}} {r['cells']:>5} {r['epsilon']:>8g} {r['expected_l1']:>15.4g} {r['cell_sd']:>9.4g} "
              f"{shown:>16} {theirs:>18} {ratio:>6}")
    print("E L1: expected L1 error of the unbiased linear reconstruction of the measurements (normal approximation:"
          " an upper figure for Laplace noise, 13% above it where a cell is one Laplace draw); non-negativity "
          "and rounding reduce it, the more the sparser the table is against the noise (the audit "
          "states the error simulated on a table with the released margins). Every cell: Laplace noise on each cell of "
          "the full table (Laplace only).")
    line = total_noise_line(totals)
    if line:
        print(line)
    for note in notes:
        print(f"note: {note}")
    print("*: the same for the paper's measurements with equal scales; its own LP and rounding do worse than this "
          "(see `tabrelease frontier` for measured errors). ratio: this plan's E L1 over the paper's (below 1: this "
          "plan expects less error)")
    if rows[0]["paper_note"]:
        print(f"note: {rows[0]['paper_note']}")
    return 0


def total_noise_line(totals: list) -> str | None:
    """What the terminal says of the noise in the released total (`forecast.total_noise_sds`), or None where the
    plan does not tell it."""
    known = [t for t in totals if t["total_noise_sd"] is not None]
    if not known:
        return None
    if all(t["total_noise_sd"] == 0 for t in known):
        return "total: released exactly, with no noise (n is public under this guarantee)"
    shown = ", ".join(f"{t['total_noise_sd']:.4g} at epsilon {t['epsilon']:g}" for t in known)
    return (f"total: the released total's noise has standard deviation {shown} (counts). A table of fewer records "
            "than that is released with a total that is more noise than count, which the fit's non-negativity does "
            "not correct (it corrects the noise in the interactions): spend more epsilon, or give --public-total "
            "where n is public already (a guarantee between tables of equal n)")


def _print_json(table, spec, question: str, rows: list, simulated: bool, *, notes: list, **extra) -> None:
    """One JSON object on stdout, whichever question was asked (schema `plan-1`), checked before it is printed."""
    from ..schemas import PLAN, validate

    document = {"schema": "tabrelease/plan/1", "table": table.name, "question": question, "mechanism": spec.mechanism_name,
                "noise": "gaussian" if spec.delta else "laplace", "neighbours": spec.neighbours,
                "delta": spec.delta, "public_total": bool(spec.option("public_total")),
                "error_model": "simulated on the reference" if simulated else "unbiased", **extra,
                "margins": rows, "notes": notes}
    validate(document, PLAN)
    print(json.dumps(document, indent=1, allow_nan=False))


def _reference_counts(args, table):
    """The --reference table's counts, read with the table's own input settings; its variables and levels must be
    the table's."""
    from ..spec import INPUT_SETTINGS, source_from_settings
    from ..workflow import read_source

    import numpy as np

    settings = {s.name: getattr(args, s.name) for s in INPUT_SETTINGS}
    try:
        reference = read_source(source_from_settings(args.reference, settings))
    except TabreleaseError:
        if not settings.get("microdata"):
            raise
        # A published table of counts for microdata (a new user's trial: --microdata applied to the reference too,
        # and the advice to drop it would have broken the table's own reading): read as a long table, its cells
        # listed or not, with the table's levels file.
        as_counts = {**settings, "microdata": False, "variables": None, "engine": None, "scheduler": None,
                     "sparse": True}
        try:
            reference = read_source(source_from_settings(args.reference, as_counts))
        except TabreleaseError:
            raise TabreleaseError(f"the reference {args.reference} can be read neither as microdata nor as a table "
                                  f"of counts (a {args.count_column!r} column) of {table.name}'s variables") from None
    if list(reference.variables) != list(table.variables) or [sorted(v) for v in reference.levels] != [
            sorted(v) for v in table.levels]:
        raise TabreleaseError(f"the reference {args.reference} does not have the variables and levels of "
                              f"{table.name}: a reference is a table of the same variables and levels")
    counts = np.asarray(reference.counts)
    for axis, (theirs, ours) in enumerate(zip(reference.levels, table.levels)):  # in the table's order of levels
        counts = np.take(counts, [list(theirs).index(level) for level in ours], axis=axis)
    if getattr(table, "held_as_cells", True) and np.array_equal(counts, table.counts):
        # A review's trial: the confidential table given as its own reference ran the simulation on the true counts
        # and printed epsilons that depend on them, uncharged.
        raise TabreleaseError(f"the reference {args.reference} holds exactly {table.name}'s counts: a reference is "
                              "public data (a table released before, a published one), and figures simulated on the "
                              "confidential counts would be derived from them; nothing was planned")
    return counts
