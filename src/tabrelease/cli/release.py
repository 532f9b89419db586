"""`tabrelease release`: release margins of a table under differential privacy."""

from __future__ import annotations

import argparse
from ..errors import TabreleaseError
from ._common import (add_spec_arguments, add_table_arguments, import_numpy_with_signals_held, load_from_args,
                      spec_settings_from_args)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "release",
        help="release margins under differential privacy and write public/ and internal/ folders",
        description="Release the margins of a table under epsilon-DP (or (epsilon, delta)-DP with --delta, for the "
        "planned and gaussian mechanisms). Writes DIR/public (the released margins and release.json) and DIR/internal (audit.json and "
        "audit.html, which compare the release with the confidential table).",
    )
    add_table_arguments(parser)
    add_spec_arguments(parser, required=("epsilon",))
    parser.add_argument("--out", required=True, help="output folder (must not exist unless --force)")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--ledger", metavar="FILE",
                        help="record the release in this privacy ledger (made with `tabrelease ledger init FILE`), and "
                        "refuse it if its dataset's budget would be exceeded")
    parser.add_argument("--dataset", metavar="ID", help="the dataset the table is drawn from, whose budget the release "
                        "spends (default: the table's name)")
    parser.add_argument("--allow-unbudgeted", action="store_true",
                        help="let a ledger that holds budgets record a release of a dataset that has none")
    parser.add_argument("--allow-alias", action="store_true",
                        help="let the ledger charge a table already released under another dataset id to this one "
                        "(say it only when the two datasets are truly distinct: otherwise the same data gets a "
                        "second budget)")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (release.json, the folders, "
                        "the warnings, the ledger's charge) instead of lines for people")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import_numpy_with_signals_held()
    from ..bundle import check_release_destination
    from ..spec import LedgerAccount, spec_from_settings
    from ..workflow import publish_release

    spec = spec_from_settings(spec_settings_from_args(args))  # every setting checked before the table is read
    check_release_destination(args.out, args.force)  # and a wrong --out fails fast too
    table = load_from_args(args)
    account = None if args.ledger is None else LedgerAccount(
        ledger=args.ledger, dataset=args.dataset, allow_unbudgeted=args.allow_unbudgeted, allow_alias=args.allow_alias)
    if account is None and (args.dataset or args.allow_unbudgeted or args.allow_alias):
        raise TabreleaseError("--dataset, --allow-unbudgeted and --allow-alias apply to a release charged to a ledger: "
                              "add --ledger FILE")
    from ..errors import ReleaseInterrupted

    try:
        done = publish_release(table, spec, args.out, account=account, force=args.force)
    except ReleaseInterrupted as interrupted:  # held after the charge: the release stands, and is said as made
        done = interrupted.published
    try:
        return _say(args, spec, table, done)
    except BrokenPipeError:  # output piped into `head`: the command line stops quietly, as for any command
        raise
    except BaseException as exc:
        # The release is made (published, and charged where a ledger was given): a failure to say so (an encoding
        # the terminal cannot take, a Ctrl-C while printing) must not end as a bug or an interrupt, which say nothing
        # was charged (a reviewer's trial: exit 3 for a published, charged release).
        import os

        if os.environ.get("TABRELEASE_DEBUG") and isinstance(exc, Exception):
            raise
        _say_made_but_unsaid(done, exc)
        return 0


def _say_made_but_unsaid(done, exc: BaseException) -> None:
    """One line on standard error, in ASCII whatever its encoding: the release is made, its summary not printed."""
    import sys

    kind = "interrupted" if isinstance(exc, KeyboardInterrupt) else type(exc).__name__
    charged = ("" if done.ledger_entry is None else
               f" and charged (ledger record {done.ledger_entry.get('sequence')})")
    # Where the terminal or a signal did not stop it, the fault is the tool's: said so, by kind only.
    fault = "" if isinstance(exc, (OSError, UnicodeError, KeyboardInterrupt, SystemExit)) else (
        "; a fault of the tool: please report it (TABRELEASE_DEBUG=1 shows the traceback)")
    line = (f"tabrelease: the release is made, published to {done.out}{charged}, but its summary could not be "
            f"printed ({kind}){fault}\n")
    try:
        stream = getattr(sys.stderr, "buffer", None)
        if stream is not None:
            stream.write(line.encode("ascii", "backslashreplace"))
        else:
            sys.stderr.write(line.encode("ascii", "backslashreplace").decode("ascii"))
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # no standard error to say it on: release.json and the ledger do
        pass


