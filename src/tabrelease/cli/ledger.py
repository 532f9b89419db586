"""`tabrelease ledger`: make a ledger, verify it, show the budget spent and remaining per dataset, set budgets."""

from __future__ import annotations

from ._common import decimal_float, positive_float, print_json

ACTIONS = ("init", "verify", "show")


def _bundle_found(entry) -> bool | None:
    """Whether the release's output folder holds the bundle of this charge now (its internal/charge.json names the
    charge's MAC); None where the record names no folder."""
    import hmac
    import json
    from pathlib import Path

    from ..ledger import CHARGE_FILE

    if not entry.get("output"):
        return None
    try:
        recorded = json.loads((Path(entry["output"]) / "internal" / CHARGE_FILE).read_text()).get("mac")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    return isinstance(recorded, str) and hmac.compare_digest(recorded, str(entry.get("mac")))


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="make (init), verify or show a privacy ledger; set a dataset's budget",
        # argparse would print the positional words twice ("[init|verify|show] FILE [[init|verify|show] FILE ...]")
        usage="tabrelease ledger [init|verify|show] FILE [options]",
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
    parser.add_argument("--delta", type=decimal_float, default=None, help="the total delta budget (default 0)")
    parser.add_argument("--budget-neighbours", choices=("add-remove", "replace", "sensitive-attributes"),
                        default="add-remove",
                        help="the privacy unit the budget bounds: add-remove (default; releases that publish n "
                        "exactly, with --public-total, replace neighbours or randomized response, are refused), "
                        "replace (n treated as known; an add-remove release costs 2 epsilon, (2 epsilon, (1 + "
                        "e^epsilon) delta), or 4 rho by group privacy; local epsilon counts as epsilon), or "
                        "sensitive-attributes (a change of the --budget-attributes of one record)")
    parser.add_argument("--budget-attributes", metavar="VAR,VAR", default=None,
                        help="the protected variables of a sensitive-attributes budget, by the table's own "
                             "variable names (the ledger reads no table: not their letters or names for people)")
    parser.add_argument("--rho", type=positive_float, default=None,
                        help="a zCDP budget: releases compose by adding rho (Gaussian releases their rho, pure "
                        "epsilon releases epsilon^2/2; approximate (epsilon, delta) ones that are not zCDP are refused)")
    parser.add_argument("--accounting", choices=("basic", "zcdp"), default=None,
                        help="basic (epsilons and deltas add; the default) or zcdp (rho adds; with --epsilon and "
                        "--delta the budget is the largest rho whose exact conversion gives them)")
    parser.add_argument("--bundles", nargs="+", metavar="DIR", default=None,
                        help="with verify: hold these release folders against the ledger (a bundle without its "
                        "charge, a charge without a bundle among them)")
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
    if action in ("init", "verify"):  # an option the action does not read is refused, never silently ignored
        given = [flag for flag, value in (("--releases", args.releases), ("--set-budget", args.set_budget),
                                          ("--epsilon", args.epsilon), ("--delta", args.delta), ("--rho", args.rho),
                                          ("--accounting", args.accounting),
                                          ("--budget-attributes", args.budget_attributes),
                                          ("--bundles", args.bundles if action == "init" else None))
                 if value not in (None, False)]
        if given:
            raise TabreleaseError(f"{given[0]} does not go with `ledger {action} FILE`"
                                  + (" (list releases with `ledger FILE --releases`)" if given[0] == "--releases"
                                     else ""))
    if action == "init":
        from ..ledger import KEY_ENVIRONMENT, key_file

        made = init_ledger(path)
        key = key_file(made)
        if args.json:
            print_json({"ledger": str(made), "key": None if key is None else str(key)})
        elif key is None:
            print(f"made the ledger {made}, keyed by ${KEY_ENVIRONMENT} (no key file)")
        else:
            print(f"made the ledger {made} and its key {key} (owner-only: keep it private, and keep it: without it "
                  f"the ledger can be neither written nor verified; ${KEY_ENVIRONMENT} may hold it instead)")
        return 0
    if action == "verify":
        from ..errors import LedgerIntegrityError
        from ..ledger import copied_from, ledger_aliases, scratch_copy_of, verify_bundles

        problems = verify_ledger(path)
        chain_intact = not problems
        if chain_intact and args.bundles is not None:
            problems = verify_bundles(path, args.bundles)
        notes = [] if problems else [
            f"{dataset} released data also released, whole or in part, under {', '.join(others)} (allowed as "
            "distinct datasets by the operator)" for dataset, others in ledger_aliases(path).items()]
        original = None if problems else copied_from(path)
        if original is not None:  # a backup verifies; it is never charged
            notes.append(f"this is a copy of the ledger at {original}, which is still there: it verifies, but "
                         "nothing can be spent or set in it")
        if not problems and scratch_copy_of(path):  # left by a batch's prediction that was killed
            notes.append("this is a throw-away copy that a batch's prediction made: it verifies, but nothing can be "
                         "spent or set in it (remove it)")
        checked = "every record's MAC, the head and the anchor check out" + (
            f", and each of the {len(args.bundles)} bundles has its charge and its public files as released" if args.bundles else "")
        if args.json:
            # The same verdict and exit status as the text, as one document (an auditor's script reads this).
            print_json({"ledger": path, "intact": not problems, "chain_intact": chain_intact,
                        "bundles_checked": None if args.bundles is None else len(args.bundles),
                        "problems": list(problems), "notes": notes,
                        "checked": checked if not problems else None})
            return 0 if not problems else LedgerIntegrityError.exit_status
        for problem in problems:
            print(f"FAILED: {problem}")
        for note in notes:
            print(f"NOTE: {note}")
        if not problems:
            print(f"intact: {checked}")
        elif chain_intact:
            print(f"{len(problems)} problem(s) between the ledger and the bundles given, each said above")
        else:
            print(f"{len(problems)} problem(s): nothing can be spent or set until an auditor resolves them")
        return 0 if not problems else LedgerIntegrityError.exit_status
    if args.bundles is not None:
        raise TabreleaseError("--bundles goes with `ledger verify FILE`")
    if args.set_budget is not None:
        if args.epsilon is None and args.rho is None:
            raise TabreleaseError("--set-budget needs --epsilon (the dataset's total budget) or --rho (a zCDP budget)")
        attributes = () if args.budget_attributes is None else tuple(
            a.strip() for a in args.budget_attributes.split(",") if a.strip())
        from ..ledger import budget_status

        before = budget_status(path, args.set_budget)
        set_budget(path, args.set_budget, args.epsilon, args.delta, neighbours=args.budget_neighbours,
                   attributes=attributes, rho=args.rho, accounting=args.accounting)
        if not args.json:
            # A budget changed is said with the one it replaces (a reviewer raised a spent budget, and the output
            # read as if it were new; the ledger's chain keeps both).
            was = _budget_words(before)
            print(f"set the budget of the dataset {args.set_budget} (recorded in the ledger {path})"
                  f"{'' if was is None else f'; it replaces {was}'}:")
    elif any(v is not None for v in (args.epsilon, args.delta, args.rho, args.accounting, args.budget_attributes)):
        raise TabreleaseError("--epsilon, --delta, --rho, --accounting and --budget-attributes set a budget: give "
                              "--set-budget DATASET too")
    if args.releases:
        from ..ledger import entry_margins, ledger_entries

        entries = ledger_entries(path)
        fields = ("time", "dataset", "mechanism", "epsilon", "delta", "neighbours", "total_public", "margins",
                  "margin_names", "noise_mode", "output", "failed")
        found = [_bundle_found(e) for e in entries]
        if args.json:
            print_json({"ledger": path, "releases": [{**{f: e.get(f) for f in fields}, "bundle_found": f}
                                                     for e, f in zip(entries, found)]})
            return 0
        print(f"{'time':<25} {'dataset':<16} {'mechanism':<14} {'epsilon':>8} {'delta':>7} {'mode':<10} margins -> output")
        for e, present in zip(entries, found):
            failed = f"  FAILED ({e['failed']})" if e["failed"] else ""
            if not e["failed"] and present is False:  # charged and not recorded failed, but no bundle of it there
                failed = ("  (no bundle of this charge there now: killed after its charge, moved, replaced or "
                          "deleted)")
            print(f"{e['time']:<25} {e['dataset']:<16} {e['mechanism']:<14} {e['epsilon']:>8.4g} {e['delta']:>7.2g} "
                  f"{e['noise_mode']:<10} {' '.join(entry_margins(e))} -> {e['output']}{failed}")
        print(f"{len(entries)} release(s)")
        return 0
    rows = ledger_summary(path)
    if args.json:
        print_json({"ledger": path, "composition": "per dataset, under its budget's unit: basic sequential "
                    "(epsilons add, deltas add) or zCDP (rho adds)", "datasets": [r.as_dict() for r in rows]})
        return 0
    from ._common import budget_line

    print(f"{'dataset':<20} {'tables':>6} {'releases':>8}  spending")
    for r in rows:
        # delta is its own sum under basic accounting only (NaN where no unit covers every release)
        delta = "" if r.accounting == "zcdp" or not r.delta_spent > 0 else f"; delta spent {r.delta_spent:.3g}" + (
            "" if r.delta_budget is None else f" of {r.delta_budget:.3g}")
        print(f"{r.dataset:<20} {len(r.fingerprints):>6} {r.releases:>8}  {budget_line(r)}{delta}")
    print("composition: a dataset's releases add up under its budget's unit (an add-remove release counts twice its "
          "epsilon against a replace budget, by group privacy; one with no guarantee under that unit is refused)")
    print("tables: how many distinct tables (by keyed fingerprint) were released under the dataset")
    for r in rows:
        if len(r.fingerprints) > 1:
            # Other columns of one file are other tables too: said first, as the everyday case (a user's check
            # read the note as a mistake where none was made).
            print(f"NOTE: {r.dataset} was released from {len(r.fingerprints)} different tables (other columns or "
                  "levels of its data, the data changed between releases, or another file given the same dataset "
                  "name): one budget covers them")
        if r.aliases:
            print(f"NOTE: {r.dataset} released data also released, whole or in part, under {', '.join(r.aliases)}")
    return 0


def _budget_words(status) -> str | None:
    """A dataset's budget in words ("epsilon 1 (add-remove)", "rho 0.5 (zCDP, replace)"), or None where it has none."""
    if status.accounting == "zcdp" and status.rho_budget is not None:
        return f"rho {status.rho_budget:g} (zCDP, {status.neighbours})"
    if status.epsilon_budget is None:
        return None
    delta = f", delta {status.delta_budget:g}" if status.delta_budget else ""
    return f"epsilon {status.epsilon_budget:g}{delta} ({status.neighbours})"
