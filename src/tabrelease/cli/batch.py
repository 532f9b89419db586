"""`tabrelease batch SPEC.toml`: a season's releases from one reviewed file (the library's `batch` module)."""

from __future__ import annotations

import os


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "batch",
        help="run the releases of a reviewed TOML spec in order, with the ledger; --dry-run predicts it",
        description="Datasets (files, declared levels, budgets), the ledger and a list of releases, from one TOML "
        "file. Every entry is checked, every release planned and the whole batch charged on a copy of the ledger "
        "before the first is made: where the ledger would refuse a release, the batch is refused whole (exit: the "
        "refusal's, 5 for a budget). A refusal it could not foresee (another process charging meanwhile) stops the "
        "run there, saying what was and was not released. --dry-run shows the plans, the expected errors and the "
        "budget each dataset will have spent, and changes nothing.",
    )
    parser.add_argument("spec", metavar="SPEC.toml")
    parser.add_argument("--dry-run", action="store_true", help="predict the run; change nothing")
    parser.add_argument("--set-budgets", action="store_true",
                        help="let the spec change a budget the ledger already holds (without it such a spec is "
                        "refused whole, listing every change)")
    parser.add_argument("--json", action="store_true", help="print what was (or would be) done as JSON")
    parser.set_defaults(run=run)


# The run stopped at a refusal after releasing what came before it: it exits with the refusal's own status (5 a
# budget, 6 the ledger's integrity, 2 another refusal; 0: all made; 4: a release was charged and then failed, and
# the run stopped there). Not 3, which is an internal error's.


SIMULATED = ", simulation: not for publication"  # a step made with seeded noise, as its bundle says


def run(args) -> int:
    from ._common import import_numpy_with_signals_held

    import_numpy_with_signals_held()
    from .._files import check_side_file
    from ..batch import dry_run, read_spec, run_batch
    from ..errors import TabreleaseError

    # The spec is read whole: a pipe or a device would never end, a huge file would fill memory. (A missing spec is
    # left to read_spec, which says so.)
    if os.path.lexists(args.spec):
        check_side_file(args.spec, "batch spec")
    try:
        spec = read_spec(args.spec)
    except RecursionError:  # the TOML parser follows nesting by recursion
        raise TabreleaseError(f"the batch spec {args.spec} nests too deeply to read (thousands of brackets inside "
                              "each other)") from None
    result = (dry_run if args.dry_run else run_batch)(spec, set_budgets=args.set_budgets)
    try:
        return _say(args, spec, result)
    except BrokenPipeError:  # piped into `head`: quiet, as for any command
        raise
    except (KeyboardInterrupt, SystemExit, OSError) as exc:
        # The batch is done (its releases made or not, charged or not): a signal or a terminal gone while its summary
        # is printed must not turn its status into one that says otherwise (a review's trial: 130 and no summary
        # after every release was made).
        import sys

        kind = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else type(exc).__name__
        try:
            print(f"tabrelease: the batch's summary could not be printed ({kind}); `tabrelease ledger LEDGER "
                  "--releases` lists what it charged", file=sys.stderr)
        except (OSError, ValueError):
            pass
        return _status(result)


def _status(result) -> int:
    """The exit status of a batch run: a charged failure's 4, a refusal's own, an interrupt's 130 (or 128 + N), else 0."""
    from ..errors import ChargedReleaseFailed

    if result.charged_failure is not None:
        return ChargedReleaseFailed.exit_status
    refused = next((s for s in result.steps if s.exit_status is not None), None)
    if refused is not None:
        return refused.exit_status
    return result.interrupted_status or 0


def _say(args, spec, result) -> int:
    """The batch's summary (or its JSON), then the lines on standard error its status needs; the status."""
    if args.json:
        from ._common import print_json

        print_json(result.as_dict())
    else:
        title = "dry run: nothing was charged or written" if result.dry_run else "batch run"
        print(f"{title} ({args.spec}, ledger {spec.ledger})")
        for change in result.budget_changes:
            print(f"budget: {'would ' if result.dry_run else ''}{change}")
        for step in result.steps:
            if step.rho_spent_after is not None:
                spent = f"; {step.dataset} spent rho {step.rho_spent_after:.6g} of {step.rho_budget:.6g}"
            else:
                spent = ("" if step.epsilon_spent_after is None else
                         f"; {step.dataset} spent {step.epsilon_spent_after:g}"
                         + ("" if step.epsilon_budget is None else f" of {step.epsilon_budget:g}"))
            errors = ", ".join(f"{m} {e:.3g}" for m, e in step.expected_l1.items())
            print(f"{step.number:>3}. {step.status:<17} {step.dataset} {' '.join(step.margins)} with "
                  f"{step.guarantee} ({step.mechanism}{SIMULATED if step.mode != 'release' else ''}) -> {step.out}"
                  f"{spent}")
            if errors and step.status != "not attempted":
                print(f"     expected L1: {errors}")
            if step.reason:
                print(f"     why: {step.reason}")
            for warning in step.warnings:
                print(f"     WARNING: {warning}")
    failed = result.charged_failure
    if failed is not None:  # charged, not published: as `release` says it (exit 4), after the summary
        import sys

        from ..errors import ChargedReleaseFailed

        print(f"tabrelease: error: release {failed.number}: {failed.reason}", file=sys.stderr)
    elif result.interrupted and _status(result) == result.interrupted_status:
        import sys

        # After the summary, which says which were made.
        print("tabrelease: interrupted: the releases marked made stand, charged; the rest were not attempted",
              file=sys.stderr)
    return _status(result)