def _say(args, spec, table, done) -> int:
    """What the command prints of a release made: its summary, or one JSON document (`--json`)."""
    mode = spec.mode
    release, cal = done.release, done.release.noise
    if args.json:
        import json

        from ._common import print_json

        status = done.budget
        print_json({
            "release": json.loads((done.out / "public" / "release.json").read_text()),
            "public": str(done.out / "public"), "audit": str(done.out / "internal" / "audit.html"),
            "warnings": list(done.warnings),
            # The simulation's seed, drawn by the tool where none was given: printed as on the terminal (release
            # mode draws from the secure sampler and has none).
            "seed": release.noise_seed,
            "ledger": None if done.ledger_entry is None else {
                "dataset": done.ledger_entry["dataset"], "guarantee_charged": done.ledger_entry["guarantee"],
                "epsilon_charged": done.ledger_entry["epsilon"], "sequence": done.ledger_entry["sequence"],
                "release_id": done.ledger_entry["release_id"],
                "budget": None if status is None else status.as_dict()},
        })
        return 0
    design = release.plan.design if release.plan is not None else None
    if design is not None:

        sds = [e.cell_sd for e in release.plan.implementation.expected_errors(release.plan).values()]
        spread = (f"{min(sds):.3g}" if f"{min(sds):.3g}" == f"{max(sds):.3g}"
                  else f"{min(sds):.3g} to {max(sds):.3g}")  # not "2 to 2"
        noise = f"{cal.distribution} noise planned per block: expected cell sd {spread} counts"
    elif cal.distribution == "randomized-response":  # its scale is the probability of reporting the true cell
        noise = f"randomized response, each record's true cell kept with probability {cal.scale:.4g}"
    else:
        noise = f"{cal.distribution} scale {cal.scale:.4g}"
    print(f"released {len(release.margins)} margin{'' if len(release.margins) == 1 else 's'} of {table.name} with {release.mechanism} "
          f"({_guarantee_and_calibration(release, table, cal)}; {noise}, {mode} mode)")
    print(f"privacy:  {release.privacy}")
    for warning in done.warnings:
        print(f"WARNING: {warning}")
    if release.noise_seed is not None:
        print(f"seed:     {release.noise_seed} (--simulate --seed {release.noise_seed} replays it; kept in internal/audit.json)")
    if done.ledger_entry is not None:
        from ..privacy import PrivacyGuarantee
        from ._common import budget_line

        charged = PrivacyGuarantee.from_dict(done.ledger_entry["guarantee"])
        account = "its account could not be read back" if done.budget is None else budget_line(done.budget)
        print(f"ledger:   charged {charged.describe()} to the dataset {done.ledger_entry['dataset']} (record "
              f"{done.ledger_entry['sequence']}); {account}")
    elif release.noise_mode == "release":  # publishable, and in no account: said here as in the audit's box
        print("ledger:   none: no privacy budget accounts for this release (--ledger FILE charges one)")
    print(f"public:   {done.out / 'public'}")
    # Where the warnings that read the true counts are, whether there are any or not (their number reads them too).
    print(f"internal: {done.out / 'internal' / 'audit.html'} (the audit, with any warning that reads the "
          "confidential counts)")
    return 0


def _guarantee_and_calibration(release, table, cal) -> str:
    """The headline's privacy words: the guarantee that holds (loss and unit), then, where the noise was calibrated
    per a step of another unit (a public total: per add-remove step, the guarantee for replace neighbours at twice
    the epsilon), that calibration, so that the line never reads as a stronger guarantee than the release has."""
    guarantee = release.plan.implementation.guarantee(release.plan, table.variables)  # as release.json states it
    if guarantee.unit.kind == cal.neighbours or guarantee.loss.epsilon == cal.epsilon:
        return guarantee.describe()
    return (f"{guarantee.describe()}; its noise calibrated to epsilon {cal.epsilon:g}"
            f"{f', delta {cal.delta:g}' if cal.delta else ''} per {cal.neighbours} step")
