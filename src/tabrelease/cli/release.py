"""`tabrelease release`: release margins of a table under differential privacy."""

from __future__ import annotations

import argparse
from ..errors import TabreleaseError
from ._common import add_table_arguments, load_from_args, non_negative_int, positive_float


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "release",
        help="release margins under differential privacy and write public/ and internal/ folders",
        description="Release the margins of a table under epsilon-DP (or (epsilon, delta)-DP with --delta, for the "
        "planned and gaussian mechanisms). Writes DIR/public (the released margins and release.json) and DIR/internal (audit.json and "
        "audit.html, which compare the release with the confidential table).",
    )
    add_table_arguments(parser)
    parser.add_argument("--epsilon", required=True, type=positive_float, help="privacy loss epsilon (> 0)")
    parser.add_argument("--margins", help="margins to release, e.g. '[AB][BC]'; default: the table's paper model")
    # Checked by the API (importing it here would slow every command's start-up).
    parser.add_argument("--mechanism", default="planned",
                        help="planned (default: noise planned per block, least squares, controlled rounding), auto "
                        "(the paper's: Fourier for all-binary tables, Efron-Stein otherwise), fourier, efron-stein, "
                        "gaussian, binary-encoding, cells, margins or nonneg")
    parser.add_argument("--public-total", action="store_true",
                        help="treat the total n as public (an invariant): released exactly, not noised (planned only)")
    parser.add_argument("--plan-objective", choices=("total-squared-error", "max-cell-variance"), default=None,
                        help="what the planned mechanism minimises: the total expected squared error of the released "
                        "margins (default) or the largest variance of a released cell")
    parser.add_argument("--neighbours", default="add-remove", choices=("add-remove", "replace"),
                        help="neighbouring data sets differ by one added/removed record (default) or one changed record")
    parser.add_argument("--sensitive", metavar="VAR,VAR", default=None,
                        help="sensitive-attributes mechanism: the sensitive variables (names or letters)")
    parser.add_argument("--delta", type=float,
                        help="delta in (0, 1): (epsilon, delta)-DP: Gaussian noise (gaussian, planned), or the "
                             "copula's advanced composition (gaussian-copula, copula-id)")
    parser.add_argument("--calibration", default="exact", choices=("exact", "paper"),
                        help="exact sensitivity (default) or the paper's formulas, for reproduction only")
    parser.add_argument("--simulate", action="store_true",
                        help="seeded, reproducible numpy noise instead of the secure sampler (not for publication)")
    parser.add_argument("--seed", type=non_negative_int, help="seed of the simulation noise (only with --simulate)")
    parser.add_argument("--nonneg-t", type=positive_float, default=None,
                        help="t of the nonneg mechanism: the implied table is non-negative w.p. 1 - exp(-t) (default 5)")
    parser.add_argument("--estimator", default=None,
                        help="least-squares (GLS over non-negative tables with the total pinned; default of planned), "
                        "linf-lp (the paper's LP; default of the paper's mechanisms), as-measured, shifted-synthesis")
    parser.add_argument("--rounding", default=None, choices=("nearest", "controlled", "none"),
                        help="controlled (an integer table whose margins are as close as possible to the estimate's; "
                        "default of planned), nearest (each cell, the paper's step 6; default of the paper's "
                        "mechanisms), none")
    parser.add_argument("--bound-delta", type=float, default=0.05,
                        help="the audit's L1 error bounds hold with probability 1 - this (default 0.05)")
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
    parser.add_argument("--xlsx", action="store_true", help="also write the public margins as one Excel workbook, "
                        "public/margins.xlsx (a sheet describing the release, one per margin); needs tabrelease[excel]")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON (release.json, the folders, "
                        "the warnings, the ledger's charge) instead of lines for people")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..models import default_model, parse_model
    from ..noise import RELEASE, SIMULATION
    from ..workflow import publish_release

    if args.seed is not None and not args.simulate:
        raise TabreleaseError(
            "release mode draws from a secure sampler and accepts no seed; add --simulate for seeded, "
            "reproducible (non-secure) noise"
        )
    if not 0 < args.bound_delta < 1:
        raise TabreleaseError(f"--bound-delta must lie strictly between 0 and 1, not {args.bound_delta:g}")
    from ..bundle import check_release_destination

    check_release_destination(args.out, args.force)  # before the table is read: a wrong --out fails fast
    table = load_from_args(args)
    model = default_model(table) if args.margins is None else parse_model(args.margins, table)
    mode = SIMULATION if args.simulate else RELEASE
    done = publish_release(
        table, args.out, args.epsilon, model.generators + tuple(model.dropped), mechanism=args.mechanism, neighbours=args.neighbours,
        delta=args.delta, calibration=args.calibration, mode=mode, seed=args.seed, nonneg_t=args.nonneg_t,
        estimator=args.estimator, rounding=args.rounding, public_total=args.public_total, plan_objective=args.plan_objective,
        sensitive=args.sensitive, bound_delta=args.bound_delta, ledger=args.ledger, dataset=args.dataset,
        allow_unbudgeted=args.allow_unbudgeted, allow_alias=args.allow_alias, force=args.force, workbook=args.xlsx,
    )
    release, cal = done.release, done.release.noise
    if args.json:
        import json

        from ._common import print_json

        status = done.budget
        print_json({
            "release": json.loads((done.out / "public" / "release.json").read_text()),
            "public": str(done.out / "public"), "audit": str(done.out / "internal" / "audit.html"),
            "warnings": list(done.warnings),
            "ledger": None if done.ledger_entry is None else {
                "dataset": done.ledger_entry["dataset"], "guarantee_charged": done.ledger_entry["guarantee"],
                "epsilon_charged": done.ledger_entry["epsilon"], "sequence": done.ledger_entry["sequence"],
                "release_id": done.ledger_entry["release_id"],
                "budget": None if status is None else status.as_dict()},
        })
        return 0
    design = release.plan.design if release.plan is not None else None
    if design is not None:
        from ..mechanisms import get_mechanism

        sds = [e.cell_sd for e in get_mechanism(release.mechanism).expected_errors(release.plan).values()]
        noise = (f"{cal.distribution} noise planned per block: expected cell sd {min(sds):.3g} to {max(sds):.3g} "
                 "counts")
    else:
        noise = f"{cal.distribution} scale {cal.scale:.4g}"
    print(f"released {len(release.margins)} margins of {table.name} with {release.mechanism} "
          f"(epsilon {cal.epsilon:g}{f', delta {cal.delta:g}' if cal.delta else ''}, {cal.neighbours}, "
          f"{noise}, {mode} mode)")
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
    print(f"public:   {done.out / 'public'}")
    print(f"internal: {done.out / 'internal' / 'audit.html'}")
    return 0
